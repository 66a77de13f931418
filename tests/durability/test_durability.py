"""Durability at the edges: nothing acknowledged is lost, and what the server keeps on disk is
bounded and trustworthy. server.log rotates, even with several processes writing to it; folders
planted in a shared log dir are refused; tasks are recovered from the archive alone; a submit on
a full disk says so instead of acknowledging answers it could not keep; an upload that ends
after the submit is refused; every free-text field has one limit."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

import askrich
from helpers.support import (MODULE, WAIT, answer_while_waited_on, choice, disk_full, http_request, interview, quiet_runtime,
                     settled_long_ago, submit, two_tasks_then_restart)


def unknown(call) -> str:
    with pytest.raises(askrich.JsonRpcError) as caught:
        call()
    assert caught.value.code == -32602
    return caught.value.message


# -- server.log rotation ------------------------------------------------------------------------

WRITER = r"""
import io, sys
sys.path.insert(0, sys.argv[1])
import askrich
log = askrich.Log(sys.argv[2], stream=io.StringIO())
name = sys.argv[3]
sent = 0
for command in sys.stdin:
    word, _, count = command.strip().partition(" ")
    if word == "write":
        for _ in range(int(count)):
            sent += 1
            log.event("writer", name=name, n=sent, padding="p" * 180)
    elif word == "final":
        log.event("final", name=name)
    print("done", flush=True)
"""

ROTATE_BYTES = 5 * 1024 * 1024
LINE = re.compile(r"^\S+ \d+ (writer name=(\w) n=(\d+) padding=p{180}|final name=(\w)|prefill \d+ x+)$")


def _log_files(log_dir):
    return {name: os.path.join(log_dir, name) for name in os.listdir(log_dir) if name.startswith("server.log")}


def test_server_log_rotates_at_5_mib_keeping_three_with_two_processes_writing(tmp_path):
    log_dir = str(tmp_path)
    # An earlier server's log: ours, 0600, as the server makes it (any other is not used).
    descriptor = os.open(os.path.join(log_dir, "server.log"), os.O_WRONLY | os.O_CREAT, 0o600)
    with open(descriptor, "w") as prefilled:
        line = 0
        while prefilled.tell() < ROTATE_BYTES - 64 * 1024:
            line += 1
            prefilled.write("2026-01-01T00:00:00.000Z 1 prefill %d %s\n" % (line, "x" * 200))
    writers = {
        name: subprocess.Popen([sys.executable, "-c", WRITER, os.path.dirname(MODULE), log_dir, name],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name in "AB"
    }

    def command(name, text):
        writers[name].stdin.write(text + "\n")
        writers[name].stdin.flush()

    def done(name):
        assert writers[name].stdout.readline() == "done\n"

    try:
        # 2 x 40 rounds of 1,000 lines of ~250 bytes: about 20 MiB after the 5 MiB already
        # there, so server.log rotates about four times, the two processes taking turns.
        for _ in range(40):
            for name in "AB":
                command(name, "write 1000")
            for name in "AB":
                done(name)
        for name in "AB":  # each must have followed the other's rotations to the new file
            command(name, "final")
            done(name)
    finally:
        for writer in writers.values():
            writer.stdin.close()
            writer.wait(WAIT)
    files = _log_files(log_dir)
    assert sorted(files) == ["server.log", "server.log.1", "server.log.2", "server.log.3"], sorted(files)
    seen = {"A": [], "B": []}
    for name in ("server.log.3", "server.log.2", "server.log.1", "server.log"):
        size = os.path.getsize(files[name])
        assert size <= ROTATE_BYTES + 64 * 1024, (name, size)
        with open(files[name], encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        assert lines[-1] == "", name  # ends with a whole line
        for text in lines[:-1]:
            match = LINE.match(text)
            assert match, "a torn or mixed line in %s: %r" % (name, text[:120])
            if match.group(2):
                seen[match.group(2)].append(int(match.group(3)))
        if name == "server.log":
            assert lines[-3].endswith("final name=A") and lines[-2].endswith("final name=B")
    for name, numbers in seen.items():
        # Nothing lost or repeated since the oldest line kept, and the newest is there.
        assert numbers == list(range(numbers[0], 40001)), name
    assert os.stat(files["server.log"]).st_mode & 0o077 == 0


# -- tasks recovered from the archive, never from server.log ----------------------------------


def test_tasks_are_recovered_with_server_log_a_folder(tmp_path):
    os.makedirs(str(tmp_path / "server.log"))  # no log file can be written: nothing to scan
    after, recovered, answered_task, lost_task, _ = two_tasks_then_restart(tmp_path)
    try:
        done = recovered.get(answered_task)
        assert done["status"] == "completed"
        assert done["result"]["structuredContent"]["answers"][0]["selected"] == ["a"]
        assert "tasks" not in done["result"]["structuredContent"]  # the record of tasks stays ours
        failed = recovered.get(lost_task)
        assert failed["status"] == "failed" and "restarted" in failed["error"]["message"]
    finally:
        after.close()


def test_text_in_the_log_that_looks_like_a_task_never_makes_one(tmp_path):
    """A title and a browser's User-Agent are logged as they are; neither may invent a task."""
    before = quiet_runtime(tmp_path)
    answered = before.open_interview(interview(choice("q", "a")))  # never a task
    spoof = " task-created task=%s.1 interview=%s " % (answered.id, answered.id)
    before.open_interview(interview(choice("q", "a"), title=spoof))
    http_request(before.form_url(answered), headers={"User-Agent": "Mozilla/5.0" + spoof.replace(".1", ".2")})
    before.hub.submit(answered, {"answers": {"q": {"selected": ["a"]}}})
    before.close()
    with open(str(tmp_path / "server.log"), encoding="utf-8") as log:
        assert log.read().count("task-created task=%s." % answered.id) == 2  # the bait is there
    after = quiet_runtime(tmp_path)
    try:
        recovered = askrich.TaskRegistry(after.log, after.archive, after.form_url)
        for task_id in (answered.id + ".1", answered.id + ".2"):
            assert unknown(lambda: recovered.get(task_id)) == 'unknown task "%s"' % task_id
    finally:
        after.close()


