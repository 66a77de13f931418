"""The form server's HTTP API and its checks (tests/README.md, "The form server's HTTP API")."""

from __future__ import annotations

import http.client
import json
import os
import stat
import threading
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import askrich
from helpers.support import DISCARD, api_url, choice, http_request, interview, settled_long_ago, submit, wait_for_result

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


# The questions of the `opened` fixture's interview (form/conftest.py).
OPENED = (
    choice("db", "pg", "my", recommended="pg"),
    choice("r", "a", "b", "c", kind="rank"),
    {"id": "src", "header": "Upgrade?", "options": [
        {"id": "up", "label": "Upgrade", "textInput": {"required": True}},
        {"id": "keep", "label": "Keep"}]},
)


def port_of(url):
    return urllib.parse.urlsplit(url).port


def test_the_form_page_is_served_with_the_security_headers(runtime, opened):
    response = http_request(runtime.form_url(opened))
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Content-Security-Policy"] == CSP
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    body = response.body.decode()
    assert "<script" in body and "/assets/" in body
    # No inline script or style: everything the page runs comes from /assets/.
    assert "<style" not in body and " style=" not in body
    for tag in body.split("<script")[1:]:
        assert "src=" in tag.split(">")[0]


def test_unknown_tokens_get_404_with_the_plain_text(runtime, opened):
    base = runtime.form_url(opened).rsplit("/s/", 1)[0]
    response = http_request(base + "/s/" + "A" * 24)
    assert response.status == 404
    assert response.body.decode() == "Interview not found or expired."
    assert http_request(base + "/api/s/" + "A" * 24).status == 404
    assert http_request(base + "/api/s/" + "A" * 24 + "/state").status == 404


def test_only_allow_listed_assets_are_served_with_fixed_types(runtime, opened):
    base = runtime.form_url(opened).rsplit("/s/", 1)[0]
    for name in sorted(askrich.ASSET_FILES):
        response = http_request(base + "/assets/" + name)
        assert response.status == 200, name
        extension = os.path.splitext(name)[1]
        assert response.headers["Content-Type"] == askrich.ASSET_CONTENT_TYPES[extension]
    for path in ("/assets/../askrich.py", "/assets/%2e%2e/askrich.py", "/assets/demo.json",
                 "/assets/js/../../askrich.py", "/assets/", "/askrich.py", "/"):
        assert http_request(base + path).status == 404, path


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.2", "localhost.evil", ""])
def test_foreign_host_headers_are_forbidden(runtime, opened, host):
    response = http_request(runtime.form_url(opened), headers={"Host": host})
    assert response.status == 403
    assert response.json() == {"error": "forbidden host", "code": "forbidden-host"}


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "LOCALHOST"])
def test_loopback_host_names_are_accepted_with_or_without_port(runtime, opened, host):
    port = port_of(runtime.form_url(opened))
    assert http_request(runtime.form_url(opened), headers={"Host": host}).status == 200
    assert http_request(runtime.form_url(opened), headers={"Host": "%s:%d" % (host, port)}).status == 200


@pytest.mark.parametrize("origin", ["null", "http://evil.example", "http://localhost:1", "https://localhost"])
def test_foreign_origins_are_forbidden_on_every_route(runtime, opened, origin):
    for url, method in ((runtime.form_url(opened), "GET"), (api_url(runtime.form_url(opened)), "GET"),
                        (api_url(runtime.form_url(opened), "submit"), "POST")):
        response = http_request(url, method, {"answers": {}}, headers={"Origin": origin})
        assert response.status == 403, (url, origin)
    assert http_request(api_url(runtime.form_url(opened), "state")).json()["state"] == "pending"


def test_own_origin_is_accepted(runtime, opened):
    origin = "http://localhost:%d" % port_of(runtime.form_url(opened))
    response = http_request(api_url(runtime.form_url(opened), "state"), headers={"Origin": origin})
    assert response.status == 200
    # What the browser sends on the form's own fetch POST.
    posted = http_request(api_url(runtime.form_url(opened), "progress"), "POST",
                          {"answered": 1, "deferred": 0, "needsInfo": 0, "open": 2},
                          headers={"Origin": origin})
    assert posted.status == 204


