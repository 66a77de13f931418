"""Every kind of message the server writes in the 2026-07-28 era, captured from the real process
and held to the official 2026-07-28 JSON schema (tests/schemas), the tasks extension's schema
beside it, and the Python SDK's own validators where it has them; and proof that the check is
not a formality: the same messages with a required field taken out fail it.

The fixtures in conftest.py run the same check on every peer of every other test as it ends
(`modern_support.assert_every_modern_message_fits`), so no message a test captures escapes it.
"""

from __future__ import annotations

import copy

import pytest

from helpers.delivery_support import FLAT_INTERVIEW
from helpers.modern_support import (
    assert_every_modern_message_fits,
    assert_fits_the_2026_schema,
    assert_modern_message_fits,
    call_modern,
    modern_requests_sent,
    poll_task,
    result_of,
    send_modern,
    tool_modern,
    wait_until_waiting,
    written_messages,
)
from helpers.support import SubprocessServer, choice, interview, submit

pytest.importorskip("jsonschema")

DEBUG = {"io.modelcontextprotocol/logLevel": "debug"}
FORM = {"elicitation": {"form": {}}}


def ask(peer, *questions) -> dict:
    asked = result_of(tool_modern(peer, "ask_user_rich", interview(*questions, delivery="link"), tasks=True))
    return asked["structuredContent"]


def start_task(peer, session_id) -> dict:
    created = result_of(tool_modern(peer, "await_user_answers", {"sessionId": session_id}, tasks=True))
    assert created["resultType"] == "task", created
    return created


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """{kind: the whole message the server wrote} for every kind the modern era has, and the
    peer, from one scripted session."""
    peer = SubprocessServer(tmp_path_factory.mktemp("modern-schema") / "logs",
                            env={"ASK_USER_RICH_PROGRESS_MS": "100"})
    try:
        call_modern(peer, "server/discover")
        call_modern(peer, "tools/list")
        call_modern(peer, "tasks/get", {"taskId": "nobody.1"}, tasks=True)  # -32602
        tool_modern(peer, "ask_user_rich", dict(FLAT_INTERVIEW, delivery="elicitation"), capabilities=FORM)

        done = ask(peer, choice("db", "pg", "my"))
        task = start_task(peer, done["sessionId"])
        call_modern(peer, "tasks/get", {"taskId": task["taskId"]}, tasks=True)
        call_modern(peer, "tasks/update", {"taskId": task["taskId"], "inputResponses": {}}, tasks=True)
        wait_until_waiting(peer, done["sessionId"])
        assert submit(done["url"], {"db": {"selected": ["pg"]}}, specVersion=1).status == 200
        poll_task(peer, task["taskId"], lambda t: t["status"] == "completed")

        dropped = ask(peer, choice("db", "pg", "my"))
        dropped_task = start_task(peer, dropped["sessionId"])
        call_modern(peer, "tasks/cancel", {"taskId": dropped_task["taskId"]}, tasks=True)
        call_modern(peer, "tasks/get", {"taskId": dropped_task["taskId"]}, tasks=True)

        waited = ask(peer, choice("db", "pg", "my"))
        blocking = send_modern(peer, "tools/call", {"name": "await_user_answers",
                                                    "arguments": {"sessionId": waited["sessionId"]}},
                               progress_token="p", **DEBUG)
        wait_until_waiting(peer, waited["sessionId"])
        peer.receive(lambda m: m.get("method") == "notifications/progress")
        assert submit(waited["url"], {"db": {"selected": ["my"]}}, specVersion=1).status == 200
        result_of(peer.response(blocking))
    finally:
        peer.close()

    methods = modern_requests_sent(peer)
    kinds = {}
    for message in written_messages(peer):
        kind = kind_of(methods, message)
        if kind and kind not in kinds:
            kinds[kind] = message
    return kinds, peer, methods


def kind_of(methods, message):
    if "method" in message:
        return message["method"]
    if "error" in message:
        return "error"
    method, result = methods.get(message.get("id")), message["result"]
    if method == "tools/call":
        return "tools/call " + result["resultType"]
    if method == "tasks/get":
        return "tasks/get " + result["status"]
    return method


KINDS = ["server/discover", "tools/list", "error", "tools/call input_required", "tools/call complete",
         "tools/call task", "tasks/get working", "tasks/get completed", "tasks/get cancelled",
         "tasks/update", "tasks/cancel", "notifications/progress", "notifications/message"]


def test_every_kind_of_modern_message_is_captured_and_fits_the_schemas(captured):
    kinds, peer, methods = captured
    assert sorted(kinds) == sorted(KINDS)
    for kind, message in kinds.items():
        method = None if "method" in message else methods.get(message.get("id"))
        assert_modern_message_fits(method, message)
    assert assert_every_modern_message_fits(peer) >= len(KINDS)


