"""The 2026-07-28 era over raw JSON-RPC on the real process: each request is served from its
own `_meta`, `server/discover`, multi round-trip elicitation with a protected requestState,
and the legacy era beside it in the same process."""

from __future__ import annotations

import json

import pytest

from helpers.delivery_support import FLAT_INTERVIEW, RANK_INTERVIEW, submit_like_a_browser
from helpers.modern_support import (
    CLIENT_INFO,
    DECLINED_URL_REASON,
    KEY_VERSION,
    MODERN,
    SERVER_INFO,
    SUPPORTED_VERSIONS,
    assert_fits_the_2026_schema,
    assert_fits_the_schema,
    assert_modern_result,
    assert_no_server_requests,
    call_modern,
    form_state,
    log_events,
    modern_meta,
    modern_params,
    poll_task,
    post_progress,
    result_of,
    send_modern,
    server_requests,
    tool_modern,
    wait_until_waiting,
    without_cache_hints,
    without_envelope,
    written_messages,
)
from helpers.support import api_url, choice, http_request, interview, wait_for_interview

FORM = {"elicitation": {"form": {}}}
URL_ONLY = {"elicitation": {"url": {}}}
ELICIT = dict(FLAT_INTERVIEW, delivery="elicitation")
ACCEPTED = {"action": "accept", "content": {"db": "my", "extras": ["search"], "free": "hi"}}


@pytest.fixture
def modern(subprocess_server):
    """A fresh server process that has seen no initialize."""
    return subprocess_server()


def legacy_instructions_and_tools(subprocess_server):
    legacy = subprocess_server()
    instructions = legacy.initialize()["result"]["instructions"]
    tools = legacy.call("tools/list")["result"]["tools"]
    return instructions, tools


def first_round(peer, arguments=ELICIT, capabilities=FORM) -> dict:
    result = result_of(tool_modern(peer, "ask_user_rich", arguments, capabilities=capabilities))
    assert_modern_result(result, "input_required")
    assert_fits_the_2026_schema("tools/call", result)
    return result


def retry(peer, arguments, state, responses=None, capabilities=FORM, name="ask_user_rich", **meta):
    extra = {"requestState": state}
    if responses is not None:
        extra["inputResponses"] = responses
    return tool_modern(peer, name, arguments, extra=extra, capabilities=capabilities, **meta)


# -- server/discover and the era of each request ----------------------------------------------


def test_server_discover_answers_with_every_version_the_tasks_extension_and_the_initialize_instructions(
        modern, subprocess_server):
    instructions, _ = legacy_instructions_and_tools(subprocess_server)
    result = result_of(call_modern(modern, "server/discover"))
    assert result == {
        "resultType": "complete",
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": {"tools": {}, "logging": {}, "resources": {},
                         "extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/ui": {}}},
        "ttlMs": 3600000,
        "cacheScope": "public",
        "instructions": instructions,
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }


def test_server_discover_fits_the_official_schema_and_the_sdk_strict_validator(modern):
    result = result_of(call_modern(modern, "server/discover"))
    assert_fits_the_schema("DiscoverResult", result)  # ttlMs and cacheScope are required there
    assert_fits_the_2026_schema("server/discover", result)


def test_modern_tools_list_may_be_cached_for_an_hour_by_the_caller_alone(modern):
    # The list depends on whether the request declared MCP Apps (tests/protocol/test_apps.py), so a shared
    # cache must not hand one caller's list to another.
    result = result_of(call_modern(modern, "tools/list"))
    assert result["cacheScope"] == "private" and result["ttlMs"] > 0
    assert_fits_the_schema("ListToolsResult", result)
    assert "nextCursor" not in result  # one page


def test_server_discover_without_meta_is_refused_with_32602_saying_what_to_send(modern):
    for params in ({}, {"_meta": {}}, {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}):
        reply = modern.call("server/discover", params)
        assert reply["error"]["code"] == -32602, (params, reply)
        assert KEY_VERSION in reply["error"]["message"]
        assert_fits_the_schema("JSONRPCErrorResponse", reply)
    params = {"_meta": {KEY_VERSION: MODERN, "io.modelcontextprotocol/clientInfo": CLIENT_INFO}}
    assert modern.call("server/discover", params)["error"]["code"] == -32602  # no clientCapabilities
    assert result_of(call_modern(modern, "server/discover"))["resultType"] == "complete"