def test_api_returns_the_filled_spec_and_state(runtime, opened):
    payload = http_request(api_url(runtime.form_url(opened))).json()
    assert payload["id"] == opened.id
    assert payload["state"] == "pending" and payload["version"] == 1
    assert payload["note"] is None and payload["result"] is None
    question = payload["spec"]["questions"][1]
    assert question["kind"] == "rank" and question["allowOther"] is False
    assert question["recommended"] == [] and question["version"] == 1
    assert http_request(api_url(runtime.form_url(opened), "state")).json() == {
        "state": "pending", "waiting": False, "version": 1,
    }


def test_the_api_carries_the_limits_the_form_keeps_and_the_form_has_no_number_of_its_own(runtime, opened):
    assert http_request(api_url(runtime.form_url(opened))).json()["limits"] == {
        "freeText": askrich.FREE_TEXT_MAX,
        "attachmentBytes": askrich.ATTACHMENT_MAX_BYTES,
        "attachments": askrich.ATTACHMENTS_MAX_COUNT,
        "attachmentsBytes": askrich.ATTACHMENTS_MAX_TOTAL_BYTES,
    }
    # The form reads them from there (browser/test_form_limits.py lowers them in the server).
    scripts = "".join(askrich.read_asset("js/" + name).decode("utf-8")
                      for name in ("attach.js", "state.js", "main.js"))
    for number in ("20000", "20 * 1024", "10 * 1024 * 1024", "50 * 1024 * 1024", "= 20;"):
        assert number not in scripts, number


def test_a_submit_is_checked_type_size_json_shape_version_answers_in_that_order(opened, runtime):
    url = api_url(runtime.form_url(opened), "submit")
    # 1. media type (a form or text/plain post, which needs no preflight, is refused)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        response = http_request(url, "POST", b'{"answers": {}}', {"Content-Type": content_type})
        assert response.status == 415
        assert response.json() == {"error": "expected application/json", "code": "unsupported-media-type"}
    # 3. size, JSON, shape
    big = http_request(url, "POST", b"{}", {"Content-Type": "application/json",
                                             "Content-Length": str(6 * 1024 * 1024)})
    assert big.status == 413
    bad = http_request(url, "POST", b"{nope", {"Content-Type": "application/json; charset=utf-8"})
    assert bad.status == 400 and bad.json()["error"].startswith("invalid JSON: ")
    for body in ([], {"answers": []}, {"nope": 1}):
        response = http_request(url, "POST", body)
        assert response.status == 422
        assert response.json() == {"error": "payload must be an object with an answers object", "code": "invalid-answers"}
    # 4. a stale specVersion
    runtime.append_questions(opened.id, [choice("late", "x")])
    stale = submit(runtime.form_url(opened), {}, specVersion=1)
    assert stale.status == 409 and stale.json() == {"error": "new questions were added", "code": "stale-version", "version": 2}
    # 5. answer problems keep the interview open
    wrong = submit(runtime.form_url(opened), {"db": {"selected": ["mongo"]}}, specVersion=2)
    assert wrong.status == 422
    assert wrong.json()["error"] == 'question "db": unknown option id "mongo"'
    needs_text = submit(runtime.form_url(opened), {"src": {"selected": ["up"]}})
    assert needs_text.json()["error"] == 'question "src": option "up" needs its text'
    # 6. success, then 2. not pending
    done = submit(runtime.form_url(opened), {"db": {"selected": ["pg"]}}, specVersion=2)
    assert done.status == 200
    assert done.json() == {"ok": True, "delivered": False, "counts": {
        "answered": 1, "deferred": 0, "needsInfo": 0, "unanswered": 3}}
    again = submit(runtime.form_url(opened), {})
    assert again.status == 409 and again.json() == {"error": "interview already submitted", "code": "not-pending"}
    after = http_request(api_url(runtime.form_url(opened))).json()
    assert after["state"] == "submitted" and after["result"]["answers"][0]["selected"] == ["pg"]


