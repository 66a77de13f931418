"""Unit tests of the two protocol eras' own parts: the sealed requestState, how a request's
`_meta` picks its era, the task registry, and the setting that turns the 2026-07-28 era off."""

from __future__ import annotations

import json
import os

import pytest

import askrich
from helpers.support import InProcessServer, choice, interview, quiet_runtime, two_tasks_then_restart

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
ARGUMENTS = {"title": "T", "questions": [{"id": "q", "header": "Q?"}]}


def refusal(call) -> askrich.JsonRpcError:
    with pytest.raises(askrich.JsonRpcError) as caught:
        call()
    return caught.value


# -- requestState -----------------------------------------------------------------------------


def test_a_sealed_request_state_opens_to_its_interview_and_input_key():
    seal = askrich.RequestStateSeal()
    state = seal.seal("0123456789ab", "ask_user_rich", ARGUMENTS, "answers")
    assert seal.open(state, "ask_user_rich", json.loads(json.dumps(ARGUMENTS))) == ("0123456789ab", "answers")


@pytest.mark.parametrize("change", ["flip", "cut", "pad", "empty", "number", "other key", "not ascii", "lone surrogate"])
def test_a_changed_or_foreign_request_state_is_refused_with_32602(change):
    seal = askrich.RequestStateSeal()
    state = seal.seal("0123456789ab", "ask_user_rich", ARGUMENTS, "answers")
    body, mac = state.split(".")
    bad = {
        "flip": body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + mac,
        "cut": state[:-1],
        "pad": state + "x",
        "empty": "",
        "number": 5,
        "other key": askrich.RequestStateSeal().seal("0123456789ab", "ask_user_rich", ARGUMENTS, "answers"),
        "not ascii": "\u00e9" + state[1:],
        "lone surrogate": "\ud800." + mac,
    }[change]
    error = refusal(lambda: seal.open(bad, "ask_user_rich", ARGUMENTS))
    assert error.code == -32602 and error.message.startswith("invalid requestState: ")


def test_a_request_state_is_refused_after_an_hour_for_another_tool_or_other_arguments():
    seal = askrich.RequestStateSeal()
    state = seal.seal("0123456789ab", "ask_user_rich", ARGUMENTS, "answers", now=1000.0)
    assert seal.open(state, "ask_user_rich", ARGUMENTS, now=1000.0 + 3599)[0] == "0123456789ab"
    expired = refusal(lambda: seal.open(state, "ask_user_rich", ARGUMENTS, now=1000.0 + 3601))
    assert "expired" in expired.message
    other_tool = refusal(lambda: seal.open(state, "await_user_answers", ARGUMENTS, now=1000.0))
    assert "made for ask_user_rich" in other_tool.message
    other_arguments = refusal(lambda: seal.open(state, "ask_user_rich", dict(ARGUMENTS, title="U"), now=1000.0))
    assert "other arguments" in other_arguments.message


# -- which era a request is in ----------------------------------------------------------------


def test_a_request_without_the_version_key_is_legacy():
    assert askrich.ModernRequest.parse(None) is None
    assert askrich.ModernRequest.parse({"progressToken": 1}) is None


def test_a_modern_request_carries_its_capabilities_client_and_log_level():
    meta = dict(MODERN_META, **{
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "claude-code"},
        "io.modelcontextprotocol/logLevel": "info",
    })
    request = askrich.ModernRequest.parse(meta)
    assert request.tasks is True and request.client_info == {"name": "claude-code"}
    assert request.log_level == "info"
    assert askrich.ModernRequest.parse(MODERN_META).tasks is False