@pytest.mark.parametrize("cursor", ["bogus", "", 7, {"page": 2}])
def test_a_tools_list_cursor_we_never_issued_is_refused_with_32602(modern, cursor):
    reply = modern.call("tools/list", modern_params({"cursor": cursor}))
    assert reply["error"]["code"] == -32602
    assert "cursor" in reply["error"]["message"]
    assert result_of(call_modern(modern, "tools/list"))["tools"]


def test_modern_tools_list_serves_the_legacy_tools_unchanged_with_the_modern_envelope(modern, subprocess_server):
    _, legacy_tools = legacy_instructions_and_tools(subprocess_server)
    result = result_of(call_modern(modern, "tools/list"))
    assert_modern_result(result)
    assert_fits_the_2026_schema("tools/list", result)  # the SDK refuses the listing otherwise
    assert without_cache_hints(without_envelope(result)) == {"tools": legacy_tools}
    assert [tool["name"] for tool in result["tools"]] == ["ask_user_rich", "append_questions", "await_user_answers"]


@pytest.mark.parametrize("method", ["server/discover", "tools/list", "tools/call"])
@pytest.mark.parametrize("version", ["2099-01-01", "2025-11-25", "2026-01-01"])
def test_an_unsupported_modern_version_gets_32022_naming_what_we_serve(modern, method, version):
    params = {"name": "ask_user_rich", "arguments": interview(delivery="link")} if method == "tools/call" else {}
    params["_meta"] = modern_meta()
    params["_meta"][KEY_VERSION] = version
    reply = modern.call(method, params)
    error = reply["error"]
    assert error["code"] == -32022
    assert error["message"].startswith("Unsupported protocol version")
    assert error["data"] == {"supported": SUPPORTED_VERSIONS, "requested": version}
    assert modern.call("ping")["result"] == {}


@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
def test_a_modern_request_without_client_capabilities_is_refused_with_32602(modern, method, tmp_path):
    params = {"name": "ask_user_rich", "arguments": interview(delivery="link")} if method == "tools/call" else {}
    params["_meta"] = {KEY_VERSION: MODERN, "io.modelcontextprotocol/clientInfo": CLIENT_INFO}
    reply = modern.call(method, params)
    assert reply["error"]["code"] == -32602
    assert "clientCapabilities" in reply["error"]["message"]  # says what to add
    # Nothing was created: the call never ran.
    assert log_events(tmp_path / "logs", "session-created") == []
    assert modern.call("ping")["result"] == {}


def test_a_modern_link_call_returns_the_legacy_result_plus_result_type_and_server_info(modern):
    result = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))
    assert_modern_result(result)
    assert_fits_the_2026_schema("tools/call", result)
    structured = result["structuredContent"]
    assert structured["status"] == "awaiting"
    assert structured["reason"] == "Browser opening was skipped (delivery=link)."
    assert result["content"][0]["text"] == structured["summary"]
    assert "isError" not in result or result["isError"] is False


def test_the_form_names_the_agent_from_the_client_info_of_the_request_that_asked(modern):
    # Integration with the form's agent name: each modern request names its own client.
    asked = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    assert http_request(api_url(asked["url"])).json()["agent"] == CLIENT_INFO["title"]
    params = modern_params({"name": "ask_user_rich", "arguments": interview(delivery="link")})
    params["_meta"]["io.modelcontextprotocol/clientInfo"] = {"name": "claude-code", "version": "2"}
    other = result_of(modern.call("tools/call", params))["structuredContent"]
    assert http_request(api_url(other["url"])).json()["agent"] == "Claude Code"
    params["_meta"].pop("io.modelcontextprotocol/clientInfo")
    anonymous = result_of(modern.call("tools/call", params))["structuredContent"]
    assert http_request(api_url(anonymous["url"])).json()["agent"] is None


def test_a_modern_tool_error_is_a_complete_result_with_is_error(modern):
    result = result_of(tool_modern(modern, "ask_user_rich", {"title": "", "questions": []}))
    assert_modern_result(result)
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Invalid interview:\n")