def test_a_submit_is_archived_durably_with_private_permissions(opened, runtime):
    assert submit(runtime.form_url(opened), {"db": {"selected": ["my"], "notes": "n"}}, generalNotes="g").status == 200
    directory = os.path.join(runtime.config.log_dir, "answers")
    (name,) = os.listdir(directory)
    assert name.endswith("-%s.json" % opened.id)
    assert ":" not in name
    path = os.path.join(directory, name)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    record = json.load(open(path, encoding="utf-8"))
    assert "summary" not in record
    assert record["generalNotes"] == "g"
    assert [q["id"] for q in record["interview"]["questions"]] == ["db", "r", "src"]
    assert stat.S_IMODE(os.stat(runtime.config.log_dir).st_mode) == 0o700


def test_a_progress_post_takes_only_json_counts_that_make_sense(runtime, opened):
    url = api_url(runtime.form_url(opened), "progress")
    assert http_request(url, "POST", {"answered": 1, "deferred": 0, "needsInfo": 0, "open": 2}).status == 204
    assert http_request(url, "POST", {"answered": -1}).status == 422
    assert http_request(url, "POST", b"x", {"Content-Type": "text/plain"}).status == 415


def test_a_visibility_report_moves_what_the_notices_judge_by_and_a_bad_one_is_refused(opened, runtime):
    url = api_url(runtime.form_url(opened), "visibility")
    seen = {"page": "tab-1", "visibility": "visible", "focus": True}
    assert http_request(url, "POST", seen).status == 204
    assert opened.attention()["sightings"] == 1
    assert http_request(url, "POST", dict(seen, focus=False)).status == 204  # behind another window
    assert http_request(url, "POST", seen).status == 204  # in front again: a second sighting
    assert opened.attention()["sightings"] == 2
    for bad, said in [
        ([], "visibility must be an object of page, visibility and focus"),
        (dict(seen, visibility="prerender"), 'visibility must be "visible" or "hidden" (got "prerender")'),
        (dict(seen, focus="yes"), 'focus must be true or false (got "yes")'),
        (dict(seen, page="a/b"), "page must be the page's id"),
        (dict(seen, page="x" * 65), "page must be the page's id"),
        ({"page": 7}, "page must be the page's id: 1 to 64 letters, digits, '-' or '_' (got 7); "
                      "visibility must be \"visible\" or \"hidden\" (got null); focus must be true or false (got null)"),
    ]:
        answer = http_request(url, "POST", bad)
        assert answer.status == 400 and answer.json()["code"] == "invalid-visibility", bad
        assert said in answer.json()["error"]
    assert http_request(url, "POST", b"{", {"Content-Type": "application/json"}).json()["code"] == "bad-json"
    assert http_request(url, "POST", b"x", {"Content-Type": "text/plain"}).status == 415
    assert http_request(url, "POST", b"x" * 2000, {"Content-Type": "application/json"}).status == 413
    assert http_request(api_url(runtime.form_url(opened).replace(opened.token, "nope"), "visibility"), "POST", seen).status == 404
    assert opened.attention()["sightings"] == 2  # nothing refused counted
    assert http_request(url, "POST", seen).status == 204  # and the server serves on
    assert http_request(runtime.form_url(opened)).status == 200


def test_an_interview_remembers_its_latest_pages_only(runtime, opened):
    """A page that keeps saying it is in view is one sighting; one forgotten (the bound on
    pages kept) counts again when it next says so."""
    url = api_url(runtime.form_url(opened), "visibility")
    seen = {"page": "p0", "visibility": "visible", "focus": True}
    assert http_request(url, "POST", seen).status == 204
    assert http_request(url, "POST", seen).status == 204
    assert opened.attention()["sightings"] == 1
    for number in range(1, askrich.PAGES_REMEMBERED + 1):
        assert http_request(url, "POST", {"page": "p%d" % number, "visibility": "hidden", "focus": False}).status == 204
    assert http_request(url, "POST", seen).status == 204
    assert opened.attention()["sightings"] == 2


