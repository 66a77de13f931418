"""The official TypeScript MCP client of the 2026-07-28 line (@modelcontextprotocol/client) and its
tasks extension (@modelcontextprotocol/ext-tasks), pinned in tests/helpers/clients_support.py, driving
the server over stdio in both of its negotiation modes: `auto` (it probes with server/discover on
a sibling process, then speaks modern) and pinned to 2026-07-28.

The host is tests/ts_client/driver.mjs: the test tells it what to do, line by line, and it reports
every JSON-RPC message on the wire, every progress notification and elicitation its handlers saw,
and every error the SDK raised on its own. Each test ends by holding every message the server
wrote to the 2026-07-28 schema (and the tasks extension's own schemas), and by requiring that the
SDK raised nothing: what the TS client's validation rejects is a failure here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
from helpers import clients_support as cs  # noqa: E402
from helpers.delivery_support import FLAT_INTERVIEW, SERVER, server_env, submit_like_a_browser  # noqa: E402
from helpers.modern_support import (  # noqa: E402
    DECLINED_URL_REASON,
    MODERN,
    SERVER_INFO,
    TASKS,
    KEY_SERVER_INFO,
    assert_fits_the_schema,
    assert_modern_message_fits,
    form_state,
    log_events,
    wait_until_waiting,
)
from helpers.support import WAIT, LogWatch, choice, interview, submit  # noqa: E402

DRIVER = os.path.join(_HERE, "ts_client", "driver.mjs")
MODES = ["auto", MODERN]
TOOLS = ["ask_user_rich", "append_questions", "await_user_answers"]
# How long one driver reply may take: a connect spawns a server (two in auto mode), and a task
# settles on the client's own polling of tasks/get.
REPLY_WAIT = 60.0


class TsClient:
    """One driver process: commands in, replies and events out (read by a thread of its own)."""

    def __init__(self, tmp_path) -> None:
        folder = tmp_path / "ts-client"
        folder.mkdir()
        shutil.copy(DRIVER, str(folder / "driver.mjs"))
        os.symlink(cs.modules_dir(), str(folder / "node_modules"))
        self.process = subprocess.Popen(
            [cs.node(), str(folder / "driver.mjs")], cwd=str(folder), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = []
        self.changed = threading.Condition()
        self.next_id = 0
        # The server's stderr comes through the driver's (the SDK's transport inherits it): the
        # log lines a test waits on, as they are written.
        self.log = LogWatch()
        self.readers = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self.readers:
            reader.start()

    def _read_stderr(self) -> None:
        for raw in iter(lambda: self.process.stderr.read1(65536), b""):
            self.log.write(raw.decode("utf-8", "replace"))

    def _read(self) -> None:
        for raw in self.process.stdout:
            try:
                line = json.loads(raw.decode("utf-8"))
            except ValueError:
                line = {"event": "unparsed", "text": raw.decode("utf-8", "replace")}
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.lines.append({"event": "exit"})
            self.changed.notify_all()

    def wait_for(self, predicate, timeout: float = REPLY_WAIT, what: str = "a driver line"):
        """The first line for which `predicate` holds, waiting on the reader (never a sleep)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                if any(line.get("event") == "exit" for line in self.lines):
                    raise AssertionError("the driver exited before %s; stderr:\n%s" % (what, self.stderr()))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("timed out waiting for %s; stderr:\n%s" % (what, self.stderr()))
                self.changed.wait(left)

    def send(self, op: str, **fields) -> int:
        self.next_id += 1
        fields.update(id=self.next_id, op=op)
        self.process.stdin.write((json.dumps(fields) + "\n").encode("utf-8"))
        self.process.stdin.flush()
        return self.next_id

    def reply(self, command_id: int, timeout: float = REPLY_WAIT):
        line = self.wait_for(lambda line: line.get("reply") == command_id, timeout,
                             "the reply to command %d" % command_id)
        assert "error" not in line, "the TS client failed: %s" % json.dumps(line["error"], indent=1)[:4000]
        return line["ok"]

    def call(self, op: str, timeout: float = REPLY_WAIT, **fields):
        return self.reply(self.send(op, **fields), timeout)

    def events(self, kind: str) -> list:
        with self.changed:
            return [line for line in self.lines if line.get("event") == kind]

    def stderr(self) -> str:
        return self.log.getvalue()[-4000:]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=WAIT)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for reader in self.readers:
            reader.join(WAIT)

    # What the server wrote, held to the spec.

    def server_messages(self) -> list:
        return [line["message"] for line in self.events("wire") if line["dir"] == "in"]

    def request_methods(self) -> dict:
        """{id: method} of every request the host sent on the session's pipe."""
        return {line["message"]["id"]: line["message"]["method"] for line in self.events("wire")
                if line["dir"] == "out" and "id" in line["message"] and "method" in line["message"]}

    def assert_fits_the_tasks_schema(self, schema: str, value) -> None:
        """`value` passes the tasks extension's own wire schema `schema` (its Zod schemas)."""
        verdict = self.call("validate", schema=schema, value=value)
        assert verdict["valid"], "%s does not fit %s: %s" % (json.dumps(value)[:600], schema, verdict["issues"])

    def assert_every_server_message_fits(self) -> int:
        """Every message the server wrote passes the 2026-07-28 schema and the Python SDK's
        validators (modern_support), the task ones the tasks extension's own Zod schemas too; no
        server-to-client request was sent, and the SDK raised no error of its own; the number of
        messages checked."""
        methods = self.request_methods()
        messages = self.server_messages()
        for message in messages:
            assert "method" not in message or "id" not in message, "a request to the client: %s" % message
            method = None if "method" in message else methods[message["id"]]
            assert_modern_message_fits(method, message)
            assert message.get("result", {}).get("_meta", {}).get(KEY_SERVER_INFO, SERVER_INFO) == SERVER_INFO
            schema = tasks_schema_of(method, message)
            if schema:
                self.assert_fits_the_tasks_schema(schema, message if method is None else message["result"])
        assert self.events("clientError") == []
        assert self.events("clientWarning") == []
        return len(messages)