def test_a_modern_append_and_await_of_a_submitted_interview_end_at_once_complete(modern):
    asked = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    appended = result_of(tool_modern(modern, "append_questions", {
        "sessionId": asked["sessionId"], "questions": [choice("more", "x", "y")]}))
    assert_modern_result(appended)
    assert appended["structuredContent"]["total"] == 2
    submit_like_a_browser(asked["url"])
    result = result_of(tool_modern(modern, "await_user_answers", {"sessionId": asked["sessionId"]}, tasks=True))
    assert_modern_result(result)  # submitted already: no task even with the extension declared
    assert result["structuredContent"]["status"] == "submitted"


def test_a_discover_probe_then_initialize_gives_a_working_legacy_session(modern):
    assert result_of(call_modern(modern, "server/discover"))["supportedVersions"][0] == MODERN
    reply = modern.initialize(capabilities={"elicitation": {"form": {}}})
    assert reply["result"]["protocolVersion"] == "2025-11-25"
    assert "resultType" not in reply["result"]
    listed = modern.call("tools/list")["result"]
    assert "resultType" not in listed and len(listed["tools"]) == 3
    # Elicitation goes the legacy way: a request of ours on stdout, answered by the client.
    call_id = modern.request("tools/call", {"name": "ask_user_rich", "arguments": ELICIT})
    request = modern.receive(lambda m: m.get("method") == "elicitation/create")
    assert isinstance(request["id"], str) and request["params"]["mode"] == "form"
    modern.send({"jsonrpc": "2.0", "id": request["id"], "result": ACCEPTED})
    result = modern.response(call_id)["result"]
    assert "resultType" not in result
    structured = result["structuredContent"]
    assert structured["status"] == "submitted" and structured["via"] == "elicitation"
    assert structured["answers"][0]["selected"] == ["my"]


def test_a_modern_request_ignores_what_an_earlier_initialize_declared(modern):
    # The legacy session declared every elicitation; this modern request declares none, so its
    # interview may not be elicited: it falls back to the browser (opening is off: awaiting).
    modern.initialize(capabilities={"elicitation": {"form": {}, "url": {}}})
    result = result_of(tool_modern(modern, "ask_user_rich", ELICIT, capabilities={}))
    assert_modern_result(result)
    assert result["structuredContent"]["status"] == "awaiting"
    assert server_requests(modern) == []
    # A modern request that declares form elicitation gets it by round trip, not by a request.
    assert first_round(modern)["inputRequests"]["answers"]["params"]["mode"] == "form"


def test_legacy_requests_in_the_same_process_stay_legacy_after_modern_ones(modern):
    result_of(call_modern(modern, "tools/list"))
    assert modern.initialize()["result"]["protocolVersion"] == "2025-11-25"
    assert "resultType" not in modern.call("tools/list")["result"]
    assert modern.call("ping")["result"] == {}


# -- form elicitation by multi round-trip requests --------------------------------------------


@pytest.mark.parametrize("capabilities", [{"elicitation": {}}, FORM, {"elicitation": {"form": {}, "url": {}}}])
def test_form_elicitation_asks_by_input_required_and_the_accepted_retry_returns_the_answers(
        modern, capabilities):
    first = first_round(modern, capabilities=capabilities)
    assert set(first) >= {"resultType", "inputRequests", "requestState", "_meta"}
    assert "content" not in first and "structuredContent" not in first
    (key, request), = first["inputRequests"].items()
    assert key == "answers" and request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "form"
    assert params["message"].startswith("Pick a stack\n\nThree quick ones.")
    assert list(params["requestedSchema"]["properties"]) == ["db", "db__other", "extras", "extras__other", "free"]
    assert params["requestedSchema"]["properties"]["db"]["default"] == "pg"
    assert isinstance(first["requestState"], str) and first["requestState"]

    result = result_of(retry(modern, ELICIT, first["requestState"], {"answers": ACCEPTED}, capabilities))
    assert_modern_result(result)
    assert_fits_the_2026_schema("tools/call", result)
    structured = result["structuredContent"]
    assert structured["status"] == "submitted" and structured["via"] == "elicitation"
    db, extras, free = structured["answers"]
    assert db["selected"] == ["my"] and extras["selected"] == ["search"] and free["other"] == "hi"
    assert_no_server_requests(modern)


