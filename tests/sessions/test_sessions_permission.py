"""Permission asks in a real interactive Claude Code 2.1.328 session (marked `sessions`), in
`--permission-mode default`, with the ask-user-rich plugin installed from the marketplace that
`build_zipapp.py --plugin` writes and its permission hook turned on as the README says. The
scripted model (tests/helpers/scripted_model.py) runs one Bash command per prompt; each time Claude Code
shows its own dialog and runs the hook, which opens the form. In one session, in turn: allowed in
the form in Chromium (the command ran, no key pressed), denied with a note (the model got the note), answered
in the terminal first (the hook ended its form by itself within 2 s: the form says so), and
"always" (accept edits for the session: the session's mode changed). tests/README.md
("Permission asks") says what this proves."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers import leftovers  # noqa: E402
from helpers.scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from helpers.sessions_support import (API_KEY, COLUMNS, ENTER, ROWS, Terminal, chromium_page,  # noqa: E402
                              end_logged_servers, require_chromium, seed_home)
from helpers.sessions_support import INTERACTIVE_WAIT as WAIT  # noqa: E402
from helpers.support import EventsReader, RecordingOpener, api_url, http_request, submit  # noqa: E402
from test_sessions_hook import _installed_plugin, _tool_result  # noqa: E402

pytestmark = [pytest.mark.sessions, pytest.mark.browser]
NOTE = "Not on a Friday."
DIALOG = "Do you want to proceed?"


def _prompt(request):
    """The person's last typed prompt ("Step 2"), from the request's messages."""
    for message in reversed(request.body.get("messages") or []):
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            block.get("text", "") for block in content or [] if isinstance(block, dict) and block.get("type") == "text"]
        for text in texts:
            if text.strip().startswith("Step "):
                return text.strip()
    return ""


def command_of(step: int) -> str:
    """The command of step `step`: the last is a mkdir, for which Claude Code 2.1.328 suggests
    accepting edits for the session (for an `echo > file` it suggests only the folder)."""
    return "mkdir step-4" if step == 4 else "echo step-%d > step-%d.txt" % (step, step)


def policy(model, request):
    """At each "Step N" prompt, run one Bash command; once its result arrived, say so."""
    body = request.body if isinstance(request.body, dict) else {}
    if not body.get("tools"):  # a side request (a title, a summary): not the agent's turn
        return Text("Steps")
    if _tool_result(request) is not None:
        return Text("Noted: %s." % _prompt(request))
    step = int(_prompt(request).split()[1])
    return ToolUse("Bash", {"command": command_of(step), "description": "Write step %d" % step})


def result_of(model, step):
    """The model's request that brings step `step`'s Bash result."""
    return model.wait_for(lambda r: _tool_result(r) is not None and _prompt(r) == "Step %d" % step, WAIT,
                          "the result of step %d" % step)


def allow_in_chromium(url):
    """The person: Allow once, in the form's page, and submit."""
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(url)
        page.wait_for_selector("body.ready")
        expect(page.locator('section.question[data-qid="permission"] .q-header')).to_contain_text("wants to run a command")
        page.locator('li.opt[data-opt="allow"] input.opt-input').click()
        page.keyboard.press("End")
        page.locator("#btn-submit").click()
        page.wait_for_selector("section.end")


