"""The command line: main(argv) in-process, demo/ask as a user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import pytest

import askrich
from helpers.support import MODULE, WAIT, api_url, http_request, interview, quiet_runtime, submit, wait_for_result


def test_version_prints_the_version_and_help_names_every_command_and_option(capsys):
    assert askrich.main(["--version"]) == 0
    assert capsys.readouterr().out == "ask-user-rich %s\n" % askrich.__version__
    assert askrich.main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("demo", "ask FILE.json", "doctor", "--link", "--no-open", "--verbose", "exit codes"):
        assert word in out


def test_usage_errors_exit_2(capsys):
    assert askrich.main(["frobnicate"]) == 2
    assert "unknown arguments: frobnicate" in capsys.readouterr().err
    assert askrich.main(["ask"]) == 2
    assert askrich.main(["demo", "--bogus"]) == 2


def test_a_bad_interview_file_exits_2_with_the_problem_list(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"title": "T", "questions": [{"id": "a", "header": "A", "kind": "rank"}]}))
    assert askrich.main(["ask", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Invalid interview:\n")
    assert "a rank question needs at least 2 options to order (it has 0)" in err
    (tmp_path / "broken.json").write_text("{")
    assert askrich.main(["ask", str(tmp_path / "broken.json")]) == 2
    assert askrich.main(["ask", str(tmp_path / "missing.json")]) == 2


def run_cli(tmp_path, args, answers, stdin=None):
    """Run askrich.py like a user, answer through HTTP once the link is printed."""
    env = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"), ASK_USER_RICH_OPEN="0")
    process = subprocess.Popen(
        [sys.executable, MODULE, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env,
    )
    if stdin is not None:
        process.stdin.write(stdin.encode())
    process.stdin.close()
    found = {"stderr": []}

    def watch_stderr():
        for line in iter(process.stderr.readline, b""):
            found["stderr"].append(line.decode("utf-8"))
            match = re.search(rb"http://localhost:\d+/s/[A-Za-z0-9_-]+", line)
            if match and "url" not in found:
                found["url"] = match.group().decode()
                found["response"] = submit(found["url"], answers)

    watcher = threading.Thread(target=watch_stderr, daemon=True)
    watcher.start()
    out = process.stdout.read()  # until the process exits (pytest's timeout bounds it)
    process.wait(10)
    watcher.join(5)
    return process.returncode, out, found


def test_demo_asks_the_built_in_interview_and_prints_the_result(tmp_path):
    code, out, found = run_cli(tmp_path, ["demo", "--link"], {
        "db": {"selected": ["pg"]},
        "goals": {"ranked": ["speed", "cost", "looks"]},
        "issue": {"selected": ["upgrade"], "optionTexts": {"upgrade": "https://example.com/1"}},
    })
    assert found["response"].status == 200
    assert code == 0
    result = json.loads(out)
    assert result["status"] == "submitted" and result["title"].startswith("Demo")
    assert result["counts"]["answered"] == 3
    assert result["answers"][3]["optionTexts"] == {"upgrade": "https://example.com/1"}


LOG_LINE = re.compile(r"^\[ask-user-rich\] \d{4}-\d\d-\d\dT[\d:.]+Z \d+ ")


def test_demo_shows_the_person_the_link_and_human_lines_only_and_logs_to_server_log(tmp_path):
    code, out, found = run_cli(tmp_path, ["demo", "--link"], {"db": {"selected": ["pg"]}})
    assert code == 0 and json.loads(out)["status"] == "submitted"
    shown = found["stderr"]
    assert shown[:4] == ["\n", 'The interview "Demo: plan the notes app" is at:\n', "  %s\n" % found["url"], "\n"]
    # Then only the wait's own words (at once, then every 15 s), never a line of the log.
    assert all(line.startswith('[ask-user-rich] Waiting for answers to "Demo') for line in shown[4:]), shown
    assert not [line for line in shown if LOG_LINE.match(line)], shown
    with open(tmp_path / "logs" / "server.log", encoding="utf-8") as log:
        kept = log.read()
    assert " http-started " in kept and " session-created " in kept and " submitted " in kept


def test_demo_verbose_shows_the_log_lines_on_the_terminal_too(tmp_path):
    code, out, found = run_cli(tmp_path, ["demo", "--link", "--verbose"], {"db": {"selected": ["pg"]}})
    assert code == 0 and json.loads(out)["status"] == "submitted"
    logged = [line.split()[3] for line in found["stderr"] if LOG_LINE.match(line)]
    assert "http-started" in logged and "session-created" in logged, found["stderr"]


def test_closing_waits_for_the_reply_of_the_submit_that_settled_the_interview(tmp_path, monkeypatch):
    # demo and ask print the result and exit the moment the interview settles, and the submit's
    # reply is written after that: closing must wait for it, or the page hears that the server
    # went away although its answers were delivered. The reply is held until the server stopped
    # serving, and then until close() returned (at most a second): a close that does not wait
    # for it returns first.
    monkeypatch.setattr(askrich, "REPLY_DRAIN_SECONDS", WAIT, raising=False)
    runtime = quiet_runtime(tmp_path / "logs")
    form = runtime.open_interview(interview())
    stopped, closed = threading.Event(), threading.Event()
    order = []
    send_reply, stop_serving = askrich.FormRequestPlumbing.send_reply, askrich.stop_serving

    def held_reply(handler, reply):
        if handler.path.endswith("/submit"):
            assert stopped.wait(WAIT), "the server never stopped serving"
            closed.wait(1.0)
        send_reply(handler, reply)
        order.append("reply sent")

    def stop_then_tell(server, *args, **kwargs):
        stop_serving(server, *args, **kwargs)
        stopped.set()

    monkeypatch.setattr(askrich.FormRequestPlumbing, "send_reply", held_reply)
    monkeypatch.setattr(askrich, "stop_serving", stop_then_tell)
    replies = []
    poster = threading.Thread(target=lambda: replies.append(submit(runtime.form_url(form), {"q": {"selected": ["a"]}})))
    poster.start()
    try:
        assert wait_for_result(runtime, form.id, WAIT)["status"] == "submitted"
        runtime.close()
        order.append("closed")
    finally:
        stopped.set()
        closed.set()
        poster.join(WAIT)
    assert replies and replies[0].status == 200, replies
    assert order == ["reply sent", "closed"]


def test_ask_reads_an_interview_from_stdin(tmp_path):
    interview = {"title": "From stdin", "questions": [{"id": "q", "header": "Q?"}]}
    code, out, found = run_cli(tmp_path, ["ask", "-", "--no-open"], {"q": {"other": "typed"}},
                               stdin=json.dumps(interview))
    assert code == 0
    assert json.loads(out)["answers"][0]["other"] == "typed"


def test_the_demo_uses_every_feature():
    spec, _ = askrich.validate_interview(json.loads(askrich.read_asset("demo.json")))
    questions = spec["questions"]
    assert spec["intro"]
    assert any(q["kind"] == "rank" for q in questions)
    assert any(q["multiSelect"] for q in questions)
    assert any(q["dependsOn"] for q in questions)
    assert any(not q["options"] for q in questions)
    assert any(not q["allowOther"] for q in questions)
    options = [o for q in questions for o in q["options"]]
    assert any(o["preview"] for o in options) and any(o["description"] for o in options)
    assert any(o["textInput"] and o["textInput"]["required"] for o in options)
    assert all(q["rationale"] for q in questions if q["recommended"] and q["kind"] == "rank")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_opening_the_inbox_from_the_command_leaves_no_descriptor_open(tmp_path, capsys):
    # The command may run many times in one process (tests, a host driving main()): the log it
    # opens only to record the opener's outcome is closed again.
    config = askrich.Config(log_dir=str(tmp_path), open_browser=False)
    before = set(os.listdir("/proc/self/fd"))
    askrich._show_inbox("http://127.0.0.1:9/inbox/KEY", True, config, None)
    assert set(os.listdir("/proc/self/fd")) == before
    assert "Could not open the browser" in capsys.readouterr().err