@pytest.mark.parametrize("action, status", [("decline", "declined"), ("cancel", "cancelled")])
def test_form_elicitation_declined_or_cancelled_in_the_retry_settles_every_answer_unanswered(modern, action, status):
    first = first_round(modern)
    result = result_of(retry(modern, ELICIT, first["requestState"], {"answers": {"action": action}}))
    structured = result["structuredContent"]
    assert structured["status"] == status and structured["via"] == "elicitation"
    assert [row["status"] for row in structured["answers"]] == ["unanswered"] * 3
    assert_no_server_requests(modern)


def test_an_interview_the_client_form_cannot_show_is_not_elicited_in_the_modern_era_either(modern):
    result = result_of(tool_modern(modern, "ask_user_rich", dict(RANK_INTERVIEW, delivery="elicitation"),
                                   capabilities={"elicitation": {"form": {}, "url": {}}}))
    assert_modern_result(result)  # falls back to the browser; opening is off, so: the link
    assert result["structuredContent"]["status"] == "awaiting"
    assert result["structuredContent"]["reason"].startswith("Could not open the browser (")


@pytest.mark.parametrize("responses", [None, {}, {"answers": {"action": "maybe"}}, {"other-key": ACCEPTED}])
def test_a_retry_without_a_usable_response_gets_the_same_input_required_again(modern, responses):
    first = first_round(modern)
    again = result_of(retry(modern, ELICIT, first["requestState"], responses))
    assert_modern_result(again, "input_required")
    assert again["inputRequests"] == first["inputRequests"]
    assert isinstance(again["requestState"], str)
    # The interview is still open to the real answer.
    result = result_of(retry(modern, ELICIT, again["requestState"], {"answers": ACCEPTED}))
    assert result["structuredContent"]["status"] == "submitted"


def test_a_replayed_retry_after_the_settle_changes_nothing(modern):
    first = first_round(modern)
    settled = result_of(retry(modern, ELICIT, first["requestState"], {"answers": ACCEPTED}))
    interview_id = settled["structuredContent"]["interviewId"]
    replay = retry(modern, ELICIT, first["requestState"], {"answers": {"action": "decline"}})
    if "error" in replay:
        assert replay["error"]["code"] == -32602, replay
    else:
        assert replay["result"]["structuredContent"]["status"] == "submitted", replay
    collected = result_of(tool_modern(modern, "await_user_answers", {"sessionId": interview_id}))
    assert without_envelope(collected) == without_envelope(settled)


def test_racing_retries_settle_the_interview_once_and_all_report_that_one_result(modern):
    for _ in range(5):
        first = first_round(modern)
        sent = [send_modern(modern, "tools/call", {
            "name": "ask_user_rich", "arguments": ELICIT, "requestState": first["requestState"],
            "inputResponses": {"answers": response}}, capabilities=FORM)
            for response in (ACCEPTED, {"action": "decline"}, {"action": "cancel"})]
        outcomes = {json.dumps(result_of(modern.response(each))["structuredContent"], sort_keys=True)
                    for each in sent}
        assert len(outcomes) == 1, outcomes


def tampered(state: str) -> list:
    """States that differ from a good one: a changed character, cut, padded, empty, and text
    that is not even ASCII where the seal's encoding is expected."""
    middle = len(state) // 2
    flipped = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1:]
    return [flipped, state[:-1], state + "x", "", "not-a-state", "\x80.0", "\u00e9" + state[1:]]


def test_a_tampered_request_state_is_refused_with_32602_and_changes_nothing(modern):
    first = first_round(modern)
    for bad in tampered(first["requestState"]):
        reply = retry(modern, ELICIT, bad, {"answers": {"action": "decline"}})
        assert reply["error"]["code"] == -32602, (bad, reply)
        assert reply["error"]["message"].startswith("invalid requestState: ")
    # The declines above did nothing: the interview takes the real accept.
    result = result_of(retry(modern, ELICIT, first["requestState"], {"answers": ACCEPTED}))
    assert result["structuredContent"]["status"] == "submitted"
    assert result["structuredContent"]["answers"][0]["selected"] == ["my"]


