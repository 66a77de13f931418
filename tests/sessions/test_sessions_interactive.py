"""Interactive Claude Code sessions (marked `sessions`): the pinned Claude Code 2.1.328 runs its
full-screen UI in a pseudo-terminal against the scripted model (tests/helpers/scripted_model.py), in a
throwaway HOME, offline. The test types the prompt as a person would, reads the screen through
a terminal emulator (pyte: the UI redraws by cursor moves, so the raw bytes never hold a line of
text in order), submits the form, and checks what the person saw, what Claude Code got from our
server (sessions_support.StdioTap) and what reached the model.

What these sessions showed (tests/README.md has the whole picture): an interactive session
declares the tasks extension, so the call becomes a task that runs in the background at once;
Claude Code polls tasks/get every 2 s, shows the task's statusMessage in its task view (cut at
200 characters), and hands the result to the model as a task notification. A call without a
task runs inline until the auto-background time, then moves to the background the same way."""

from __future__ import annotations

import json
import re
import sys
import time

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers.scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from helpers.sessions_support import (API_KEY, COLUMNS, DOWN, ENTER, NOTE, PICK_A_DATABASE, ROWS,  # noqa: E402
                              StdioTap, Terminal, chromium_page, end_logged_servers, require_chromium,
                              seed_home)
from helpers.sessions_support import INTERACTIVE_WAIT as WAIT  # noqa: E402
from helpers.support import MODULE, RecordingOpener, api_url, http_request, submit  # noqa: E402

pytestmark = pytest.mark.sessions
TOOL = "mcp__ask-user-rich__ask_user_rich"
BACKGROUND_MS = 15000  # CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS for the call without a task
ARGS = PICK_A_DATABASE
PROMPT = "Ask me which database to use."


# -- the model --------------------------------------------------------------------------------

def _called(messages):
    return any(block.get("type") == "tool_use" and block.get("name") == TOOL
               for message in messages if message.get("role") == "assistant"
               and isinstance(message.get("content"), list) for block in message["content"])


def answers_arrived(request):
    """Whether this request carries our submitted result (as a tool result or a notification)."""
    return '\\"status\\":\\"submitted\\"' in json.dumps(request.body.get("messages") or [])


def session_policy(model, request):
    """Search the deferred tools by words only our hint has, call ask_user_rich once, say that
    it waits while the call runs in the background, and thank once the answers arrived."""
    body = request.body if isinstance(request.body, dict) else {}
    messages = body.get("messages") or []
    if not body.get("tools"):  # a side request (a title, a summary): not the agent's turn
        return Text("Database choice")
    if answers_arrived(request):
        return Text("Thanks, noted.")
    if _called(messages):
        return Text("Waiting for the answers.")
    if TOOL in [tool.get("name") for tool in body["tools"]]:
        return ToolUse(TOOL, ARGS)
    return ToolUse("ToolSearch", {"query": "clarify preferences approval", "max_results": 5})


# -- one session ------------------------------------------------------------------------------

