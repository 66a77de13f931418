"""When nobody answers (CONTRACT.md §20): the person's away policy over stdio, with delays of
a few seconds (decimal minutes), the answers the person gave in the form kept, needsPerson
questions left open, the warning before the policy acts, permission asks never touched, and
`by`/`via` on every answer of every result."""

from __future__ import annotations

import calendar
import io
import json
import time

import jsonschema
import pytest

from helpers.delivery_support import linux_facts
from helpers.modern_support import get_task, modern_params, poll_task, result_of, tool_modern
from helpers.notices_support import PushServer
from helpers.support import (WAIT, SubprocessServer, api_url, askrich, choice, http_request, interview, quiet_runtime,
                     submit, wait_for_file, wait_for_result)

AFTER = "0.03"  # minutes: 1.8 s
SECONDS = 1.8


def questions():
    """Six questions: four with a recommendation, one of them needsPerson; one rank."""
    return interview(
        choice("db", "pg", "my", recommended="pg"),
        choice("langs", "py", "go", "rs", multiSelect=True, recommended=["rs", "py"]),
        {"id": "order", "header": "Rank them", "kind": "rank", "options": [
            {"id": "speed", "label": "Speed"}, {"id": "cost", "label": "Cost"}], "recommended": ["cost", "speed"]},
        choice("prod", "yes", "no", recommended="no", needsPerson=True),
        choice("free"),
        choice("color", "red", "blue", recommended="red"),
        title="Six questions",
    )


def away_server(tmp_path, policy, after=AFTER, **env):
    return SubprocessServer(tmp_path / "logs", env=dict({"ASK_USER_RICH_AWAY": policy,
                                                         "ASK_USER_RICH_AWAY_AFTER": after}, **env))


def structured(reply) -> dict:
    return reply["result"]["structuredContent"]


def result_schema():
    return askrich.RESULT_SCHEMA


def test_recommended_takes_each_recommendation_nobody_gave_and_says_so(tmp_path):
    server = away_server(tmp_path, "recommended")
    try:
        server.initialize()
        started = time.monotonic()
        result = structured(server.tool("ask_user_rich", dict(questions(), delivery="link"), timeout=WAIT))
        session = result["sessionId"]
        result = structured(server.tool("await_user_answers", {"sessionId": session}, timeout=WAIT + SECONDS))
        assert time.monotonic() - started >= SECONDS - 0.2
    finally:
        server.close()
    jsonschema.validate(result, result_schema())
    rows = {row["id"]: row for row in result["answers"]}
    assert result["status"] == "submitted" and result["via"] == "away-policy"
    assert result["away"] == {"policy": "recommended", "afterMinutes": 0.03,
                              "decided": ["db", "langs", "order", "color"]}
    assert rows["db"]["selected"] == ["pg"] and rows["db"]["by"] == "away-policy"
    assert rows["langs"]["selected"] == ["py", "rs"] and rows["order"]["ranked"] == ["cost", "speed"]
    # needsPerson and a question without a recommendation stay open.
    assert rows["prod"]["status"] == "unanswered" and rows["prod"]["by"] == "person"
    assert rows["free"]["status"] == "unanswered"
    assert all(row["via"] is None for row in rows.values())
    first = result["summary"].splitlines()[0]
    assert first == ("Nobody answered within 0.03 minutes: the recommendation was taken for 4 of 6 "
                     "questions (your away policy).")
    assert "[taken by the away policy]" in result["summary"]


def test_decline_settles_declined_with_the_policys_reason(tmp_path):
    server = away_server(tmp_path, "decline")
    try:
        server.initialize()
        session = structured(server.tool("ask_user_rich", dict(questions(), delivery="link")))["sessionId"]
        result = structured(server.tool("await_user_answers", {"sessionId": session}, timeout=WAIT + SECONDS))
    finally:
        server.close()
    assert result["status"] == "declined"
    assert result["generalNotes"] == "Nobody answered within 0.03 minutes (the person's away policy)."
    assert result["away"] == {"policy": "decline", "afterMinutes": 0.03, "decided": []}
    assert all(row["status"] == "unanswered" and row["by"] == "person" for row in result["answers"])