def test_a_request_state_retried_with_other_arguments_or_another_tool_is_refused(modern):
    first = first_round(modern)
    state = first["requestState"]
    other_title = dict(ELICIT, title="Another title")
    reply = retry(modern, other_title, state, {"answers": {"action": "decline"}})
    assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith("invalid requestState: ")
    other_question = dict(ELICIT, questions=ELICIT["questions"][:2])
    reply = retry(modern, other_question, state, {"answers": {"action": "decline"}})
    assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith("invalid requestState: ")
    for name, arguments in [("await_user_answers", {"sessionId": "0" * 12}),
                            ("append_questions", {"sessionId": "0" * 12, "questions": [choice("z", "a")]})]:
        reply = retry(modern, arguments, state, {"answers": {"action": "decline"}}, name=name)
        assert reply["error"]["code"] == -32602, (name, reply)
        assert reply["error"]["message"].startswith("invalid requestState: ")
    result = result_of(retry(modern, ELICIT, state, {"answers": ACCEPTED}))
    assert result["structuredContent"]["status"] == "submitted"


def test_a_request_state_from_another_server_process_is_refused(subprocess_server):
    first_server, second_server = subprocess_server(), subprocess_server()
    state = first_round(first_server)["requestState"]
    reply = retry(second_server, ELICIT, state, {"answers": ACCEPTED})
    assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith("invalid requestState: ")


def test_an_elicited_interview_whose_retry_never_comes_stays_collectable(modern, tmp_path):
    first_round(modern)
    (created,) = log_events(tmp_path / "logs", "session-created")
    interview_id = created["interview"]
    # No retry ever comes; the interview is still pending: a short await hands out its link.
    waited = result_of(tool_modern(modern, "await_user_answers", {"sessionId": interview_id, "timeoutSeconds": 1}))
    structured = waited["structuredContent"]
    assert structured["status"] == "awaiting" and structured["sessionId"] == interview_id
    submit_like_a_browser(structured["url"])
    collected = result_of(tool_modern(modern, "await_user_answers", {"sessionId": interview_id}))
    assert collected["structuredContent"]["status"] == "submitted"
    assert collected["structuredContent"]["via"] == "browser"


# -- URL elicitation by multi round-trip requests ---------------------------------------------


@pytest.fixture
def no_opener(subprocess_server):
    return subprocess_server(env={"ASK_USER_RICH_OPEN": "1", "ASK_USER_RICH_OPEN_CMD": "false"})


def test_url_elicitation_asks_to_open_the_form_and_the_accepted_retry_waits_for_the_submit(no_opener):
    first = first_round(no_opener, FLAT_INTERVIEW, URL_ONLY)
    (key, request), = first["inputRequests"].items()
    assert key == "open-form" and request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "url" and "/s/" in params["url"] and "Pick a stack" in params["message"]
    assert "elicitationId" not in params
    url = params["url"]
    assert form_state(url)["state"] == "pending"

    call_id = send_modern(no_opener, "tools/call", {
        "name": "ask_user_rich", "arguments": FLAT_INTERVIEW, "requestState": first["requestState"],
        "inputResponses": {"open-form": {"action": "accept"}}}, capabilities=URL_ONLY, progress_token="url-wait")
    first_progress = no_opener.receive(lambda m: m.get("method") == "notifications/progress")
    assert first_progress["params"]["progressToken"] == "url-wait"
    assert first_progress["params"]["message"].startswith('Waiting for answers to "Pick a stack": 0 of 3 answered')
    wait_until_waiting(no_opener)
    assert submit_like_a_browser(url)["delivered"] is True
    result = result_of(no_opener.response(call_id))
    assert_modern_result(result)
    structured = result["structuredContent"]
    assert structured["status"] == "submitted" and structured["via"] == "browser"
    assert [row["selected"] for row in structured["answers"]] == [["pg"], ["cache"], []]
    assert_no_server_requests(no_opener)


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_url_elicitation_returns_awaiting_at_once_and_the_form_stays_open(no_opener, action):
    first = first_round(no_opener, FLAT_INTERVIEW, URL_ONLY)
    url = first["inputRequests"]["open-form"]["params"]["url"]
    result = result_of(retry(no_opener, FLAT_INTERVIEW, first["requestState"],
                             {"open-form": {"action": action}}, URL_ONLY))
    assert_modern_result(result)
    structured = result["structuredContent"]
    assert structured == {"status": "awaiting", "sessionId": structured["sessionId"], "url": url,
                          "reason": DECLINED_URL_REASON, "summary": structured["summary"]}
    assert result["content"][0]["text"].startswith(DECLINED_URL_REASON + "\nThe interview \"Pick a stack\"")
    assert form_state(url)["state"] == "pending"
    submit_like_a_browser(url)
    collected = result_of(tool_modern(no_opener, "await_user_answers", {"sessionId": structured["sessionId"]}))
    assert collected["structuredContent"]["status"] == "submitted"
    assert_no_server_requests(no_opener)