class Session:
    """One interactive Claude Code session with our server behind the tap; `with` ends every
    process it started, by id, however the test ends."""

    def __init__(self, tmp_path, model, extra_env=(), module=MODULE):
        self.tmp_path = tmp_path
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.opener = RecordingOpener(tmp_path)
        self.tap = StdioTap(tmp_path, [sys.executable, module])
        self.env = cs.offline_env(tmp_path)
        self.env.update({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": API_KEY,
                         "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                         "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)})
        self.env.update(dict(extra_env))
        seed_home(self.env, self.work)
        self.module = module
        self.model = model
        self.terminal = None

    def __enter__(self):
        config = {"mcpServers": {"ask-user-rich": {
            "type": "stdio", "command": self.tap.argv[0], "args": self.tap.argv[1:],
            "env": {"ASK_USER_RICH_LOG_DIR": self.env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1",
                    "ASK_USER_RICH_OPEN_CMD": self.opener.command, "ASK_USER_RICH_PROGRESS_MS": "500",
                    "ASK_USER_RICH_INBOX_PORT": "0"}}}}
        self.terminal = Terminal([cs.cli("claude"), "--mcp-config", json.dumps(config), "--strict-mcp-config",
                                  "--allowedTools", TOOL], self.env, self.work)
        return self

    def __exit__(self, *exc):
        try:
            if self.terminal is not None:
                self.terminal.close()
        finally:
            try:
                end_logged_servers(self.log(), self.module)
            finally:
                self.opener.close()
                # What was relayed stays beside the session's log, for a failure's reader.
                with open(str(self.tmp_path / "relayed.jsonl"), "w", encoding="utf-8") as f:
                    f.write("\n".join(self.tap.lines) + "\n")
                self.tap.close()

    # -- what the session did

    def log(self):
        return cs.server_log(self.env)

    def answers_of(self, method):
        """(request, response) for every request of `method` our server answered. Paired by id
        whatever the order relayed: the tap reports a request once it is written to the server,
        so a quick answer may be reported first."""
        requests, responses = [], {}
        for message in self.tap.messages():
            if not isinstance(message, dict) or "id" not in message:
                continue
            if message.get("method") == method:
                requests.append(message)
            elif "method" not in message:
                responses[json.dumps(message["id"])] = message
        return [(request, responses[json.dumps(request["id"])]) for request in requests
                if json.dumps(request["id"]) in responses]

    def wait_answers(self, method, count, what):
        """The first `count` answers to `method`, waiting for them on the tap."""
        alive = lambda: self.terminal.process.poll() is None  # noqa: E731
        try:
            return self.tap.wait_until(lambda: self.answers_of(method)[:count]
                                       if len(self.answers_of(method)) >= count else None, WAIT, what, alive)
        except AssertionError as error:
            raise AssertionError("%s; relayed: %s; our log:\n%s\nthe screen:\n%s" % (
                error, self.tap.lines[-6:], self.log()[-1500:], self.terminal.text())) from None

    def opened_url(self):
        return self.opener.wait(timeout=WAIT, alive=lambda: self.terminal.process.poll() is None)

    # -- what the person does

    def start(self):
        """Wait for the prompt and our server's tools, then type the request and Enter."""
        self.terminal.wait_for_text("❯", what="the prompt")
        self.wait_answers("tools/list", 1, "our tools listed to Claude Code")
        self.terminal.type(PROMPT)
        self.terminal.wait_for_text(PROMPT, what="the typed prompt")
        self.terminal.type(ENTER)

    def open_task_view(self):
        """The footer's task count, then ↓ and Enter: the task's own view."""
        self.terminal.wait_for_text("1 MCP task", what="the footer's running task")
        self.terminal.type(DOWN)
        self.terminal.wait_for_text("enter to view tasks", what="the footer's task selection")
        self.terminal.type(ENTER)
        return self.terminal.wait_for_text("Runtime:", what="the task view")


def _poll_intervals(session):
    """Seconds between the tasks/get requests, from our server's log (times in ms, dated: a
    session may run across midnight)."""
    import calendar

    times = []
    for day, clock in re.findall(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d\.\d+)Z \d+ request method=tasks/get ",
                                 session.log(), re.M):
        whole, _, fraction = clock.partition(".")
        times.append(calendar.timegm(time.strptime("%sT%s" % (day, whole), "%Y-%m-%dT%H:%M:%S")) + float("0." + fraction))
    return [round(b - a, 2) for a, b in zip(times, times[1:])]


def _last_turn(body) -> str:
    """The last user turn of a request to the model, as JSON: what it got from the tools. Claude
    Code may put a note of its own after it (at midnight, "The date has changed")."""
    return json.dumps([message for message in body["messages"] if message.get("role") == "user"][-1])


def _median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None


# -- the tests --------------------------------------------------------------------------------