def test_wait_decides_nothing_and_a_bad_value_is_reported_once(tmp_path):
    server = away_server(tmp_path, "sometimes", after="soon")
    try:
        server.initialize()
        session = structured(server.tool("ask_user_rich", dict(questions(), delivery="link")))["sessionId"]
        reply = structured(server.tool("await_user_answers", {"sessionId": session, "timeoutSeconds": 3}, timeout=WAIT))
        assert reply["status"] == "awaiting"
    finally:
        server.close()
    warnings = "".join(server.stderr_lines)
    assert warnings.count("ASK_USER_RICH_AWAY='sometimes' is not one of wait, recommended, decline; using wait") == 1
    assert warnings.count("ASK_USER_RICH_AWAY_AFTER='soon' is not a number of minutes") == 1


def test_the_config_reads_the_policy_and_decimal_minutes():
    config, warnings = askrich.Config.from_env({"ASK_USER_RICH_AWAY": "Recommended", "ASK_USER_RICH_AWAY_AFTER": "2.5"})
    assert (config.away, config.away_after, warnings) == ("recommended", 2.5, [])
    config, warnings = askrich.Config.from_env({"ASK_USER_RICH_AWAY_AFTER": "-1"})
    assert (config.away, config.away_after, len(warnings)) == ("wait", 30.0, 1)


def test_an_answer_the_person_gave_in_the_form_is_kept_and_restarts_the_clock(tmp_path):
    runtime = quiet_runtime(tmp_path / "logs", away="recommended", away_after=0.03)
    try:
        form = runtime.open_interview(questions())
        time.sleep(SECONDS * 0.6)
        # The form reports the person's answers as they change (through the door, by its Host).
        body = {"answered": 2, "answers": {"db": {"selected": ["my"], "notes": "We run it"},
                                           "color": {"status": "defer"}}}
        reply = http_request(api_url(runtime.form_url(form), "progress"), "POST", body)
        assert reply.status == 204, reply.body
        reported = time.monotonic()
        result = wait_for_result(runtime, form.id, timeout=WAIT)
        assert time.monotonic() - reported >= SECONDS - 0.3  # the answer was a sign of the person
    finally:
        runtime.close()
    rows = {row["id"]: row for row in result["answers"]}
    assert rows["db"]["selected"] == ["my"] and rows["db"]["notes"] == "We run it"
    assert (rows["db"]["by"], rows["db"]["via"]) == ("person", "browser")
    assert rows["color"]["status"] == "deferred" and rows["color"]["by"] == "person"
    assert result["away"]["decided"] == ["langs", "order"]
    assert "recommendation was taken for 2 of 6 questions" in result["summary"].splitlines()[0]


def test_a_progress_answer_that_is_not_one_yet_holds_nothing_and_a_bad_one_is_refused(tmp_path):
    runtime = quiet_runtime(tmp_path / "logs", away="recommended", away_after=10)
    try:
        form = runtime.open_interview(questions())
        reply = http_request(api_url(runtime.form_url(form), "progress"), "POST", {"answers": {"db": {"selected": ["nope"]},
                                                                                  "free": {"other": "  "}}})
        assert reply.status == 204 and form.given_answers() == {}
        reply = http_request(api_url(runtime.form_url(form), "progress"), "POST", {"answers": ["db"]})
        assert reply.status == 422
    finally:
        runtime.close()