def tasks_schema_of(method, message):
    """The tasks extension's Zod schema for a message of the extension (None for others)."""
    if method is None:
        return "TaskStatusNotificationV2Schema" if message["method"] == "notifications/tasks" else None
    if "result" not in message:
        return None
    if method == "tools/call":
        return "CreateTaskResultV2Schema" if message["result"].get("resultType") == "task" else None
    return {"tasks/get": "GetTaskResultV2Schema", "tasks/cancel": "CancelTaskResultV2Schema",
            "tasks/update": "UpdateTaskResultV2Schema"}.get(method)


@pytest.fixture
def ts_client(tmp_path):
    clients = []

    def start(mode, elicitation=None, **env):
        """A driver connected to a fresh server in negotiation `mode`; the connect's reply."""
        client = TsClient(tmp_path)
        clients.append(client)
        env.setdefault("ASK_USER_RICH_OPEN", "0")
        connected = client.call("connect", mode=mode, command=sys.executable, args=[SERVER],
                                env=server_env(tmp_path / "logs", **env), cwd=str(tmp_path),
                                elicitation=elicitation or {})
        return client, connected

    yield start
    for client in clients:
        client.close()


def modern_requests(tmp_path) -> set:
    return {(fields.get("method"), fields.get("era")) for fields in log_events(tmp_path / "logs", "request")}