def _task_session(tmp_path, answer, label):
    """One interactive session whose call becomes a task; `answer(url, terminal)` plays the
    person (it returns the monotonic time of the submit). Checks what the person saw, what
    Claude Code got from us, and what reached the model."""
    with ScriptedModel(session_policy) as model, Session(tmp_path, model) as session:
        terminal = session.terminal
        session.start()
        call = model.wait_for(lambda r: isinstance(r.answer, ToolUse) and r.answer.name == TOOL, WAIT,
                              "the model's call to ask_user_rich")
        url = session.opened_url()
        # The session declared the tasks extension, so our server made the call a task (its log
        # says so, and so does its answer on the wire).
        [(request, created)] = session.wait_answers("tools/call", 1, "our answer to the tools/call")
        assert "io.modelcontextprotocol/tasks" in json.dumps(request["params"].get("_meta")), request
        assert created["result"]["resultType"] == "task", created
        task_id = created["result"]["taskId"]
        assert "task-created task=%s " % task_id in session.log()
        # What the person sees while it works: the task's status line, with the form's link.
        working = session.open_task_view()
        assert "Status: working · Waiting for answers to \"Pick a database\"" in working, working
        shown = terminal.wait_for("the form's whole link in the task's status line",
                                  lambda flat: "Form: " + url in flat)
        status_line = shown[shown.index("Status:"):shown.index("Runtime:")].strip()
        # Let Claude Code poll a few times, so that the cadence is measured and the status line
        # is seen following the polls (the elapsed time moves).
        session.wait_answers("tasks/get", 3, "three tasks/get answered")
        terminal.wait_for("the status line following the polls", lambda flat: re.search(
            r"Status: working · .*\((?!0:0[01]\b)\d+:\d\d elapsed\).* Form: " + re.escape(url), flat))
        for _, response in session.answers_of("tasks/get"):
            message = response["result"]["statusMessage"]
            assert len(message) <= 200 and message.endswith(" Form: " + url), message
        submitted = answer(url, terminal)
        after = model.wait_for(lambda r: NOTE in r.text, WAIT, "the answers in the model's next request")
        latency = after.arrived - submitted
        done = terminal.wait_for_text("Thanks, noted.", what="the model's reply to the answers")
        finished = terminal.wait_for_text("Status: completed", what="the task's finished status")
        polls = _poll_intervals(session)
        last = session.tap.wait_until(lambda: next((response["result"] for _, response in session.answers_of("tasks/get")
                                                    if response["result"]["status"] != "working"), None),
                                      WAIT, "the finished task's tasks/get answer on the tap")
    print("claude-code 2.1.328 interactive, tasks, %s: submit to model request %.3f s; tasks/get every %s s"
          " (median of %s); status line: %s" % (label, latency, _median(polls), polls, status_line))
    assert call.answer.arguments == ARGS
    # The model got the answers, note included, as the task's result (structuredContent as JSON).
    received = _last_turn(after.body)
    assert "<task-notification>" in received and task_id in received, received[:2000]
    assert '\\"selected\\":[\\"my\\"]' in received and NOTE in received and "archivePath" in received
    # The finished task says what happened, not that it is still waiting: its last tasks/get
    # answer carries the result's summary line as its statusMessage.
    assert last["status"] == "completed", last
    summary = last["result"]["structuredContent"]["summary"].split("\n", 1)[0]
    assert last["statusMessage"] == summary and "submitted" in summary, last["statusMessage"]
    assert "Waiting for answers" not in finished.split("Thanks, noted.")[-1]
    assert "MCP task %s (ask-user-rich/ask_user_rich) completed." % task_id in done
    # Claude Code asks every 2 s while the person has not acted for a minute: the cadence, however
    # late a busy machine ran one poll (and so the next one early, or ours read it late).
    assert polls and 1.5 <= _median(polls) <= 3.5 and 1.5 <= sum(polls) / len(polls) <= 3.5, polls


def test_interactive_session_makes_a_task_shows_its_link_and_hands_the_answers_to_the_model(tmp_path):
    def through_the_api(url, terminal):
        submitted = time.monotonic()
        reply = submit(url, {"db": {"selected": ["my"], "notes": NOTE}})
        assert reply.status == 200, reply.body
        return submitted

    _task_session(tmp_path, through_the_api, "form API")


@pytest.mark.browser
def test_interactive_session_answered_in_chromium(tmp_path):
    require_chromium()
    from playwright.sync_api import expect

    def in_the_browser(url, terminal):
        with chromium_page() as page:
            page.goto(url)  # the link the recording opener was given, as a browser would
            page.wait_for_selector("body.ready")
            # The page told our server it is open; the task's status line says so at the next poll.
            terminal.wait_for("the form open in the task's status line",
                              lambda flat: "answered, form open (" in flat)
            question = page.locator('section.question[data-qid="db"]')
            if not question.is_visible():  # a welcome screen first
                page.keyboard.press("ArrowRight")
            question.locator('li.opt[data-opt="my"] input.opt-input').click()
            question.locator(".note-text").fill(NOTE)
            page.keyboard.press("Escape")
            page.keyboard.press("End")
            submitted = time.monotonic()
            page.locator("#btn-submit").click()
            expect(page.locator("section.end h2")).to_have_text("Answers sent")
            # The end screen names the agent from the session's clientInfo, and says it has them.
            expect(page.locator("section.end")).to_contain_text("has your answers now")
            assert "Claude Code" in page.locator("section.end").inner_text()
        return submitted

    _task_session(tmp_path, in_the_browser, "Chromium")


