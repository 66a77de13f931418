"""The form in a real MCP Apps host nobody here wrote: MCP Inspector's web client (the pinned npm
package, tests/clients_support.py), started against our real server over stdio, driven in
Chromium. The app is answered in Inspector's sandboxed frame and await_user_answers, called from
Inspector's Tools tab, returns the answers; an attachment's thumbnail shows under the policy
Inspector builds from the resource's csp, with no CSP violation; an invalid interview's error is
shown; the theme control follows Inspector's own theme switch; and an app-rendered elicitation
is answered in Inspector's dialog, the blocking call returning the answers. Inspector runs its
proxy with its auth token off (DANGEROUSLY_OMIT_AUTH): nothing but the test reaches its port."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from playwright.sync_api import Error as PlaywrightError, expect

from formkit import ROOT

from helpers import clients_support
from helpers.inbox_support import free_port
from helpers.modern_support import log_events
from helpers.support import form_strings, wait_for_file
from test_app_host import FIRST_QUESTION_MS, first_question_ms

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
)
SPEC = {"title": "Release plan", "questions": [
    {"id": "db", "header": "Which database?", "options": [{"id": "pg", "label": "Postgres"}, {"id": "my", "label": "MySQL"}]},
]}


class Inspector:
    """`mcp-inspector --web` with our server as its ad-hoc stdio server, its auth off; `era`
    "auto" lets it speak 2026-07-28 (its default is the initialize era)."""

    def __init__(self, folder, era="legacy") -> None:
        self.logs = os.path.join(str(folder), "logs")
        home = os.path.join(str(folder), "home")
        os.makedirs(home, exist_ok=True)
        port = free_port()
        env = dict(os.environ, HOME=home, CLIENT_PORT=str(port), MCP_SANDBOX_PORT="0", MCP_APP_ORIGIN_PORT="0",
                   DANGEROUSLY_OMIT_AUTH="true", MCP_AUTO_OPEN_ENABLED="false", MCP_INSPECTOR_SECRET_STORE="memory",
                   MCP_STORAGE_DIR=os.path.join(str(folder), "storage"))
        env.update(dict.fromkeys(clients_support.PROXIES, clients_support.DEAD_PROXY))
        server_env = {"ASK_USER_RICH_LOG_DIR": self.logs, "ASK_USER_RICH_OPEN": "0", "ASK_USER_RICH_INBOX_PORT": "0",
                      "ASK_USER_RICH_NOTIFY": "off", "XDG_CACHE_HOME": os.path.join(str(folder), "cache")}
        args = [clients_support.node(), clients_support.inspector(), "--web", "--protocol-era", era]
        for name, value in server_env.items():
            args += ["-e", "%s=%s" % (name, value)]
        args += [sys.executable, str(ROOT / "askrich.py")]
        self.process = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, universal_newlines=True, start_new_session=True)
        self.output = []
        up = threading.Event()

        def read() -> None:
            for line in self.process.stdout:
                self.output.append(line)
                if "is up and running" in line:
                    up.set()

        threading.Thread(target=read, daemon=True).start()
        if not up.wait(60):
            self.close()
            raise AssertionError("MCP Inspector did not start:\n" + "".join(self.output))
        self.url = "http://127.0.0.1:%d/" % port

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def session_of(self, event: str) -> str:
        """The interview id of the latest `event` in our server's log."""
        wait_for_file(os.path.join(self.logs, "server.log"))
        deadline = time.monotonic() + 15
        while not log_events(self.logs, event):
            assert time.monotonic() < deadline, "no %s in server.log" % event
            time.sleep(0.05)
        return log_events(self.logs, event)[-1]["interview"]


@pytest.fixture(scope="module")
def inspector(tmp_path_factory):
    running = Inspector(tmp_path_factory.mktemp("inspector"))
    yield running
    running.close()