@pytest.mark.parametrize("mode", MODES)
def test_the_ts_client_negotiates_2026_07_28_and_lists_our_tools_with_their_cache_hints(ts_client, tmp_path, mode):
    client, connected = ts_client(mode)
    assert connected["era"] == "modern" and connected["protocolVersion"] == MODERN
    assert {key: connected["serverVersion"][key] for key in SERVER_INFO} == SERVER_INFO
    assert connected["serverCapabilities"] == {"tools": {}, "logging": {}, "resources": {},
                                              "extensions": {TASKS: {}, "io.modelcontextprotocol/ui": {}}}
    assert "await_user_answers" in connected["instructions"]
    discover = connected["discover"]
    assert discover["supportedVersions"][0] == MODERN
    assert (discover["ttlMs"], discover["cacheScope"]) == (3600000, "public")
    assert_fits_the_schema("DiscoverResult", discover)

    listed = client.call("listTools")
    assert [tool["name"] for tool in listed["tools"]] == TOOLS
    # The list depends on whether the caller renders MCP Apps (its app-only tools and hints),
    # so it may be cached only by the caller that asked.
    assert listed["cacheScope"] == "private" and listed["ttlMs"] > 0
    for tool in listed["tools"]:
        assert tool["_meta"]["anthropic/searchHint"] and tool["_meta"]["anthropic/maxResultSizeChars"] > 0
    assert client.assert_every_server_message_fits() >= 1
    assert ("tools/list", "modern") in modern_requests(tmp_path)
    assert ("initialize", "legacy") not in modern_requests(tmp_path)


@pytest.mark.parametrize("mode", MODES)
def test_the_ts_client_asks_by_link_and_gets_awaiting_with_a_form_that_is_open(ts_client, mode):
    client, _ = ts_client(mode)
    result = client.call("callTool", name="ask_user_rich", arguments=interview(
        choice("db", "pg", "my", recommended="pg"), delivery="link"))
    assert result.get("isError") is not True
    awaiting = result["structuredContent"]
    assert awaiting["status"] == "awaiting" and "/s/" in awaiting["url"]
    assert awaiting["url"] in result["content"][0]["text"]
    assert form_state(awaiting["url"])["state"] == "pending"
    assert client.assert_every_server_message_fits() >= 1


@pytest.mark.parametrize("mode", MODES)
def test_a_blocking_call_reaches_the_ts_progress_handler_and_returns_the_submitted_answers(ts_client, tmp_path, mode):
    client, _ = ts_client(mode, ASK_USER_RICH_PROGRESS_MS="200")
    asked = client.call("callTool", name="ask_user_rich", arguments=interview(
        choice("db", "pg", "my", recommended="pg"), choice("more", "yes", "no"), delivery="link"))
    url, session_id = asked["structuredContent"]["url"], asked["structuredContent"]["sessionId"]
    waiting = client.send("callTool", name="await_user_answers", arguments={"sessionId": session_id},
                          progress=True)
    wait_until_waiting(client)
    # At least one interval tick after the first message, as a user who takes their time.
    client.wait_for(lambda line: line.get("event") == "progress" and line["progress"]["progress"] >= 2,
                    what="a second progress notification")
    response = submit(url, {"db": {"selected": ["pg"]}, "more": {"status": "defer"}}, specVersion=1)
    assert response.status == 200, response.body
    result = client.reply(waiting)

    structured = result["structuredContent"]
    assert structured["status"] == "submitted"
    assert structured["counts"] == {"answered": 1, "deferred": 1, "needsInfo": 0, "unanswered": 0}
    assert structured["answers"][0]["followedRecommendation"] is True
    seen = [line["progress"] for line in client.events("progress") if line["call"] == waiting]
    values = [progress["progress"] for progress in seen]
    assert len(values) >= 2 and values == sorted(set(values)), values
    assert all(progress["message"].startswith('Waiting for answers to "Test interview": ') for progress in seen)
    # Every message ends with the link: a terminal client shows only the latest.
    assert all(progress["message"].endswith(". Form: " + url) for progress in seen)
    assert client.assert_every_server_message_fits() >= 3


def elicitations(client) -> list:
    return [line["params"] for line in client.events("elicitation")]


def tool_call_results(client) -> list:
    """The results the server wrote for tools/call, in order."""
    methods = client.request_methods()
    return [message["result"] for message in client.server_messages()
            if "result" in message and methods.get(message.get("id")) == "tools/call"]