def hooks_running(marker: str) -> dict:
    """Our permission hooks still running (by their command line, which holds the test's own
    folder): (pid, None) -> command line, as leftovers.still_running takes them."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                line = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if "permission-request" in line and marker in line:
            found[(int(pid), None)] = line
    return found


class PermissionSession:
    """The session, its terminal and the opener its hooks open forms with."""

    def __init__(self, tmp_path, model):
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.opener = RecordingOpener(tmp_path)
        self.env = cs.offline_env(tmp_path)
        self.env.update({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": API_KEY,
                         "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                         "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS),
                         "ASK_USER_RICH_OPEN": "1", "ASK_USER_RICH_OPEN_CMD": self.opener.command})
        seed_home(self.env, self.work)
        self.pyz = _installed_plugin(tmp_path, self.env, self.work)
        done = subprocess.run(["python3", self.pyz, "hook", "permission-request", "--enable"], env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=WAIT)
        assert done.returncode == 0 and "now open in ask-user-rich's form" in done.stdout, done.stderr
        self.terminal = Terminal([cs.cli("claude"), "--permission-mode", "default"], self.env, self.work)
        self.terminal.wait_for_text("❯", what="the prompt")

    def alive(self):
        return self.terminal.process.poll() is None

    def ask(self, step: int) -> str:
        """Type "Step N"; the form's URL once the hook opened it, with Claude Code's own dialog
        on screen meanwhile."""
        self.terminal.type("Step %d" % step)
        self.terminal.wait_for_text("Step %d" % step, what="the typed prompt")
        self.terminal.type(ENTER)
        url = self.opener.wait(step, timeout=WAIT, alive=self.alive)
        self.terminal.wait_for_text(DIALOG, what="Claude Code's own permission dialog")
        return url

    def answer_in_terminal(self):
        """Press 1 ("Yes") in Claude Code's dialog; again should the dialog, just drawn, not have
        taken the first key yet."""
        for _ in range(3):
            self.terminal.type("1")
            try:
                self.terminal.wait_for("the dialog closing", lambda flat: DIALOG not in flat, 3)
                return
            except AssertionError:
                continue
        raise AssertionError("Claude Code's dialog did not take the key 1")

    def close(self):
        try:
            self.terminal.close()
        finally:
            end_logged_servers(cs.server_log(self.env), "askrich.pyz")
            self.opener.close()


def test_claude_codes_permission_asks_are_answered_in_the_form_or_in_the_terminal_whichever_comes_first(tmp_path):
    require_chromium()
    with ScriptedModel(policy) as model:
        session = PermissionSession(tmp_path, model)
        try:
            # 1. Allowed in the form; no key pressed in the terminal.
            url = session.ask(1)
            served = http_request(api_url(url)).json()
            assert served["spec"]["title"] == "Claude Code wants to run a command", served["spec"]
            assert "```sh\n%s\n```" % command_of(1) in served["spec"]["questions"][0]["body"]
            allow_in_chromium(url)
            allowed = _tool_result(result_of(model, 1))

            # 2. Denied with a note: the model gets the note.
            url = session.ask(2)
            assert submit(url, {"permission": {"selected": ["deny"], "notes": NOTE}}).status == 200
            denied = _tool_result(result_of(model, 2))

            # 3. Answered in the terminal first: the hook notices and ends its form by itself.
            url = session.ask(3)
            events = EventsReader(api_url(url, "events"), "state")
            try:
                events.wait_for(lambda s: s["waiting"], WAIT, "the hook waiting")
                session.answer_in_terminal()
                answered = result_of(model, 3)
                ended = events.wait_for(lambda s: s["state"] != "pending", WAIT, "the form ending")
                noticed = time.monotonic() - answered.arrived
            finally:
                events.close()
            leftovers.still_running(hooks_running(str(tmp_path)), 5)  # woken by their exits
            left = hooks_running(str(tmp_path))

            # 4. "Always": allowed, and the session accepts edits from now on.
            url = session.ask(4)
            options = http_request(api_url(url)).json()["permission"]["options"]
            always = next(o["id"] for o in options if o["key"] == "perm.always.acceptEdits")
            assert submit(url, {"permission": {"selected": [always]}}).status == 200
            result_of(model, 4)
            mode = session.terminal.wait_for_text("accept edits on", what="the session's new mode")
        except AssertionError as failure:
            raise AssertionError("%s\n--- the screen:\n%s\n--- server.log:\n%s" % (
                failure, session.terminal.text(), cs.server_log(session.env)[-3000:])) from None
        finally:
            session.close()
    print("claude-code 2.1.328 permission asks: allowed=%r denied=%r; terminal first noticed in %.2fs"
          % (allowed["content"], denied["content"], noticed))
    # Allowed: the command ran, with nothing typed in the terminal.
    assert allowed.get("is_error") is not True and (session.work / "step-1.txt").read_text().strip() == "step-1"
    # Denied: an error result holding the person's note; the command did not run.
    assert denied.get("is_error") is True and NOTE in json.dumps(denied["content"]), denied
    assert not (session.work / "step-2.txt").exists()
    # The terminal's answer ran the command; the hook ended its form within 2 s, saying so, and exited.
    assert (session.work / "step-3.txt").exists()
    assert ended["state"] == "cancelled" and ended.get("answeredInTerminal") is True, ended
    assert noticed < 2.0, noticed
    assert left == {}, left
    # "Always": allowed, and the updatedPermissions switched the session's mode.
    assert (session.work / "step-4").is_dir() and "accept edits on" in mode
    archive = session.env["ASK_USER_RICH_LOG_DIR"] + "/answers"
    decisions = []
    for name in sorted(os.listdir(archive)):
        with open(os.path.join(archive, name), encoding="utf-8") as f:
            record = json.load(f)
        decisions.append((record["permission"]["input"]["command"], record["permission"]["decision"],
                          record["permission"]["where"]))
    assert decisions == [(command_of(1), "allow", "browser"), (command_of(2), "deny", "browser"),
                         (command_of(3), "terminal", "terminal"), (command_of(4), "allow", "browser")], decisions