def accept_url_elicitation(peer, arguments, **meta):
    """The first round of a URL elicitation, then the accepted retry sent: (form URL, retry id)."""
    first = first_round(peer, arguments, URL_ONLY)
    call_id = send_modern(peer, "tools/call", {
        "name": "ask_user_rich", "arguments": arguments, "requestState": first["requestState"],
        "inputResponses": {"open-form": {"action": "accept"}}}, capabilities=URL_ONLY, **meta)
    return first["inputRequests"]["open-form"]["params"]["url"], call_id


def test_an_accepted_url_elicitation_stops_waiting_at_timeout_seconds_with_awaiting(no_opener):
    arguments = dict(FLAT_INTERVIEW, timeoutSeconds=1)
    url, call_id = accept_url_elicitation(no_opener, arguments)
    result = result_of(no_opener.response(call_id))
    assert_modern_result(result)
    structured = result["structuredContent"]
    assert structured["status"] == "awaiting" and structured["url"] == url
    assert structured["reason"] == "Stopped waiting after 1s (timeoutSeconds)."
    assert form_state(url)["state"] == "pending"


def test_an_accepted_url_elicitation_cancelled_sends_no_response_and_stays_collectable(no_opener):
    url, call_id = accept_url_elicitation(no_opener, FLAT_INTERVIEW)
    wait_until_waiting(no_opener)
    no_opener.notify("notifications/cancelled", {"requestId": call_id})
    no_opener.log.wait_for("wait-end")  # the cancelled retry stopped waiting
    submit_like_a_browser(url)
    assert no_opener.call("ping")["result"] == {}
    assert all(m.get("id") != call_id for m in no_opener.pending)
    assert form_state(url)["state"] == "submitted"


def test_the_log_never_holds_the_form_token_in_the_modern_era(no_opener, tmp_path):
    url, call_id = accept_url_elicitation(no_opener, FLAT_INTERVIEW, tasks=True)
    task = result_of(no_opener.response(call_id))
    assert_modern_result(task, "task")
    result_of(call_modern(no_opener, "tasks/get", {"taskId": task["taskId"]}, tasks=True))
    submit_like_a_browser(url)
    no_opener.close()
    token = url.rsplit("/s/", 1)[1]
    assert token not in (tmp_path / "logs" / "server.log").read_text(encoding="utf-8")


def test_a_modern_client_without_url_elicitation_gets_awaiting_at_once_when_no_opener_works(no_opener):
    result = result_of(tool_modern(no_opener, "ask_user_rich", FLAT_INTERVIEW, capabilities=FORM))
    assert_modern_result(result)
    assert result["structuredContent"]["status"] == "awaiting"
    assert result["structuredContent"]["reason"].startswith("Could not open the browser (")
    assert_no_server_requests(no_opener)


# -- notifications that belong to a modern request --------------------------------------------