@pytest.mark.parametrize("mode", MODES)
def test_a_form_elicitation_is_answered_by_the_ts_elicitation_handler_and_settles_the_interview(ts_client, mode):
    answer = {"action": "accept", "content": {"db": "my", "extras": ["cache"], "free": "ok"}}
    client, _ = ts_client(mode, elicitation={"form": answer})
    result = client.call("callTool", name="ask_user_rich", arguments=dict(FLAT_INTERVIEW, delivery="elicitation"))

    (params,) = elicitations(client)
    assert params["mode"] == "form" and params["message"].startswith("Pick a stack")
    assert list(params["requestedSchema"]["properties"]) == ["db", "db__other", "extras", "extras__other", "free"]
    structured = result["structuredContent"]
    assert structured["status"] == "submitted" and structured["via"] == "elicitation"
    assert [row["selected"] for row in structured["answers"]] == [["my"], ["cache"], []]
    assert structured["answers"][2]["other"] == "ok"
    # It came by round trip: input_required, then the retry's complete result.
    assert [r["resultType"] for r in tool_call_results(client)] == ["input_required", "complete"]
    assert client.assert_every_server_message_fits() >= 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action, status", [("decline", "declined"), ("cancel", "cancelled")])
def test_a_form_elicitation_the_ts_handler_refuses_settles_every_answer_unanswered(ts_client, mode, action, status):
    client, _ = ts_client(mode, elicitation={"form": {"action": action}})
    result = client.call("callTool", name="ask_user_rich", arguments=dict(FLAT_INTERVIEW, delivery="elicitation"))
    structured = result["structuredContent"]
    assert structured["status"] == status and structured["via"] == "elicitation"
    assert structured["counts"]["unanswered"] == 3
    assert client.assert_every_server_message_fits() >= 2


@pytest.mark.parametrize("mode", MODES)
def test_a_url_elicitation_accepted_by_the_ts_handler_waits_for_the_submit_with_progress(ts_client, mode):
    client, _ = ts_client(mode, elicitation={"url": {"action": "accept"}},
                          ASK_USER_RICH_OPEN_CMD="/bin/false", ASK_USER_RICH_OPEN="1")
    call = client.send("callTool", name="ask_user_rich", arguments=FLAT_INTERVIEW, progress=True)
    client.wait_for(lambda line: line.get("event") == "elicitation", what="the URL elicitation")
    (params,) = elicitations(client)
    assert params["mode"] == "url" and "/s/" in params["url"] and "Pick a stack" in params["message"]
    assert "elicitationId" not in params
    wait_until_waiting(client)
    assert submit_like_a_browser(params["url"])["delivered"] is True
    result = client.reply(call)

    structured = result["structuredContent"]
    assert structured["status"] == "submitted" and structured["via"] == "browser"
    # The SDK reports its own round ("Fulfilling input required…") to the handler too; ours
    # are the ones on the wire, and every one of them reached the handler.
    ours = [m["params"]["message"] for m in client.server_messages() if m.get("method") == "notifications/progress"]
    handled = [line["progress"]["message"] for line in client.events("progress") if line["call"] == call]
    assert ours and ours[0].startswith('Waiting for answers to "Pick a stack": ')
    assert [message for message in handled if message in ours] == ours
    assert [r["resultType"] for r in tool_call_results(client)] == ["input_required", "complete"]
    methods = [message.get("method") for message in client.server_messages()]
    assert "notifications/elicitation/complete" not in methods  # no such thing in this era
    assert client.assert_every_server_message_fits() >= 3


@pytest.mark.parametrize("mode", MODES)
def test_a_url_elicitation_declined_by_the_ts_handler_returns_awaiting_and_the_form_stays_open(ts_client, mode):
    client, _ = ts_client(mode, elicitation={"url": {"action": "decline"}},
                          ASK_USER_RICH_OPEN_CMD="/bin/false", ASK_USER_RICH_OPEN="1")
    result = client.call("callTool", name="ask_user_rich", arguments=FLAT_INTERVIEW)
    structured = result["structuredContent"]
    assert structured["status"] == "awaiting" and structured["reason"] == DECLINED_URL_REASON
    assert form_state(structured["url"])["state"] == "pending"
    assert client.assert_every_server_message_fits() >= 2