def test_a_task_on_an_interview_still_pending_here_never_turns_failed(tmp_path):
    runtime = quiet_runtime(tmp_path)
    try:
        tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
        form = runtime.open_interview(interview(choice("q", "a")))
        timed_out = tasks.create(form, "Waiting", askrich.Cancellation())["taskId"]
        tasks.complete(timed_out, {"structuredContent": {"status": "awaiting"}})
        cancelled = tasks.create(form, "Waiting", askrich.Cancellation())["taskId"]
        tasks.cancel(cancelled)
        for task_id in (timed_out, cancelled):  # settled long past the retention time
            tasks.tasks[task_id].settled_monotonic -= 2 * askrich.SETTLED_RETENTION_SECONDS
        assert tasks.get(timed_out)["status"] == "completed"
        assert tasks.get(cancelled)["status"] == "cancelled"
        runtime.hub.submit(form, {"answers": {"q": {"selected": ["a"]}}})
        assert tasks.get(timed_out)["result"] == {"structuredContent": {"status": "awaiting"}}
        # Once the interview too is past retention, the tasks are read back from its archive.
        settled_long_ago(form, 2 * askrich.SETTLED_RETENTION_SECONDS)
        again = tasks.get(cancelled)
        assert again["status"] == "completed", again
        assert again["result"]["structuredContent"]["answers"][0]["selected"] == ["a"]
    finally:
        runtime.close()