@pytest.mark.parametrize("version", ["2025-11-25", "2099-01-01", ""])
def test_another_modern_version_is_refused_with_32022_naming_every_version_we_serve(version):
    error = refusal(lambda: askrich.ModernRequest.parse(dict(MODERN_META, **{
        "io.modelcontextprotocol/protocolVersion": version})))
    assert error.code == -32022 and error.message == "Unsupported protocol version"
    assert error.data == {"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                          "requested": version}


@pytest.mark.parametrize("capabilities", [None, [], "all"])
def test_a_modern_request_without_capabilities_is_refused_with_32602(capabilities):
    meta = dict(MODERN_META)
    if capabilities is None:
        del meta["io.modelcontextprotocol/clientCapabilities"]
    else:
        meta["io.modelcontextprotocol/clientCapabilities"] = capabilities
    error = refusal(lambda: askrich.ModernRequest.parse(meta))
    assert error.code == -32602 and "clientCapabilities" in error.message


def test_an_unknown_log_level_is_refused_with_32602():
    error = refusal(lambda: askrich.ModernRequest.parse(dict(MODERN_META, **{
        "io.modelcontextprotocol/logLevel": "loud"})))
    assert error.code == -32602 and "logLevel" in error.message


# -- tasks ------------------------------------------------------------------------------------


@pytest.fixture
def runtime(tmp_path):
    runtime = quiet_runtime(tmp_path)
    yield runtime
    runtime.close()


def test_tasks_get_fresh_ids_under_their_interview_and_follow_the_progress(runtime):
    tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
    form = runtime.open_interview(interview(choice("q", "a")))
    first = tasks.create(form, "Waiting", askrich.Cancellation())
    second = tasks.create(form, "Waiting", askrich.Cancellation())
    assert first["taskId"] != second["taskId"]
    assert first["taskId"].startswith(form.id + ".") and first["taskId"].split(".")[1].isdigit()
    assert (first["status"], first["ttlMs"], first["pollIntervalMs"]) == ("working", None, 2000)
    tasks.update(first["taskId"], dict(askrich.progress_snapshot(form)[1], answered=1))
    moved = tasks.get(first["taskId"])
    assert moved["statusMessage"].startswith('Waiting for answers to "Test interview": 1 of 1 answered, ')
    assert moved["lastUpdatedAt"] >= first["createdAt"]
    assert moved["statusMessage"].endswith(" Form: " + runtime.form_url(form))
    tasks.complete(first["taskId"], {"content": []})
    done = tasks.get(first["taskId"])
    assert done["status"] == "completed" and done["result"] == {"content": []}
    tasks.complete(first["taskId"], {"content": ["twice"]})
    assert tasks.get(first["taskId"])["result"] == {"content": []}


def test_a_short_progress_line_cuts_the_title_from_the_facts_and_keeps_the_counts():
    facts = {"title": 'A "quoted" title \\ with escapes ' * 6, "answered": 3, "total": 12,
             "form": "form open", "elapsedSeconds": 65}
    whole = askrich.progress_message(facts)
    assert whole.endswith('": 3 of 12 answered, form open (1:05 elapsed)') and len(whole) > 100
    for limit in range(80, 130):
        line = askrich.progress_message(facts, limit)
        assert len(line) <= limit and line.endswith('…": 3 of 12 answered, form open (1:05 elapsed)'), line
    # No room for 8 characters of title: the end goes instead.
    assert askrich.progress_message(facts, 60) == askrich.cut(whole, 60)


def test_a_call_holds_only_the_collaborators_it_uses_never_the_server(runtime, monkeypatch):
    made = []
    real = askrich.McpServer.start_tool_call
    monkeypatch.setattr(askrich.McpServer, "start_tool_call",
                        lambda self, call, name, arguments: made.append(call) or real(self, call, name, arguments))
    peer = InProcessServer(runtime)
    try:
        peer.initialize()
        peer.tool("ask_user_rich", dict(ARGUMENTS, delivery="link"))
        modern = peer.call("tools/call", {"name": "ask_user_rich", "arguments": dict(ARGUMENTS, delivery="link"),
                                          "_meta": MODERN_META})
        assert modern["result"]["resultType"] == "complete"
    finally:
        peer.close()
    legacy_call, modern_call = made
    for call in made:
        assert not any(isinstance(value, askrich.McpServer) for value in vars(call).values()), vars(call)
    assert legacy_call.transport is modern_call.transport is peer.server.transport
    assert callable(legacy_call.handshake) and legacy_call.client_info == {"name": "tests", "version": "1"}
    assert (modern_call.tasks, modern_call.seal, modern_call.log_scope) == (
        peer.server.tasks, peer.server.seal, peer.server.routing)


def test_cancelling_a_task_cancels_its_call_and_leaves_it_cancelled(runtime):
    tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
    form = runtime.open_interview(interview(choice("q", "a")))
    cancellation = askrich.Cancellation()
    task = tasks.create(form, "Waiting", cancellation)
    tasks.cancel(task["taskId"])
    assert cancellation.is_set and tasks.get(task["taskId"])["status"] == "cancelled"
    tasks.complete(task["taskId"], {"content": []})
    assert "result" not in tasks.get(task["taskId"])


@pytest.mark.parametrize("task_id", ["nope", "", "0123456789ab.1", "0123456789ab.x"])
def test_a_task_this_server_never_made_is_unknown(runtime, task_id):
    tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
    error = refusal(lambda: tasks.get(task_id))
    assert error.code == -32602 and error.message == 'unknown task "%s"' % task_id


def test_after_a_restart_a_task_is_completed_from_the_archive_or_failed_when_its_interview_was_lost(tmp_path):
    after, recovered, answered_task, lost_task, answered = two_tasks_then_restart(tmp_path)
    try:
        done = recovered.get(answered_task)
        assert done["status"] == "completed"
        assert done["result"]["structuredContent"]["interviewId"] == answered.id
        assert done["result"]["structuredContent"]["answers"][0]["selected"] == ["a"]
        failed = recovered.get(lost_task)
        assert failed["status"] == "failed" and "result" not in failed
        assert "restarted" in failed["error"]["message"] and "again" in failed["error"]["message"]
    finally:
        after.close()


# -- the setting that keeps the initialize era only -------------------------------------------


def test_with_the_legacy_setting_a_modern_request_is_served_as_legacy(tmp_path):
    runtime = quiet_runtime(tmp_path, protocol="legacy")
    peer = InProcessServer(runtime)
    try:
        listed = peer.call("tools/list", {"_meta": dict(MODERN_META)})["result"]
        assert "resultType" not in listed and len(listed["tools"]) == 3
        unsupported = peer.call("tools/list", {"_meta": dict(MODERN_META, **{
            "io.modelcontextprotocol/protocolVersion": "2099-01-01"})})
        assert "resultType" not in unsupported["result"]
    finally:
        peer.close()
        runtime.close()


def test_every_request_is_logged_with_its_method_and_era(tmp_path):
    runtime = quiet_runtime(tmp_path)
    peer = InProcessServer(runtime)
    try:
        peer.call("server/discover", {"_meta": dict(MODERN_META)})
        peer.call("tools/list", {"_meta": dict(MODERN_META)})
        peer.initialize()
        peer.call("ping")
    finally:
        peer.close()
        runtime.close()
    with open(os.path.join(str(tmp_path), "server.log"), encoding="utf-8") as log:
        logged = [line.split(" request ", 1)[1].split() for line in log if " request " in line]
    assert logged == [["method=server/discover", "era=modern"], ["method=tools/list", "era=modern"],
                      ["method=initialize", "era=legacy"], ["method=ping", "era=legacy"]]
