"""Permission asks through the form: `askrich.py hook permission-request`, the PermissionRequest
hook of Claude Code and Codex (tests/README.md, "Permission asks").

What the ask shows and what each answer prints are pure and tested as such; then the command as
the CLIs run it, in a subprocess, answered through the real form server, through the session's
transcript (answered in the terminal first), or ended by a stop, a timeout or bad input. The real
sessions are in tests/sessions/test_sessions_permission.py."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time

import pytest

import askrich
from helpers.inbox_support import free_port
from helpers.notices_support import PushServer
from helpers.support import WAIT, EventsReader, api_url, http_request, submit
from test_hook import HookProcess, through_inbox_and_push

FOLDER = "/home/dev/shop"
SUGGESTIONS = [{"type": "addDirectories", "directories": [FOLDER], "destination": "session"},
               {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
COMMAND = {"command": "npm test -- --watch=false", "description": "Run the test suite"}


def request(tool_name="Bash", tool_input=None, **changes):
    """A PermissionRequest as Claude Code 2.1.328 sends it (seen in a real session)."""
    payload = {"session_id": "32414482-3aea-4b22-8560-090a94138aee", "transcript_path": "/tmp/none.jsonl",
               "cwd": FOLDER, "permission_mode": "default", "hook_event_name": "PermissionRequest",
               "tool_name": tool_name, "tool_input": COMMAND if tool_input is None else tool_input,
               "permission_suggestions": SUGGESTIONS}
    payload.update(changes)
    return payload


def asked(payload):
    """(the validated spec, the internal options) of the ask the hook would open."""
    arguments, internal = askrich.permission_interview(askrich.PermissionRequest(payload))
    spec, _ = askrich.validate_interview(arguments)
    return spec, internal


def settled(payload, answer, declined=False):
    spec, _ = asked(payload)
    submission = askrich.check_submission(spec, {"answers": {"permission": answer} if answer else {},
                                                 "declined": declined})
    return askrich.build_result(spec, submission["answers"], None, interview_id="0123456789ab",
                                status=submission["status"], via="browser", submitted_at=0,
                                duration_seconds=1, attachments=None, archive_path=None)


# -- the ask ------------------------------------------------------------------------------------

def test_a_command_is_shown_in_a_code_block_with_its_description_folder_and_the_choices_in_order():
    spec, internal = asked(request())
    [question] = spec["questions"]
    assert question["id"] == "permission" and question["header"] == spec["title"] == \
        "Claude Code wants to run a command"
    assert "```sh\nnpm test -- --watch=false\n```" in question["body"]
    assert "Run the test suite" in question["body"] and "```\n%s\n```" % FOLDER in question["body"]
    assert [(o["id"], o["label"]) for o in question["options"]] == [
        ("allow", "Allow once"), ("always-0", "Allow, and allow this folder"),
        ("always-1", "Allow, and accept edits for this session"), ("deny", "Deny")]
    assert question["options"][1]["description"] == FOLDER + " · For this session only."
    assert question["allowOther"] is False
    assert internal["kind"] == "permission"
    assert internal["permission"]["row"] == {"action": "run", "tool": "Bash", "what": COMMAND["command"]}


def test_an_edit_is_a_diff_a_long_new_file_is_folded_a_url_and_an_mcp_tools_arguments_are_shown():
    edit = asked(request("Edit", {"file_path": "/srv/app.py", "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"}))
    body = edit[0]["questions"][0]["body"]
    assert edit[0]["title"] == "Claude Code wants to edit a file"
    assert "```diff\n--- a/srv/app.py\n+++ b/srv/app.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n```" in body
    multi = asked(request("MultiEdit", {"file_path": "/srv/app.py", "edits": [
        {"old_string": "a = 1", "new_string": "a = 2"}, {"old_string": "b = 1", "new_string": "b = 3"}]}))
    assert "-a = 1\n+a = 2\n@@ -1 +1 @@\n-b = 1\n+b = 3\n```" in multi[0]["questions"][0]["body"]
    lines = "\n".join("line %d" % n for n in range(100))
    write = asked(request("Write", {"file_path": "/srv/new.txt", "content": lines}))[0]["questions"][0]["body"]
    shown, folded = write.split("<details><summary>Show the whole file</summary>")
    assert "line 39\n```" in shown and "line 40" not in shown and "line 40\n" in folded and "line 99" in folded
    fetch = asked(request("WebFetch", {"url": "https://example.com/a?b=1", "prompt": "Find the price"}))[0]
    assert fetch["title"] == "Claude Code wants to fetch a web page"
    assert "```\nhttps://example.com/a?b=1\n```" in fetch["questions"][0]["body"]
    mcp = asked(request("mcp__db__query", {"sql": "DROP TABLE orders"}))[0]
    assert mcp["title"] == "Claude Code wants to use the tool mcp__db__query"
    assert '"sql": "DROP TABLE orders"' in mcp["questions"][0]["body"]
    other = asked(request("NotebookEdit", {"notebook_path": "/a.ipynb", "new_source": "x"}))[0]
    assert other["title"] == "Claude Code wants to use NotebookEdit" and '"new_source": "x"' in other["questions"][0]["body"]


def test_a_command_holding_backticks_cannot_end_its_code_block():
    body = asked(request(tool_input={"command": "echo ```; echo `date`"}))[0]["questions"][0]["body"]
    assert "````sh\necho ```; echo `date`\n````" in body


def test_codex_is_offered_no_always_since_it_refuses_updated_permissions():
    for codex in (request(turn_id="t1", model="gpt-5"), request(transcript_path="/home/u/.codex/sessions/rollout-1.jsonl")):
        spec, internal = asked(codex)
        assert [o["id"] for o in spec["questions"][0]["options"]] == ["allow", "deny"]
        assert spec["title"] == "Codex wants to run a command"
        assert internal["permission"]["form"]["agent"] == "Codex"


# -- the decision ---------------------------------------------------------------------------------

def test_each_choice_is_the_decision_claude_code_takes_and_no_choice_decides_nothing():
    payload = request()
    internal = asked(payload)[1]["permission"]
    choose = lambda answer, **extra: askrich.permission_choice(internal, settled(payload, answer, **extra))  # noqa: E731
    assert choose({"selected": ["allow"]}) == {"behavior": "allow"}
    assert choose({"selected": ["always-1"]}) == {"behavior": "allow", "updatedPermissions": [SUGGESTIONS[1]]}
    assert choose({"selected": ["deny"], "notes": "Not on main."}) == {"behavior": "deny", "message": "Not on main."}
    assert choose({"selected": ["deny"]}) == {"behavior": "deny", "message": "The person denied this in ask-user-rich."}
    # A skip, a deferral or nothing chosen: never an allow; the terminal decides.
    assert choose(None, declined=True) is None
    assert choose({"status": "defer"}) is None and choose({}) is None


# -- notices ----------------------------------------------------------------------------------------

def test_a_desktop_notice_may_show_the_command_cleaned_but_a_push_names_only_the_agent_tool_and_project():
    row = asked(request(tool_input={"command": "rm -rf build\x1b[2J\u202e && make " + "x" * 400}))[1]["permission"]["row"]
    notice = askrich.compose_notice({"title": "x", "questions": []}, "Claude Code", FOLDER, "http://localhost/s/t",
                                    environ={"LANG": "de_DE.UTF-8"}, permission=row)
    assert notice["heading"] == "Claude Code möchte einen Befehl ausführen"
    assert notice["body"] == "Bash · shop" and "rm" not in json.dumps(notice["title"])
    desktop = notice["desktopBody"]
    assert desktop.startswith("rm -rf build[2J") and "\x1b" not in desktop and "\u202e" not in desktop
    assert len(desktop) <= askrich.NOTICE_TEXT_CHARS + len(" · shop")


# -- the command ------------------------------------------------------------------------------------

def run_main(args, stdin_text, monkeypatch, log_dir):
    monkeypatch.setenv("ASK_USER_RICH_LOG_DIR", str(log_dir))
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin_text))
    return askrich.main(["hook", "permission-request"] + args)


def test_off_until_enabled_and_doctor_says_which(tmp_path, monkeypatch, capsys):
    assert run_main([], json.dumps(request()), monkeypatch, tmp_path) == 0
    assert capsys.readouterr().out == ""
    config = askrich.Config(log_dir=str(tmp_path))
    assert askrich._doctor_hook(config, askrich.hook_kinds()["permission-request"]).startswith("Permission hook: off")
    assert run_main(["--enable"], "", monkeypatch, tmp_path) == 0
    assert "Permission asks (may I run this?) now open in ask-user-rich's form" in capsys.readouterr().out
    assert askrich._doctor_hook(config, askrich.hook_kinds()["permission-request"]).startswith("Permission hook: on")
    assert not askrich.hook_is_on(config)  # the AskUserQuestion hook is another switch
    assert run_main(["--disable"], "", monkeypatch, tmp_path) == 0
    assert askrich._doctor_hook(config, askrich.hook_kinds()["permission-request"]).startswith("Permission hook: off")


@pytest.mark.parametrize("stdin_text", [
    "", "not json", "[]", json.dumps(request(hook_event_name="PreToolUse")), json.dumps(request(tool_name=None)),
    json.dumps(request(tool_input={"command": "x" * (1024 * 1024)})),
], ids=["empty", "not-json", "a-list", "another-event", "no-tool", "a-1-MB-input"])
def test_bad_input_exits_0_with_no_output_and_opens_nothing(stdin_text, tmp_path, monkeypatch, capsys):
    (tmp_path / askrich.PERMISSION_SWITCH).write_text("on")
    assert run_main([], stdin_text, monkeypatch, tmp_path) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "the terminal decides" in captured.err
    assert "/s/" not in captured.err and not (tmp_path / "answers").exists()


def test_a_hook_that_cannot_serve_its_form_exits_0_with_no_output_within_5_s(tmp_path):
    hook = HookProcess(tmp_path, request(), hook="permission-request", switch=askrich.PERMISSION_SWITCH,
                       env={"ASK_USER_RICH_HOST": "192.0.2.1"})  # an address this machine cannot bind
    code, out = hook.finish()
    assert code == 0 and out == "" and time.monotonic() - hook.started < 5
    assert "could not start the form server" in "".join(hook.err)


def permission_hook(tmp_path, payload, args=(), env=None):
    return HookProcess(tmp_path, payload, args, env, hook="permission-request", switch=askrich.PERMISSION_SWITCH)


def archived(tmp_path):
    [name] = os.listdir(tmp_path / "logs" / "answers")
    with open(tmp_path / "logs" / "answers" / name, encoding="utf-8") as f:
        return json.load(f)


def test_allowed_always_in_the_form_prints_the_suggestion_as_given_through_the_inbox_and_a_push(tmp_path):
    work = tmp_path / "shop"
    work.mkdir()
    port = free_port()
    with PushServer() as push:
        hook = permission_hook(tmp_path, request(cwd=str(work)), env=through_inbox_and_push(port, push))
        try:
            url = hook.form_url()
            served = http_request(api_url(url)).json()
            assert served["agent"] == "Claude Code" and served["permission"]["action"] == "run"
            sent = push.wait_request()["body"].decode("utf-8")
            assert "npm" not in sent and json.loads(sent)["title"] == "Claude Code wants to run a command"
            [row] = hook.inbox_rows(port)
            assert row["permission"] == {"action": "run", "tool": "Bash", "what": COMMAND["command"]}
            reply = submit(url, {"permission": {"selected": ["always-1"]}})
            submitted = time.monotonic()
            assert reply.status == 200, reply.body
        finally:
            code, out = hook.finish()
    assert code == 0 and out.count("\n") == 1 and json.loads(out) == {"hookSpecificOutput": {
        "hookEventName": "PermissionRequest",
        "decision": {"behavior": "allow", "updatedPermissions": [SUGGESTIONS[1]]}}}
    assert time.monotonic() - submitted < WAIT
    record = archived(tmp_path)
    assert record["kind"] == "permission"
    permission = record["permission"]
    # Answered at the form's link, the front door's (the hook holds the inbox's port): "door".
    assert (permission["tool"], permission["input"], permission["decision"], permission["suggestion"],
            permission["reason"], permission["where"]) == ("Bash", COMMAND, "allow", SUGGESTIONS[1], None, "door")
    assert permission["answeredAt"].endswith("Z")


def test_denied_with_a_note_prints_the_note_as_the_message_and_archives_the_reason(tmp_path):
    hook = permission_hook(tmp_path, request())
    try:
        assert submit(hook.form_url(), {"permission": {"selected": ["deny"], "notes": "Not on main."}}).status == 200
    finally:
        code, out = hook.finish()
    assert code == 0 and json.loads(out)["hookSpecificOutput"]["decision"] == {"behavior": "deny", "message": "Not on main."}
    assert archived(tmp_path)["permission"]["reason"] == "Not on main."


def test_answered_in_the_terminal_first_ends_the_hook_silently_within_2_s_and_the_form_says_so(tmp_path):
    transcript = tmp_path / "session.jsonl"
    call = {"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "toolu_7", "name": "Bash", "input": COMMAND}]}}
    transcript.write_text(json.dumps(call) + "\n")
    hook = permission_hook(tmp_path, request(transcript_path=str(transcript)))
    try:
        events = EventsReader(api_url(hook.form_url(), "events"), "state")
        try:
            events.wait_for(lambda s: s["waiting"], WAIT, "the hook waiting")
            # Another tool's result is not this one's: the ask stays.
            with open(transcript, "a") as f:
                f.write(json.dumps({"type": "user", "message": {"content": [
                    {"type": "tool_result", "tool_use_id": "toolu_6", "content": "x"}]}}) + "\n")
            time.sleep(1.2)
            assert hook.process.poll() is None
            with open(transcript, "a") as f:
                f.write(json.dumps({"type": "user", "message": {"content": [
                    {"type": "tool_result", "tool_use_id": "toolu_7", "content": "ok"}]}}) + "\n")
            written = time.monotonic()
            ended = events.wait_for(lambda s: s["state"] != "pending", WAIT, "the interview ending")
            noticed = time.monotonic() - written
        finally:
            events.close()
    finally:
        code, out = hook.finish()
    assert noticed < 2.0, noticed
    # The page, told, closes its stream; the hook then ends at once.
    assert time.monotonic() - written < 2.0 + askrich.HOOK_GOODBYE_SECONDS
    assert ended["state"] == "cancelled" and ended.get("answeredInTerminal") is True, ended
    assert code == 0 and out == ""
    permission = archived(tmp_path)["permission"]
    assert (permission["decision"], permission["where"]) == ("terminal", "terminal")


def test_a_sigterm_a_timeout_or_a_skip_never_allows_anything(tmp_path):
    stopped = permission_hook(tmp_path / "stop", request()) if (tmp_path / "stop").mkdir() is None else None
    timed = permission_hook(tmp_path / "time", request(), ["--timeout", "4"]) if (tmp_path / "time").mkdir() is None else None
    skipped = permission_hook(tmp_path / "skip", request()) if (tmp_path / "skip").mkdir() is None else None
    try:
        events = EventsReader(api_url(stopped.form_url(), "events"), "state")
        try:
            events.wait_for(lambda s: s["waiting"], WAIT, "the hook waiting")
        finally:
            events.close()
        stopped.process.send_signal(signal.SIGTERM)
        assert submit(skipped.form_url(), {}, declined=True).status == 200
    finally:
        outcomes = [hook.finish() for hook in (stopped, timed, skipped)]
    assert outcomes == [(0, "")] * 3
    assert archived(tmp_path / "time")["permission"]["decision"] == "terminal"


def test_the_readme_turns_the_hook_on_as_tested_here_and_says_what_codex_does():
    with open(os.path.join(os.path.dirname(askrich.__file__), "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    assert "askrich.pyz hook permission-request --enable" in readme
    assert "`[features] hooks = true`" in readme and "`~/.codex/hooks.json` a `PermissionRequest` command" in readme
    assert "asks itself once the hook gives up" in readme
