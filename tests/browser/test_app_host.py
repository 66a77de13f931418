"""A real MCP Apps host: the SDK's own host class (AppBridge, from the pinned npm package
@modelcontextprotocol/ext-apps, bundled by tests/helpers/clients_support.py) in a page on loopback, our
resource in a sandboxed frame of another origin under the spec's default CSP, and the frame's
tools/call forwarded to our real server over stdio. Each run answers a rich interview (every
question kind, a follow-up appended while the form is open, an attachment), submits, and sees
await_user_answers return the answers and the host receive the app's messages; the runs cover
both protocol eras, English and Arabic, and the host's light and dark."""

from __future__ import annotations

import base64
import http.server
import json
import threading

import pytest
from playwright.sync_api import expect

from formkit import DESKTOP, ROOT, choice

from helpers import clients_support  # noqa: E402
from helpers.modern_support import call_modern  # noqa: E402
from helpers.support import SubprocessServer  # noqa: E402

APPS = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}
URI = "ui://ask-user-rich/form.html"
# What the spec tells a host to use when the resource declares no CSP of its own.
DEFAULT_APP_CSP = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                   "img-src 'self' data:; media-src 'self' data:; connect-src 'none'")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
)
HOST_PAGE = b'<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head><body><script type="module" src="/host.bundle.js"></script></body></html>'
PANEL = {"light": "rgb(250, 250, 240)", "dark": "rgb(20, 24, 40)"}  # the host's own colours
FIRST_QUESTION_MS = 500  # from the call's result reaching the app to the first question answerable


class StaticPages(http.server.ThreadingHTTPServer):
    """One loopback origin serving fixed pages: path -> (content type, bytes, extra headers)."""

    daemon_threads = True

    def __init__(self, pages: dict) -> None:
        self.pages = pages

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(handler):  # noqa: N805 (the handler's own self is the request)
                page = self.pages.get(handler.path)
                if page is None:
                    handler.send_error(404)
                    return
                content_type, body, headers = page
                handler.send_response(200)
                handler.send_header("Content-Type", content_type)
                handler.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    handler.send_header(name, value)
                handler.end_headers()
                handler.wfile.write(body)

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def origin(self) -> str:
        return "http://127.0.0.1:%d" % self.server_address[1]


class Agent:
    """The host's MCP client of our real server over stdio, in one era, declaring MCP Apps."""

    def __init__(self, tmp_path, era: str, env=None) -> None:
        self.era = era
        self.peer = SubprocessServer(tmp_path / "logs", env=env)
        if era == "legacy":
            self.peer.initialize(capabilities=APPS)

    def call(self, method, params=None) -> dict:
        if self.era == "legacy":
            reply = self.peer.call(method, params)
        else:
            reply = call_modern(self.peer, method, params, capabilities=APPS)
        assert "result" in reply, reply
        return reply["result"]

    def tool(self, name, arguments) -> dict:
        return self.call("tools/call", {"name": name, "arguments": arguments})


def interview(language, extra=0):
    """Every question kind, in `language`; `extra` more plain questions make it long."""
    return {
        "title": "Release plan" if language == "en" else "خطة الإصدار",
        "language": language,
        "questions": [
            choice("db", "Which database?", [
                {"id": "pg", "label": "Postgres", "preview": "```sql\nCREATE TABLE t (id serial);\n```"},
                {"id": "my", "label": "MySQL"}], recommended="pg", rationale="We run it already."),
            {"id": "order", "kind": "rank", "header": "Rank the goals", "options": [
                {"id": "speed", "label": "Speed"}, {"id": "cost", "label": "Cost"}, {"id": "looks", "label": "Looks"}],
             "recommended": ["cost", "speed", "looks"]},
            choice("feat", "Which features?", ["auth", "search", "export"], multiSelect=True),
            choice("src", "Upgrade the parser?", [
                {"id": "up", "label": "Upgrade", "textInput": {"placeholder": "source URL", "required": True}},
                {"id": "keep", "label": "Keep it"}]),
            {"id": "free", "header": "Anything else?", "options": []},
        ] + [choice("more%d" % n, "More %d?" % n, ["y", "n"]) for n in range(extra)],
    }