def ask_by_link(client, *questions) -> dict:
    asked = client.call("callTool", name="ask_user_rich", arguments=interview(*questions, delivery="link"))
    return asked["structuredContent"]


@pytest.mark.parametrize("mode", MODES)
def test_a_task_through_ext_tasks_goes_from_creation_to_the_submitted_result(ts_client, tmp_path, mode):
    client, _ = ts_client(mode)
    awaiting = ask_by_link(client, choice("db", "pg", "my", recommended="pg"))
    url, session_id = awaiting["url"], awaiting["sessionId"]
    started = client.call("taskCall", name="await_user_answers", arguments={"sessionId": session_id})
    assert started["kind"] == "task", started
    task_id = started["taskId"]
    assert task_id.startswith(session_id + ".")
    assert started["capabilities"]["cancellation"] is True

    settling = client.send("taskSettle", taskId=task_id)
    working = client.call("taskSnapshot", taskId=task_id)
    assert working["status"] == "working"
    assert working["statusMessage"].endswith(" Form: " + url)
    assert 'sessionId "%s"' % session_id in working["statusMessage"]
    wait_until_waiting(client)
    assert submit(url, {"db": {"selected": ["pg"]}}, specVersion=1).status == 200
    settled = client.reply(settling)

    assert settled["status"] == "completed", settled
    structured = settled["result"]["structuredContent"]
    assert structured["status"] == "submitted"
    assert structured["answers"][0]["selected"] == ["pg"]
    assert settled["lastTask"]["status"] == "completed"
    assert settled["lastTask"]["statusMessage"] == settled["result"]["content"][0]["text"].splitlines()[0]
    created = [message["result"] for message in client.server_messages()
               if message.get("result", {}).get("resultType") == "task"]
    assert [task["taskId"] for task in created] == [task_id]
    assert (created[0]["status"], created[0]["ttlMs"], created[0]["pollIntervalMs"]) == ("working", None, 2000)
    assert [fields["task"] for fields in log_events(tmp_path / "logs", "task-created")] == [task_id]
    assert [fields["task"] for fields in log_events(tmp_path / "logs", "task-completed")] == [task_id]
    assert client.assert_every_server_message_fits() >= 4


@pytest.mark.parametrize("mode", MODES)
def test_a_task_cancelled_through_ext_tasks_says_so_and_its_form_stays_open(ts_client, tmp_path, mode):
    client, _ = ts_client(mode)
    awaiting = ask_by_link(client, choice("db", "pg", "my"))
    url = awaiting["url"]
    started = client.call("taskCall", name="await_user_answers", arguments={"sessionId": awaiting["sessionId"]})
    task_id = started["taskId"]
    settling = client.send("taskSettle", taskId=task_id)
    client.call("taskCancel", taskId=task_id)
    settled = client.reply(settling)

    assert settled["status"] == "cancelled", settled
    cancelled = client.call("taskSnapshot", taskId=task_id)
    assert cancelled["status"] == "cancelled"
    assert cancelled["statusMessage"] == "Cancelled by the client; the form stays open at " + url
    assert form_state(url)["state"] == "pending"
    assert [fields["task"] for fields in log_events(tmp_path / "logs", "task-cancelled")] == [task_id]
    assert log_events(tmp_path / "logs", "task-completed") == []
    methods = client.request_methods()
    assert "tasks/cancel" in methods.values()
    # The interview is still there to collect: a later submit reaches a new await.
    assert submit(url, {"db": {"selected": ["my"]}}, specVersion=1).status == 200
    collected = client.call("callTool", name="await_user_answers", arguments={"sessionId": awaiting["sessionId"]})
    assert collected["structuredContent"]["answers"][0]["selected"] == ["my"]
    assert client.assert_every_server_message_fits() >= 4


TASK_FIELDS = ["resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs",
               "statusMessage", "result"]


