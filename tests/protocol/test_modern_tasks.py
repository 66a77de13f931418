"""Tasks (the io.modelcontextprotocol/tasks extension) over raw JSON-RPC on the real process:
a call that would block answers at once with a task when, and only when, its request declares
the extension; tasks/get shows the live progress and then exactly the blocking call's result;
cancel, timeout, update, unknown ids, and a restart of the server on the same log dir."""

from __future__ import annotations

import io
import re
import time

import pytest

from helpers.delivery_support import FLAT_INTERVIEW, submit_like_a_browser
from helpers.modern_support import (
    assert_fits_the_schema,
    assert_modern_result,
    assert_no_server_requests,
    call_modern,
    form_state,
    get_task,
    poll_task,
    post_progress,
    result_of,
    send_modern,
    tool_modern,
    wait_until_waiting,
    without_envelope,
    written_messages,
)
from helpers.support import RecordingOpener, askrich, choice, interview

jsonschema = pytest.importorskip("jsonschema")

TASK_FIELDS = {"resultType", "taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt",
               "ttlMs", "pollIntervalMs", "_meta"}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
TWO_QUESTIONS = interview(choice("db", "pg", "my", recommended="pg"), choice("cache", "yes", "no"),
                          delivery="link")


@pytest.fixture
def peer(subprocess_server):
    return subprocess_server()


def ask_link_modern(peer, arguments=TWO_QUESTIONS) -> dict:
    result = result_of(tool_modern(peer, "ask_user_rich", arguments, tasks=True))
    assert_modern_result(result)  # delivery "link" ends at once: never a task
    return result["structuredContent"]


def await_task(peer, session_id, **arguments) -> dict:
    arguments["sessionId"] = session_id
    task = result_of(tool_modern(peer, "await_user_answers", arguments, tasks=True))
    # Nobody answers the form before this reply: that it came at all, with the task still
    # working, is the proof that a task answers at once rather than waiting for the user.
    assert task.get("status") == "working", task
    return task


def assert_created_task(task: dict, interview_id: str) -> None:
    assert_modern_result(task, "task")
    assert set(task) == TASK_FIELDS, task
    assert task["status"] == "working"
    assert re.match(re.escape(interview_id) + r"\.\d+$", task["taskId"]), task["taskId"]
    assert task["ttlMs"] is None and task["pollIntervalMs"] == 2000
    assert ISO.match(task["createdAt"]) and ISO.match(task["lastUpdatedAt"])
    assert task["lastUpdatedAt"] >= task["createdAt"]


def output_schema(peer, tool: str) -> dict:
    tools = result_of(call_modern(peer, "tools/list"))["tools"]
    return next(entry["outputSchema"] for entry in tools if entry["name"] == tool)


def completed(peer, task_id: str) -> dict:
    done = poll_task(peer, task_id, lambda t: t["status"] != "working", what="task %s to end" % task_id)
    assert_modern_result(done)
    assert done["status"] == "completed", done
    return done


# -- creation and polling ---------------------------------------------------------------------


