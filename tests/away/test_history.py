"""The record of who decided (CONTRACT.md §20, "History"): `askrich.py history [QUERY] [--json]
[--limit N]` newest first, with and without a query, as JSON and as text; and the inbox's
history routes, behind the inbox's own key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from helpers.inbox_support import free_port, read_key
from helpers.support import MODULE, WAIT, LogWatch, askrich, choice, http_request, interview, quiet_runtime, submit


def decide_three(log_dir):
    """Oldest first: the person's submit, a permission decision, one the away policy took."""
    rt = quiet_runtime(log_dir)
    try:
        mine = rt.open_interview(interview(choice("db", "pg", "my"), title="Pick a database"), agent="Codex")
        submit(rt.form_url(mine), {"db": {"selected": ["my"], "notes": "Ops knows MySQL"}})
        time.sleep(0.002)  # the archive's names order by the settle's millisecond
        rt.archive.save({"interviewId": "0123456789ab", "title": "Claude Code wants to run a command",
                         "status": "submitted", "submittedAt": askrich.iso_utc(time.time()), "via": "browser",
                         "counts": {}, "answers": [], "agent": "Claude Code", "project": "/work/shop",
                         "kind": "permission",
                         "permission": {"tool": "Bash", "input": {"command": "make deploy"}, "decision": "allow",
                                        "suggestion": None, "reason": None, "where": "door",
                                        "answeredAt": askrich.iso_utc(time.time())}})
        time.sleep(0.002)
        spec, options = askrich.validate_interview(interview(choice("color", "red", "blue", recommended="red"),
                                                             title="Pick a colour"))
        away = rt.hub.create(spec, options, agent="Claude Code", away=("recommended", 30))
        rt.hub.settle_by_policy(away)
        return mine.id, away.id
    finally:
        rt.close()


def history(log_dir, *args):
    done = subprocess.run([sys.executable, MODULE, "history", *args], capture_output=True, timeout=WAIT,
                          env=dict(os.environ, ASK_USER_RICH_LOG_DIR=str(log_dir)))
    return done.returncode, done.stdout.decode("utf-8")


def test_history_lists_newest_first_as_json_with_who_decided(tmp_path):
    mine, away = decide_three(tmp_path / "logs")
    code, out = history(tmp_path / "logs", "--json")
    assert code == 0
    entries = json.loads(out)["history"]
    assert [(e["interviewId"], e["kind"], e["outcome"], e["decidedBy"]) for e in entries] == [
        (away, "interview", "submitted", "away-policy"),
        ("0123456789ab", "permission", "allow", "person"),
        (mine, "interview", "submitted", "person"),
    ]
    assert (entries[0]["agent"], entries[0]["project"], entries[0]["title"]) == ("Claude Code", os.getcwd(),
                                                                                 "Pick a colour")
    assert entries[1]["tool"] == "Bash"
    assert all(os.path.isfile(e["archivePath"]) for e in entries)


def test_a_query_searches_titles_questions_and_answers_and_limit_cuts(tmp_path):
    mine, away = decide_three(tmp_path / "logs")
    for query, found in (("mysql", [mine]), ("Question color", [away]), ("make deploy", ["0123456789ab"]),
                         ("PICK", [away, mine]), ("nothing like it", [])):
        code, out = history(tmp_path / "logs", "--json", *query.split())
        assert code == 0
        assert [e["interviewId"] for e in json.loads(out)["history"]] == found, query
    code, out = history(tmp_path / "logs", "--limit", "1", "--json")
    assert [e["interviewId"] for e in json.loads(out)["history"]] == [away]


def test_history_as_text_is_one_line_each_and_says_who_decided(tmp_path):
    decide_three(tmp_path / "logs")
    code, out = history(tmp_path / "logs")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    assert "submitted, 1 answered  by the away policy  Claude Code · " in lines[0] and lines[0].endswith('"Pick a colour"')
    assert "allow Bash  by the person  Claude Code · shop" in lines[1]
    assert lines[2].endswith('"Pick a database"') and "by the person  Codex" in lines[2]
    code, out = history(tmp_path / "logs", "zebra")
    assert (code, out) == (0, 'Nothing decided yet matches "zebra".\n')


@pytest.mark.parametrize("args", [["--limit"], ["--limit", "0"], ["--jsn"]])
def test_bad_history_arguments_are_usage_errors(tmp_path, args):
    code, _ = history(tmp_path / "logs", *args)
    assert code == 2


def test_the_inbox_serves_the_history_under_its_key_only(tmp_path):
    mine, away = decide_three(tmp_path / "logs")
    port = free_port()
    watch = LogWatch()
    rt = quiet_runtime(tmp_path / "logs", watch, inbox_port=port)
    try:
        rt.open_interview(interview(title="Keeps the inbox held"))
        watch.wait_for("inbox-holding")
        key = read_key(tmp_path / "logs")
        host = {"Host": "localhost:%d" % port}
        base = "http://127.0.0.1:%d" % port
        listing = http_request("%s/api/inbox/%s/history?q=mysql" % (base, key), headers=host)
        assert listing.status == 200 and [e["interviewId"] for e in listing.json()["history"]] == [mine]
        entry = http_request("%s/api/inbox/%s/history/%s" % (base, key, away), headers=host).json()
        assert [(a["id"], a["by"], a["selectedLabels"]) for a in entry["answers"]] == [("color", "away-policy", ["RED"])]
        assert http_request("%s/api/inbox/%s/history" % (base, "x" * len(key)), headers=host).status == 404
        assert http_request("%s/inbox/history" % base, headers=host).status == 404  # no session
        assert http_request("%s/api/inbox/%s/history/ffffffffffff" % (base, key), headers=host).status == 404
    finally:
        rt.close()


def test_a_damaged_archive_record_costs_only_itself(tmp_path):
    mine, _ = decide_three(tmp_path / "logs")
    runtime = quiet_runtime(tmp_path / "logs")
    try:
        runtime.archive.save({"interviewId": "ffffffffffff", "submittedAt": askrich.iso_utc(time.time()),
                              "title": 7, "answers": {"x": 1}, "kind": "permission", "permission": "yes"})
        runtime.archive.save({"interviewId": "eeeeeeeeeeee", "submittedAt": askrich.iso_utc(time.time() + 1),
                              "answers": [{"selectedLabels": 3, "optionTexts": ["a"], "header": None}]})
    finally:
        runtime.close()
    code, out = history(tmp_path / "logs", "--json", "mysql")
    assert code == 0 and [e["interviewId"] for e in json.loads(out)["history"]] == [mine]
    code, out = history(tmp_path / "logs")
    assert code == 0 and len(out.splitlines()) == 5