def test_a_blocking_modern_call_sends_progress_on_its_token_and_answers_after_the_submit(subprocess_server):
    peer = subprocess_server(env={"ASK_USER_RICH_PROGRESS_MS": "100"})
    asked = result_of(tool_modern(peer, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    call_id = send_modern(peer, "tools/call", {"name": "await_user_answers",
                                               "arguments": {"sessionId": asked["sessionId"]}}, progress_token=7)
    ticks = [peer.receive(lambda m: m.get("method") == "notifications/progress") for _ in range(3)]
    assert [tick["params"]["progressToken"] for tick in ticks] == [7, 7, 7]
    values = [tick["params"]["progress"] for tick in ticks]
    assert values == sorted(set(values))
    submit_like_a_browser(asked["url"])
    result = result_of(peer.response(call_id))
    assert_modern_result(result)
    assert result["structuredContent"]["status"] == "submitted"
    assert_no_server_requests(peer)


def test_a_modern_call_cancelled_by_notification_sends_no_response_and_stays_collectable(modern):
    asked = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    call_id = send_modern(modern, "tools/call", {"name": "await_user_answers", "arguments": {"sessionId": asked["sessionId"]}})
    wait_until_waiting(modern, asked["sessionId"])
    modern.notify("notifications/cancelled", {"requestId": call_id})
    assert modern.call("ping")["result"] == {}
    assert form_state(asked["url"])["state"] == "pending"
    submit_like_a_browser(asked["url"])
    collected = result_of(tool_modern(modern, "await_user_answers", {"sessionId": asked["sessionId"]}))
    assert_modern_result(collected)
    assert collected["structuredContent"]["status"] == "submitted"
    assert all(m.get("id") != call_id for m in modern.pending)


def test_log_messages_go_only_to_a_modern_request_that_asked_for_them_with_its_log_level(modern):
    quiet = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))
    assert quiet["structuredContent"]["status"] == "awaiting"
    assert [m for m in modern.pending if m.get("method") == "notifications/message"] == []
    call_id = send_modern(modern, "tools/call", {"name": "ask_user_rich", "arguments": interview(delivery="link")},
                          **{"io.modelcontextprotocol/logLevel": "debug"})
    message = modern.receive(lambda m: m.get("method") == "notifications/message")
    assert message["params"]["level"] in ("debug", "info", "notice", "warning", "error")
    assert message["params"]["logger"] == "ask-user-rich"
    result_of(modern.response(call_id))


# -- the era in the log -----------------------------------------------------------------------


def test_each_request_is_logged_with_its_method_and_era(subprocess_server, tmp_path):
    peer = subprocess_server()
    result_of(call_modern(peer, "server/discover"))
    result_of(call_modern(peer, "tools/list"))
    result_of(tool_modern(peer, "ask_user_rich", interview(delivery="link")))
    peer.initialize()
    peer.call("tools/list")
    peer.call("ping")
    peer.close()
    logged = [(fields.get("method"), fields.get("era")) for fields in log_events(tmp_path / "logs", "request")
              if not fields.get("method", "").startswith("notifications/")]
    assert logged == [
        ("server/discover", "modern"), ("tools/list", "modern"), ("tools/call", "modern"),
        ("initialize", "legacy"), ("tools/list", "legacy"), ("ping", "legacy"),
    ]


# -- log notifications scoped to the request that asked -------------------------------------

DEBUG = {"io.modelcontextprotocol/logLevel": "debug"}


def log_messages(peer) -> list:
    return [m["params"] for m in written_messages(peer) if m.get("method") == "notifications/message"]


def naming(messages, **fields) -> list:
    return [m for m in messages if any(m["data"].get(key) == value for key, value in fields.items())]


def blocking_await(peer, session_id, **meta):
    call_id = send_modern(peer, "tools/call", {"name": "await_user_answers",
                                               "arguments": {"sessionId": session_id}}, **meta)
    peer.log.wait_for("wait-start", "interview=" + session_id)
    return call_id


def test_a_call_without_log_level_gets_no_log_messages_of_its_own_while_another_call_asked(modern):
    waited = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    listening = blocking_await(modern, waited["sessionId"], **DEBUG)
    quiet = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    assert naming(log_messages(modern), interview=quiet["sessionId"]) == []
    modern.notify("notifications/cancelled", {"requestId": listening})
    assert modern.call("ping")["result"] == {}


def test_a_legacy_set_level_never_applies_to_modern_requests(modern):
    modern.initialize()
    assert modern.call("logging/setLevel", {"level": "debug"})["result"] == {}
    asked = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    modern.call("ping")
    assert naming(log_messages(modern), interview=asked["sessionId"]) == []
    # The legacy era keeps its messages.
    legacy = modern.call("tools/call", {"name": "ask_user_rich", "arguments": interview(delivery="link")})
    legacy_id = legacy["result"]["structuredContent"]["sessionId"]
    modern.call("ping")
    assert naming(log_messages(modern), interview=legacy_id)


