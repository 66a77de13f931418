"""Claude Code's own questions through the form: `askrich.py hook ask-user-question`, the
PreToolUse hook on the built-in AskUserQuestion (tests/README.md, "Claude Code's own questions").

The mapping both ways is pure and tested as such; then the command as Claude Code runs it, in a
subprocess, answered through the real form server. The real Claude Code session is in
tests/sessions/test_sessions_hook.py."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

import askrich
from helpers.inbox_support import free_port, read_key
from helpers.notices_support import PushServer
from helpers.support import (ASK_USER_QUESTION, ASKED_DB, ASKED_LANGS, MODULE, WAIT, EventsReader, api_url,
                     http_request, submit)

DB, LANGS, TOOL_INPUT = ASKED_DB, ASKED_LANGS, ASK_USER_QUESTION


def hook_input(tool_input=TOOL_INPUT, cwd="/tmp", **changes):
    payload = {"session_id": "32414482-3aea-4b22-8560-090a94138aee", "transcript_path": "/tmp/t.jsonl",
               "cwd": cwd, "permission_mode": "default", "hook_event_name": "PreToolUse",
               "tool_name": "AskUserQuestion", "tool_input": tool_input, "tool_use_id": "toolu_0002"}
    payload.update(changes)
    return payload


def settled(tool_input, answers, general=None, declined=False):
    """The result that the form's submit of `answers` (the form's raw answers) gives."""
    spec, _ = askrich.validate_interview(askrich.interview_from_ask_user_question(tool_input))
    submission = askrich.check_submission(spec, {"answers": answers, "generalNotes": general,
                                                 "declined": declined})
    return askrich.build_result(spec, submission["answers"], general, interview_id="0123456789ab",
                                status=submission["status"], via="browser", submitted_at=0,
                                duration_seconds=1, attachments=None, archive_path=None)


# -- the questions, as an interview -------------------------------------------------------------

def test_each_question_becomes_a_form_question_with_its_options_preview_recommendation_and_other():
    arguments = askrich.interview_from_ask_user_question(TOOL_INPUT)
    spec, _ = askrich.validate_interview(arguments)  # a valid interview, as the form serves it
    assert spec["title"] == "Database · Langs"
    db, langs = spec["questions"]
    assert (db["id"], db["header"], db["multiSelect"], db["allowOther"]) == ("Database", DB, False, True)
    assert [(o["label"], o["description"]) for o in db["options"]] == [
        ("Postgres (Recommended)", "Row store we run already"), ("MySQL", "Ops knows it")]
    assert db["recommended"] == ["o1"]
    # The built-in shows a preview in a monospace box: a fenced block keeps its lines.
    assert db["options"][0]["preview"] == "```text\n+--------+\n| orders |\n+--------+\n```"
    assert (langs["id"], langs["multiSelect"], langs["allowOther"]) == ("Langs", True, True)
    assert [o["label"] for o in langs["options"]] == ["Python", "Go", "Rust"]


def test_a_preview_with_its_own_fences_is_markdown_and_chips_that_slug_to_nothing_get_numbers():
    tool_input = {"questions": [
        {"question": "どれ？", "header": "選択", "multiSelect": False, "options": [
            {"label": "A", "description": "", "preview": "```py\nx = 1\n```"}, {"label": "B", "description": "b"}]},
        {"question": "もう一つ？", "header": "選択", "multiSelect": False, "options": [
            {"label": "C", "description": "c"}, {"label": "D", "description": "d"}]}]}
    arguments = askrich.interview_from_ask_user_question(tool_input)
    assert [q["id"] for q in arguments["questions"]] == ["q1", "q2"]
    assert arguments["title"] == "選択 · 選択"
    assert arguments["questions"][0]["options"][0] == {"id": "o1", "label": "A", "preview": "```py\nx = 1\n```"}


def test_more_than_the_built_ins_limits_is_still_one_interview():
    many = {"questions": [{"question": "Question %d?" % n, "header": "A chip longer than twelve", "multiSelect": False,
                           "options": [{"label": "Option %d" % k, "description": "d"} for k in range(9)]}
                          for n in range(7)]}
    spec, _ = askrich.validate_interview(askrich.interview_from_ask_user_question(many))
    assert len(spec["questions"]) == 7 and all(len(q["options"]) == 9 for q in spec["questions"])
    assert [q["id"] for q in spec["questions"]][:3] == ["A-chip-longer-than-twelve", "A-chip-longer-than-twelve-2",
                                                         "A-chip-longer-than-twelve-3"]


@pytest.mark.parametrize("tool_input", [
    None, [], {}, {"questions": []}, {"questions": "x"}, {"questions": [{"header": "No text"}]},
    {"questions": [{"question": " ", "header": "h", "options": []}]},
    {"questions": [{"question": "Q?", "options": [{"description": "no label"}]}]},
    {"questions": [{"question": "Q?", "options": "A, B"}]},
])
def test_input_that_is_not_an_ask_user_question_call_is_refused(tool_input):
    with pytest.raises(askrich.HookInputUnfit):
        askrich.interview_from_ask_user_question(tool_input)


# -- the answers, as the hook's output ----------------------------------------------------------

def test_single_and_multi_select_answers_with_notes_and_the_chosen_preview():
    result = settled(TOOL_INPUT, {"Database": {"selected": ["o1"], "notes": 'Keep "orders" small.'},
                                  "Langs": {"selected": ["o1", "o3"]}})
    output = askrich.ask_user_question_answer(TOOL_INPUT, result)
    assert output == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "updatedInput": {"questions": TOOL_INPUT["questions"],
                         "answers": {DB: "Postgres (Recommended)", LANGS: "Python, Rust"},
                         "annotations": {DB: {"notes": 'Keep "orders" small.',
                                              "preview": "+--------+\n| orders |\n+--------+"}}}}}


def test_an_other_text_is_the_answer_itself_and_general_notes_ride_on_the_first_question():
    result = settled(TOOL_INPUT, {"Database": {"other": "SQLite, for now"},
                                  "Langs": {"selected": ["o2"], "other": "Zig"}}, general="Ship it by Friday.")
    update = askrich.ask_user_question_answer(TOOL_INPUT, result)["hookSpecificOutput"]["updatedInput"]
    assert update["answers"] == {DB: "SQLite, for now", LANGS: "Go, Zig"}
    assert update["annotations"] == {DB: {"notes": "General notes: Ship it by Friday."}}


def test_deferred_needs_info_and_unanswered_questions_say_so_in_words_the_model_reads():
    three = {"questions": TOOL_INPUT["questions"] + [
        {"question": "And a third?", "header": "Third", "multiSelect": False,
         "options": [{"label": "X", "description": "x"}, {"label": "Y", "description": "y"}]}]}
    result = settled(three, {"Database": {"status": "defer"},
                             "Langs": {"status": "needs-info", "notes": "Which platforms?"}})
    update = askrich.ask_user_question_answer(three, result)["hookSpecificOutput"]["updatedInput"]
    assert update["answers"] == {DB: askrich.HOOK_OPEN_ANSWERS["deferred"],
                                 LANGS: askrich.HOOK_OPEN_ANSWERS["needs-info"],
                                 "And a third?": askrich.HOOK_OPEN_ANSWERS["unanswered"]}
    assert update["annotations"] == {LANGS: {"notes": "Which platforms?"}}


def test_a_skipped_interview_is_a_refusal_that_says_so_with_the_persons_reason():
    result = settled(TOOL_INPUT, {}, general="Not now, in a meeting.", declined=True)
    assert askrich.ask_user_question_answer(TOOL_INPUT, result) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "The person skipped these questions in the ask-user-rich form, saying: "
                                    "Not now, in a meeting.."}}
    bare = askrich.ask_user_question_answer(TOOL_INPUT, settled(TOOL_INPUT, {}, declined=True))
    assert bare["hookSpecificOutput"]["permissionDecisionReason"] == \
        "The person skipped these questions in the ask-user-rich form."


# -- the command, in this process -----------------------------------------------------------------

def run_main(args, stdin_text, monkeypatch, log_dir):
    monkeypatch.setenv("ASK_USER_RICH_LOG_DIR", str(log_dir))
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin_text))
    return askrich.main(["hook", "ask-user-question"] + args)


def test_off_until_enabled_and_off_again_and_doctor_says_which(tmp_path, monkeypatch, capsys):
    assert run_main([], json.dumps(hook_input()), monkeypatch, tmp_path) == 0
    assert capsys.readouterr().out == ""  # off: Claude Code asks in its terminal
    assert run_main(["--enable"], "", monkeypatch, tmp_path) == 0
    assert "now open in ask-user-rich's form" in capsys.readouterr().out
    assert os.path.isfile(tmp_path / askrich.HOOK_SWITCH)
    config = askrich.Config(log_dir=str(tmp_path))
    assert askrich._doctor_hook(config, askrich.hook_kinds()["ask-user-question"]).startswith("AskUserQuestion hook: on")
    assert run_main(["--disable"], "", monkeypatch, tmp_path) == 0
    assert "asked in its terminal again" in capsys.readouterr().out
    assert askrich._doctor_hook(config, askrich.hook_kinds()["ask-user-question"]).startswith("AskUserQuestion hook: off")


@pytest.mark.parametrize("stdin_text", [
    "", "{", "[]", json.dumps(hook_input(tool_name="Bash", tool_input={"command": "ls"})),
    json.dumps(hook_input(hook_event_name="PostToolUse")), json.dumps(hook_input(tool_input={"questions": []})),
])
def test_anything_wrong_exits_0_with_no_output_so_claude_code_asks_itself(stdin_text, tmp_path, monkeypatch, capsys):
    (tmp_path / askrich.HOOK_SWITCH).write_text("on")
    assert run_main([], stdin_text, monkeypatch, tmp_path) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "Claude Code asks in the terminal" in captured.err


def test_no_form_server_exits_0_with_no_output(tmp_path, monkeypatch, capsys):
    (tmp_path / askrich.HOOK_SWITCH).write_text("on")
    monkeypatch.setenv("ASK_USER_RICH_HOST", "192.0.2.1")  # an address this machine cannot bind
    assert run_main([], json.dumps(hook_input()), monkeypatch, tmp_path) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "could not start the form server" in captured.err


def test_bad_arguments_are_usage_errors(tmp_path, monkeypatch, capsys):
    for args in (["--timeout"], ["--timeout", "soon"], ["--timeout", "0"], ["--bogus"]):
        assert run_main(args, "", monkeypatch, tmp_path) == 2
    assert askrich.main(["hook", "other-tool"]) == 2


# -- the command, as Claude Code runs it ----------------------------------------------------------

class HookProcess:
    """`askrich.py hook <hook>` (turned on) fed one call on stdin (`payload`: JSON, or bytes as
    they are); its stderr as it comes."""

    def __init__(self, tmp_path, payload, args=(), env=None, hook="ask-user-question", switch=askrich.HOOK_SWITCH):
        log_dir = self.log_dir = tmp_path / "logs"
        log_dir.mkdir(exist_ok=True)
        (log_dir / switch).write_text("on")
        settings = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(log_dir), ASK_USER_RICH_OPEN="0",
                        ASK_USER_RICH_INBOX_PORT="0")
        settings.update(env or {})
        self.started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, MODULE, "hook", hook] + list(args),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env=settings)
        self.process.stdin.write(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
        self.process.stdin.close()
        self.err = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in iter(self.process.stderr.readline, b""):
            with self.changed:
                self.err.append(line.decode("utf-8", "replace"))
                self.changed.notify_all()

    def wait_err(self, pattern):
        """The first match of `pattern` in stderr, waiting for it."""
        with self.changed:
            found = self.changed.wait_for(lambda: re.search(pattern, "".join(self.err)), WAIT)
            assert found, "no %r on stderr: %s" % (pattern, "".join(self.err))
            return found.group()

    def form_url(self):
        return self.wait_err(r"http://localhost:\d+/s/[A-Za-z0-9_-]+")

    def inbox_rows(self, port):
        """The inbox's rows, once this hook holds the inbox on `port`."""
        self.wait_err(r"inbox-holding port=%d" % port)
        listing = http_request("http://127.0.0.1:%d/api/inbox/%s" % (port, read_key(self.log_dir)),
                               headers={"Host": "localhost:%d" % port}).json()
        return listing["interviews"]


    def finish(self):
        out = self.process.stdout.read()
        self.process.wait(WAIT)
        self.reader.join(WAIT)
        return self.process.returncode, out.decode("utf-8")