@pytest.fixture(scope="module")
def host_bundle():
    with open(clients_support.app_host_bundle(), "rb") as bundle:
        return bundle.read()


# The Arabic interview is long (8 questions at first): the app asks the host for full screen.
@pytest.mark.parametrize("era, language, theme, extra", [("legacy", "en", "light", 0), ("modern", "ar", "dark", 3)])
def test_a_real_host_shows_the_form_and_the_answers_reach_the_agent(browser, host_bundle, tmp_path, era, language, theme, extra):
    agent = Agent(tmp_path, era)
    try:
        run_host(browser, host_bundle, agent, language, theme, extra)
    finally:
        agent.peer.close()


def open_in_host(browser, host_bundle, agent, spec, result, language="en", host_context=None, offers=None):
    """The stand-in host showing our resource for `result`: (context, page, frame, servers);
    console errors and page errors, the frames' too, gather in page.problems."""
    (resource,) = agent.call("resources/read", {"uri": URI})["contents"]
    app = StaticPages({"/app.html": ("text/html; charset=utf-8", resource["text"].encode("utf-8"),
                                     {"Content-Security-Policy": DEFAULT_APP_CSP})})
    host = StaticPages({"/": ("text/html; charset=utf-8", HOST_PAGE, {}),
                        "/host.bundle.js": ("text/javascript", host_bundle, {})})
    context = browser.new_context(viewport=DESKTOP, locale=language)
    context.set_default_timeout(15000)
    page = context.new_page()
    page.problems = []
    page.on("console", lambda message: message.type == "error" and page.problems.append(
        "%s (%s)" % (message.text, message.location.get("url"))))
    page.on("pageerror", lambda error: page.problems.append(str(error)))
    page.expose_function("mcpCall", lambda params: json.dumps(agent.call("tools/call", json.loads(params))))
    page.goto(host.origin + "/")
    page.wait_for_function("() => typeof window.startHost === 'function'")
    page.evaluate("(options) => startHost(options)", dict({
        "appUrl": app.origin + "/app.html", "toolInput": spec, "toolResult": result,
        "hostContext": host_context or {"theme": "light", "displayMode": "inline", "availableDisplayModes": ["inline"],
                                        "locale": language},
    }, **({"offers": offers} if offers is not None else {})))
    frame = page.wait_for_selector("iframe").content_frame()
    return context, page, frame, (app, host)


def run_host(browser, host_bundle, agent, language, theme, extra):
    tools = {tool["name"]: tool for tool in agent.call("tools/list")["tools"]}
    assert tools["ask_user_rich"]["_meta"]["ui"]["resourceUri"] == URI
    spec = interview(language, extra)
    result = agent.tool("ask_user_rich", spec)
    shown = result["structuredContent"]
    assert (shown["status"], shown["reason"]) == ("awaiting", "Shown in the conversation.")
    context, page, frame, servers = open_in_host(browser, host_bundle, agent, spec, result, language, {
        "theme": theme, "displayMode": "inline", "availableDisplayModes": ["inline", "fullscreen"],
        "locale": language, "styles": {"variables": {"--color-background-primary": PANEL[theme]}}})
    try:
        frame.wait_for_url(servers[0].origin + "/app.html")
        frame.wait_for_selector("body.ready")
        interactive_ms = first_question_ms(frame)
        print("\nstand-in host (%s): call result -> first question interactive %.0f ms" % (language, interactive_ms))
        assert interactive_ms <= FIRST_QUESTION_MS
        answer(agent, page, frame, shown["sessionId"], language, theme, extra)
        answers = agent.tool("await_user_answers", {"sessionId": shown["sessionId"]})["structuredContent"]
        check_answers(answers)
        page.wait_for_function("() => window.hostSeen.messages.length > 0")  # sent after the submit's reply
        seen = page.evaluate("window.hostSeen")
        assert seen["messages"] == [chat_message(language, "app.answered", spec["title"], shown["sessionId"])]
        (summary,) = seen["contexts"]
        assert summary["content"][0]["text"].split("\n", 1)[0] == answers["summary"].split("\n", 1)[0]
        sizes = seen["sizes"]
        assert sizes, "the app never told the host its height"
        # The short end page after the questions: the frame shrinks as well as grows.
        assert any(later < earlier for earlier, later in zip(sizes, sizes[1:])), sizes
        assert set(seen["calls"]) >= {"form_state", "form_progress", "form_attach", "form_submit"}
        assert not page.problems, page.problems
    finally:
        context.close()
        for each in servers:
            each.shutdown()