OTHER_SERVER = r"""
import io, sys
sys.path.insert(0, sys.argv[1])
import askrich
config = askrich.Config(log_dir=sys.argv[2], open_browser=False)
runtime = askrich.Runtime(config, askrich.Log(sys.argv[2], stream=io.StringIO()))
tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
pending = runtime.open_interview({"title": "T", "questions": [{"id": "q", "header": "Q?"}]})
answered = runtime.open_interview({"title": "T", "questions": [{"id": "q", "header": "Q?"}]})
print(tasks.create(pending, "Waiting", askrich.Cancellation())["taskId"])
print(tasks.create(answered, "Waiting", askrich.Cancellation())["taskId"], flush=True)
runtime.hub.submit(answered, {"answers": {"q": {"status": "defer"}}})
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_task_of_another_live_process_on_the_same_log_dir_is_unknown_here(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", OTHER_SERVER, os.path.dirname(MODULE), str(tmp_path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    runtime = quiet_runtime(tmp_path)
    try:
        pending_task = other.stdout.readline().strip()
        answered_task = other.stdout.readline().strip()
        assert other.stdout.readline() == "ready\n"
        tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
        for task_id in (pending_task, answered_task):
            assert unknown(lambda: tasks.get(task_id)) == 'unknown task "%s"' % task_id
        other.stdin.close()
        assert other.wait(WAIT) == 0
        # Gone now: a restart, as far as anyone can tell.
        assert tasks.get(pending_task)["status"] == "failed"
        assert tasks.get(answered_task)["status"] == "completed"
    finally:
        if other.poll() is None:
            other.kill()
        runtime.close()


# -- a shared log folder ------------------------------------------------------------------------


def _record(interview_id: str) -> dict:
    return {
        "interviewId": interview_id, "status": "submitted", "via": "browser",
        "submittedAt": "2026-01-01T00:00:00.000Z", "durationSeconds": 1, "counts": {},
        "answers": [{"id": "q", "status": "answered", "selected": ["forged"]}], "generalNotes": None,
        "interview": {"title": "T", "questions": [{"id": "q", "header": "Q?"}]},
    }


def _plant(folder, interview_id: str, mode: int = 0o600) -> str:
    path = os.path.join(str(folder), "2026-01-01T00-00-00-000Z-%s.json" % interview_id)
    with open(path, "w") as handle:
        json.dump(_record(interview_id), handle)
    os.chmod(path, mode)
    return path


def test_a_planted_symlink_never_redirects_the_archive_and_is_said_once(tmp_path):
    log_dir, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    log_dir.mkdir()
    elsewhere.mkdir()
    os.symlink(str(elsewhere), str(log_dir / "answers"))
    os.symlink(str(elsewhere), str(log_dir / "tasks"))
    stderr = io.StringIO()
    runtime = quiet_runtime(log_dir, stderr)
    try:
        tasks = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
        for _ in range(2):
            form = runtime.open_interview(interview(choice("q", "a")))
            tasks.create(form, "Waiting", askrich.Cancellation())
            result = answer_while_waited_on(runtime, form, {"q": {"selected": ["a"]}})
            assert result["answers"][0]["selected"] == ["a"]  # the waiting call got them
            assert result["archivePath"] is None
        assert os.listdir(str(elsewhere)) == []
        _plant(elsewhere, "0123456789ab")
        assert runtime.archive.find("0123456789ab") is None
    finally:
        runtime.close()
    said = [line for line in stderr.getvalue().splitlines() if " folder-refused " in line]
    assert len(said) == 2, said  # answers/ and tasks/, once each
    assert all("symlink" in line for line in said)


needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="planting another user's files needs root (chown)")


@needs_root
def test_a_forged_archive_is_never_served_as_the_users_answers(tmp_path):
    """Another user of a shared log dir made answers/ (theirs) or slipped a file into ours."""
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    for log_dir in (theirs, ours):
        (log_dir / "answers").mkdir(parents=True)
    _plant(theirs / "answers", "0123456789ab")
    os.chown(str(theirs / "answers"), 65534, 65534)
    foreign = _plant(ours / "answers", "0123456789ab")
    os.chown(foreign, 65534, 65534)
    _plant(ours / "answers", "ba9876543210", mode=0o644)  # not written by us: we write 0600
    _plant(ours / "answers", "aaaaaaaaaaaa")  # as we write it: the one that counts
    for log_dir in (theirs, ours):
        runtime = quiet_runtime(log_dir)
        try:
            assert runtime.archive.find("0123456789ab") is None
            assert runtime.archive.find("ba9876543210") is None
            peer = askrich.TaskRegistry(runtime.log, runtime.archive, runtime.form_url)
            assert unknown(lambda: peer.get("0123456789ab.1"))
        finally:
            runtime.close()
    runtime = quiet_runtime(ours)
    try:
        assert runtime.archive.find("aaaaaaaaaaaa")["answers"][0]["selected"] == ["forged"]
    finally:
        runtime.close()


def test_a_folder_others_can_write_is_not_used(tmp_path):
    for name in ("answers", "attachments", "tasks"):
        (tmp_path / name).mkdir()
        os.chmod(str(tmp_path / name), 0o777)
    _plant(tmp_path / "answers", "0123456789ab")
    runtime = quiet_runtime(tmp_path)
    try:
        assert runtime.archive.find("0123456789ab") is None
        form = runtime.open_interview(interview(choice("q", "a")))
        reply = http_request(runtime.form_url(form).replace("/s/", "/api/s/") + "/attachments", "POST", b"png",
                             {"X-Attachment-Name": "a.png", "Content-Type": "image/png"})
        assert reply.status == 500 and "written by group or others" in reply.json()["error"]
        assert os.listdir(str(tmp_path / "attachments")) == []
    finally:
        runtime.close()


# -- an Other where none is taken ---------------------------------------------------------------


def test_an_other_on_a_question_that_takes_none_is_ignored_as_the_original_does(tmp_path):
    runtime = quiet_runtime(tmp_path)
    try:
        form = runtime.open_interview(interview(
            choice("r", "x", "y", kind="rank"),
            choice("closed", "a", "b", allowOther=False),
            choice("typed", "a", allowOther=False),
        ))
        result = answer_while_waited_on(runtime, form, {
            "r": {"ranked": ["y", "x"], "other": "the original's own tests send this"},
            "closed": {"selected": ["b"], "other": "not asked for"},
            "typed": {"other": 42},  # whatever it is, it is not read
        })
        rows = {row["id"]: row for row in result["answers"]}
        assert rows["r"]["ranked"] == ["y", "x"] and rows["r"]["other"] is None
        assert rows["closed"]["selected"] == ["b"] and rows["closed"]["other"] is None
        assert rows["typed"]["status"] == "unanswered"
    finally:
        runtime.close()


# -- one limit for every free text --------------------------------------------------------------

LIMIT = 20000


@pytest.mark.parametrize("answers, general, field", [
    ({"q": {"selected": ["a"], "notes": "n" * (LIMIT + 1)}}, None, 'question "q": notes are longer'),
    ({"q": {"other": "o" * (LIMIT + 1)}}, None, 'question "q": other is longer'),
    ({"t": {"selected": ["x"], "optionTexts": {"x": "t" * (LIMIT + 1)}}}, None,
     'question "t": the text of option "x" is longer'),
    ({"q": {"status": "defer", "notes": "d" * (LIMIT + 1)}}, None, 'question "q": notes are longer'),
    ({}, "g" * (LIMIT + 1), "generalNotes is longer"),
], ids=["notes", "other", "option-text", "deferred-notes", "general-notes"])
def test_a_free_text_past_20000_characters_is_a_422_naming_the_field(tmp_path, answers, general, field):
    runtime = quiet_runtime(tmp_path)
    try:
        form = runtime.open_interview(interview(
            choice("q", "a"), {"id": "t", "header": "T?", "options": [{"id": "x", "label": "X", "textInput": {}}]}))
        extra = {} if general is None else {"generalNotes": general}
        refused = submit(runtime.form_url(form), answers, **extra)
        assert refused.status == 422 and refused.json()["error"] == field + " than 20000 characters"
        assert form.state == "pending"
        # At the limit it is taken whole (whitespace around it does not count).
        at_limit = json.loads(json.dumps(answers))
        for row in at_limit.values():
            for key in ("notes", "other"):
                if key in row:
                    row[key] = "  " + row[key][:LIMIT] + "\n"
            if "optionTexts" in row:
                row["optionTexts"] = {"x": row["optionTexts"]["x"][:LIMIT]}
        if general is not None:
            extra["generalNotes"] = general[:LIMIT]
        assert submit(runtime.form_url(form), at_limit, **extra).status == 200
    finally:
        runtime.close()


def test_form_elicitation_holds_the_same_limit():
    spec, _ = askrich.validate_interview(interview(choice("q", "a"), {"id": "free", "header": "F?"}))
    schema = askrich.elicitation_schema(spec["questions"])["properties"]
    assert schema["free"]["maxLength"] == LIMIT and schema["q__other"]["maxLength"] == LIMIT
    answers, ignored = askrich.answers_from_elicitation(
        spec["questions"], {"q__other": "o" * (LIMIT + 5), "free": "f" * LIMIT})
    assert answers["q"]["other"] == "o" * LIMIT and answers["free"]["other"] == "f" * LIMIT
    assert ignored == ["q__other=%d characters, cut to %d" % (LIMIT + 5, LIMIT)]


# -- an upload racing the submit ----------------------------------------------------------------


def test_an_upload_whose_body_ends_after_the_submit_is_a_409_and_leaves_no_file(tmp_path, monkeypatch):
    """Over a raw socket: the upload's headers and half its body, then the submit, then the rest."""
    import socket
    import urllib.parse

    runtime = quiet_runtime(tmp_path)
    reading = threading.Event()
    real_folder = askrich.AttachmentStore._ensure_folder

    def folder_then_gate(store):
        folder = real_folder(store)
        reading.set()  # past the first pending check: the body is being read now
        return folder

    monkeypatch.setattr(askrich.AttachmentStore, "_ensure_folder", folder_then_gate)
    try:
        form = runtime.open_interview(interview(choice("q", "a")))
        parts = urllib.parse.urlsplit(runtime.form_url(form))
        body = os.urandom(3 * 1024 * 1024)
        head = ("POST /api/s/%s/attachments HTTP/1.1\r\nHost: localhost:%d\r\nContent-Type: image/png\r\n"
                "X-Attachment-Name: screenshot.png\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % (parts.path.rsplit("/", 1)[1], parts.port, len(body))).encode()
        with socket.create_connection((parts.hostname, parts.port), timeout=WAIT) as sock:
            sock.sendall(head + body[: len(body) // 2])
            assert reading.wait(WAIT)
            done = submit(runtime.form_url(form), {"q": {"selected": ["a"]}})
            assert done.status == 200, done.body
            sock.sendall(body[len(body) // 2:])
            reply = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        status_line, _, rest = reply.partition(b"\r\n")
        assert status_line.split()[1] == b"409", reply[:300]
        refusal = json.loads(rest.split(b"\r\n\r\n", 1)[1])
        assert (refusal["error"], refusal["code"]) == ("interview already submitted", "not-pending")
        assert form.settled_result()["answers"][0]["attachments"] == []
        folder = os.path.join(str(tmp_path), "attachments", form.id)
        assert os.listdir(folder) == [], "the late file is still on disk, named by no result"
    finally:
        runtime.close()


# -- the archive cannot be written ----------------------------------------------------------------

NOT_SAVED = "could not save the answers: %s; they are still in this form, try again"


def _full_disk(monkeypatch):
    monkeypatch.setattr(askrich, "write_private_file", disk_full)


def test_a_submit_whose_answers_cannot_be_saved_and_that_no_call_takes_is_a_507_and_settles_nothing(tmp_path, monkeypatch):
    """Injected: runs on every machine. The same with a real full disk is below."""
    stderr = io.StringIO()
    runtime = quiet_runtime(tmp_path, stderr)
    try:
        form = runtime.open_interview(interview(choice("q", "a")))
        real = askrich.write_private_file
        _full_disk(monkeypatch)
        refused = submit(runtime.form_url(form), {"q": {"selected": ["a"], "notes": "every word"}}, generalNotes="kept")
        assert refused.status == 507 and refused.json()["error"] == NOT_SAVED % "No space left on device"
        assert refused.json()["code"] == "not-saved"
        assert form.state == "pending" and form.settled_result() is None
        assert "archive-failed" in stderr.getvalue()
        monkeypatch.setattr(askrich, "write_private_file", real)  # room again: send again
        again = submit(runtime.form_url(form), {"q": {"selected": ["a"], "notes": "every word"}}, generalNotes="kept")
        assert again.status == 200 and again.json()["delivered"] is False
        record = runtime.archive.find(form.id)
        assert record["answers"][0]["notes"] == "every word" and record["generalNotes"] == "kept"
    finally:
        runtime.close()


def test_with_a_call_waiting_the_answers_go_to_it_and_the_failed_write_is_logged(tmp_path, monkeypatch):
    stderr = io.StringIO()
    runtime = quiet_runtime(tmp_path, stderr)
    try:
        form = runtime.open_interview(interview(choice("q", "a")))
        _full_disk(monkeypatch)
        result = answer_while_waited_on(runtime, form, {"q": {"selected": ["a"]}})
        assert result["answers"][0]["selected"] == ["a"] and result["archivePath"] is None
        assert "archive-failed" in stderr.getvalue() and form.state == "submitted"
    finally:
        runtime.close()


def _while_archiving(monkeypatch, during, fail=False):
    """The archive's write runs `during()` first (once), then writes, or fails as a full disk."""
    real = askrich.write_private_file

    def write(folder, name, data):
        monkeypatch.setattr(askrich, "write_private_file", real)
        during()
        if fail:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(folder, name, data)

    monkeypatch.setattr(askrich, "write_private_file", write)


def _in_thread(outcomes: dict, key: str, work) -> threading.Thread:
    def run():
        try:
            outcomes[key] = work()
        except Exception as error:  # what the work was refused with is the outcome
            outcomes[key] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_archive_is_written_with_the_interview_free_and_changes_meanwhile_wait_for_the_outcome(tmp_path, monkeypatch):
    """The settle is reserved under the interview's lock, the archive built and fsynced outside
    it, then published: a page reading the state meanwhile is answered at once (pending), and
    an append or a second submit that arrives meanwhile waits, then is refused as settled."""
    runtime = quiet_runtime(tmp_path)
    try:
        form = runtime.open_interview(interview(choice("q", "a")))
        outcomes, late = {}, []

        def during():
            reader = _in_thread(outcomes, "state", lambda: askrich.state_json(form.status()))
            reader.join(WAIT)
            assert not reader.is_alive(), "the interview's state could not be read while its archive was written"
            late.append(_in_thread(outcomes, "append", lambda: runtime.append_questions(form.id, [choice("later", "a")])))
            late.append(_in_thread(outcomes, "submit", lambda: runtime.hub.submit(form, {"answers": {"q": {"selected": ["a"]}}})))

        _while_archiving(monkeypatch, during)
        assert runtime.hub.submit(form, {"answers": {"q": {"selected": ["a"]}}})["ok"] is True
        for thread in late:
            thread.join(WAIT)
        assert outcomes["state"] == {"state": "pending", "waiting": False, "version": 1}
        assert isinstance(outcomes["append"], askrich.InterviewSettled)
        assert isinstance(outcomes["submit"], askrich.InterviewSettled)
        assert [q["id"] for q in runtime.archive.find(form.id)["interview"]["questions"]] == ["q"]
        assert form.state == "submitted" and [q["id"] for q in form.spec["questions"]] == ["q"]
    finally:
        runtime.close()


def test_an_append_that_waited_on_a_failed_archive_goes_through_and_the_next_submit_keeps_it(tmp_path, monkeypatch):
    runtime = quiet_runtime(tmp_path)
    try:
        form = runtime.open_interview(interview(choice("q", "a")))
        outcomes, late = {}, []
        _while_archiving(monkeypatch, lambda: late.append(_in_thread(
            outcomes, "append", lambda: runtime.append_questions(form.id, [choice("later", "a")]))), fail=True)
        with pytest.raises(askrich.AnswersNotSaved):
            runtime.hub.submit(form, {"answers": {"q": {"selected": ["a"]}}})
        late[0].join(WAIT)
        assert outcomes["append"]["status"] == "appended" and form.state == "pending"
        answers = {"q": {"selected": ["a"]}, "later": {"selected": ["a"]}}
        assert runtime.hub.submit(form, {"answers": answers, "specVersion": 2})["ok"] is True
        assert [row["id"] for row in runtime.archive.find(form.id)["answers"]] == ["q", "later"]
    finally:
        runtime.close()


@contextlib.contextmanager
def small_tmpfs(path, size_kib: int):
    """A tmpfs of `size_kib` at `path`; skipped, saying why, where this machine cannot mount."""
    os.makedirs(str(path), exist_ok=True)
    if not shutil.which("mount"):
        pytest.skip("no mount command here, so no small file system to fill")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dk,mode=0700" % size_kib, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % (done.stderr.strip() or "mount failed"))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_on_a_really_full_disk_the_submit_is_a_507_and_goes_through_once_there_is_room(tmp_path):
    with small_tmpfs(tmp_path / "full", 256) as log_dir:
        runtime = quiet_runtime(log_dir)
        try:
            form = runtime.open_interview(interview(choice("q", "a")))
            filler = os.path.join(str(log_dir), "filler")
            with open(filler, "wb", buffering=0) as handle:
                try:
                    while True:
                        handle.write(b"x" * 4096)
                except OSError as error:
                    assert error.errno == errno.ENOSPC
            answers = {"q": {"selected": ["a"], "notes": "n" * 8000}}
            refused = submit(runtime.form_url(form), answers)
            assert refused.status == 507, refused.body
            assert refused.json()["error"] == NOT_SAVED % "No space left on device"
            assert form.state == "pending"
            assert [n for n in os.listdir(os.path.join(str(log_dir), "answers")) if n.endswith(".tmp")] == []
            os.unlink(filler)
            assert submit(runtime.form_url(form), answers).status == 200
            assert runtime.archive.find(form.id)["answers"][0]["notes"] == "n" * 8000
        finally:
            runtime.close()


def test_every_folder_made_is_fsynced_into_its_parent_before_the_reply(tmp_path, monkeypatch):
    synced = []
    real = askrich.sync_directory
    monkeypatch.setattr(askrich, "sync_directory", lambda folder: (synced.append(os.path.abspath(folder)), real(folder)))
    runtime = quiet_runtime(tmp_path)
    try:
        form = runtime.open_interview(interview(choice("q", "a")))
        root = os.path.abspath(str(tmp_path))
        reply = http_request(runtime.form_url(form).replace("/s/", "/api/s/") + "/attachments", "POST", b"png",
                             {"X-Attachment-Name": "a.png", "Content-Type": "image/png"})
        assert reply.status == 201
        attachments = os.path.join(root, "attachments")
        # attachments/ into the log dir, attachments/<id>/ into attachments/, the file into its folder.
        assert synced[:3] == [root, attachments, os.path.join(attachments, form.id)], synced
        del synced[:]
        assert submit(runtime.form_url(form), {"q": {"selected": ["a"]}}).status == 200
        assert synced[:2] == [root, os.path.join(root, "answers")], synced
    finally:
        runtime.close()