# (kind, where the field sits in the message) for every required field of each kind.
PLANTED = [
    ("server/discover", ("result", "resultType")), ("server/discover", ("result", "supportedVersions")),
    ("server/discover", ("result", "capabilities")), ("server/discover", ("result", "ttlMs")),
    ("server/discover", ("result", "cacheScope")),
    ("tools/list", ("result", "tools")), ("tools/list", ("result", "ttlMs")),
    ("tools/list", ("result", "cacheScope")), ("tools/list", ("result", "resultType")),
    ("tools/list", ("result", "tools", 0, "inputSchema")),
    ("error", ("error", "code")), ("error", ("error", "message")),
    ("tools/call input_required", ("result", "resultType")),
    ("tools/call input_required", ("result", "inputRequests", "answers", "method")),
    ("tools/call complete", ("result", "content")), ("tools/call complete", ("result", "resultType")),
    ("tools/call task", ("result", "taskId")), ("tools/call task", ("result", "status")),
    ("tools/call task", ("result", "createdAt")), ("tools/call task", ("result", "lastUpdatedAt")),
    ("tools/call task", ("result", "ttlMs")), ("tools/call task", ("result", "resultType")),
    ("tasks/get working", ("result", "taskId")), ("tasks/get working", ("result", "ttlMs")),
    ("tasks/get working", ("result", "createdAt")), ("tasks/get working", ("result", "resultType")),
    ("tasks/get completed", ("result", "result")),
    ("tasks/get completed", ("result", "result", "content")),
    ("tasks/get cancelled", ("result", "lastUpdatedAt")), ("tasks/get cancelled", ("result", "status")),
    ("tasks/update", ("result", "resultType")), ("tasks/cancel", ("result", "resultType")),
    ("notifications/progress", ("params", "progressToken")), ("notifications/progress", ("params", "progress")),
    ("notifications/message", ("params", "level")), ("notifications/message", ("params", "data")),
    ("notifications/message", ("jsonrpc",)),
]


def planted(message, path) -> dict:
    """A deep copy of `message` without the field at `path`."""
    broken = copy.deepcopy(message)
    parent = broken
    for step in path[:-1]:
        parent = parent[step]
    assert path[-1] in parent if isinstance(parent, dict) else path[-1] < len(parent), (path, message)
    del parent[path[-1]]
    return broken


@pytest.mark.parametrize("kind, path", PLANTED, ids=["%s-%s" % (k, ".".join(map(str, p))) for k, p in PLANTED])
def test_a_message_missing_a_required_field_fails_the_check(captured, kind, path):
    kinds, _peer, methods = captured
    message = kinds[kind]
    method = None if "method" in message else methods.get(message.get("id"))
    with pytest.raises(AssertionError):
        assert_modern_message_fits(method, planted(message, path))


def test_an_input_required_result_with_neither_input_requests_nor_request_state_fails_the_check(captured):
    kinds, _peer, methods = captured
    message = kinds["tools/call input_required"]
    assert_modern_message_fits("tools/call", planted(message, ("result", "requestState")))
    assert_modern_message_fits("tools/call", planted(message, ("result", "inputRequests")))
    with pytest.raises(AssertionError):
        assert_modern_message_fits("tools/call", planted(planted(message, ("result", "requestState")),
                                                         ("result", "inputRequests")))


# The SDK's models give a missing tool-result `content` a default, so only the JSON schema
# catches that one (above).
@pytest.mark.parametrize("kind, field", [("server/discover", "ttlMs"), ("server/discover", "cacheScope"),
                                         ("tools/list", "tools"), ("tools/call complete", "resultType")])
def test_the_python_sdk_validators_agree_on_a_planted_missing_field(captured, kind, field):
    kinds, _peer, methods = captured
    message = kinds[kind]
    method = methods[message["id"]]
    assert_fits_the_2026_schema(method, message["result"])
    with pytest.raises(Exception):
        assert_fits_the_2026_schema(method, planted(message, ("result", field))["result"])


@pytest.mark.parametrize("kind, field, value", [
    ("tasks/get working", "resultType", "task"),  # "task" is for CreateTaskResult only
    ("tools/call task", "status", "pending"),
    ("tools/call task", "ttlMs", "never"),
    ("tools/list", "cacheScope", "everyone"),
])
def test_a_message_with_a_value_the_spec_forbids_fails_the_check(captured, kind, field, value):
    kinds, _peer, methods = captured
    broken = copy.deepcopy(kinds[kind])
    broken["result"][field] = value
    with pytest.raises(AssertionError):
        assert_modern_message_fits(methods[broken["id"]], broken)


def test_a_failed_task_must_carry_its_error(captured):
    # Our failed tasks come only after a restart (tests/protocol/test_modern_tasks.py checks those, and the
    # fixtures hold them to the schema); here the rule itself, on a captured task.
    kinds, _peer, _methods = captured
    failed = copy.deepcopy(kinds["tasks/get cancelled"])
    failed["result"].update(status="failed", error={"code": -32603, "message": "The server restarted."})
    assert_modern_message_fits("tasks/get", failed)
    with pytest.raises(AssertionError):
        assert_modern_message_fits("tasks/get", planted(failed, ("result", "error")))