def through_inbox_and_push(port, push):
    """A hook's settings for the inbox on `port` and push notices to the PushServer `push`."""
    return {"ASK_USER_RICH_INBOX_PORT": str(port), "ASK_USER_RICH_NOTIFY": "push",
            "ASK_USER_RICH_PUSH_URL": push.url("/hook")}


def test_the_hook_asks_in_the_form_and_prints_the_answers_as_claude_code_takes_them(tmp_path):
    # Through the inbox (its own port) and a push notice, as any waiting call: both name the
    # agent Claude Code and the project folder of the hook's cwd.
    work = tmp_path / "project"
    work.mkdir()
    port = free_port()
    with PushServer() as push:
        hook = HookProcess(tmp_path, hook_input(cwd=str(work)), env=through_inbox_and_push(port, push))
        try:
            url = hook.form_url()
            served = http_request(api_url(url)).json()
            assert served["agent"] == "Claude Code" and served["spec"]["title"] == "Database · Langs"
            assert [q["header"] for q in served["spec"]["questions"]] == [DB, LANGS]
            notice = json.loads(push.wait_request()["body"])
            assert (notice["agent"], notice["project"], notice["questions"]) == ("Claude Code", str(work), 2)
            [row] = hook.inbox_rows(port)
            assert (row["agent"], row["project"], row["title"]) == ("Claude Code", str(work), "Database · Langs")
            reply = submit(url, {"Database": {"selected": ["o2"], "notes": "Ops knows MySQL better."},
                                 "Langs": {"selected": ["o1", "o3"], "other": "Zig"}})
            assert reply.status == 200, reply.body
        finally:
            code, out = hook.finish()
    assert code == 0
    # Exactly one line of JSON: what Claude Code parses from a hook's stdout.
    assert out.endswith("\n") and out.count("\n") == 1
    assert json.loads(out) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "updatedInput": {"questions": TOOL_INPUT["questions"],
                         "answers": {DB: "MySQL", LANGS: "Python, Rust, Zig"},
                         "annotations": {DB: {"notes": "Ops knows MySQL better."}}}}}


