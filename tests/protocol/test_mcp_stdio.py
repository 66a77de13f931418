"""The MCP transport and the three tools over stdio."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import askrich
from helpers.support import (
    ask_link,
    InProcessServer,
    LogWatch,
    api_url,
    choice,
    http_request,
    interview,
    submit,
    wait_for_interview,
)


def error_code(reply):
    return reply["error"]["code"]


# -- handshake and housekeeping ---------------------------------------------------------------


def test_server_discover_is_answered_at_once_so_modern_clients_stay_modern(server):
    started = time.monotonic()
    result = server.call("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}})["result"]
    assert result["resultType"] == "complete" and "2026-07-28" in result["supportedVersions"]
    assert time.monotonic() - started < 2
    # A dual-era client may still take the initialize handshake after the probe.
    assert server.initialize()["result"]["protocolVersion"] == "2025-11-25"


def test_with_the_legacy_setting_server_discover_is_refused_so_clients_fall_back_to_initialize(tmp_path):
    config = askrich.Config(log_dir=str(tmp_path), open_browser=False, protocol="legacy")
    runtime = askrich.Runtime(config, askrich.Log(str(tmp_path), stream=io.StringIO()))
    peer = InProcessServer(runtime)
    try:
        started = time.monotonic()
        reply = peer.call("server/discover", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}})
        assert error_code(reply) == -32601
        assert time.monotonic() - started < 2
        assert peer.initialize()["result"]["protocolVersion"] == "2025-11-25"
    finally:
        peer.close()
        runtime.close()


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_initialize_echoes_a_supported_protocol_version(server, version):
    result = server.initialize(version=version)["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {"tools": {"listChanged": False}, "logging": {}, "resources": {},
                                      "extensions": {"io.modelcontextprotocol/ui": {}}}
    assert result["serverInfo"] == {
        "name": "ask-user-rich", "title": "Ask User Rich", "version": askrich.__version__,
    }
    assert "await_user_answers" in result["instructions"]
    assert "needs-info" in result["instructions"]


def test_initialize_answers_the_latest_version_to_an_unknown_one(server):
    assert server.initialize(version="2099-01-01")["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_remembers_the_client_elicitation_capabilities(server):
    server.initialize(capabilities={"elicitation": {"form": {}, "url": {}}})
    assert server.server.client_capabilities == {"elicitation": {"form": {}, "url": {}}}


def test_ping_answers_empty_and_set_level_refuses_an_unknown_level(server):
    assert server.call("ping")["result"] == {}
    assert server.call("logging/setLevel", {"level": "warning"})["result"] == {}
    assert error_code(server.call("logging/setLevel", {"level": "loud"})) == -32602


def test_tools_list_declares_three_tools_with_schemas_and_annotations(server):
    tools = server.call("tools/list")["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["ask_user_rich", "append_questions", "await_user_answers"]
    for tool in tools:
        assert tool["title"] and tool["description"]
        assert tool["inputSchema"]["type"] == "object"
        assert tool["outputSchema"]["type"] == "object"
        assert tool["annotations"] == {
            "readOnlyHint": True, "destructiveHint": False, "idempotentHint": False,
            "openWorldHint": False,
        }
    ask = tools[0]
    # The description teaches every rejection rule before the first call.
    for rule in ("ASCII", "unique", "labels", "rank", "at least 2", "allowOther false",
                 "dependsOn", "Unknown fields", "timeoutSeconds"):
        assert rule in ask["description"], rule


# -- protocol errors --------------------------------------------------------------------------


def test_garbage_lines_get_parse_errors_and_the_server_keeps_serving(server):
    server.send(b"this is not json\n")
    reply = server.receive(lambda m: True)
    assert reply["id"] is None and error_code(reply) == -32700
    assert reply["error"]["message"].startswith("Parse error: ")
    server.send(b"\xff\xfe\n")
    assert error_code(server.receive(lambda m: True)) == -32700
    assert server.call("ping")["result"] == {}


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},  # no jsonrpc member
        {"jsonrpc": "2.0", "id": 1},  # neither method nor result
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
        [1],
        "ping",
        7,
    ],
)
def test_messages_that_are_not_json_rpc_get_invalid_request(server, message):
    server.send(message)
    reply = server.receive(lambda m: True)
    if isinstance(message, list):
        assert isinstance(reply, list) and error_code(reply[0]) == -32600
    else:
        assert error_code(reply) == -32600
    assert server.call("ping")["result"] == {}


def test_an_unknown_method_is_32601_and_an_unknown_tool_or_bad_params_32602(server):
    assert error_code(server.call("prompts/list")) == -32601  # resources/* serve the MCP Apps form
    assert error_code(server.call("tools/call", {"name": "nope", "arguments": {}})) == -32602
    assert error_code(server.call("tools/call", {"name": "ask_user_rich", "arguments": [1]})) == -32602
    assert error_code(server.call("ping", [1, 2])) == -32602


def test_a_batch_is_answered_with_an_array_without_the_notifications(server):
    server.send([
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "nope"},
    ])
    reply = server.receive(lambda m: isinstance(m, list))
    assert [item["id"] for item in reply] == ["a", "b"]
    assert reply[0]["result"] == {} and error_code(reply[1]) == -32601
    server.send([])
    assert error_code(server.receive(lambda m: True)) == -32600


def test_responses_to_requests_we_never_sent_are_ignored(server):
    server.send({"jsonrpc": "2.0", "id": "srv-99", "result": {}})
    server.send({"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "x"}})
    assert server.call("ping")["result"] == {}
    assert server.pending == []


def test_bad_interview_arguments_are_a_tool_error_the_model_can_read(server):
    reply = server.tool("ask_user_rich", {"title": "", "questions": []})
    result = reply["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        'Invalid interview:\n- title: "title" must be a non-empty string, not ""\n'
        '- questions: "questions" must be a non-empty array'
    )


# -- the tools --------------------------------------------------------------------------------


def test_link_delivery_returns_awaiting_at_once_with_the_link_and_instructions(server):
    server.initialize()
    reply = server.tool("ask_user_rich", interview(delivery="link"))["result"]
    structured = reply["structuredContent"]
    assert set(structured) == {"status", "sessionId", "url", "reason", "summary"}
    assert structured["reason"] == "Browser opening was skipped (delivery=link)."
    assert len(structured["sessionId"]) == 12 and int(structured["sessionId"], 16) >= 0
    token = structured["url"].rsplit("/s/", 1)[1]
    assert len(token) == 24
    assert reply["content"][0]["text"] == (
        "Browser opening was skipped (delivery=link).\n"
        'The interview "Test interview" is waiting at:\n%s\n\n'
        "Show this link to the user, then call await_user_answers with sessionId \"%s\" "
        "to wait for the submit." % (structured["url"], structured["sessionId"])
    )
    assert structured["summary"] == reply["content"][0]["text"]


def test_await_returns_the_answers_after_a_submit_with_strictly_increasing_progress(server, runtime):
    server.initialize()
    runtime.config = runtime.config.replace(progress_ms=100)
    structured = ask_link(server)
    request_id = server.request(
        "tools/call",
        {"name": "await_user_answers", "arguments": {"sessionId": structured["sessionId"]},
         "_meta": {"progressToken": "tok"}},
    )
    notes = [server.receive(lambda m: m.get("method") == "notifications/progress") for _ in range(3)]
    assert [n["params"]["progress"] for n in notes] == [1, 2, 3]
    assert all(n["params"]["progressToken"] == "tok" for n in notes)
    assert structured["url"] in notes[0]["params"]["message"]
    # Every notification ends with the form's link: a terminal client shows only the latest.
    assert all(n["params"]["message"].endswith(". Form: " + structured["url"]) for n in notes)
    assert notes[1]["params"]["message"].startswith(
        'Waiting for answers to "Test interview": 0 of 1 answered, form not opened yet ('
    )
    assert submit(structured["url"], {"q": {"selected": ["a"]}}).status == 200
    result = server.response(request_id)["result"]
    assert result["structuredContent"]["status"] == "submitted"
    assert result["structuredContent"]["answers"][0]["selected"] == ["a"]
    assert result["content"][0]["text"] == result["structuredContent"]["summary"]


def test_progress_reports_new_counts_from_the_form_without_waiting_for_the_interval(server):
    server.initialize()
    structured = ask_link(server, interview(choice("a", "x"), choice("b", "x"), choice("c", "x")))
    server.request(
        "tools/call",
        {"name": "await_user_answers", "arguments": {"sessionId": structured["sessionId"]},
         "_meta": {"progressToken": 7}},
    )
    first = server.receive(lambda m: m.get("method") == "notifications/progress")
    assert first["params"]["progress"] == 1
    posted = http_request(api_url(structured["url"], "progress"), "POST",
                          {"answered": 2, "deferred": 0, "needsInfo": 0, "open": 1})
    assert posted.status == 204
    second = server.receive(lambda m: m.get("method") == "notifications/progress", timeout=5)
    assert "2 of 3 answered" in second["params"]["message"]


def test_a_call_without_a_progress_token_gets_no_progress_messages(server):
    server.initialize()
    structured = ask_link(server)
    request_id = server.request("tools/call", {"name": "await_user_answers",
                                               "arguments": {"sessionId": structured["sessionId"]}})
    assert submit(structured["url"], {"q": {"selected": ["b"]}}).status == 200
    server.response(request_id)
    assert not [m for m in server.pending if m.get("method") == "notifications/progress"]


def test_cancelled_call_sends_no_response_and_the_interview_stays_collectable(server):
    server.initialize()
    structured = ask_link(server)
    request_id = server.request("tools/call", {"name": "await_user_answers",
                                               "arguments": {"sessionId": structured["sessionId"]}})
    waited_on = server.runtime.hub.get(structured["sessionId"])
    wait_for_interview(waited_on, lambda i: i.activity()["waiters"] == 1, what="the call waiting")
    assert http_request(api_url(structured["url"], "state")).json()["waiting"] is True
    server.notify("notifications/cancelled", {"requestId": request_id, "reason": "user"})
    assert server.call("ping")["result"] == {}
    # The waiter has left: /state says so, and no response for the cancelled id ever comes.
    wait_for_interview(waited_on, lambda i: i.activity()["waiters"] == 0, what="the cancelled call leaving")
    assert http_request(api_url(structured["url"], "state")).json()["waiting"] is False
    assert submit(structured["url"], {"q": {"selected": ["a"]}}).status == 200
    again = server.tool("await_user_answers", {"sessionId": structured["sessionId"]})
    assert again["result"]["structuredContent"]["status"] == "submitted"
    assert all(m.get("id") != request_id for m in server.pending)


def test_timeout_seconds_returns_awaiting_and_never_answers_for_the_user(server):
    server.initialize()
    structured = ask_link(server)
    reply = server.tool("await_user_answers", {"sessionId": structured["sessionId"], "timeoutSeconds": 1})
    result = reply["result"]["structuredContent"]
    assert result["status"] == "awaiting"
    assert result["reason"] == "Stopped waiting after 1s (timeoutSeconds)."
    state = http_request(api_url(structured["url"], "state")).json()
    assert state["state"] == "pending"


def test_several_waiters_all_receive_the_result(server):
    server.initialize()
    structured = ask_link(server)
    ids = [server.request("tools/call", {"name": "await_user_answers",
                                         "arguments": {"sessionId": structured["sessionId"]}})
           for _ in range(3)]
    wait_for_interview(server.runtime.hub.get(structured["sessionId"]), lambda i: i.activity()["waiters"] >= 3,
                       what="three calls waiting")
    assert submit(structured["url"], {"q": {"selected": ["a"]}}).json()["delivered"] is True
    results = [server.response(i)["result"]["structuredContent"] for i in ids]
    assert all(r == results[0] and r["status"] == "submitted" for r in results)


def test_await_after_submit_returns_at_once_again_and_again(server):
    server.initialize()
    structured = ask_link(server)
    submit(structured["url"], {"q": {"status": "defer", "notes": "later"}})
    for _ in range(2):
        result = server.tool("await_user_answers", {"sessionId": structured["sessionId"]})["result"]
        assert result["structuredContent"]["answers"][0]["status"] == "deferred"


def test_await_on_an_unknown_session_or_a_misspelt_field_is_a_tool_error_saying_why(server):
    server.initialize()
    reply = server.tool("await_user_answers", {"sessionId": "0123456789ab"})["result"]
    assert reply["isError"] is True
    assert reply["content"][0]["text"] == (
        'No interview with sessionId "0123456789ab" (it may have expired or the server restarted).'
    )
    reply = server.tool("await_user_answers", {"sessionid": "x"})["result"]
    assert reply["isError"] is True
    assert 'unknown field "sessionid"; did you mean "sessionId"?' in reply["content"][0]["text"]


def test_append_questions_adds_to_the_open_form_and_bumps_the_version(server):
    server.initialize()
    structured = ask_link(server)
    reply = server.tool("append_questions", {
        "sessionId": structured["sessionId"],
        "questions": [choice("f1", "x", dependsOn=["q"]), choice("f2", "y", dependsOn=["f1"])],
        "note": "Two **follow-ups**",
    })["result"]["structuredContent"]
    assert reply == {"status": "appended", "sessionId": structured["sessionId"], "appended": 2,
                     "total": 3, "version": 2, "url": structured["url"]}
    page = http_request(api_url(structured["url"])).json()
    assert page["version"] == 2
    assert page["note"] == {"version": 2, "text": "Two **follow-ups**"}
    assert [q["id"] for q in page["spec"]["questions"]] == ["q", "f1", "f2"]
    assert [q["version"] for q in page["spec"]["questions"]] == [1, 2, 2]


def test_append_questions_says_one_sentence_and_then_gives_the_json(server):
    server.initialize()
    structured = ask_link(server, interview(choice("q", "a"), title="Pick a stack"))
    reply = server.tool("append_questions", {
        "sessionId": structured["sessionId"], "questions": [choice("f1", "x"), choice("f2", "y")],
    })["result"]
    assert [block["type"] for block in reply["content"]] == ["text", "text"]
    assert reply["content"][0]["text"] == (
        'Appended 2 questions to "Pick a stack" (3 in all); the open form shows them now. The answers '
        'arrive through the call that is waiting, or call await_user_answers with sessionId "%s".'
        % structured["sessionId"]
    )
    assert json.loads(reply["content"][1]["text"]) == reply["structuredContent"]


def test_a_rejected_append_changes_nothing(server):
    server.initialize()
    structured = ask_link(server)
    reply = server.tool("append_questions", {
        "sessionId": structured["sessionId"],
        "questions": [choice("ok", "x"), choice("q", "y")],
    })["result"]
    assert reply["isError"] is True
    assert reply["content"][0]["text"] == (
        'Invalid follow-up questions:\n- questions[1] (q): duplicate question id "q"'
    )
    page = http_request(api_url(structured["url"])).json()
    assert page["version"] == 1 and len(page["spec"]["questions"]) == 1


def test_append_after_the_submit_or_to_an_unknown_session_says_what_to_do_instead(server):
    server.initialize()
    structured = ask_link(server)
    submit(structured["url"], {})
    reply = server.tool("append_questions", {"sessionId": structured["sessionId"],
                                             "questions": [choice("n", "x")]})["result"]
    assert reply["content"][0]["text"] == (
        'Interview "%s" is already submitted, so questions can no longer be appended. '
        "Ask the follow-ups in a new ask_user_rich call." % structured["sessionId"]
    )
    reply = server.tool("append_questions", {"sessionId": "ffffffffffff",
                                             "questions": [choice("n", "x")]})["result"]
    assert reply["content"][0]["text"].startswith('No interview with sessionId "ffffffffffff"')


@pytest.fixture
def server_opening_with(tmp_path):
    """An in-process server whose only browser opener is the given command."""
    started = []

    def start(command):
        config = askrich.Config(log_dir=str(tmp_path), open_cmd=command)
        log = LogWatch()
        runtime = askrich.Runtime(config, askrich.Log(str(tmp_path), stream=log))
        peer = InProcessServer(runtime)
        peer.log = log
        started.append((peer, runtime))
        peer.initialize()
        return peer

    yield start
    for peer, runtime in started:
        peer.close()
        runtime.close()


def test_browser_delivery_blocks_until_the_submit_when_the_opener_succeeds(server_opening_with):
    peer = server_opening_with("true")
    request_id = peer.request("tools/call", {"name": "ask_user_rich", "arguments": interview()})
    peer.log.wait_for("session-created")
    (created,) = peer.runtime.hub.by_id.values()
    assert submit(peer.runtime.form_url(created), {"q": {"selected": ["a"]}}).status == 200
    result = peer.response(request_id)["result"]["structuredContent"]
    assert result["status"] == "submitted" and result["via"] == "browser"


def test_browser_delivery_returns_awaiting_with_the_reason_when_the_opener_fails(server_opening_with):
    peer = server_opening_with("false")
    result = peer.tool("ask_user_rich", interview())["result"]["structuredContent"]
    assert result["status"] == "awaiting"
    assert result["reason"].startswith("Could not open the browser (")
    assert "(false) exited with 1" in result["reason"]


# -- every line is one JSON message -----------------------------------------------------------

awkward_text = st.text(
    alphabet=st.sampled_from(list("ab \n\r\t\"\\") + ["\u2028", "\u2029", "\x00", "é", "😀", "\x7f"]),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=awkward_text, note=awkward_text)
def test_every_line_written_is_one_json_message_even_for_newlines_and_u2028(server, title, note):
    if not title.strip():
        title = "t" + title
    before = len(server.reader.raw)
    structured = ask_link(server, interview(title=title))
    assert askrich.quote(title) in structured["summary"]
    server.tool("append_questions", {"sessionId": structured["sessionId"],
                                     "questions": [choice("n%d" % before, "x")], "note": note})
    for line in server.reader.raw[before:]:
        assert line.count(b"\n") == 1 and line.endswith(b"\n")
        assert b"\xe2\x80\xa8" not in line and b"\xe2\x80\xa9" not in line
        json.loads(line)


# -- the process ------------------------------------------------------------------------------


def test_subprocess_speaks_the_protocol_and_exits_zero_at_eof_with_a_wait_in_flight(subprocess_server):
    peer = subprocess_server()
    assert peer.call("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}})["result"]["resultType"] == "complete"
    assert peer.initialize()["result"]["serverInfo"]["name"] == "ask-user-rich"
    structured = ask_link(peer)
    peer.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": structured["sessionId"]}})
    peer.log.wait_for("wait-start", "interview=" + structured["sessionId"])
    started = time.monotonic()
    assert peer.close(timeout=5) == 0
    assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_subprocess_exits_zero_within_a_second_on_sigterm_and_sigint_with_a_wait_in_flight(
        subprocess_server, signum):
    peer = subprocess_server()
    peer.initialize()
    structured = ask_link(peer)
    peer.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": structured["sessionId"]}})
    peer.log.wait_for("wait-start", "interview=" + structured["sessionId"])
    started = time.monotonic()
    peer.process.send_signal(signum)
    assert peer.process.wait(5) == 0
    assert time.monotonic() - started < 1.5


def test_an_archived_result_is_found_after_a_restart(subprocess_server):
    first = subprocess_server()
    first.initialize()
    structured = ask_link(first)
    assert submit(structured["url"], {"q": {"selected": ["b"], "notes": "kept"}}).status == 200
    assert first.close() == 0
    second = subprocess_server()
    second.initialize()
    result = second.tool("await_user_answers", {"sessionId": structured["sessionId"]})["result"]
    structured_result = result["structuredContent"]
    assert structured_result["status"] == "submitted"
    assert structured_result["answers"][0]["selected"] == ["b"]
    assert structured_result["summary"].splitlines()[1] == '1. [q] Question q? -> B | notes: "kept"'


def test_the_log_never_holds_a_live_token(subprocess_server, tmp_path):
    peer = subprocess_server()
    peer.initialize()
    structured = ask_link(peer)
    token = structured["url"].rsplit("/", 1)[1]
    http_request(structured["url"])
    submit(structured["url"], {"q": {"selected": ["a"]}})
    peer.close()
    log = (tmp_path / "logs" / "server.log").read_text(encoding="utf-8")
    assert "session-created" in log and "page-view" in log and "submitted" in log
    assert token not in log and token not in "".join(peer.stderr_lines)
    assert token[:4] + "…" in log


def test_closing_the_form_server_does_not_wait_out_its_poll_interval(tmp_path, monkeypatch):
    # A client sends SIGINT and SIGTERM 100 ms later, so closing must not wait until the serve
    # loop next looks at its stop flag. With every serve loop made to look only every 30 s,
    # a close that relied on the poll would take 30 s; the bound is generous but far below it.
    import socketserver

    original = socketserver.BaseServer.serve_forever

    def slow_poll(self, poll_interval=0.5):
        return original(self, poll_interval=30)

    monkeypatch.setattr(socketserver.BaseServer, "serve_forever", slow_poll)
    config = askrich.Config(log_dir=str(tmp_path), open_browser=False)
    runtime = askrich.Runtime(config, askrich.Log(str(tmp_path), stream=io.StringIO()))
    runtime.open_interview(interview(delivery="link"))
    threads = runtime.form_server.threads  # one serve loop for each loopback
    assert threads and all(thread.is_alive() for thread in threads)
    closed = threading.Event()
    closer = threading.Thread(target=lambda: (runtime.close(), closed.set()), daemon=True)
    closer.start()
    assert closed.wait(10), "closing waited for the serve loop's poll interval"
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def test_sigint_alone_ends_the_process_with_the_log_flushed(subprocess_server):
    peer = subprocess_server()
    peer.initialize()
    ask_link(peer)  # the form server is running
    peer.process.send_signal(signal.SIGINT)
    assert peer.process.wait(5) == 0  # no SIGTERM needed
    peer.log.wait_for("http-stopped")
    peer.log.wait_for("shutdown")