def first_question_ms(frame) -> float:
    """From the host handing the app the call's result to the first question answerable, as the
    app's own performance marks have it."""
    return frame.locator("body").evaluate(
        "() => performance.getEntriesByName('askrich:interactive')[0].startTime"
        " - performance.getEntriesByName('askrich:handed')[0].startTime")


def words(language) -> dict:
    return json.loads((ROOT / "assets" / "i18n" / ("%s.json" % language)).read_text(encoding="utf-8"))


def chat_message(language, key, title, session_id) -> dict:
    """The message the app sends the conversation, in the form's language."""
    text = words(language)[key].replace("{title}", title).replace("{id}", session_id)
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def answer(agent, page, frame, session_id, language, theme, extra):
    root = frame.locator("html")
    expect(root).to_have_attribute("lang", language)
    expect(root).to_have_attribute("dir", "rtl" if language == "ar" else "ltr")
    expect(root).to_have_attribute("data-theme", theme)
    theme_button = frame.locator("#btn-theme")
    expect(theme_button).to_have_text(words(language)["theme." + theme])
    assert frame.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--panel').trim()") == PANEL[theme]
    # The host switches its theme while the form is shown, and back.
    other = "dark" if theme == "light" else "light"
    page.evaluate("(theme) => changeHostContext({theme})", other)
    expect(root).to_have_attribute("data-theme", other)
    expect(theme_button).to_have_text(words(language)["theme." + other])  # the control follows
    page.evaluate("(theme) => changeHostContext({theme})", theme)
    expect(root).to_have_attribute("data-theme", theme)

    def section(qid):
        return frame.locator(f'section.question[data-qid="{qid}"]')

    def option(qid, opt):
        return section(qid).locator(f'li.opt[data-opt="{opt}"] input.opt-input')

    # Full screen only when the person asks for it, and only for a long interview.
    fullscreen = frame.locator("#btn-fullscreen")
    assert page.evaluate("window.hostSeen.displayModes") == []
    if extra:
        expect(fullscreen).to_have_text(words(language)["app.fullscreen"])
        fullscreen.click()
        expect(fullscreen).to_have_text(words(language)["app.inline"])
        assert page.evaluate("window.hostSeen.displayModes") == ["fullscreen"]
    else:
        expect(fullscreen).to_be_hidden()
    body = frame.locator("body")
    forward = "ArrowLeft" if language == "ar" else "ArrowRight"  # the next screen lies to the reading's end
    option("db", "my").click()
    section("db").locator(".attach-input").set_input_files(
        files=[{"name": "screen.png", "mimeType": "image/png", "buffer": PNG}])
    expect(section("db").locator(".attach-item .attach-name")).to_have_text(["screen.png"])
    expect(section("db").locator("img.attach-thumb")).to_have_attribute("src", "data:image/png;base64," + base64.b64encode(PNG).decode())
    frame.wait_for_function("() => document.querySelector('img.attach-thumb').naturalWidth > 0")
    body.press("Escape")
    body.press(forward)
    body.press("c")  # keep the rank order as shown
    body.press(forward)
    option("feat", "search").click()
    option("feat", "auth").click()
    body.press("Escape")
    body.press(forward)
    option("src", "up").click()
    section("src").locator(".opt-text-input").fill("https://example.com/x")
    body.press("Escape")
    body.press(forward)
    section("free").locator("textarea.other-text").fill("Nothing really")
    body.press("Escape")
    # A follow-up while the form is open: the app's form_state poll brings it in.
    agent.tool("append_questions", {"sessionId": session_id, "questions": [choice("late", "One more?", ["y", "n"])],
                                    "note": "I forgot **this** one."})
    expect(frame.locator('#rail li[data-qid="late"]')).to_have_count(1)
    body.press("g")
    option("late", "n").click()
    body.press("Escape")
    body.press("End")
    frame.locator("#btn-submit").click()
    if extra:  # the extra questions are left open: the form asks once more
        expect(frame.locator(".review .confirm")).to_be_visible()
        frame.locator("#btn-submit").click()
    # No call was waiting: the end page says the conversation tells the agent, not "close this tab".
    saved = words(language)["inHost.end.saved"].split("{agent}")[0]
    expect(frame.locator("section.end")).to_contain_text(saved)


