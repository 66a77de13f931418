"""Real agent sessions in Claude Code's print mode (marked `sessions`: `bash tests/run.sh -k
sessions`): a pinned `claude -p` runs its agent loop against a scripted model on loopback
(tests/helpers/scripted_model.py), offline, in a throwaway HOME, with our server behind the recording
tap of tests/helpers/sessions_support.py. The model's calls reach our server, the form opens through a recording
opener, a test answers through the form's HTTP API, and the answers must reach the model's next
request. The interactive sessions (pseudo-terminal, tasks) are in test_sessions_interactive.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers.scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from helpers.sessions_support import NOTE, PICK_A_DATABASE, StdioTap, end_logged_servers  # noqa: E402
from helpers.support import MODULE, EventsReader, RecordingOpener, api_url, http_request, submit  # noqa: E402

pytestmark = pytest.mark.sessions
PREFIX = "mcp__ask-user-rich__"
ASK, APPEND, AWAIT = PREFIX + "ask_user_rich", PREFIX + "append_questions", PREFIX + "await_user_answers"
# What a model would type into Claude Code's tool search for each tool: words of our search hints.
SEARCH = {ASK: "clarify preferences approval", APPEND: "follow-up ask more",
          AWAIT: "wait answers open interview link"}
ARGS = PICK_A_DATABASE
API_KEY = "sk-ant-scripted-test"
WAIT = 60  # seconds for any one thing a session does (start, a model turn, the form opening)
LEGACY = "claude-2.1.197"


# -- reading the conversation Claude Code sends the model ---------------------------------------

class Call:
    """One tool use of the model and the result Claude Code handed back for it (None: not yet)."""

    def __init__(self, name, arguments):
        self.name = name
        self.arguments = arguments
        self.result = None  # the tool_result block
        self.text = None  # its content as the model reads it

    def json(self):
        return json.loads(self.text)


def calls_made(body):
    """Every tool use in the conversation, in order, with its result."""
    calls, by_id = [], {}
    for message in (body or {}).get("messages") or []:
        if not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_use":
                by_id[block["id"]] = call = Call(block["name"], block.get("input") or {})
                calls.append(call)
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in by_id:
                call = by_id[block["tool_use_id"]]
                call.result = block
                content = block.get("content")
                if isinstance(content, list):
                    content = "".join(part.get("text", "") for part in content if part.get("type") == "text")
                call.text = content
    return calls


def tool_names(body):
    return [tool.get("name") for tool in (body or {}).get("tools") or []]


def scripted(*steps, done="Thanks, noted."):
    """A policy that makes the tool calls `steps` in order, then says `done`. A step is
    `(tool, arguments)`, the arguments a dict or a function of the finished calls so far. While
    Claude Code keeps a tool deferred (not in the request's tools), the model searches for it
    first, by words of its search hint, as a model would."""

    def policy(model, request):
        calls = [call for call in calls_made(request.body) if call.result is not None]
        made = [call for call in calls if call.name != "ToolSearch"]
        if len(made) >= len(steps):
            return Text(done)
        tool, arguments = steps[len(made)]
        if tool not in tool_names(request.body):
            if sum(1 for call in calls if call.name == "ToolSearch" and call.arguments.get("query") == SEARCH[tool]) >= 2:
                return Text("I could not find %s." % tool)
            return ToolUse("ToolSearch", {"query": SEARCH[tool], "max_results": 5})
        return ToolUse(tool, arguments(made) if callable(arguments) else arguments)

    return policy


def result_of(request, tool, index=-1):
    """The text the model received for its `index`-th call of `tool` in this request."""
    results = [call for call in calls_made(request.body) if call.name == tool and call.result is not None]
    return results[index] if results else None


def turn_after(model, tool, count=1, timeout=WAIT):
    """The first model turn whose conversation holds `count` finished calls of `tool`."""
    return model.wait_for(
        lambda r: sum(1 for c in calls_made(r.body) if c.name == tool and c.result is not None) >= count,
        timeout, "the model's request after call %d of %s" % (count, tool))


def called(model, tool, count=1, timeout=WAIT):
    """The model turn that made call `count` of `tool`."""
    seen = []

    def made(request):
        if isinstance(request.answer, ToolUse) and request.answer.name == tool:
            if request not in seen:
                seen.append(request)
            return len(seen) >= count
        return False

    return model.wait_for(made, timeout, "call %d of %s" % (count, tool))


# -- one print-mode session ---------------------------------------------------------------------

class PrintSession:
    """`claude -p PROMPT` with our server behind the tap and a recording opener; `with` ends every
    process it started, by id, however the test ends. stdout and stderr go to files (a big result
    echoed in stream-json must never fill a pipe nobody reads)."""

    def __init__(self, tmp_path, policy, prompt="Ask me which database to use.", legacy=False,
                 server_env=(), module=MODULE, client_env=(), server_config=(), output_format="stream-json"):
        self.tmp_path = tmp_path
        self.claude = cs.legacy_cli(LEGACY) if legacy else cs.cli("claude")
        self.release = LEGACY.split("-")[1] if legacy else cs.CLIENTS["claude"][1]
        self.prompt = prompt
        self.model = ScriptedModel(policy)
        self.opener = RecordingOpener(tmp_path)
        self.env = cs.offline_env(tmp_path)
        self.server_env = {"ASK_USER_RICH_LOG_DIR": self.env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1",
                           "ASK_USER_RICH_OPEN_CMD": self.opener.command, "ASK_USER_RICH_PROGRESS_MS": "500",
                           "ASK_USER_RICH_INBOX_PORT": "0"}
        self.server_env.update(dict(server_env))
        self.env.update(dict(client_env))
        self.server_config = dict(server_config)
        self.module = module
        self.output = ["--output-format", "stream-json", "--verbose"] if output_format == "stream-json" else \
            ["--output-format", output_format]
        self.tap = StdioTap(tmp_path, [sys.executable, module])
        self.process = None
        self.ended = threading.Event()

    def __enter__(self):
        self.model.__enter__()
        self.env.update({"ANTHROPIC_BASE_URL": self.model.url, "ANTHROPIC_API_KEY": API_KEY,
                         "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        config = {"mcpServers": {"ask-user-rich": {
            "type": "stdio", "command": self.tap.argv[0], "args": self.tap.argv[1:], "env": self.server_env,
            **self.server_config}}}
        self.out = open(str(self.tmp_path / "stdout.txt"), "w+", encoding="utf-8")
        self.err = open(str(self.tmp_path / "stderr.txt"), "w+", encoding="utf-8")
        # Its own process group, so that ending it by its id ends what it started too.
        self.process = subprocess.Popen(
            [self.claude, "-p", self.prompt, "--mcp-config", json.dumps(config), "--strict-mcp-config",
             "--allowedTools", ",".join((ASK, APPEND, AWAIT))] + self.output,
            env=self.env, cwd=str(self.tmp_path), stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
            start_new_session=True)
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def _watch(self):
        self.process.wait()
        self.ended.set()

    def __exit__(self, *exc):
        try:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            end_logged_servers(self.log(), self.module)
        finally:
            self.out.close()
            self.err.close()
            self.opener.close()
            self.tap.close()
            self.model.__exit__(*exc)

    def alive(self):
        return not self.ended.is_set()

    def opened(self, count=1):
        """The URL the server opened (the `count`-th), as the person's browser would get it."""
        return self.opener.wait(count, timeout=WAIT, alive=self.alive)

    def finish(self):
        """Wait for the CLI to end; its exit code."""
        assert self.ended.wait(WAIT), "claude -p did not end after the model's last turn"
        return self.process.returncode

    def stdout(self):
        with open(self.out.name, encoding="utf-8") as f:
            return f.read()

    def stderr(self):
        with open(self.err.name, encoding="utf-8") as f:
            return f.read()

    def events(self):
        """The stream-json lines claude -p printed."""
        return [json.loads(line) for line in self.stdout().splitlines() if line.startswith("{")]

    def log(self):
        return cs.server_log(self.env)

    def wire_calls(self, tool):
        """The arguments of every tools/call of `tool` that reached our server, as it got them."""
        return [message["params"].get("arguments") for message in self.tap.messages(">")
                if message.get("method") == "tools/call" and message["params"].get("name") == tool]


def wait_until_waited_on(url):
    """Block until a call waits on the interview at `url` (the events route says so): a submit
    then goes straight to that call, so the time to the model's next request is Claude Code's."""
    events = EventsReader(api_url(url, "events"), "state")
    try:
        events.wait_for(lambda state: state["waiting"], WAIT, "a call waiting")
    finally:
        events.close()


def submit_and_time(session, url, answers, tool, count=1, **extra):
    """Submit `answers` once a call waits; the model's next request and the seconds from the
    submit to it."""
    wait_until_waited_on(url)
    submitted = time.monotonic()
    reply = submit(url, answers, **extra)
    assert reply.status == 200, reply.body
    after = turn_after(session.model, tool, count)
    return after, after.arrived - submitted


def assert_found_by_search(session, tool):
    """The tool reached the model through Claude Code's tool search: a search result named it."""
    reference = '"tool_reference", "tool_name": "%s"' % tool
    assert any(reference in r.text for r in session.model.turns), \
        "no tool search result named %s; turns: %s" % (tool, [tool_names(r.body) for r in session.model.turns])


def assert_arrived_intact(session, url, tool, arguments):
    """The call reached our server with exactly the model's arguments, and the form the person
    sees holds them."""
    session.tap.wait_until(lambda: True if arguments in session.wire_calls(tool) else None, WAIT,
                           "the tools/call of %s with the model's arguments, on the tap" % tool)
    spec = http_request(api_url(url)).json()["spec"]
    assert spec["title"] == arguments["title"]
    for sent, shown in zip(arguments["questions"], spec["questions"]):
        for key, value in sent.items():
            if key == "options":
                assert [(o["id"], o["label"]) for o in shown["options"]] == [(o["id"], o["label"]) for o in value]
            elif key == "recommended":  # the spec keeps it as a list of ids
                assert shown[key] == (value if isinstance(value, list) else [value])
            else:
                assert shown[key] == value, key


def report(case, session, latency, received):
    """The measured row for the README's table (shown with pytest -s)."""
    print("\nclaude-code %s -p | %s | %s | submit to model request %.3f s"
          % (session.release, case, received, latency))


# -- the sessions -------------------------------------------------------------------------------

def test_print_mode_round_trip_with_a_note_reaches_the_model(tmp_path):
    """`claude -p`: the model finds ask_user_rich through tool search and calls it; the form
    opens; the person picks the non-recommended option with a note; the model's next request
    holds the answer and the note, and the session ends cleanly with our server shut down."""
    with PrintSession(tmp_path, scripted((ASK, ARGS))) as session:
        url = session.opened()
        assert_arrived_intact(session, url, "ask_user_rich", ARGS)
        after, latency = submit_and_time(session, url, {"db": {"selected": ["my"], "notes": NOTE}}, ASK)
        assert session.finish() == 0, session.stderr()[-2000:]
    result = result_of(after, ASK).json()  # structuredContent, as compact JSON
    assert result["status"] == "submitted" and result["answers"][0]["selected"] == ["my"]
    assert result["answers"][0]["notes"] == NOTE and result["answers"][0]["followedRecommendation"] is False
    assert result["archivePath"] and result["summary"].endswith("Everything, as JSON: %s" % result["archivePath"])
    assert_found_by_search(session, ASK)
    # Claude Code sent a progress token; -p prints no MCP progress in its stream-json output (only
    # a heartbeat once a call has run 30 s), so what the person sees is the browser opening.
    log = session.log()
    assert "progressToken=present" in log and "browser-open opened=true" in log
    assert [e for e in session.events() if e.get("type") == "result"][0]["result"] == "Thanks, noted."
    assert not [e for e in session.events() if e.get("type") == "tool_progress" or e.get("subtype") == "task_progress"]
    assert "request method=server/discover era=modern" in log and " shutdown" in log
    report("modern (2026-07-28), no tasks, browser", session, latency, "structuredContent inline")


def _session_id(made):
    return made[0].json()["sessionId"]


def test_print_mode_link_then_await_user_answers(tmp_path):
    """`delivery: "link"`: nothing opens, the call returns `awaiting` with the link (which
    stream-json prints, in the tool result), the model calls await_user_answers with the
    sessionId it got, and the answers submitted then reach the model through that call."""
    arguments = dict(ARGS, delivery="link")
    policy = scripted((ASK, arguments), (AWAIT, lambda made: {"sessionId": _session_id(made)}))
    with PrintSession(tmp_path, policy) as session:
        first = turn_after(session.model, ASK)
        awaiting = result_of(first, ASK).json()
        assert awaiting["status"] == "awaiting" and awaiting["reason"] == "Browser opening was skipped (delivery=link)."
        url = awaiting["url"]
        assert_arrived_intact(session, url, "ask_user_rich", arguments)
        called(session.model, AWAIT)
        after, latency = submit_and_time(session, url, {"db": {"selected": ["my"], "notes": NOTE}}, AWAIT)
        assert session.finish() == 0, session.stderr()[-2000:]
    assert session.opener.urls == []
    assert session.wire_calls("await_user_answers") == [{"sessionId": awaiting["sessionId"]}]
    result = result_of(after, AWAIT).json()
    assert result["status"] == "submitted" and result["interviewId"] == awaiting["sessionId"]
    assert result["answers"][0]["selected"] == ["my"] and result["answers"][0]["notes"] == NOTE
    assert_found_by_search(session, ASK)
    assert_found_by_search(session, AWAIT)
    # Where the person can see the link in -p: the tool result line of stream-json (plain -p
    # prints only the model's last text, so there the model must repeat it).
    printed = [e for e in session.events() if e.get("type") == "user"]
    assert any(url in json.dumps(e) for e in printed)
    report("modern, no tasks, link + await_user_answers", session, latency, "structuredContent inline")


def test_plain_print_mode_shows_the_person_nothing_while_the_call_waits(tmp_path):
    """Plain `claude -p` (text output) prints only the session's result, the model's last text:
    while await_user_answers waits after `delivery: "link"`, nothing is on stdout or stderr, the
    link included. In -p, the browser opening is what the person sees of the call."""
    arguments = dict(ARGS, delivery="link")
    policy = scripted((ASK, arguments), (AWAIT, lambda made: {"sessionId": _session_id(made)}))
    with PrintSession(tmp_path, policy, output_format="text") as session:
        url = result_of(turn_after(session.model, ASK), ASK).json()["url"]
        called(session.model, AWAIT)
        wait_until_waited_on(url)
        assert (session.stdout(), url in session.stderr()) == ("", False)
        submit_and_time(session, url, {"db": {"selected": ["my"], "notes": NOTE}}, AWAIT)
        assert session.finish() == 0, session.stderr()[-2000:]
    assert session.stdout() == "Thanks, noted.\n" and url not in session.stderr()


FOLLOW_UP = [{"id": "pool", "header": "Connection pool size?", "options": [
    {"id": "10", "label": "10"}, {"id": "50", "label": "50"}], "recommended": "10"}]
POOL_NOTE = "We expect bursts."


def test_print_mode_follow_up_appended_to_the_open_form(tmp_path):
    """A follow-up while the form is open: link, append_questions with a note, then
    await_user_answers; the person sees both questions and the note in one form, and the
    answers to both (notes included) reach the model."""
    policy = scripted(
        (ASK, dict(ARGS, delivery="link")),
        (APPEND, lambda made: {"sessionId": _session_id(made), "questions": FOLLOW_UP, "note": "One more, sorry."}),
        (AWAIT, lambda made: {"sessionId": _session_id(made)}))
    with PrintSession(tmp_path, policy) as session:
        url = result_of(turn_after(session.model, ASK), ASK).json()["url"]
        appended = result_of(turn_after(session.model, APPEND), APPEND).json()
        assert (appended["status"], appended["appended"], appended["total"], appended["version"]) == ("appended", 1, 2, 2)
        form = http_request(api_url(url)).json()
        assert [q["id"] for q in form["spec"]["questions"]] == ["db", "pool"]
        assert form["note"] == {"version": 2, "text": "One more, sorry."}
        called(session.model, AWAIT)
        answers = {"db": {"selected": ["my"], "notes": NOTE}, "pool": {"selected": ["50"], "notes": POOL_NOTE}}
        after, latency = submit_and_time(session, url, answers, AWAIT, specVersion=2)
        assert session.finish() == 0, session.stderr()[-2000:]
    assert session.wire_calls("append_questions")[0]["questions"] == FOLLOW_UP
    result = result_of(after, AWAIT).json()
    got = {a["id"]: (a["selected"], a["notes"]) for a in result["answers"]}
    assert got == {"db": (["my"], NOTE), "pool": (["50"], POOL_NOTE)}
    assert_found_by_search(session, APPEND)
    report("modern, no tasks, link + append_questions + await", session, latency, "structuredContent inline")


def test_print_mode_follow_up_after_the_submit_goes_to_a_new_interview(tmp_path):
    """After the answers, append_questions is refused with the text that says what to do, the
    model asks the follow-up in a new ask_user_rich call, a second form opens, and those answers
    reach the model too."""
    second = {"title": "One more thing", "questions": FOLLOW_UP}
    policy = scripted(
        (ASK, ARGS),
        (APPEND, lambda made: {"sessionId": made[0].json()["interviewId"], "questions": FOLLOW_UP}),
        (ASK, second))
    with PrintSession(tmp_path, policy) as session:
        url = session.opened()
        submit_and_time(session, url, {"db": {"selected": ["pg"]}}, ASK)
        refused = result_of(turn_after(session.model, APPEND), APPEND)
        url2 = session.opened(2)
        assert url2 != url
        assert_arrived_intact(session, url2, "ask_user_rich", second)
        after, latency = submit_and_time(session, url2, {"pool": {"selected": ["50"], "notes": POOL_NOTE}}, ASK, 2)
        assert session.finish() == 0, session.stderr()[-2000:]
    assert refused.result.get("is_error") is True
    assert "is already submitted, so questions can no longer be appended. Ask the follow-ups in a new " \
           "ask_user_rich call." in refused.text
    result = result_of(after, ASK).json()
    assert result["title"] == "One more thing"
    assert (result["answers"][0]["selected"], result["answers"][0]["notes"]) == (["50"], POOL_NOTE)
    report("modern, no tasks, a follow-up after the submit", session, latency, "structuredContent inline")


def test_legacy_claude_code_round_trip_with_a_note_reaches_the_model(tmp_path):
    """Claude Code 2.1.197 (the initialize era): the same round trip as in 2.1.328. It does not
    defer MCP tools (it has no tool search: our tools are in the model's first request), and it
    negotiates 2025-11-25 through initialize."""
    with PrintSession(tmp_path, scripted((ASK, ARGS)), legacy=True) as session:
        url = session.opened()
        assert_arrived_intact(session, url, "ask_user_rich", ARGS)
        after, latency = submit_and_time(session, url, {"db": {"selected": ["my"], "notes": NOTE}}, ASK)
        assert session.finish() == 0, session.stderr()[-2000:]
    result = result_of(after, ASK).json()  # structuredContent, as compact JSON, as in 2.1.328
    assert result["status"] == "submitted" and result["answers"][0]["selected"] == ["my"]
    assert result["answers"][0]["notes"] == NOTE and result["archivePath"]
    first = session.model.turns[0]
    assert ASK in tool_names(first.body) and "ToolSearch" not in tool_names(first.body)
    assert not any(call.name == "ToolSearch" for call in calls_made(after.body))
    log = session.log()
    assert "request method=initialize era=legacy" in log and "server/discover" not in log
    assert re.search(r" initialize protocol=2025-11-25 requested=2025-11-25 client=claude-code ", log), log
    assert "progressToken=present" in log and "browser-open opened=true" in log and " shutdown" in log
    assert [e for e in session.events() if e.get("type") == "result"][0]["result"] == "Thanks, noted."
    report("legacy (initialize, 2025-11-25), no tasks, browser", session, latency, "structuredContent inline")


# -- a long wait in print mode ------------------------------------------------------------------

def test_print_mode_mcp_tool_timeout_ends_the_call_with_an_error_the_model_sees(tmp_path):
    """`claude -p` waits on the call for as long as MCP_TOOL_TIMEOUT allows (a hard wall-clock
    limit: progress does not extend it). When it passes, the model gets Claude Code's error (no
    sessionId in it, so no way to await the form), and as -p then ends, the form goes with our
    server."""
    with PrintSession(tmp_path, scripted((ASK, ARGS)), client_env={"MCP_TOOL_TIMEOUT": "3000"}) as session:
        wait_until_waited_on(session.opened())
        after = turn_after(session.model, ASK)
        assert session.finish() == 0, session.stderr()[-2000:]
    received = result_of(after, ASK)
    assert received.result.get("is_error") is True
    assert received.text == 'MCP server "ask-user-rich" tool "ask_user_rich" timed out after 3s'
    log = session.log()
    # Cancelled by Claude Code's notification or by -p closing our stdin, whichever came first.
    assert "outcome=cancelled" in log and " shutdown" in log and "submitted interview=" not in log


def test_print_mode_per_server_timeout_outlasts_mcp_tool_timeout(tmp_path):
    """A `timeout` on our server's entry (milliseconds) overrides MCP_TOOL_TIMEOUT for it: the
    call outlives the 3 s MCP_TOOL_TIMEOUT and ends on its own timeoutSeconds instead, with
    `awaiting`; the model then calls await_user_answers and gets the answers."""
    arguments = dict(ARGS, timeoutSeconds=5)
    policy = scripted((ASK, arguments), (AWAIT, lambda made: {"sessionId": _session_id(made)}))
    with PrintSession(tmp_path, policy, client_env={"MCP_TOOL_TIMEOUT": "3000"},
                      server_config={"timeout": 120000}) as session:
        url = session.opened()
        awaiting = result_of(turn_after(session.model, ASK), ASK)
        assert awaiting.result.get("is_error") is not True, awaiting.text
        assert awaiting.json()["reason"] == "Stopped waiting after 5s (timeoutSeconds)."
        called(session.model, AWAIT)
        after, latency = submit_and_time(session, url, {"db": {"selected": ["my"], "notes": NOTE}}, AWAIT)
        assert session.finish() == 0, session.stderr()[-2000:]
    result = result_of(after, AWAIT).json()
    assert result["status"] == "submitted" and result["answers"][0]["notes"] == NOTE
    report("modern, no tasks, timeoutSeconds then await (per-server timeout)", session, latency,
           "structuredContent inline")


def test_print_mode_auto_background_ends_the_session_with_the_form_open(tmp_path):
    """With CLAUDE_AUTO_BACKGROUND_TASKS=1, -p moves a call that runs past
    CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS to the background: the model is told so, our progress
    shows as task_progress lines, and -p then ends on its own a few seconds after the model's
    turn, closing our server with the form still unanswered. The answers can never arrive."""
    env = {"CLAUDE_AUTO_BACKGROUND_TASKS": "1", "CLAUDE_CODE_MCP_AUTO_BACKGROUND_MS": "2000"}
    with PrintSession(tmp_path, scripted((ASK, ARGS)), client_env=env) as session:
        wait_until_waited_on(session.opened())
        after = turn_after(session.model, ASK)
        assert session.finish() == 0, session.stderr()[-2000:]
        ended = time.monotonic()
    received = result_of(after, ASK).text
    assert "is still running after 2s. It was moved to the background as task" in received, received
    progress = [e for e in session.events() if e.get("subtype") == "task_progress"]
    assert progress and all(e["summary"].startswith('Waiting for answers to "Pick a database": 0 of 1 answered')
                            for e in progress), progress
    log = session.log()
    assert "stdin-closed" in log and " shutdown" in log and "submitted interview=" not in log
    print("\nclaude-code %s -p auto-background: -p ended %.1f s after the model's last turn"
          % (session.release, ended - session.model.turns[-1].arrived))


# -- a long interview: the result must fit -------------------------------------------------------

CLAUDE_CODE_TOKEN_LIMIT = 25000  # MAX_MCP_OUTPUT_TOKENS' default in 2.1.328


def long_interview(count=300):
    """`count` questions of every kind an agent writes: single and multi choice, rankings,
    option text fields, free text, previews; long headers, context and rationales."""
    questions = []
    for i in range(count):
        header = "Question %d: how should we handle this part of the design, given what we know?" % i
        kind = i % 6
        if kind == 0:
            question = {"options": [{"id": c, "label": "Option %s" % c.upper(), "description": "What %s means." % c}
                                    for c in "abc"], "recommended": "b", "rationale": "B is what we run today."}
        elif kind == 1:
            question = {"multiSelect": True, "options": [{"id": c, "label": "Feature %s" % c} for c in "abcd"],
                        "recommended": ["a", "c"]}
        elif kind == 2:
            question = {"kind": "rank", "options": [{"id": c, "label": "Goal %s" % c} for c in "xyz"],
                        "recommended": ["x", "y", "z"]}
        elif kind == 3:
            question = {"options": [{"id": "keep", "label": "Keep it"},
                                    {"id": "up", "label": "Upgrade", "textInput": {"placeholder": "the source URL"}}],
                        "recommended": "keep"}
        elif kind == 4:
            question = {"body": "Anything we missed about **part %d**?" % i}
        else:
            question = {"options": [{"id": "a", "label": "Layout A", "preview": "```\n[A] [B]\n```"},
                                    {"id": "b", "label": "Layout B", "preview": "```\n[B]\n[A]\n```"}],
                        "recommended": "a"}
        question.update(id="q%03d" % i, header=header)
        questions.append(question)
    return {"title": "The big design review", "questions": questions}


def long_answers(questions):
    """Most as recommended; every third another pick (or Other, or a typed URL, or a reversed
    order), a note on every fourth, free text typed, and a few deferred, needs-info or left
    open."""
    answers = {}
    for i, question in enumerate(questions):
        qid, kind = question["id"], i % 6
        if i % 50 == 27:
            continue  # unanswered
        if i % 50 == 7:
            answers[qid] = {"status": "defer"}
            continue
        if i % 50 == 17:
            answers[qid] = {"status": "needs-info", "notes": "Which region is %s about?" % qid}
            continue
        other = i % 3 == 0
        if kind == 0:
            answer = {"selected": ["c" if other else "b"]}
        elif kind == 1:
            answer = {"selected": ["b", "d"] if other else ["a", "c"]}
        elif kind == 2:
            answer = {"ranked": ["z", "y", "x"] if other else ["x", "y", "z"]}
        elif kind == 3:
            answer = ({"selected": ["up"], "optionTexts": {"up": "https://example.com/src/%d" % i}} if other
                      else {"selected": ["keep"]})
        elif kind == 4:
            answer = {"other": "Free answer to %s: mind the migration window." % qid}
        else:
            answer = {"other": "Neither layout for %s; a third one" % qid} if other else {"selected": ["a"]}
        if i % 4 == 0:
            answer["notes"] = "Note on %s: watch the cost of this one." % qid
        answers[qid] = answer
    return answers


def expected_row(question, answer):
    """The fields of the result row that `answer` must produce (empty ones left out, as in a
    compact row)."""
    if answer is None:
        return {"status": "unanswered"}
    status = {"defer": "deferred", "needs-info": "needs-info"}.get(answer.get("status"), "answered")
    row = {"status": status}
    for key in ("selected", "ranked", "other", "optionTexts", "notes"):
        if answer.get(key):
            row[key] = answer[key]
    return row


def long_session(tmp_path, module=MODULE, legacy=False):
    """The 300-question session: (session, what the model received, the submit-to-request time,
    the arguments, the answers submitted)."""
    arguments = long_interview()
    answers = long_answers(arguments["questions"])
    with PrintSession(tmp_path, scripted((ASK, arguments)), prompt="Review the whole design with me.",
                      module=module, legacy=legacy) as session:
        url = session.opened()
        assert_arrived_intact(session, url, "ask_user_rich", arguments)
        after, latency = submit_and_time(session, url, answers, ASK, generalNotes="Thanks, the rest is fine.")
        assert session.finish() == 0, session.stderr()[-2000:]
    return session, result_of(after, ASK).text, latency, arguments, answers


RELEASES = pytest.mark.parametrize("legacy", [False, True], ids=["2.1.328", "2.1.197"])


@RELEASES
def test_print_mode_300_question_interview_reaches_the_model_inline_and_within_budget(tmp_path, legacy):
    """A 300-question interview answered in the form with many non-default answers and notes:
    the model's next request holds the result inline (not Claude Code's <persisted-output> file
    reference and 2 KB preview), within 25,000 tokens, with every answer that is not the
    recommendation and every note; the archive it names holds every field of every answer."""
    session, received, latency, arguments, answers = long_session(tmp_path, legacy=legacy)
    questions = arguments["questions"]
    assert "<persisted-output>" not in received and "Output too large" not in received, received[:600]
    characters = len(received)
    # Counted as Claude Code estimates a text's tokens: characters / 4. A denser text (120,000
    # characters for about 34,000 tokens) is nearer 3.5 a token, so that must fit too.
    assert characters / 3.5 <= CLAUDE_CODE_TOKEN_LIMIT, characters
    result = json.loads(received)
    assert result["compact"] is True and result["status"] == "submitted"
    assert result["generalNotes"] == "Thanks, the rest is fine."
    rows = {row["id"]: row for row in result["answers"]}
    assert list(rows) == [q["id"] for q in questions]
    for question in questions:
        expected = expected_row(question, answers.get(question["id"]))
        row = rows[question["id"]]
        assert {key: row.get(key) for key in expected} == expected, question["id"]
        if row.get("followedRecommendation") is not True or "notes" in expected:
            # the summary the model reads first lists it, note and all
            line = [text for text in result["summary"].splitlines() if "[%s]" % question["id"] in text]
            assert line and (expected.get("notes") or "") in line[0], question["id"]
    # The archive it names holds everything: every row whole, and the questions as asked.
    with open(result["archivePath"], encoding="utf-8") as f:
        archive = json.load(f)
    assert [q["id"] for q in archive["interview"]["questions"]] == [q["id"] for q in questions]
    assert archive["generalNotes"] == "Thanks, the rest is fine." and "compact" not in archive
    assert [q["header"] for q in archive["interview"]["questions"]] == [q["header"] for q in questions]
    for question, row in zip(questions, archive["answers"]):
        expected = expected_row(question, answers.get(question["id"]))
        assert row["header"] == question["header"]
        assert {key: row[key] for key in expected} == expected, question["id"]
        for key in ("selected", "ranked", "other", "optionTexts", "notes"):
            if key not in expected:
                assert row[key] in (None, [], {}), (question["id"], key)
    non_default = sum(1 for q in questions if rows[q["id"]].get("followedRecommendation") is not True)
    notes = sum(1 for a in answers.values() if a.get("notes"))
    print("\n300 questions, %d not as recommended, %d notes: the model got %d characters inline "
          "(%d tokens at 4 characters a token)" % (non_default, notes, characters, characters // 4))
    report("%s, no tasks, 300 questions" % ("legacy" if legacy else "modern"), session, latency,
           "compact structuredContent inline")


def _variant(tmp_path, old, new):
    """askrich.py with `old` replaced by `new`, beside the real assets."""
    with open(MODULE, encoding="utf-8") as f:
        source = f.read()
    assert old in source, "the variant no longer applies: %r" % old
    folder = tmp_path / "variant"
    folder.mkdir()
    (folder / "askrich.py").write_text(source.replace(old, new), encoding="utf-8")
    os.symlink(os.path.join(os.path.dirname(MODULE), "assets"), str(folder / "assets"))
    return str(folder / "askrich.py")


@RELEASES
def test_without_the_size_hint_claude_code_hands_the_model_only_a_preview(tmp_path, legacy):
    """The same session against a server whose tools lack `anthropic/maxResultSizeChars`: Claude
    Code saves even the compact result to a file and the model gets a 2 KB preview, so the test
    above fails on such a server."""
    module = _variant(tmp_path, ', "anthropic/maxResultSizeChars": MAX_RESULT_SIZE_CHARS}', "}")
    received = long_session(tmp_path, module, legacy)[1]
    assert received.startswith("<persisted-output>") and "Output too large" in received, received[:300]
    assert "Preview (first 2KB)" in received and len(received) < 3000


def test_without_the_compact_form_the_result_passes_the_budget(tmp_path):
    """The same session against a server that never goes compact: the result stays inline (the
    hint) but passes 25,000 tokens, so the test above fails on such a server."""
    module = _variant(tmp_path, "COMPACT_ABOVE_CHARS = 40000", "COMPACT_ABOVE_CHARS = 10 ** 9")
    received = long_session(tmp_path, module)[1]
    assert "<persisted-output>" not in received
    assert len(received) / 4 > CLAUDE_CODE_TOKEN_LIMIT, len(received)


def test_print_mode_the_persons_away_policy_answers_when_nobody_does(tmp_path):
    """Nobody answers the form that opened: after ASK_USER_RICH_AWAY_AFTER (3 s here) the
    person's away policy takes the recommendation, and the model's next request holds the
    result with by "away-policy" and the summary line that says so."""
    env = {"ASK_USER_RICH_AWAY": "recommended", "ASK_USER_RICH_AWAY_AFTER": "0.05"}
    with PrintSession(tmp_path, scripted((ASK, ARGS)), server_env=env) as session:
        session.opened()
        after = turn_after(session.model, ASK)
        assert session.finish() == 0, session.stderr()[-2000:]
    result = result_of(after, ASK).json()
    assert result["status"] == "submitted" and result["via"] == "away-policy"
    assert result["answers"][0]["selected"] == ["pg"] and result["answers"][0]["by"] == "away-policy"
    assert result["away"] == {"policy": "recommended", "afterMinutes": 0.05, "decided": ["db"]}
    assert result["summary"].splitlines()[0] == (
        "Nobody answered within 0.05 minutes: the recommendation was taken for 1 of 1 questions (your away policy).")