def test_a_skip_in_the_form_refuses_the_tool_with_the_reason(tmp_path):
    hook = HookProcess(tmp_path, hook_input())
    try:
        reply = submit(hook.form_url(), {}, declined=True, generalNotes="Ask me tomorrow.")
        assert reply.status == 200, reply.body
    finally:
        code, out = hook.finish()
    assert code == 0 and json.loads(out)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "The person skipped these questions in the ask-user-rich form, saying: "
                                    "Ask me tomorrow.."}


def test_before_its_timeout_the_hook_gives_the_questions_back_and_the_form_says_so(tmp_path):
    # --timeout 8: Claude Code's limit for the hook; it stops waiting a quarter earlier (6 s).
    hook = HookProcess(tmp_path, hook_input(), ["--timeout", "8"])
    try:
        events = EventsReader(api_url(hook.form_url(), "events"), "state")
        try:
            ended = events.wait_for(lambda s: s["state"] != "pending", 8 + WAIT, "the interview ending")
        finally:
            events.close()
    finally:
        code, out = hook.finish()
    assert (ended["state"], ended.get("handedBack")) == ("cancelled", True), ended
    assert code == 0 and out == ""  # Claude Code shows its own question


def test_two_questions_with_the_same_text_leave_claude_code_to_ask(tmp_path, monkeypatch, capsys):
    """Claude Code keys the answers by the question's text: two alike would lose one answer."""
    twice = {"questions": [dict(ASK_USER_QUESTION["questions"][0]), dict(ASK_USER_QUESTION["questions"][0], header="Again")]}
    (tmp_path / askrich.HOOK_SWITCH).write_text("on")
    assert run_main([], json.dumps(hook_input(tool_input=twice)), monkeypatch, tmp_path) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "same text" in captured.err