@pytest.fixture(scope="module")
def modern_inspector(tmp_path_factory):
    running = Inspector(tmp_path_factory.mktemp("inspector-modern"), era="auto")
    yield running
    running.close()


@pytest.fixture
def page(browser, inspector):
    yield from inspector_page(browser, inspector)


def inspector_page(browser, inspector):
    """Inspector's page, connected to our server; console errors (the app's frames' included)
    are kept in page.problems."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(20000)
    page = context.new_page()
    page.problems = []
    page.on("console", lambda message: message.type == "error" and page.problems.append(message.text))
    page.goto(inspector.url)
    # Mantine hides the switch's input itself (hence force), yet lays it out. Inspector draws its
    # sidebar again as its settings come in: on a busy machine the switch found first could be
    # gone, or not laid out yet, by the time it was clicked (a click that failed toggled nothing).
    switch = page.get_by_role("switch").first  # "Connect or disconnect"
    for attempt in range(3):
        switch.wait_for(state="visible")
        try:
            switch.click(force=True)
            break
        except PlaywrightError:
            if attempt == 2:
                raise
    try:
        page.get_by_text("Connected", exact=True).wait_for()
        yield page
    finally:
        context.close()


def open_app(page, spec: dict) -> None:
    """The Apps tab: ask_user_rich with `spec` (typed into Inspector's JSON editor), Open App."""
    page.get_by_text("Apps", exact=True).click()
    page.get_by_text("Ask the user a rich interview").first.click()
    page.get_by_label("Edit as JSON").check(force=True)
    page.evaluate("(text) => ace.edit(document.querySelector('main .ace_editor')).setValue(text, -1)", json.dumps(spec))
    page.get_by_role("button", name="Open App").click()


def await_answers(page, session_id: str) -> dict:
    """await_user_answers, called from Inspector's Tools tab: the result's JSON as shown there."""
    page.get_by_text("Tools", exact=True).click()
    page.get_by_text("await_user_answers", exact=True).click()
    page.get_by_role("textbox", name="sessionId").fill(session_id)
    page.get_by_role("button", name="Execute Tool").click()
    shown = page.locator("main").get_by_text('"interviewId": "%s"' % session_id).first
    shown.wait_for()
    text = page.locator("main").inner_text()
    via = re.search(r'"via": "(\w+)"', text)
    status = re.search(r'"status": "(\w+)"', text)
    return {"via": via and via.group(1), "status": status and status.group(1), "text": text}


def app_frame(page):
    """Our form in the Apps tab: Inspector's sandbox frame holds it in a frame of its own."""
    return page.frame_locator("main iframe").first.frame_locator("iframe").first


def test_the_app_is_answered_in_inspector_with_a_thumbnail_and_the_host_theme(page, inspector):
    open_app(page, SPEC)
    frame = app_frame(page)
    frame.locator("body.ready").wait_for(state="attached")
    interactive_ms = first_question_ms(frame)
    session_id = inspector.session_of("shown-in-host")
    option = frame.locator('li.opt[data-opt="my"] input.opt-input')
    option.click()
    # The thumbnail shows under the policy Inspector derives from our declared csp.
    frame.locator('section.question[data-qid="db"] .attach-input').set_input_files(
        files=[{"name": "screen.png", "mimeType": "image/png", "buffer": PNG}])
    thumb = frame.locator("img.attach-thumb")
    expect(thumb).to_have_count(1)
    # decode() fails for an image the policy refused.
    assert thumb.evaluate("img => img.decode().then(() => img.naturalWidth)") > 0
    # Inspector switches its own theme: the app and its theme control follow.
    root, control = frame.locator("html"), frame.locator("#btn-theme")
    before = root.get_attribute("data-theme")
    page.get_by_label("Toggle color scheme").click()
    after = "dark" if before == "light" else "light"
    expect(root).to_have_attribute("data-theme", after)
    words = form_strings("en")
    expect(control).to_have_text(words["theme." + after])
    frame.locator("#title").click()  # the keys go to the frame again
    frame.locator("body").press("End")
    frame.locator("#btn-submit").click()
    frame.locator("section.end").wait_for()
    result = await_answers(page, session_id)
    assert (result["status"], result["via"]) == ("submitted", "app"), result["text"][-2000:]
    assert '"selected": [\n' in result["text"] or '"my"' in result["text"]
    assert not [problem for problem in page.problems if "Content Security Policy" in problem or "CSP" in problem], page.problems
    print("\ninspector: call result -> first question interactive %.0f ms" % interactive_ms)
    assert interactive_ms <= FIRST_QUESTION_MS


def test_an_invalid_interview_shows_its_error_in_inspector(page):
    open_app(page, {"title": "Broken", "questions": SPEC["questions"] * 2})
    end = app_frame(page).locator("section.end")
    expect(end).to_contain_text("could not be loaded")
    expect(end).to_contain_text('duplicate question id "db"')  # the server's own words on what is wrong
    expect(end).not_to_contain_text("expired")


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_an_app_rendered_elicitation_is_answered_in_inspectors_dialog(browser, request, era):
    """In the initialize era the host answers our elicitation/create request; in 2026-07-28 it
    retries the call with the app's answer to the input request."""
    inspector = request.getfixturevalue("inspector" if era == "legacy" else "modern_inspector")
    pages = inspector_page(browser, inspector)
    page = next(pages)
    try:
        answer_in_the_dialog(page, inspector)
    finally:
        pages.close()


# The whole form in the host's dialog: a ranking and an option's own text too, which the flat
# schema alone (the host's own fallback form) could only hold as typed text.
DIALOG_SPEC = {"title": "Release plan", "delivery": "elicitation", "questions": SPEC["questions"] + [
    {"id": "order", "header": "Which first?", "kind": "rank", "options": [
        {"id": "api", "label": "The API"}, {"id": "docs", "label": "The docs"}, {"id": "ui", "label": "The UI"}]},
    {"id": "why", "header": "Why now?", "options": [
        {"id": "asked", "label": "Users asked"},
        {"id": "else", "label": "Something else", "textInput": {"placeholder": "What?"}}]},
]}


def answer_in_the_dialog(page, inspector):
    open_app(page, DIALOG_SPEC)
    dialog = page.locator('[data-testid="app-elicitation"]')
    dialog.wait_for()
    frame = dialog.frame_locator("iframe").first.frame_locator("iframe").first
    frame.locator("body.ready").wait_for(state="attached")
    session_id = inspector.session_of("form-elicitation")
    frame.locator("#btn-view").click()  # every question on one page
    frame.locator('li.opt[data-opt="pg"] input.opt-input').click()
    frame.locator('.rank-row[data-opt="api"]').click()
    frame.locator('.rank-row[data-opt="api"]').press("Shift+ArrowDown")
    frame.locator('li.opt[data-opt="else"] input.opt-input').click()
    frame.locator('li.opt[data-opt="else"] .opt-text-input').fill("A deadline")
    frame.locator("body").press("End")
    frame.locator("#general-notes").fill("Answered in the dialog")
    frame.locator("#btn-submit").click()
    expect(dialog).to_have_count(0)  # the call returned: Inspector closed its dialog
    # The Apps tab then shows the app with the call's result, the answers: over, not expired.
    words = form_strings("en")
    expect(app_frame(page).locator("section.end")).to_contain_text(words["end.already"])
    result = await_answers(page, session_id)  # the archive's answers, as the call returned them
    assert (result["status"], result["via"]) == ("submitted", "app"), result["text"][-2000:]
    assert "Answered in the dialog" in result["text"]
    assert re.search(r'"ranked": \[\s*"docs",\s*"api",\s*"ui"\s*\]', result["text"]), result["text"][-3000:]
    assert re.search(r'"optionTexts": \{\s*"else": "A deadline"\s*\}', result["text"]), result["text"][-3000:]