def test_await_on_a_pending_interview_answers_at_once_with_a_task_that_tasks_get_finds(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    assert_created_task(task, asked["sessionId"])
    assert task["statusMessage"].startswith('Waiting for answers to "Test interview": 0 of 2 answered, ')
    polled = result_of(get_task(peer, task["taskId"]))
    assert_modern_result(polled)
    assert polled["taskId"] == task["taskId"] and polled["status"] == "working"
    assert polled["createdAt"] == task["createdAt"] and polled["ttlMs"] is None
    assert polled["pollIntervalMs"] == 2000
    assert "result" not in polled
    assert form_state(asked["url"])["state"] == "pending"
    assert_no_server_requests(peer)


def test_the_status_message_follows_the_form_and_the_task_completes_with_the_blocking_result(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    post_progress(asked["url"], answered=1, still_open=1)
    moved = poll_task(peer, task["taskId"], lambda t: "1 of 2 answered" in t["statusMessage"],
                      what="the form's progress in statusMessage")
    assert moved["status"] == "working"
    # No event stream is open (no browser page), so the form reads as closed.
    assert moved["statusMessage"].startswith('Waiting for answers to "Test interview": 1 of 2 answered, form closed (')
    assert moved["lastUpdatedAt"] > task["createdAt"]
    # While working, the link ends the message: the one way to the form when no browser opened.
    assert task["statusMessage"].endswith(" Form: " + asked["url"])
    assert moved["statusMessage"].endswith(" Form: " + asked["url"])

    submit_like_a_browser(asked["url"])
    done = completed(peer, task["taskId"])
    result = done["result"]
    structured = result["structuredContent"]
    jsonschema.validate(structured, output_schema(peer, "await_user_answers"))
    assert structured["status"] == "submitted" and structured["interviewId"] == asked["sessionId"]
    assert result["content"][0]["text"] == structured["summary"]
    assert not result.get("isError")
    assert done["lastUpdatedAt"] >= moved["lastUpdatedAt"]
    # Exactly what the blocking call returns (it returns at once now: the user submitted).
    blocking = result_of(tool_modern(peer, "await_user_answers", {"sessionId": asked["sessionId"]}))
    assert without_envelope(result) == without_envelope(blocking)
    # A finished task reads the same again and again.
    assert result_of(get_task(peer, task["taskId"]))["result"] == result
    assert_no_server_requests(peer)


def test_the_status_message_counts_questions_appended_after_the_task_began(subprocess_server):
    # An append is the agent's doing, not the user's: it shows from the next progress tick on.
    peer = subprocess_server(env={"ASK_USER_RICH_PROGRESS_MS": "200"})
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    appended = result_of(tool_modern(peer, "append_questions", {
        "sessionId": asked["sessionId"], "questions": [choice("later", "a", "b")]}))
    assert appended["structuredContent"]["total"] == 3
    poll_task(peer, task["taskId"], lambda t: "0 of 3 answered" in t["statusMessage"],
              what="the appended question in statusMessage")
    submit_like_a_browser(asked["url"])
    structured = completed(peer, task["taskId"])["result"]["structuredContent"]
    assert [row["id"] for row in structured["answers"]] == ["db", "cache", "later"]


def test_ask_in_a_browser_becomes_a_task_once_the_form_is_open(subprocess_server, tmp_path):
    with RecordingOpener(tmp_path) as opener:
        peer = subprocess_server(env={"ASK_USER_RICH_OPEN": "1", "ASK_USER_RICH_OPEN_CMD": opener.command})
        started = time.monotonic()
        task = result_of(tool_modern(peer, "ask_user_rich", FLAT_INTERVIEW, tasks=True))
        assert time.monotonic() - started < 10
        assert_modern_result(task, "task")
        assert set(task) == TASK_FIELDS and task["status"] == "working"
        url = opener.wait()
        peer.log.wait_for("browser-open")  # logged once the opener exited
        assert opener.urls == [url]
    submit_like_a_browser(url)
    done = completed(peer, task["taskId"])
    structured = done["result"]["structuredContent"]
    jsonschema.validate(structured, output_schema(peer, "ask_user_rich"))
    assert structured["status"] == "submitted" and structured["via"] == "browser"
    assert task["taskId"].startswith(structured["interviewId"] + ".")
    assert [row["selected"] for row in structured["answers"]] == [["pg"], ["cache"], []]
    assert_no_server_requests(peer)


def test_every_task_gets_a_fresh_id_and_all_of_them_receive_the_one_submit(peer):
    asked = ask_link_modern(peer)
    first, second = await_task(peer, asked["sessionId"]), await_task(peer, asked["sessionId"])
    assert first["taskId"] != second["taskId"]
    for task in (first, second):
        assert_created_task(task, asked["sessionId"])
    submit_like_a_browser(asked["url"])
    results = [completed(peer, task["taskId"])["result"] for task in (first, second)]
    assert results[0] == results[1] and results[0]["structuredContent"]["status"] == "submitted"


def test_an_accepted_url_elicitation_becomes_a_task(subprocess_server):
    peer = subprocess_server(env={"ASK_USER_RICH_OPEN": "1", "ASK_USER_RICH_OPEN_CMD": "false"})
    capabilities = {"elicitation": {"url": {}}}
    first = result_of(tool_modern(peer, "ask_user_rich", FLAT_INTERVIEW, capabilities=capabilities, tasks=True))
    assert_modern_result(first, "input_required")  # asking for consent comes before any task
    url = first["inputRequests"]["open-form"]["params"]["url"]
    task = result_of(tool_modern(peer, "ask_user_rich", FLAT_INTERVIEW, capabilities=capabilities, tasks=True,
                                 extra={"requestState": first["requestState"],
                                        "inputResponses": {"open-form": {"action": "accept"}}}))
    assert_modern_result(task, "task")
    assert task["status"] == "working"
    submit_like_a_browser(url)
    done = completed(peer, task["taskId"])
    assert done["result"]["structuredContent"]["status"] == "submitted"
    assert task["taskId"].startswith(done["result"]["structuredContent"]["interviewId"] + ".")
    assert_no_server_requests(peer)


def start_task_with_a_progress_token(subprocess_server):
    """A task made by an await that carried a progressToken: (peer, the link, call id, task)."""
    peer = subprocess_server(env={"ASK_USER_RICH_PROGRESS_MS": "100"})
    asked = ask_link_modern(peer)
    call_id = send_modern(peer, "tools/call", {"name": "await_user_answers",
                                               "arguments": {"sessionId": asked["sessionId"]}},
                          tasks=True, progress_token="task-call")
    task = result_of(peer.response(call_id))
    assert_modern_result(task, "task")
    return peer, asked, call_id, task


def test_notifications_cancelled_for_a_call_already_answered_with_a_task_leaves_the_task_alone(
        subprocess_server):
    peer, asked, call_id, task = start_task_with_a_progress_token(subprocess_server)
    # The request is finished; a task is cancelled with tasks/cancel only.
    peer.notify("notifications/cancelled", {"requestId": call_id})
    post_progress(asked["url"], answered=1, still_open=1)
    poll_task(peer, task["taskId"], lambda t: "1 of 2 answered" in t["statusMessage"], what="the progress")
    submit_like_a_browser(asked["url"])
    assert completed(peer, task["taskId"])["result"]["structuredContent"]["status"] == "submitted"


def test_no_progress_is_sent_for_a_request_once_it_was_answered_with_a_task(subprocess_server):
    peer, asked, _, task = start_task_with_a_progress_token(subprocess_server)
    answered_at = len(written_messages(peer))
    post_progress(asked["url"], answered=1, still_open=1)
    poll_task(peer, task["taskId"], lambda t: "1 of 2 answered" in t["statusMessage"], what="the progress")
    submit_like_a_browser(asked["url"])
    completed(peer, task["taskId"])
    # The progress lives in statusMessage now; the answered request's token is spent.
    late = [m for m in written_messages(peer)[answered_at:] if m.get("method") == "notifications/progress"]
    assert late == [], late


# -- calls that are no task -------------------------------------------------------------------


def test_without_the_extension_the_call_blocks_until_the_submit(peer):
    asked = ask_link_modern(peer)
    call_id = send_modern(peer, "tools/call", {"name": "await_user_answers",
                                               "arguments": {"sessionId": asked["sessionId"]}})
    wait_until_waiting(peer, asked["sessionId"])
    submit_like_a_browser(asked["url"])
    result = result_of(peer.response(call_id))  # the first and only response to the call
    assert_modern_result(result)
    assert result["structuredContent"]["status"] == "submitted"


def test_an_extension_declared_in_an_earlier_request_makes_no_task(peer):
    asked = ask_link_modern(peer)  # declared the extension
    call_id = send_modern(peer, "tools/call", {"name": "await_user_answers",
                                               "arguments": {"sessionId": asked["sessionId"]}})
    wait_until_waiting(peer, asked["sessionId"])
    submit_like_a_browser(asked["url"])
    assert result_of(peer.response(call_id))["resultType"] == "complete"


def test_calls_that_end_at_once_never_make_a_task(peer):
    link = result_of(tool_modern(peer, "ask_user_rich", interview(delivery="link"), tasks=True))
    assert_modern_result(link)
    unopened = result_of(tool_modern(peer, "ask_user_rich", interview(), tasks=True))  # opening is off
    assert_modern_result(unopened)
    assert unopened["structuredContent"]["status"] == "awaiting"
    elicited = result_of(tool_modern(peer, "ask_user_rich", dict(FLAT_INTERVIEW, delivery="elicitation"),
                                     capabilities={"elicitation": {}}, tasks=True))
    assert_modern_result(elicited, "input_required")
    invalid = result_of(tool_modern(peer, "ask_user_rich", {"title": "T"}, tasks=True))
    assert_modern_result(invalid)
    assert invalid["isError"] is True
    unknown = result_of(tool_modern(peer, "await_user_answers", {"sessionId": "0" * 12}, tasks=True))
    assert_modern_result(unknown)
    assert unknown["isError"] is True


def test_a_legacy_session_never_gets_a_task(peer):
    peer.initialize(capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}})
    asked = peer.tool("ask_user_rich", interview(delivery="link"))["result"]["structuredContent"]
    call_id = peer.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": asked["sessionId"]}})
    wait_until_waiting(peer, asked["sessionId"])
    submit_like_a_browser(asked["url"])
    result = peer.response(call_id)["result"]
    assert "resultType" not in result and result["structuredContent"]["status"] == "submitted"