def test_a_call_without_tasks_moves_to_the_background_and_its_answers_still_reach_the_model(tmp_path):
    # The inline state lasts until Claude Code's own timer, which no gate of ours can hold: 15 s
    # leaves a loaded machine time to start the opener and draw our first progress before it.
    extra = {"CLAUDE_CODE_DISABLE_MCP_TASKS": "1", "CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS": str(BACKGROUND_MS)}
    with ScriptedModel(session_policy) as model, Session(tmp_path, model, extra) as session:
        terminal = session.terminal
        session.start()
        call = model.wait_for(lambda r: isinstance(r.answer, ToolUse) and r.answer.name == TOOL, WAIT,
                              "the model's call to ask_user_rich")
        url = session.opened_url()
        # Inline at first: our first progress notification, link included, reaches Claude Code
        # and is drawn under the call.
        tapped = session.tap.wait_message("<", lambda m: m.get("method") == "notifications/progress"
                                          and ("Form: " + url) in m["params"].get("message", ""),
                                          WAIT, "our first progress, with the link")
        inline = terminal.wait_for_shown("the call's progress with the form's link", lambda flat: (
            "Calling ask-user-rich… ⎿ Waiting for answers to \"Pick a database\"" in flat
            and "Form: " + url in flat))
        # At the auto-background time Claude Code answers the model itself and moves the call on.
        moved = model.wait_for(lambda r: "was moved to the background" in r.text, BACKGROUND_MS / 1000.0 + WAIT,
                               "the model told that the call moved to the background")
        background = terminal.wait_for("the call in the background", lambda flat: (
            "Called ask-user-rich" in flat and "1 MCP task" in flat and "Calling ask-user-rich…" not in flat))
        session.open_task_view()
        # The task view follows our later progress notifications (which carry no link).
        view = terminal.wait_for("our progress in the background call's task view", lambda flat: (
            "Status: working · Waiting for answers to \"Pick a database\"" in flat))
        # Our server still waits on the person, and the form is up: nothing was cancelled.
        state = http_request(api_url(url))
        assert state.status == 200 and json.loads(state.body)["state"] == "pending", state.body
        log = session.log()
        assert "task-created" not in log and "wait-start" in log and "cancel" not in log, log
        assert not session.answers_of("tools/call")  # the call still open: not answered yet
        submitted = time.monotonic()
        reply = submit(url, {"db": {"selected": ["my"], "notes": NOTE}})
        assert reply.status == 200, reply.body
        after = model.wait_for(lambda r: NOTE in r.text, WAIT, "the answers in the model's next request")
        latency = after.arrived - submitted
        terminal.wait_for_text("Thanks, noted.", what="the model's reply to the answers")
        done = terminal.wait_for_text("Status: completed", what="the background call's finished status")
        requests = [request for request, _ in session.wait_answers("tools/call", 1, "our answer to the call")]
    print("claude-code 2.1.328 interactive, no tasks, auto-background at %d ms: submit to model request %.3f s;"
          " moved %.1f s after the call; task view: %s" % (
              BACKGROUND_MS, latency, moved.arrived - call.arrived, view[view.index("Status:"):view.index("Runtime:")].strip()))
    # Without tasks, the call never declared the extension and never became one.
    assert requests and "io.modelcontextprotocol/tasks" not in json.dumps(requests)
    background_note = _last_turn(moved.body)
    assert "is still running after %ds" % (BACKGROUND_MS // 1000) in background_note, background_note
    assert inline and background and tapped
    received = _last_turn(after.body)
    assert "<task-notification>" in received and "<status>completed</status>" in received, received[:2000]
    assert '\\"selected\\":[\\"my\\"]' in received and NOTE in received and "archivePath" in received
    assert "(ask-user-rich/ask_user_rich) completed." in done
