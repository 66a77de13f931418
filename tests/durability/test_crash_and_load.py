"""Crashes and load (tests/README.md, "How it is tested"): kill -9 right after an acknowledged submit leaves its archive
complete; an unwritable or full log directory loses no answer and crashes nothing; 50
concurrent interviews with waiters, racing appends, cancellations and double submits settle
each exactly once and wake every waiter; 1,000 interviews leave no thread or memory behind."""

from __future__ import annotations

import contextlib
import errno
import gc
import http.client
import io
import json
import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import askrich
from helpers import hypothesis_profiles
from helpers.support import (
    ask_link,
    InProcessServer,
    SubprocessServer,
    answer_while_waited_on,
    api_url,
    choice,
    disk_full,
    http_request,
    interview,
    quiet_runtime,
    settled_long_ago,
    submit,
    threads_still_running,
    wait_for_interview,
    vm_status,
    wait_for_result,
)

WAIT = 20.0

# Under ASK_USER_RICH_FUZZ=long every test here is a long run: `-m slow` selects them.
pytestmark = [pytest.mark.slow] if hypothesis_profiles.LONG else []


def archived(log_dir) -> dict:
    """interviewId -> parsed archive record; every file under its final name must be whole."""
    folder = os.path.join(str(log_dir), "answers")
    records = {}
    if not os.path.isdir(folder):
        return records
    for name in os.listdir(folder):
        if name.endswith(".tmp"):
            continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)  # a torn file fails here
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert record["status"] == "submitted" and record["answers"] and record["interview"]["questions"]
        assert name.endswith("-%s.json" % record["interviewId"])
        records[record["interviewId"]] = record
    return records


# -- kill -9 --------------------------------------------------------------------------------------


def test_kill_9_right_after_acknowledged_submits_leaves_every_acknowledged_archive_whole(tmp_path):
    peer = SubprocessServer(tmp_path / "logs")
    acknowledged, lock = [], threading.Lock()
    try:
        peer.initialize()
        forms = [ask_link(peer, interview(choice("q", "a", "b"), choice("r", "x", "y"))) for _ in range(24)]
        for form in forms[:6]:  # some with a call waiting on them
            peer.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": form["sessionId"]}})
        half = threading.Event()

        def user(form):
            try:
                reply = submit(form["url"], {"q": {"selected": ["a"], "notes": "n" * 2000},
                                             "r": {"status": "defer"}}, generalNotes="g")
            except (OSError, http.client.HTTPException):
                # The server died first, before or while answering (a cut-off reply is an
                # IncompleteRead): never acknowledged, so nothing is owed.
                return
            if reply.status == 200:
                with lock:
                    acknowledged.append(form["sessionId"])
                    if len(acknowledged) >= 8:
                        half.set()

        threads = [threading.Thread(target=user, args=(form,), daemon=True) for form in forms]
        for thread in threads:
            thread.start()
        assert half.wait(WAIT)
        os.kill(peer.process.pid, signal.SIGKILL)  # no shutdown of any kind
        peer.process.wait(WAIT)
        for thread in threads:
            thread.join(WAIT)
    finally:
        peer.close()
    with lock:
        acked = list(acknowledged)
    records = archived(tmp_path / "logs")
    print("kill -9: %d submits acknowledged before the kill, %d archives on disk" % (len(acked), len(records)))
    assert set(acked) <= set(records), "an acknowledged submit has no complete archive"
    for session_id in acked:
        answers = {a["id"]: a for a in records[session_id]["answers"]}
        assert answers["q"]["selected"] == ["a"] and answers["q"]["notes"] == "n" * 2000
        assert answers["r"]["status"] == "deferred" and records[session_id]["generalNotes"] == "g"
    # A new server returns the archived result to await_user_answers.
    second = SubprocessServer(tmp_path / "logs")
    try:
        second.initialize()
        reply = second.tool("await_user_answers", {"sessionId": acked[0]})["result"]
        assert reply["structuredContent"]["status"] == "submitted"
        assert reply["structuredContent"]["interviewId"] == acked[0]
    finally:
        assert second.close() == 0