def check_answers(result):
    rows = {row["id"]: row for row in result["answers"]}
    assert result["status"] == "submitted" and result["via"] == "app"
    assert all(row["by"] == "person" and row["via"] == "app" for row in rows.values())
    assert rows["db"]["selected"] == ["my"] and rows["db"]["attachments"][0]["name"] == "screen.png"
    with open(rows["db"]["attachments"][0]["path"], "rb") as stored:
        assert stored.read() == PNG
    assert rows["order"]["ranked"] == ["speed", "cost", "looks"]
    assert rows["feat"]["selected"] == ["auth", "search"]
    assert rows["src"]["optionTexts"] == {"up": "https://example.com/x"}
    assert rows["free"]["other"] == "Nothing really"
    assert rows["late"]["selected"] == ["n"]


@pytest.mark.parametrize("language, skip", [("ja", False), ("ja", True), ("ar", True)])
def test_the_chat_message_says_answered_or_skipped_in_the_forms_language(browser, host_bundle, tmp_path, language, skip):
    agent = Agent(tmp_path, "legacy")
    spec = dict(interview(language), questions=[choice("db", "?", ["pg", "my"])])
    spec["questions"][0]["body"] = "See [the docs](https://example.com/docs)."
    result = agent.tool("ask_user_rich", spec)
    session_id = result["structuredContent"]["sessionId"]
    context, page, frame, servers = open_in_host(browser, host_bundle, agent, spec, result, language)
    try:
        frame.wait_for_selector("body.ready")
        frame.get_by_role("link", name="the docs").click()  # through the host: the frame opens nothing
        page.wait_for_function("() => window.hostSeen.links.length > 0")
        assert page.evaluate("window.hostSeen.links") == ["https://example.com/docs"]
        if skip:
            frame.locator("#title").click()  # the frame takes the keys
            frame.locator("body").press("End")  # the review, where the skip is
            frame.locator("#btn-skip").click()
            frame.locator("#skip-confirm").click()
        else:
            frame.locator('li.opt[data-opt="pg"] input.opt-input').click()
            frame.locator("body").press("End")
            frame.locator("#btn-submit").click()
        frame.wait_for_selector("section.end")
        page.wait_for_function("() => window.hostSeen.messages.length > 0")
        key = "app.skipped" if skip else "app.answered"
        assert page.evaluate("window.hostSeen.messages") == [chat_message(language, key, spec["title"], session_id)]
        status = agent.tool("await_user_answers", {"sessionId": session_id})["structuredContent"]["status"]
        assert status == ("declined" if skip else "submitted")
    finally:
        context.close()
        for each in servers:
            each.shutdown()
        agent.peer.close()