def test_the_warning_notice_comes_before_the_policy_acts(tmp_path):
    with PushServer() as push:
        server = away_server(tmp_path, "recommended", after="0.05", ASK_USER_RICH_NOTIFY="push",
                             ASK_USER_RICH_PUSH_URL=push.url("/hook"))
        try:
            server.initialize()
            session = structured(server.tool("ask_user_rich", dict(questions(), delivery="link")))["sessionId"]
            result = structured(server.tool("await_user_answers", {"sessionId": session}, timeout=WAIT + 3))
        finally:
            server.close()
        sent = [dict(json.loads(entry["body"]), at=entry["at"]) for entry in push.requests]
    warnings = [entry for entry in sent if entry["title"].startswith("In 1 minute")]
    assert result["status"] == "submitted"
    assert len(warnings) == 1, sent
    assert warnings[0]["title"] == "In 1 minute, the recommendations will be taken for “Six questions”"
    # At half of the 3 s delay: well before the policy settled it.
    settled = calendar.timegm(time.strptime(result["submittedAt"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert warnings[0]["at"] < settled


def test_a_permission_ask_is_never_decided_by_the_policy(tmp_path):
    runtime = quiet_runtime(tmp_path / "logs", away="recommended", away_after=0.01)
    try:
        arguments, internal = askrich.permission_interview(askrich.PermissionRequest({
            "hook_event_name": "PermissionRequest", "tool_name": "Bash", "cwd": str(tmp_path),
            "tool_input": {"command": "make deploy", "description": "Deploy"}}))
        assert arguments["questions"][0]["options"][0]["id"] == "allow"
        form = runtime.open_interview(dict(arguments, questions=[dict(arguments["questions"][0], recommended="allow")]),
                                      internal=internal)
        assert form.away is None and form.options["kind"] == "permission"
        result = wait_for_result(runtime, form.id, timeout=2.0)
        assert result is None and form.is_pending()
    finally:
        runtime.close()


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_every_answer_says_by_and_via_in_both_eras(tmp_path, era):
    server = SubprocessServer(tmp_path / "logs")
    try:
        if era == "legacy":
            server.initialize()
            params = {}
        else:
            params = modern_params()
        link = structured(server.tool("ask_user_rich", dict(questions(), delivery="link"), **params))
        reply = submit(link["url"], {"db": {"selected": ["pg"]}, "free": {"other": "x"}})
        assert reply.status == 200
        result = structured(server.tool("await_user_answers", {"sessionId": link["sessionId"]}, **params))
    finally:
        server.close()
    assert result["via"] == "browser" and "away" not in result
    assert [(row["by"], row["via"]) for row in result["answers"]] == [("person", "browser")] * 6


def test_a_submit_through_the_door_or_the_public_url_says_so():
    class Request:
        def __init__(self, host, **config):
            self.headers = {"Host": host}
            self.runtime = type("R", (), {"config": askrich.Config(log_dir="/nonexistent", **config)})()

    assert askrich.request_via(Request("localhost:4000", inbox_port=47615)) == "browser"
    assert askrich.request_via(Request("localhost:47615", inbox_port=47615)) == "door"
    assert askrich.request_via(Request("box.example.ts.net", inbox_port=47615,
                                       public_url="https://box.example.ts.net")) == "public"
    # A tunnel to another port of this host: only that port is the public URL.
    tunnel = dict(inbox_port=47615, public_url="http://localhost:9000")
    assert askrich.request_via(Request("localhost:9000", **tunnel)) == "public"
    assert askrich.request_via(Request("localhost:4000", **tunnel)) == "browser"
    assert askrich.request_via(Request("localhost:47615", **tunnel)) == "door"


def test_the_away_record_is_gone_once_the_result_is_archived(tmp_path):
    """Before any waiter hears of the result: a server started at that moment must not find a
    settled interview's record and take it over."""
    logs = tmp_path / "logs"
    archive = askrich.Archive(str(logs), askrich.Log(str(logs)))
    archive.record_away({"interviewId": "0123456789ab", "spec": {}, "createdAt": 0, "lastSign": 0, "given": {}})
    record = logs / "away" / "0123456789ab.json"
    assert record.exists()
    archive.save({"interviewId": "0123456789ab", "submittedAt": "2026-12-07T00:00:00.000Z", "answers": []})
    assert not record.exists()


def test_a_restarted_server_keeps_the_clock_and_the_persons_answers(tmp_path):
    first = away_server(tmp_path, "recommended", after="0.1")  # 6 s
    try:
        first.initialize()
        link = structured(first.tool("ask_user_rich", dict(questions(), delivery="link")))
        reply = http_request(api_url(link["url"], "progress"), "POST", {"answers": {"db": {"selected": ["my"]}}})
        assert reply.status == 204
        signed = time.time()
        first.log.wait_for("answers-changed")
        deadline = time.monotonic() + WAIT
        record = tmp_path / "logs" / "away" / ("%s.json" % link["sessionId"])

        def written() -> bool:  # the answer is in the record the next server goes on from
            return record.exists() and "db" in json.loads(record.read_text())["given"]

        while not written():
            assert time.monotonic() < deadline, "the answer never reached %s" % record
            time.sleep(0.05)
    finally:
        assert first.close() == 0
    time.sleep(1.0)
    restarted = time.time()
    second = away_server(tmp_path, "recommended", after="0.1")
    try:
        second.initialize()
        result = structured(second.tool("await_user_answers", {"sessionId": link["sessionId"]}, timeout=WAIT + 6))
    finally:
        second.close()
    settled = calendar.timegm(time.strptime(result["submittedAt"][:19], "%Y-%m-%dT%H:%M:%S")) + \
        int(result["submittedAt"][20:23]) / 1000.0
    # On the first server's clock (6 s after the answer), not a fresh one from the restart.
    assert signed + 5.5 <= settled < restarted + 5.5
    rows = {row["id"]: row for row in result["answers"]}
    assert rows["db"]["selected"] == ["my"] and (rows["db"]["by"], rows["db"]["via"]) == ("person", "browser")
    assert result["away"]["decided"] == ["langs", "order", "color"]
    assert not (tmp_path / "logs" / "away" / ("%s.json" % link["sessionId"])).exists()


def test_the_warning_comes_5_minutes_before_or_at_half_a_shorter_delay():
    # 30 minutes: warned at 25, acts at 30.
    assert askrich.plan_away(0.0, 1800.0, None, 1499.0) == {"act": False, "warn": False, "next": 1500.0}
    assert askrich.plan_away(0.0, 1800.0, None, 1500.0) == {"act": False, "warn": True, "next": 1800.0}
    assert askrich.plan_away(0.0, 1800.0, 0.0, 1500.0) == {"act": False, "warn": False, "next": 1800.0}
    assert askrich.plan_away(0.0, 1800.0, 0.0, 1800.0) == {"act": True, "warn": False, "next": None}
    # 4 minutes: warned at 2.
    assert askrich.plan_away(0.0, 240.0, None, 0.0)["next"] == 120.0
    # A sign of the person after the warning starts the clock, and its warning, over.
    assert askrich.plan_away(1600.0, 1800.0, 0.0, 1700.0) == {"act": False, "warn": False, "next": 3100.0}


def test_a_sighting_is_a_sign_of_the_person_and_a_page_load_is_not(tmp_path):
    runtime = quiet_runtime(tmp_path / "logs", away="recommended", away_after=10)
    try:
        form = runtime.open_interview(questions())
        created = form.last_sign()
        assert http_request(runtime.form_url(form)).status == 200  # loaded, perhaps behind other windows
        assert form.last_sign() == created
        time.sleep(0.01)
        reply = http_request(api_url(runtime.form_url(form), "visibility"), "POST", {"page": "p1", "visibility": "visible",
                                                                      "focus": True})
        assert reply.status == 204 and form.last_sign() > created
        assert askrich.inbox_row(form, "http://x")["awayAt"] == askrich.iso_utc(form.last_sign() + 600)
    finally:
        runtime.close()


def test_needs_person_must_be_true_or_false():
    with pytest.raises(askrich.InvalidInterview) as refused:
        askrich.validate_interview(interview(choice("q", "a", needsPerson="yes")))
    assert 'questions[0] (q): "needsPerson" must be true or false, not "yes"' in str(refused.value)
    spec, _ = askrich.validate_interview(interview(choice("q", "a", needsPerson=True)))
    assert spec["questions"][0]["needsPerson"] is True


def test_doctor_says_which_away_policy_holds(tmp_path):
    facts = linux_facts()
    for env, said in (({}, "away policy: wait: nothing is decided for you"),
                      ({"ASK_USER_RICH_AWAY": "recommended", "ASK_USER_RICH_AWAY_AFTER": "45"},
                       "away policy: recommended: the recommendations are taken after 45 minutes without a sign "
                       "of you (ASK_USER_RICH_AWAY_AFTER); never for a permission ask")):
        out = io.StringIO()
        askrich.run_doctor(environ=dict(env, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"),
                                        ASK_USER_RICH_INBOX_PORT="0"), facts=facts, out=out)
        assert said in out.getvalue()


def test_a_task_made_before_the_restart_works_on_and_completes_with_the_policys_result(subprocess_server, tmp_path):
    env = {"ASK_USER_RICH_AWAY": "recommended", "ASK_USER_RICH_AWAY_AFTER": "0.06"}  # 3.6 s
    before = subprocess_server(env=env)
    asked = result_of(tool_modern(before, "ask_user_rich", dict(questions(), delivery="link"), tasks=True))
    asked = asked["structuredContent"]
    task = result_of(tool_modern(before, "await_user_answers", {"sessionId": asked["sessionId"]}, tasks=True))
    assert task["status"] == "working"
    before.log.wait_for("wait-start")
    wait_for_file(str(tmp_path / "logs" / "away" / ("%s.json" % asked["sessionId"])))
    assert before.close() == 0
    after = subprocess_server(env=env)
    working = result_of(get_task(after, task["taskId"]))
    assert working["status"] == "working" and asked["sessionId"] in working["statusMessage"]
    done = poll_task(after, task["taskId"], lambda t: t["status"] != "working", what="the task to end")
    assert done["status"] == "completed", done
    result = done["result"]["structuredContent"]
    assert result["interviewId"] == asked["sessionId"] and result["away"]["decided"] == ["db", "langs", "order", "color"]