def test_methods_other_than_get_and_post_are_refused(runtime, opened):
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"):
        assert http_request(runtime.form_url(opened), method).status == 405
    assert http_request(runtime.form_url(opened), "BREW").status == 501
    assert http_request(runtime.form_url(opened)).status == 200


def read_event(response):
    lines = []
    while True:
        line = response.fp.readline().decode()
        if line == "\n":
            return lines
        lines.append(line.rstrip("\n"))


def test_events_stream_the_state_at_once_and_on_every_change(opened, runtime):
    parts = urllib.parse.urlsplit(runtime.form_url(opened))
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.request("GET", urllib.parse.urlsplit(api_url(runtime.form_url(opened), "events")).path)
    response = connection.getresponse()
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert read_event(response) == [
        "event: state", 'data: {"state": "pending", "waiting": false, "version": 1}']
    runtime.append_questions(opened.id, [choice("late", "x")], note="more")
    assert read_event(response)[1] == 'data: {"state": "pending", "waiting": false, "version": 2}'
    waiter = threading.Thread(target=wait_for_result, args=(runtime, opened.id, 10))
    waiter.start()
    assert read_event(response)[1] == 'data: {"state": "pending", "waiting": true, "version": 2}'
    submit(runtime.form_url(opened), {})
    events = [read_event(response)[1]]
    waiter.join(10)
    events.append(read_event(response)[1])
    assert 'data: {"state": "submitted", "waiting": true, "version": 2}' in events
    assert events[-1] == 'data: {"state": "submitted", "waiting": false, "version": 2}'
    connection.close()


def test_settled_interviews_expire_after_thirty_minutes(opened, runtime):
    submit(runtime.form_url(opened), {})
    assert http_request(runtime.form_url(opened)).status == 200
    settled_long_ago(opened, askrich.SETTLED_RETENTION_SECONDS + 1)
    assert http_request(runtime.form_url(opened)).status == 404
    assert runtime.hub.get(opened.id) is None
    assert runtime.archive.find(opened.id)["interviewId"] == opened.id


def test_a_failed_bind_is_reported_and_the_next_call_tries_again(tmp_path):
    import socket

    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    config = askrich.Config(log_dir=str(tmp_path), open_browser=False, port=port)
    runtime = askrich.Runtime(config, askrich.Log(str(tmp_path), stream=DISCARD))
    try:
        with pytest.raises(askrich.FormServerUnavailable) as caught:
            runtime.open_interview(interview())
        text = askrich.tool_error_text(caught.value)
        assert "Could not start the form server on 127.0.0.1:%d" % port in text
        assert "the next call tries again" in text
        blocker.close()
        opened = runtime.open_interview(interview())
        assert http_request(runtime.form_url(opened)).status == 200
    finally:
        blocker.close()
        runtime.close()