def test_a_host_that_never_renders_the_app_gets_the_browser_after_the_fallback(browser, tmp_path):
    """The stand-in host declares MCP Apps and shows nothing: after the fallback delay the form
    goes to the browser, which shows it."""
    opened = tmp_path / "opened"
    opener = tmp_path / "open.sh"
    opener.write_text('#!/bin/sh\necho "$1" >> "%s"\n' % opened)
    opener.chmod(0o755)
    agent = Agent(tmp_path, "legacy", env={"ASK_USER_RICH_OPEN": "1", "ASK_USER_RICH_OPEN_CMD": str(opener),
                                           "ASK_USER_RICH_APP_FALLBACK": "1"})
    try:
        shown = agent.tool("ask_user_rich", interview("en"))["structuredContent"]
        agent.peer.log.wait_for("app-fallback", "interview=" + shown["sessionId"])
        from helpers.support import wait_for_file
        wait_for_file(str(opened))
        assert opened.read_text().split() == [shown["url"]]
        page = browser.new_page()
        try:
            page.goto(shown["url"])
            page.wait_for_selector("body.ready")
            expect(page.locator("#title")).to_have_text("Release plan")
        finally:
            page.close()
    finally:
        agent.peer.close()


def test_an_idle_app_makes_at_most_four_host_calls_a_minute(browser, host_bundle, tmp_path):
    """Hidden and nobody acting, the app looks at its interview every 15 s (some hosts tell the
    agent of every call an app makes); on the person's first key it looks every 2.5 s again."""
    agent = Agent(tmp_path, "legacy")
    spec = dict(interview("en"), questions=[choice("db", "?", ["pg", "my"])])
    result = agent.tool("ask_user_rich", spec)
    context, page, frame, servers = open_in_host(browser, host_bundle, agent, spec, result)
    try:
        frame.wait_for_selector("body.ready")
        shown = "(state) => Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state})"
        frame.evaluate(shown, "hidden")

        def calls_in(seconds: float) -> int:
            before = page.evaluate("window.hostSeen.calls.length")
            page.wait_for_timeout(seconds * 1000)  # real time, serving the app's calls meanwhile
            return page.evaluate("window.hostSeen.calls.length") - before

        idle = calls_in(16)
        print("\nidle app: %d host calls in 16 s" % idle)
        assert idle <= 2  # 15 s apart: at most 4 a minute (every 2.5 s, it would be 6)
        frame.evaluate(shown, "visible")
        frame.locator("#title").click()  # the person acts
        assert calls_in(16) >= 5  # every 2.5 s again
    finally:
        context.close()
        for each in servers:
            each.shutdown()
        agent.peer.close()


def test_a_host_that_takes_no_messages_is_sent_none(browser, host_bundle, tmp_path):
    """Only what the host offers in hostCapabilities is asked of it (MCP Inspector offers neither
    model context nor messages, and answers -32601)."""
    agent = Agent(tmp_path, "legacy")
    spec = dict(interview("en"), questions=[choice("db", "?", ["pg", "my"])])
    result = agent.tool("ask_user_rich", spec)
    offers = {"serverTools": {}, "openLinks": {}, "logging": {}}
    context, page, frame, servers = open_in_host(browser, host_bundle, agent, spec, result, offers=offers)
    try:
        frame.wait_for_selector("body.ready")
        frame.locator('li.opt[data-opt="pg"] input.opt-input').click()
        frame.locator("body").press("End")
        frame.locator("#btn-submit").click()
        frame.wait_for_selector("section.end")
        agent.tool("await_user_answers", {"sessionId": result["structuredContent"]["sessionId"]})
        page.wait_for_timeout(300)  # what the app would send after its submit has had its time
        seen = page.evaluate("window.hostSeen")
        assert (seen["messages"], seen["contexts"]) == ([], [])
    finally:
        context.close()
        for each in servers:
            each.shutdown()
        agent.peer.close()
