"""A real MCP Apps host: the SDK's own host class (AppBridge, from the pinned npm package
@modelcontextprotocol/ext-apps, bundled by tests/clients_support.py) in a page on loopback, our
resource in a sandboxed frame of another origin under the spec's default CSP, and the frame's
tools/call forwarded to our real server over stdio. Each run answers a rich interview (every
question kind, a follow-up appended while the form is open, an attachment), submits, and sees
await_user_answers return the answers and the host receive the app's messages; the runs cover
both protocol eras, English and Arabic, and the host's light and dark."""

from __future__ import annotations

import base64
import http.server
import json
import os
import sys
import threading

import pytest
from playwright.sync_api import expect

from formkit import DESKTOP, ROOT, choice

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import clients_support  # noqa: E402
from modern_support import call_modern  # noqa: E402
from support import SubprocessServer  # noqa: E402

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

    def __init__(self, tmp_path, era: str) -> None:
        self.era = era
        self.peer = SubprocessServer(tmp_path / "logs")
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


def run_host(browser, host_bundle, agent, language, theme, extra):
    tools = {tool["name"]: tool for tool in agent.call("tools/list")["tools"]}
    assert tools["ask_user_rich"]["_meta"]["ui"]["resourceUri"] == URI
    (resource,) = agent.call("resources/read", {"uri": URI})["contents"]
    app = StaticPages({"/app.html": ("text/html; charset=utf-8", resource["text"].encode("utf-8"),
                                     {"Content-Security-Policy": DEFAULT_APP_CSP})})
    host = StaticPages({"/": ("text/html; charset=utf-8", HOST_PAGE, {}),
                        "/host.bundle.js": ("text/javascript", host_bundle, {})})
    spec = interview(language, extra)
    result = agent.tool("ask_user_rich", spec)
    shown = result["structuredContent"]
    assert (shown["status"], shown["reason"]) == ("awaiting", "Shown in the conversation.")
    context = browser.new_context(viewport=DESKTOP, locale=language)
    context.set_default_timeout(15000)
    try:
        page = context.new_page()
        problems = []
        page.on("console", lambda message: message.type == "error" and problems.append(
            "%s (%s)" % (message.text, message.location.get("url"))))
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.expose_function("mcpCall", lambda params: json.dumps(agent.call("tools/call", json.loads(params))))
        page.goto(host.origin + "/")
        page.wait_for_function("() => typeof window.startHost === 'function'")
        page.evaluate("(options) => startHost(options)", {
            "appUrl": app.origin + "/app.html", "toolInput": spec, "toolResult": result,
            "hostContext": {"theme": theme, "displayMode": "inline", "availableDisplayModes": ["inline", "fullscreen"],
                            "locale": language, "styles": {"variables": {"--color-background-primary": PANEL[theme]}}},
        })
        frame = page.wait_for_selector("iframe").content_frame()
        frame.wait_for_url(app.origin + "/app.html")
        frame.wait_for_selector("body.ready")
        answer(agent, page, frame, shown["sessionId"], language, theme, extra)
        answers = agent.tool("await_user_answers", {"sessionId": shown["sessionId"]})["structuredContent"]
        check_answers(answers)
        seen = page.evaluate("window.hostSeen")
        assert seen["messages"] == [{"role": "user", "content": [
            {"type": "text", "text": 'I answered "%s" (sessionId %s).' % (spec["title"], shown["sessionId"])}]}]
        (summary,) = seen["contexts"]
        assert summary["content"][0]["text"].split("\n", 1)[0] == answers["summary"].split("\n", 1)[0]
        assert seen["sizes"], "the app never told the host its height"
        assert set(seen["calls"]) >= {"form_state", "form_progress", "form_attach", "form_submit"}
        assert seen["displayModes"] == (["fullscreen"] if extra else [])
        assert not problems, problems
    finally:
        context.close()
        app.shutdown()
        host.shutdown()


def answer(agent, page, frame, session_id, language, theme, extra):
    root = frame.locator("html")
    expect(root).to_have_attribute("lang", language)
    expect(root).to_have_attribute("dir", "rtl" if language == "ar" else "ltr")
    expect(root).to_have_attribute("data-theme", theme)
    assert frame.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--panel').trim()") == PANEL[theme]
    # The host switches its theme while the form is shown, and back.
    other = "dark" if theme == "light" else "light"
    page.evaluate("(theme) => changeHostContext({theme})", other)
    expect(root).to_have_attribute("data-theme", other)
    page.evaluate("(theme) => changeHostContext({theme})", theme)
    expect(root).to_have_attribute("data-theme", theme)

    def section(qid):
        return frame.locator(f'section.question[data-qid="{qid}"]')

    def option(qid, opt):
        return section(qid).locator(f'li.opt[data-opt="{opt}"] input.opt-input')

    body = frame.locator("body")
    forward = "ArrowLeft" if language == "ar" else "ArrowRight"  # the next screen lies to the reading's end
    option("db", "my").click()
    section("db").locator(".attach-input").set_input_files(
        files=[{"name": "screen.png", "mimeType": "image/png", "buffer": PNG}])
    expect(section("db").locator(".attach-item .attach-name")).to_have_text(["screen.png"])
    expect(section("db").locator("img.attach-thumb")).to_have_attribute("src", "data:image/png;base64," + base64.b64encode(PNG).decode())
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
    words = json.loads((ROOT / "assets" / "i18n" / ("%s.json" % language)).read_text(encoding="utf-8"))
    saved = words["inHost.end.saved"].split("{agent}")[0]
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