def answers_for(spec, data):
    """Hypothesis: a valid raw answer for every question of `spec`."""
    raw = {}
    for question in spec["questions"]:
        ids = [option["id"] for option in question["options"]]
        mode = data.draw(st.sampled_from(["answer", "defer", "needs-info", "skip"]))
        if mode == "skip":
            continue
        entry = {"status": mode, "notes": data.draw(st.text(max_size=20))}
        if question["kind"] == "rank":
            if data.draw(st.booleans()):
                entry["ranked"] = data.draw(st.permutations(ids))
        else:
            size = len(ids) if question["multiSelect"] else min(1, len(ids))
            entry["selected"] = data.draw(st.lists(st.sampled_from(ids), max_size=size, unique=True)) if ids else []
            entry["other"] = data.draw(st.text(max_size=20))
            entry["optionTexts"] = {oid: "text for " + oid for oid in entry["selected"]
                                    if next(o for o in question["options"] if o["id"] == oid)["textInput"]}
        raw[question["id"]] = entry
    return raw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_valid_interview_answered_through_http_comes_back_identically(runtime, data):
    questions = [
        choice("single", "a", "b", "c", recommended="b"),
        choice("multi", "a", "b", "c", multiSelect=True, recommended=["a", "c"]),
        choice("rank", "x", "y", "z", kind="rank", recommended=["z", "y", "x"]),
        {"id": "free", "header": "Free?"},
        {"id": "texts", "header": "T?", "options": [
            {"id": "t1", "label": "T1", "textInput": {"required": True}}, {"id": "t2", "label": "T2"}]},
    ]
    opened = runtime.open_interview(interview(*questions))
    raw = answers_for(opened.spec, data)
    general = data.draw(st.text(max_size=30))
    response = submit(runtime.form_url(opened), raw, generalNotes=general, specVersion=1)
    assert response.status == 200, response.body
    result = wait_for_result(runtime, opened.id, timeout=5)
    expected = askrich.check_submission(opened.spec, {"answers": raw})["answers"]
    for row in result["answers"]:
        want = expected[row["id"]]
        assert row["status"] == want["status"]
        assert row["selected"] == want["selected"]
        assert row["other"] == want["other"]
        assert row["ranked"] == want["ranked"]
        assert row["optionTexts"] == want["optionTexts"]
        assert row["notes"] == ((raw.get(row["id"], {}).get("notes") or "").strip() or None)
    assert result["generalNotes"] == (general.strip() or None)
    counts = result["counts"]
    assert sum(counts.values()) == len(questions)
    # The archived copy, read back, is the same result.
    assert askrich.archived_result(runtime.archive.find(opened.id)) == result


@pytest.mark.parametrize("status", ["declined", "cancelled"])
def test_an_interview_settles_once_and_its_state_follows_the_result_status(runtime, status):
    form = runtime.open_interview(interview(choice("q", "a", "b")))
    unanswered = {"q": askrich.unanswered()}
    first = runtime.hub.settle_without_form(form, unanswered, status, "elicitation")
    assert first["status"] == status
    assert runtime.hub.settle_without_form(form, unanswered, "submitted", "elicitation") is None
    assert http_request(api_url(runtime.form_url(form), "state")).json()["state"] == status
    late = submit(runtime.form_url(form), {"q": {"selected": ["a"]}})
    assert late.status == 409 and late.json() == {"error": "interview already %s" % status, "code": "not-pending"}
    assert wait_for_result(runtime, form.id, 1)["status"] == status


def test_a_cancelled_waiter_leaves_the_interview_pending_and_uncounted(runtime):
    form = runtime.open_interview(interview(choice("q", "a", "b")))
    cancellation = askrich.Cancellation()
    outcome = []
    with form.waiter(cancellation) as waiter:
        assert http_request(api_url(runtime.form_url(form), "state")).json()["waiting"] is True
        thread = threading.Thread(target=lambda: outcome.append(waiter.wait()))
        thread.start()
        cancellation.cancel()
        thread.join(5)
    assert outcome == ["cancelled"]
    assert http_request(api_url(runtime.form_url(form), "state")).json() == {"state": "pending", "waiting": False, "version": 1}


def test_progress_is_reported_at_once_and_never_after_the_wait_returns(runtime):
    form = runtime.open_interview(interview(choice("q", "a", "b")))
    reports = []
    done = threading.Event()

    def report(facts, first):
        reports.append((facts["answered"], first, done.is_set()))
        if len(reports) == 3:
            submit(runtime.form_url(form), {"q": {"selected": ["a"]}})

    result, why = runtime.hub.wait(form, timeout=10, report=report, interval=0.01)
    done.set()
    assert why == "settled" and result["status"] == "submitted"
    assert reports[0] == (0, True, False)
    assert all(not first for _, first, _ in reports[1:])
    assert not any(after for _, _, after in reports)