def test_after_a_legacy_set_level_a_modern_call_without_log_level_gets_no_log_message_at_all(modern):
    modern.initialize()
    assert modern.call("logging/setLevel", {"level": "debug"})["result"] == {}
    since = len(written_messages(modern))
    asked = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    form_state(asked["url"])
    call_id = send_modern(modern, "tools/call", {"name": "await_user_answers",
                                                 "arguments": {"sessionId": asked["sessionId"]}})
    modern.log.wait_for("wait-start", "interview=" + asked["sessionId"])
    post_progress(asked["url"], 1, 1)
    submit_like_a_browser(asked["url"])
    assert result_of(modern.response(call_id))["structuredContent"]["status"] == "submitted"
    form_state(asked["url"])
    result_of(call_modern(modern, "ping"))  # every message before its response is written
    assert [m["data"] for m in log_messages_since(modern, since)] == []


def test_a_log_event_goes_where_what_it_is_about_belongs_whatever_its_fields_name(server):
    """The event's owner decides, never its fields: an event about an interview that a
    2026-07-28 call works on reaches that call (it asked) and never the initialize era's
    setLevel, though no field of it names the interview."""
    server.initialize()
    assert server.call("logging/setLevel", {"level": "debug"})["result"] == {}
    asked = result_of(tool_modern(server, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    held = server.runtime.hub.get(asked["sessionId"])
    call_id = send_modern(server, "tools/call", {"name": "await_user_answers",
                                                 "arguments": {"sessionId": asked["sessionId"]}}, **DEBUG)
    wait_for_interview(held, lambda i: i.activity()["waiters"] > 0, what="the call waiting")
    since = len(written_messages(server))
    server.runtime.log.event("about-the-interview", about=held, detail="no interview field")
    message = server.receive(lambda m: m.get("method") == "notifications/message"
                             and m["params"]["data"]["event"] == "about-the-interview")
    assert message["params"]["data"] == {"event": "about-the-interview", "detail": "no interview field"}
    submit_like_a_browser(asked["url"])
    assert result_of(server.response(call_id))["structuredContent"]["status"] == "submitted"
    server.call("ping")
    sent = [m["data"]["event"] for m in log_messages_since(server, since)]
    assert sent.count("about-the-interview") == 1, sent  # to the call that asked, not to setLevel too


def log_messages_since(peer, since: int) -> list:
    return [m["params"] for m in written_messages(peer)[since:] if m.get("method") == "notifications/message"]


def test_no_log_message_follows_a_create_task_result(modern):
    asked = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    call_id = send_modern(modern, "tools/call", {"name": "await_user_answers",
                                                 "arguments": {"sessionId": asked["sessionId"]}},
                          tasks=True, **DEBUG)
    task = result_of(modern.response(call_id))
    assert task["resultType"] == "task"
    submit_like_a_browser(asked["url"])
    done = poll_task(modern, task["taskId"], lambda t: t["status"] == "completed", what="the task to complete")
    assert done
    messages = written_messages(modern)
    answered = next(i for i, m in enumerate(messages) if m.get("id") == call_id and "result" in m)
    after = [m["params"] for m in messages[answered + 1:] if m.get("method") == "notifications/message"]
    assert naming(after, interview=asked["sessionId"], task=task["taskId"]) == []
    before = [m["params"] for m in messages[:answered] if m.get("method") == "notifications/message"]
    assert naming(before, interview=asked["sessionId"])  # it did ask, and got its messages until then


def test_no_log_message_follows_the_cancellation_of_the_request(modern, tmp_path):
    asked = result_of(tool_modern(modern, "ask_user_rich", interview(delivery="link")))["structuredContent"]
    call_id = blocking_await(modern, asked["sessionId"], **DEBUG)
    modern.receive(lambda m: m.get("method") == "notifications/message"
                   and m["params"]["data"].get("interview") == asked["sessionId"])  # it asked, and gets them
    modern.notify("notifications/cancelled", {"requestId": call_id})
    modern.log.wait_for("call-end", "request=%s" % call_id)
    submit_like_a_browser(asked["url"])
    modern.call("ping")
    sent = [m["data"]["event"] for m in log_messages(modern)]
    assert "call-cancelled" not in sent and "call-end" not in sent
    assert "submit" not in sent and "submitted" not in sent