# -- log directories that cannot be written -------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path, size_kib: int, read_only: bool = False):
    """A tiny tmpfs at `path`, or skip when this machine cannot mount one."""
    os.makedirs(path, exist_ok=True)
    options = "size=%dk,mode=0700%s" % (size_kib, ",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True) if shutil.which("mount") else None
    if done is None or done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (%s)" % (done.stderr.decode().strip() if done else "no mount"))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(path) -> None:
    """Write until the file system says ENOSPC."""
    with open(os.path.join(str(path), "filler"), "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"x" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC


def _answers_reach_the_agent(log_dir) -> str:
    """An interview submitted through the form while a call waits: the call gets every answer.
    Returns what the server wrote to stderr."""
    stderr = io.StringIO()
    config = askrich.Config(log_dir=str(log_dir), open_browser=False)
    runtime = askrich.Runtime(config, askrich.Log(str(log_dir), stream=stderr))
    peer = InProcessServer(runtime)
    try:
        peer.initialize()
        form = ask_link(peer)
        request = peer.request("tools/call", {"name": "await_user_answers",
                                              "arguments": {"sessionId": form["sessionId"]}})
        # The call must be waiting already: answers that no call takes are refused (507) when
        # they cannot be archived.
        wait_for_interview(runtime.hub.get(form["sessionId"]), lambda i: i.activity()["waiters"] > 0, what="the call waiting")
        done = submit(form["url"], {"q": {"selected": ["b"], "notes": "kept"}}, generalNotes="all of it")
        assert done.status == 200, done.body
        result = peer.response(request)["result"]["structuredContent"]
        assert result["status"] == "submitted"
        assert result["answers"][0]["selected"] == ["b"] and result["answers"][0]["notes"] == "kept"
        assert result["generalNotes"] == "all of it"
        assert peer.call("ping")["result"] == {}  # and the server goes on
    finally:
        peer.close()
        runtime.close()
    return stderr.getvalue()


def test_a_log_dir_that_cannot_be_created_degrades_to_stderr_and_loses_no_answer(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the log directory should be")
    stderr = _answers_reach_the_agent(blocker / "logs")
    assert stderr.count("log-degraded") == 1, stderr
    assert "archive-failed" in stderr and " submitted " in stderr


def test_a_read_only_log_dir_loses_no_answer(tmp_path):
    with tmpfs(tmp_path / "ro", 64, read_only=True) as path:
        stderr = _answers_reach_the_agent(path)
    assert "log-degraded" in stderr and "archive-failed" in stderr


def test_a_full_log_dir_loses_no_answer_and_leaves_no_partial_archive(tmp_path):
    with tmpfs(tmp_path / "full", 64) as path:
        os.makedirs(os.path.join(str(path), "answers"))
        _fill(path)
        stderr = _answers_reach_the_agent(path)
        leftovers = os.listdir(os.path.join(str(path), "answers"))
    assert "archive-failed" in stderr
    assert leftovers == [], leftovers  # the temporary file was removed, nothing half-written


def test_a_disk_that_fills_up_while_running_degrades_the_log_once_and_keeps_serving(tmp_path, monkeypatch):
    """No mount needed: the open log file starts failing the way a full disk does."""
    stderr = io.StringIO()
    runtime = quiet_runtime(tmp_path, stderr)
    try:
        monkeypatch.setattr(runtime.log, "_append", disk_full)
        real_fsync = os.fsync
        monkeypatch.setattr(askrich.os, "fsync", disk_full)
        form = runtime.open_interview(interview())
        got = answer_while_waited_on(runtime, form, {"q": {"selected": ["a"]}}, WAIT)
        monkeypatch.setattr(askrich.os, "fsync", real_fsync)
        assert got["answers"][0]["selected"] == ["a"]
        assert stderr.getvalue().count("log-degraded") == 1
        assert "archive-failed" in stderr.getvalue()
        assert not [n for n in os.listdir(tmp_path / "answers") if n.endswith(".tmp")]
    finally:
        runtime.close()


# -- load ---------------------------------------------------------------------------------------


class Collector:
    """Every message the server writes, by id, read on one thread; waits on a condition."""

    def __init__(self, peer) -> None:
        self.peer = peer
        self.by_id: dict = {}
        self.progress = 0
        self.changed = threading.Condition()
        self.send_lock = threading.Lock()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while True:
            try:
                message = self.peer.reader.next(timeout=120)
            except (EOFError, queue.Empty):
                return
            with self.changed:
                if message.get("method") == "notifications/progress":
                    self.progress += 1
                elif "method" not in message:
                    assert message["id"] not in self.by_id, "two responses to %r" % message["id"]
                    self.by_id[message["id"]] = message
                self.changed.notify_all()

    def send(self, message) -> None:
        with self.send_lock:
            self.peer.send(message)

    def call(self, request_id, name, arguments, progress=False):
        params = {"name": name, "arguments": arguments}
        if progress:
            params["_meta"] = {"progressToken": request_id}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def wait(self, request_id, timeout=WAIT):
        with self.changed:
            assert self.changed.wait_for(lambda: request_id in self.by_id, timeout), request_id
            return self.by_id[request_id]

    def has(self, request_id) -> bool:
        with self.changed:
            return request_id in self.by_id


def test_50_concurrent_interviews_with_racing_appends_cancels_and_double_submits_settle_exactly_once(tmp_path):
    config = askrich.Config(log_dir=str(tmp_path), open_browser=False, progress_ms=200)
    runtime = askrich.Runtime(config, askrich.Log(str(tmp_path), stream=io.StringIO()))
    peer = InProcessServer(runtime)
    threads_before = set(threading.enumerate())
    try:
        peer.initialize()
        forms = [ask_link(peer, interview(choice("q", "a", "b"), title="load %d" % i)) for i in range(50)]
        collector = Collector(peer)
        for i, form in enumerate(forms):
            collector.call("w-%d" % i, "await_user_answers", {"sessionId": form["sessionId"]}, progress=i % 2 == 0)
            if i % 3 == 0:  # several waiters on one interview
                collector.call("w2-%d" % i, "await_user_answers", {"sessionId": form["sessionId"]})
        # Every waiter is in place before the users start (the interview shows waiting).
        for i, form in enumerate(forms):
            expected = 2 if i % 3 == 0 else 1
            wait_for_interview(runtime.hub.get(form["sessionId"]), lambda it, n=expected: it.activity()["waiters"] >= n,
                               WAIT, "%d waiting calls" % expected)

        statuses = {i: [] for i in range(len(forms))}

        def user(i, form):
            start.wait()
            body = {"answers": {"q": {"selected": ["a"]}}, "specVersion": 1}
            for _ in range(10):
                reply = http_request(api_url(form["url"], "submit"), "POST", body)
                statuses[i].append(reply.status)
                if reply.status == 409 and reply.json().get("version"):
                    body["specVersion"] = reply.json()["version"]  # the form pulls new questions, resubmits
                    continue
                return

        def agent(i, form):
            start.wait()
            if i % 5 == 0:
                collector.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": "w-%d" % i, "reason": "race"}})
            if i % 2 == 1:
                collector.call("a-%d" % i, "append_questions",
                               {"sessionId": form["sessionId"], "questions": [choice("late", "x")]})

        workers = []
        for i, form in enumerate(forms):
            workers.append(threading.Thread(target=user, args=(i, form)))  # the page's submit
            workers.append(threading.Thread(target=user, args=(i, form)))  # a second tab, racing
        for i, form in enumerate(forms):
            workers.append(threading.Thread(target=agent, args=(i, form)))
        # Barrier: the users and the agents with an append or cancel, plus this thread.
        start = threading.Barrier(len(forms) * 2 + len(forms) + 1)
        for worker in workers:
            worker.start()
        started = time.monotonic()
        start.wait()
        for worker in workers:
            worker.join(WAIT)
            assert not worker.is_alive()

        for i, form in enumerate(forms):
            # Exactly one submit was accepted; the rest saw it already submitted (or a
            # version change first, then resubmitted).
            codes = statuses[i]
            assert codes.count(200) == 1, (i, codes)
            assert set(codes) <= {200, 409}, (i, codes)
            settled = runtime.hub.get(form["sessionId"])
            assert settled.state == "submitted"
            ids = [answer["id"] for answer in settled.settled_result()["answers"]]
            if i % 2 == 1:
                appended = collector.wait("a-%d" % i)["result"]
                if appended.get("isError"):
                    assert "already submitted" in appended["content"][0]["text"]
                    assert ids == ["q"]
                else:
                    assert ids == ["q", "late"]
            for key in ["w-%d" % i] + (["w2-%d" % i] if i % 3 == 0 else []):
                if key == "w-%d" % i and i % 5 == 0:
                    continue  # cancelled: answered only if the submit won the race
                reply = collector.wait(key)["result"]["structuredContent"]
                assert reply["status"] == "submitted" and reply == settled.settled_result()
            if i % 5 == 0:
                # Cancelled or not, the answers are collectable.
                collector.call("again-%d" % i, "await_user_answers", {"sessionId": form["sessionId"]})
                assert collector.wait("again-%d" % i)["result"]["structuredContent"] == settled.settled_result()
        elapsed = time.monotonic() - started
        records = archived(tmp_path)
        assert sorted(records) == sorted(f["sessionId"] for f in forms)  # one archive each
        cancelled_unanswered = sum(1 for i in range(0, 50, 5) if not collector.has("w-%d" % i))
        print("load: 50 interviews, %d waiters, 25 racing appends, 10 cancels (%d won before the "
              "submit), 100 racing submits, %d progress notes, settled in %.2fs"
              % (50 + 17, cancelled_unanswered, collector.progress, elapsed))
    finally:
        peer.close()
        runtime.close()
    assert threads_still_running(threads_before, WAIT) == []


def _one_interview(runtime) -> None:
    form = runtime.open_interview(interview(choice("q", "a", "b"), choice("r", "x", "y")))
    got = []
    waiter = threading.Thread(target=lambda: got.append(wait_for_result(runtime, form.id, WAIT)))
    waiter.start()
    done = submit(runtime.form_url(form), {"q": {"selected": ["a"], "notes": "x" * 200}, "r": {"status": "needs-info"}})
    waiter.join(WAIT)
    assert done.status == 200 and got and got[0]["counts"]["needsInfo"] == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RSS from /proc")
def test_1000_interviews_leave_no_thread_and_no_memory_behind(tmp_path, monkeypatch):
    runtime = askrich.Runtime(askrich.Config(log_dir=str(tmp_path), open_browser=False),
                              askrich.Log(str(tmp_path), stream=io.StringIO()))
    try:
        for _ in range(50):  # warm up: the server, imports, allocator pools
            _one_interview(runtime)
        monkeypatch.setattr(askrich, "SETTLED_RETENTION_SECONDS", 0)
        runtime.hub.get("000000000000")  # purge
        gc.collect()
        threads_before, rss_before = set(threading.enumerate()), vm_status()["VmRSS"]
        started = time.monotonic()
        for _ in range(1000):
            _one_interview(runtime)
        elapsed = time.monotonic() - started
        runtime.hub.get("000000000000")  # settled interviews past retention are dropped
        gc.collect()
        threads_left = threads_still_running(threads_before, WAIT)
        rss_after = vm_status()["VmRSS"]
        print("1000 interviews in %.1fs: RSS %.1f MB -> %.1f MB, threads %d -> %d"
              % (elapsed, rss_before, rss_after, len(threads_before),
                 threading.active_count()))
        assert runtime.hub.by_id == {} and runtime.hub.by_token == {}
        assert threads_left == []
        assert rss_after - rss_before < 20, (rss_before, rss_after)
        assert len(os.listdir(tmp_path / "answers")) == 1050
    finally:
        runtime.close()


def test_the_archive_never_writes_through_a_planted_symlink(tmp_path, monkeypatch):
    """A log dir in a shared place: a symlink waiting under the temporary name is not followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    runtime = quiet_runtime(tmp_path / "logs")
    try:
        form = runtime.open_interview(interview())
        stamp = "2026-01-01T00-00-00-000Z"
        monkeypatch.setattr(askrich, "iso_utc", lambda timestamp: "2026-01-01T00:00:00.000Z")
        answers = tmp_path / "logs" / "answers"
        answers.mkdir(parents=True, exist_ok=True)
        os.symlink(str(victim), str(answers / ("%s-%s.json.tmp" % (stamp, form.id))))
        got = answer_while_waited_on(runtime, form, {"q": {"selected": ["a"]}}, WAIT)
        assert got["answers"][0]["selected"] == ["a"]  # the agent still gets them
        assert victim.read_text() == "precious"
    finally:
        runtime.close()


# -- the lifecycle against a model --------------------------------------------------------------


class InterviewLifecycle(RuleBasedStateMachine):
    """Interviews opened, appended to, submitted (well, badly, with a stale version), waited on
    and expired in any order; the server must agree with a plain model after every step."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.log_dir = tempfile.mkdtemp(prefix="askrich-model-")
        self.runtime = askrich.Runtime(askrich.Config(log_dir=self.log_dir, open_browser=False),
                                       askrich.Log(self.log_dir, stream=io.StringIO()))
        self.model: dict = {}  # id -> {"form", "state", "version", "ids", "expired"}
        self.appended = 0

    def teardown(self) -> None:
        self.runtime.close()
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def live(self):
        # In opening order, never by id: ids are random, and Hypothesis replays by position.
        return [key for key, entry in self.model.items() if not entry["expired"]]

    @precondition(lambda self: len(self.live()) < 4)
    @rule()
    def open_one(self) -> None:
        form = self.runtime.open_interview(interview(choice("q", "a", "b")))
        self.model[form.id] = {"form": form, "state": "pending", "version": 1, "ids": ["q"], "expired": False}

    @precondition(lambda self: self.live())
    @rule(data=st.data(), valid=st.booleans())
    def append(self, data, valid) -> None:
        key = data.draw(st.sampled_from(self.live()))
        entry = self.model[key]
        self.appended += 1
        qid = "f%d" % self.appended
        question = choice(qid, "x") if valid else {"id": qid}  # no header: rejected
        try:
            reply = self.runtime.append_questions(key, [question])
        except (askrich.InterviewError, askrich.InvalidInterview) as error:
            assert not valid or entry["state"] != "pending", error
            return
        assert valid and entry["state"] == "pending"
        entry["version"] += 1
        entry["ids"].append(qid)
        assert reply["version"] == entry["version"] and reply["total"] == len(entry["ids"])

    @precondition(lambda self: self.live())
    @rule(data=st.data(), how=st.sampled_from(["good", "stale", "bad", "no-version"]))
    def submit(self, data, how) -> None:
        key = data.draw(st.sampled_from(self.live()))
        entry = self.model[key]
        answers = {"q": {"selected": ["zz"] if how == "bad" else ["a"]}}
        extra = {} if how == "no-version" else {"specVersion": entry["version"] - (how == "stale")}
        reply = submit(self.runtime.form_url(entry["form"]), answers, **extra)
        if entry["state"] != "pending":
            assert reply.status == 409
        elif how == "bad":
            assert reply.status == 422
        elif how == "stale":
            assert reply.status == 409 and reply.json()["version"] == entry["version"]
        else:
            assert reply.status == 200, reply.body
            entry["state"] = "submitted"

    @precondition(lambda self: self.live())
    @rule(data=st.data())
    def wait_briefly(self, data) -> None:
        key = data.draw(st.sampled_from(self.live()))
        result = wait_for_result(self.runtime, key, 0.01)
        if self.model[key]["state"] == "submitted":
            assert [a["id"] for a in result["answers"]] == self.model[key]["ids"]
        else:
            assert result is None

    @precondition(lambda self: any(self.model[k]["state"] == "submitted" for k in self.live()))
    @rule(data=st.data())
    def expire(self, data) -> None:
        key = data.draw(st.sampled_from([k for k in self.live() if self.model[k]["state"] == "submitted"]))
        settled_long_ago(self.runtime.hub.get(key), askrich.SETTLED_RETENTION_SECONDS + 1)
        assert self.runtime.hub.get(key) is None
        self.model[key]["expired"] = True

    @invariant()
    def the_server_agrees_with_the_model(self) -> None:
        for key, entry in self.model.items():
            held = self.runtime.hub.get(key)
            record = self.runtime.archive.find(key)
            if entry["expired"]:
                assert held is None and record is not None
                continue
            assert held.state == entry["state"] and held.status()[2] == entry["version"]
            assert [q["id"] for q in held.spec["questions"]] == entry["ids"]
            assert held.activity()["waiters"] == 0
            assert (record is not None) == (entry["state"] == "submitted")
            if record is not None:
                assert record["answers"] == held.settled_result()["answers"]


TestInterviewLifecycle = InterviewLifecycle.TestCase
TestInterviewLifecycle.settings = hypothesis_profiles.examples(ci=10, long=300)