def test_the_timeout_holds_for_20000_questions(tmp_path):
    import time

    many = {"questions": [{"question": "Question %d?" % n, "header": "Q%d" % n, "multiSelect": False,
                           "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}]}
                          for n in range(20000)]}
    started = time.monotonic()
    hook = HookProcess(tmp_path, hook_input(tool_input=many), ["--timeout", "4"])
    code, out = hook.finish()
    assert code == 0 and out == ""
    assert time.monotonic() - started < 4


def test_a_sigterm_from_claude_code_ends_the_hook_silently_and_cancels_the_form(tmp_path):
    import signal

    hook = HookProcess(tmp_path, hook_input())
    try:
        events = EventsReader(api_url(hook.form_url(), "events"), "state")
        try:
            events.wait_for(lambda s: s["waiting"], WAIT, "the hook waiting")
            hook.process.send_signal(signal.SIGTERM)
            ended = events.wait_for(lambda s: s["state"] != "pending", WAIT, "the interview ending")
        finally:
            events.close()
    finally:
        code, out = hook.finish()
    assert ended["state"] == "cancelled" and "handedBack" not in ended, ended
    assert code == 0 and out == ""


def test_the_readme_turns_the_hook_on_and_off_with_the_commands_tested_here():
    with open(os.path.join(os.path.dirname(MODULE), "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "ask-user-rich-marketplace/ask-user-rich/askrich.pyz \\\n  hook ask-user-question --enable" in readme
    assert "--disable" in readme and "`PreToolUse` hook on `AskUserQuestion`" in readme


def test_under_the_recommended_policy_the_hook_takes_the_option_labelled_recommended(tmp_path):
    hook = HookProcess(tmp_path, hook_input(), env={"ASK_USER_RICH_AWAY": "recommended",
                                                   "ASK_USER_RICH_AWAY_AFTER": "0.02"})
    hook.form_url()
    code, out = hook.finish()
    assert code == 0
    update = json.loads(out)["hookSpecificOutput"]["updatedInput"]
    # Langs has no option labelled (Recommended): it stays open.
    assert update["answers"] == {DB: "Postgres (Recommended)", LANGS: askrich.HOOK_OPEN_ANSWERS["unanswered"]}
    assert update["annotations"][DB]["notes"] == (
        "Nobody answered within 0.02 minutes: the person's away policy took this recommendation; "
        "the person did not choose it.")


def test_under_the_decline_policy_the_hook_refuses_the_tool_saying_nobody_answered(tmp_path):
    hook = HookProcess(tmp_path, hook_input(), env={"ASK_USER_RICH_AWAY": "decline", "ASK_USER_RICH_AWAY_AFTER": "0.02"})
    hook.form_url()
    code, out = hook.finish()
    assert code == 0
    assert json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"] == (
        "Nobody answered within 0.02 minutes (the person's away policy).")