def test_our_tasks_schema_and_the_tasks_extensions_own_schemas_agree_on_every_task_message(ts_client):
    """tests/schemas/tasks-2026-07-28.json was written from the extension's text; the package's
    Zod schemas are generated from its schema. On every task message of a real run, whole and with
    each field taken out, both must give the same verdict."""
    client, _ = ts_client(MODERN)
    done = ask_by_link(client, choice("db", "pg", "my"))
    finished = client.call("taskCall", name="await_user_answers", arguments={"sessionId": done["sessionId"]})
    settling = client.send("taskSettle", taskId=finished["taskId"])
    assert client.call("taskSnapshot", taskId=finished["taskId"])["status"] == "working"
    wait_until_waiting(client)
    assert submit(done["url"], {"db": {"selected": ["pg"]}}, specVersion=1).status == 200
    client.reply(settling)
    dropped = ask_by_link(client, choice("db", "pg", "my"))
    cancelled = client.call("taskCall", name="await_user_answers", arguments={"sessionId": dropped["sessionId"]})
    client.call("taskCancel", taskId=cancelled["taskId"])
    client.call("taskSnapshot", taskId=cancelled["taskId"])

    methods = client.request_methods()
    samples = {}
    for message in client.server_messages():
        method = methods.get(message.get("id"))
        schema = tasks_schema_of(method, message) if method else None
        if schema:
            kind = (method, message["result"].get("status"))
            samples.setdefault(kind, (method, schema, message))
    assert set(samples) >= {("tools/call", "working"), ("tasks/get", "working"), ("tasks/get", "completed"),
                            ("tasks/get", "cancelled"), ("tasks/cancel", None)}, sorted(map(str, samples))
    verdicts = []
    for method, schema, message in samples.values():
        variants = [("whole", message)]
        for field in TASK_FIELDS:
            if field in message["result"]:
                broken = dict(message, result={k: v for k, v in message["result"].items() if k != field})
                variants.append((field, broken))
        for label, variant in variants:
            ours = not modern_schema_errors(method, variant)
            theirs = client.call("validate", schema=schema, value=variant["result"])["valid"]
            verdicts.append((method, message["result"].get("status"), label, ours, theirs))
    disagreements = [verdict for verdict in verdicts if verdict[3] != verdict[4]]
    assert disagreements == [], disagreements
    assert any(not ours for *_, ours, _theirs in verdicts)  # some variants really were refused
    assert client.assert_every_server_message_fits() >= 8


def modern_schema_errors(method, message) -> str:
    try:
        assert_modern_message_fits(method, message)
    except AssertionError as error:
        return str(error)
    return ""


# A stand-in server whose tool result breaks its own outputSchema: what the TS client must refuse.
BROKEN_SERVER = r'''
import json, sys
META = {"io.modelcontextprotocol/serverInfo": {"name": "broken", "version": "1"}}
TOOL = {"name": "t", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}
for raw in sys.stdin:
    message = json.loads(raw)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                  "ttlMs": 0, "cacheScope": "public"}
    elif method == "tools/list":
        result = {"tools": [TOOL], "ttlMs": 0, "cacheScope": "public"}
    else:
        result = {"content": [{"type": "text", "text": "{}"}], "structuredContent": {}}
    result.update(resultType="complete", _meta=META)
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
'''


def test_a_result_the_ts_client_refuses_fails_the_test_harness(tmp_path):
    """The harness is no formality: a tool result that breaks its declared outputSchema is
    refused by the TS client's own validation, and the refusal reaches the test as an error."""
    server = tmp_path / "broken_server.py"
    server.write_text(BROKEN_SERVER)
    client = TsClient(tmp_path)
    try:
        client.call("connect", mode=MODERN, command=sys.executable, args=[str(server)],
                    env=server_env(tmp_path / "logs"), cwd=str(tmp_path), elicitation={})
        client.call("listTools")
        call = client.send("callTool", name="t", arguments={})
        refused = client.wait_for(lambda line: line.get("reply") == call, what="the refused call")
        assert "error" in refused, refused
        assert "structured content" in refused["error"]["message"].lower() or "schema" in refused["error"]["message"].lower(), refused
        with pytest.raises(AssertionError, match="the TS client failed"):
            client.reply(refused["reply"])
    finally:
        client.close()