# -- cancel, timeout, update, unknown ids -----------------------------------------------------


def test_cancelling_a_task_leaves_the_form_open_and_collectable(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    acknowledged = result_of(call_modern(peer, "tasks/cancel", {"taskId": task["taskId"]}, tasks=True))
    assert_modern_result(acknowledged)
    assert without_envelope(acknowledged) == {}
    cancelled = poll_task(peer, task["taskId"], lambda t: t["status"] != "working", what="the cancel")
    assert cancelled["status"] == "cancelled" and "result" not in cancelled
    assert form_state(asked["url"])["state"] == "pending"
    submit_like_a_browser(asked["url"])
    collected = result_of(tool_modern(peer, "await_user_answers", {"sessionId": asked["sessionId"]}))
    assert collected["structuredContent"]["status"] == "submitted"
    assert result_of(get_task(peer, task["taskId"]))["status"] == "cancelled"


def test_timeout_seconds_completes_the_task_with_awaiting_never_with_an_answer(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"], timeoutSeconds=1)
    assert_created_task(task, asked["sessionId"])
    done = completed(peer, task["taskId"])
    structured = done["result"]["structuredContent"]
    assert structured["status"] == "awaiting"
    assert structured["reason"] == "Stopped waiting after 1s (timeoutSeconds)."
    assert structured["sessionId"] == asked["sessionId"] and structured["url"] == asked["url"]
    jsonschema.validate(structured, output_schema(peer, "await_user_answers"))
    assert form_state(asked["url"])["state"] == "pending"
    # The user answers later: the ended task keeps its awaiting result; the answers are collected anew.
    submit_like_a_browser(asked["url"])
    assert result_of(get_task(peer, task["taskId"]))["result"] == done["result"]
    collected = result_of(tool_modern(peer, "await_user_answers", {"sessionId": asked["sessionId"]}))
    assert collected["structuredContent"]["status"] == "submitted"


def test_tasks_update_is_acknowledged_and_changes_nothing(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    acknowledged = result_of(call_modern(peer, "tasks/update", {
        "taskId": task["taskId"], "inputResponses": {"anything": {"action": "accept", "content": {"db": "my"}}}},
        tasks=True))
    assert_modern_result(acknowledged)
    assert without_envelope(acknowledged) == {}
    assert result_of(get_task(peer, task["taskId"]))["status"] == "working"
    assert form_state(asked["url"])["state"] == "pending"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel", "tasks/update"])
@pytest.mark.parametrize("task_id", ["nope", "", "abcdef"])
def test_an_unknown_task_id_is_refused_with_32602(peer, method, task_id):
    params = {"taskId": task_id}
    if method == "tasks/update":
        params["inputResponses"] = {}
    reply = call_modern(peer, method, params, tasks=True)
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == 'unknown task "%s"' % task_id
    assert peer.call("ping")["result"] == {}


@pytest.mark.parametrize("params", [{}, {"taskId": 5}, {"taskId": None}, {"taskId": ["x"]}])
def test_a_missing_or_mistyped_task_id_is_refused_with_32602(peer, params):
    reply = call_modern(peer, "tasks/get", params, tasks=True)
    assert reply["error"]["code"] == -32602
    assert "taskId" in reply["error"]["message"]
    assert peer.call("ping")["result"] == {}


# -- a restart on the same log dir ------------------------------------------------------------


def test_after_a_restart_an_archived_task_is_completed_and_a_lost_one_failed(subprocess_server):
    before = subprocess_server()
    answered, lost = ask_link_modern(before), ask_link_modern(before)
    answered_task = await_task(before, answered["sessionId"])
    lost_task = await_task(before, lost["sessionId"])
    submit_like_a_browser(answered["url"])
    result_before = completed(before, answered_task["taskId"])["result"]
    assert before.close() == 0  # the pending interview dies with the process

    after = subprocess_server()
    recovered = result_of(get_task(after, answered_task["taskId"]))
    assert_modern_result(recovered)
    assert recovered["taskId"] == answered_task["taskId"] and recovered["status"] == "completed"
    assert recovered["result"]["structuredContent"] == result_before["structuredContent"]
    jsonschema.validate(recovered["result"]["structuredContent"], output_schema(after, "await_user_answers"))

    failed = result_of(get_task(after, lost_task["taskId"]))
    assert_modern_result(failed)
    assert failed["taskId"] == lost_task["taskId"] and failed["status"] == "failed"
    assert "result" not in failed
    error = failed["error"]
    assert isinstance(error["code"], int)
    message = error["message"].lower()
    assert "restart" in message and "again" in message, error["message"]

    # A second restart answers the same: the verdicts come from disk, not from one process.
    assert after.close() == 0
    again = subprocess_server()
    assert result_of(get_task(again, answered_task["taskId"]))["result"] == recovered["result"]
    assert result_of(get_task(again, lost_task["taskId"]))["status"] == "failed"


def test_stdin_eof_with_tasks_and_a_blocking_modern_call_in_flight_exits_0_within_a_second(peer):
    asked = ask_link_modern(peer)
    await_task(peer, asked["sessionId"])
    send_modern(peer, "tools/call", {"name": "await_user_answers", "arguments": {"sessionId": asked["sessionId"]}})
    wait_until_waiting(peer, asked["sessionId"], nth=2)  # the task's wait and this call's
    started = time.monotonic()
    assert peer.close(timeout=5) == 0
    assert time.monotonic() - started < 1.0


# -- what a task tells the model and the person ---------------------------------------------


def test_a_working_task_names_its_interview_and_ends_with_the_form_link(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    message = task["statusMessage"]
    assert message.endswith(" Form: " + asked["url"])
    assert '"%s"' % asked["sessionId"] in message and "await_user_answers" in message
    assert result_of(get_task(peer, task["taskId"]))["statusMessage"].endswith(" Form: " + asked["url"])


def test_a_working_task_with_a_long_title_keeps_its_whole_link_within_200_characters(peer):
    # Claude Code shows a task's statusMessage cut at 200 characters: the link at its end
    # must survive the cut, so the title gives way, never the link or the counts.
    title = "Which of these storage engines should the new analytics pipeline use for raw events"
    asked = ask_link_modern(peer, dict(TWO_QUESTIONS, title=title))
    task = await_task(peer, asked["sessionId"])
    for shown in (task, result_of(get_task(peer, task["taskId"]))):
        message = shown["statusMessage"]
        assert len(message) <= 200 and message.endswith(" Form: " + asked["url"]), message
        assert message.startswith('Waiting for answers to "Which of') and '…": 0 of 2 answered' in message
        assert "0 of 2 answered" in message and '"%s"' % asked["sessionId"] in message
        assert "await_user_answers" in message


def test_a_completed_task_says_the_results_summary_line_not_waiting(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    submit_like_a_browser(asked["url"])
    done = completed(peer, task["taskId"])
    summary = done["result"]["structuredContent"]["summary"]
    assert done["statusMessage"] == summary.split("\n", 1)[0]
    assert not done["statusMessage"].startswith("Waiting")
    assert_fits_the_schema("CallToolResult", done["result"])


def test_a_cancelled_task_says_so_and_where_the_form_stays_open(peer):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    cancelled = result_of(call_modern(peer, "tasks/cancel", {"taskId": task["taskId"]}, tasks=True))
    assert cancelled["resultType"] == "complete"
    shown = result_of(get_task(peer, task["taskId"]))
    assert shown["status"] == "cancelled"
    assert shown["statusMessage"] == "Cancelled by the client; the form stays open at " + asked["url"]
    assert form_state(asked["url"])["state"] == "pending"


@pytest.mark.parametrize("tool", ["await_user_answers", "append_questions"])
def test_a_task_id_given_as_session_id_reaches_its_interview(peer, tool):
    asked = ask_link_modern(peer)
    task = await_task(peer, asked["sessionId"])
    if tool == "append_questions":
        result = result_of(tool_modern(peer, tool, {"sessionId": task["taskId"],
                                                    "questions": [choice("more", "a", "b")]}))
        assert result["structuredContent"]["sessionId"] == asked["sessionId"]
        assert result["structuredContent"]["total"] == 3
    else:
        second = await_task(peer, task["taskId"])
        assert_created_task(second, asked["sessionId"])
        submit_like_a_browser(asked["url"])
        assert completed(peer, second["taskId"])["result"]["structuredContent"]["interviewId"] == asked["sessionId"]


def test_the_session_id_schema_admits_every_id_the_server_hands_out_and_refuses_garbage(peer):
    asked = ask_link_modern(peer)
    handed_out = [asked["sessionId"]] + [await_task(peer, asked["sessionId"])["taskId"] for _ in range(2)]
    tools = {tool["name"]: tool for tool in result_of(call_modern(peer, "tools/list"))["tools"]}
    garbage = ["", "abc", "ABCDEF012345", asked["sessionId"] + ".", asked["sessionId"] + ".1.2",
               asked["sessionId"] + ".-1", asked["sessionId"] + ".x", asked["sessionId"][:11] + ".1",
               " " + asked["sessionId"], "x" + asked["sessionId"]]
    for name in ("await_user_answers", "append_questions"):
        schema = tools[name]["inputSchema"]["properties"]["sessionId"]
        for session_id in handed_out:
            jsonschema.validate(session_id, schema)
        for session_id in garbage:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(session_id, schema)


def test_the_instructions_say_how_to_get_from_a_task_id_to_its_interview(peer):
    instructions = result_of(call_modern(peer, "server/discover"))["instructions"]
    assert '"<sessionId>.<n>" names its interview' in instructions


def test_the_poll_interval_is_2s_for_a_minute_then_grows_to_30s_and_resets_when_the_user_acts(tmp_path):
    config = askrich.Config(log_dir=str(tmp_path), open_browser=False)
    runtime = askrich.Runtime(config, askrich.Log(str(tmp_path), stream=io.StringIO()))
    try:
        now = [1000.0]
        tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url, clock=lambda: now[0])
        interview_ = runtime.open_interview(TWO_QUESTIONS, agent=None)
        task_id = tasks.create(interview_, "Waiting", askrich.Cancellation())["taskId"]

        def interval(at: float) -> int:
            now[0] = 1000.0 + at
            return tasks.get(task_id)["pollIntervalMs"]

        assert [interval(0), interval(30), interval(59)] == [2000, 2000, 2000]
        grown = [interval(60), interval(120), interval(180), interval(240), interval(3600)]
        assert grown == sorted(grown) and grown[0] > 2000 and grown[-1] == 30000
        interview_.record_progress({"answered": 1, "deferred": 0, "needsInfo": 0, "open": 1})
        assert interval(3601) == 2000  # the user did something
        assert interval(3661) > 2000
    finally:
        runtime.close()
