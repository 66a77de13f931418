"""Stop means stop: a client that never reads the server's stderr never stalls it, and a stop
signal (repeated, mixed) or EOF ends every command of ours at once, whatever state it is in.

Each process here gets a stderr pipe that this test never reads once the process is under way
(`FullStderr` fills what room is left), as a client that ignores stderr leaves it.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

from helpers.support import MODULE, WAIT, LineReader, LogWatch, McpPeer, SubprocessServer, askrich, interview
from helpers.inbox_support import free_port

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux's /proc")

STOPPED_WITHIN = 3.0  # seconds: a stop may take up to 2 on a loaded machine's scheduler


class FullStderr:
    """A stderr pipe for a child that nobody reads: the test reads it only until a gate (a
    line the child writes), then fills the room left, through a descriptor of its own so
    the child's stays blocking."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.seen = b""

    def read_until(self, pattern: bytes) -> bytes:
        deadline = time.monotonic() + WAIT
        while not re.search(pattern, self.seen):
            ready, _, _ = select.select([self.read_end], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "no %r on stderr: %r" % (pattern, self.seen[-2000:])
            chunk = os.read(self.read_end, 65536)
            assert chunk, "stderr ended before %r: %r" % (pattern, self.seen[-2000:])
            self.seen += chunk
        return re.search(pattern, self.seen).group()

    def fill(self) -> None:
        filler = os.open("/proc/self/fd/%d" % self.write_end, os.O_WRONLY | os.O_NONBLOCK)
        try:
            while True:
                os.write(filler, b"x" * 4096)
        except BlockingIOError:
            pass
        finally:
            os.close(filler)

    def rest(self) -> bytes:
        """Everything still in the pipe, once the child is gone."""
        os.close(self.write_end)
        data = b""
        while True:
            chunk = os.read(self.read_end, 65536)
            if not chunk:
                return data
            data += chunk

    def close(self) -> None:
        for descriptor in (self.read_end, self.write_end):
            try:
                os.close(descriptor)
            except OSError:
                pass


def start(tmp_path, stderr: FullStderr, args=(), env=None, stdin=subprocess.PIPE) -> subprocess.Popen:
    environment = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"), ASK_USER_RICH_OPEN="0")
    environment.update(env or {})
    process = subprocess.Popen([sys.executable, MODULE, *args], stdin=stdin, stdout=subprocess.PIPE,
                               stderr=stderr.write_end, env=environment)
    return process


def signal_twice(process: subprocess.Popen, first, second, gap: float) -> float:
    """Seconds from the first signal until the process ended; the second follows `gap` s later."""
    started = time.monotonic()
    process.send_signal(first)
    time.sleep(gap)  # the spacing under test (how clients stop a server), not a wait on something
    process.send_signal(second)
    return ended_within(process, started)


def ended_within(process: subprocess.Popen, started: float) -> float:
    try:
        process.wait(WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return time.monotonic() - started


def server_log(tmp_path) -> str:
    with open(tmp_path / "logs" / "server.log", encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture
def stderr():
    pipe = FullStderr()
    yield pipe
    pipe.close()


def mcp_server(tmp_path, stderr: FullStderr):
    process = start(tmp_path, stderr)

    def write(data: bytes) -> None:
        process.stdin.write(data)
        process.stdin.flush()

    return process, McpPeer(write, LineReader(process.stdout))


def stalled_server(tmp_path, stderr: FullStderr):
    """A server with a form server running, a wait in flight and its stderr full."""
    process, peer = mcp_server(tmp_path, stderr)
    peer.initialize()
    session = peer.tool("ask_user_rich", interview(delivery="link"))["result"]["structuredContent"]["sessionId"]
    peer.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": session}})
    stderr.read_until(b"wait-start")
    stderr.fill()
    for _ in range(50):  # lines the full pipe cannot take: the server must answer regardless
        assert peer.call("ping")["result"] == {}
    return process, peer


# -- the MCP server -------------------------------------------------------------------------


def test_a_client_that_never_reads_stderr_gets_3000_logged_requests_answered_and_server_log_keeps_them(
        tmp_path, stderr):
    process, peer = mcp_server(tmp_path, stderr)
    started = time.monotonic()
    sender = threading.Thread(target=lambda: [peer.request("ping") for _ in range(3000)], daemon=True)
    sender.start()
    answered = [peer.receive(lambda m: "id" in m, timeout=15) for _ in range(3000)]
    elapsed = time.monotonic() - started
    sender.join(WAIT)
    assert sorted(m["id"] for m in answered) == list(range(1, 3001))
    assert elapsed < 15, elapsed
    print("3000 logged requests answered in %.2f s with stderr unread" % elapsed)
    process.stdin.close()
    assert process.wait(WAIT) == 0
    log = server_log(tmp_path)
    assert log.count(" request method=ping ") == 3000
    dropped = [int(n) for n in re.findall(r" stderr-dropped lines=(\d+) ", log)]
    assert len(dropped) == 1 and dropped[0] > 0, log[-500:]  # said once, at the end
    # Every line but that one went to stderr or was counted as dropped, never cut in two.
    shown = stderr.rest().decode("utf-8").splitlines()
    assert all(line.startswith("[ask-user-rich] 20") for line in shown)
    assert len(shown) + dropped[0] == len(log.splitlines()) - 1


def test_two_sigterms_5_ms_apart_end_a_server_whose_stderr_is_full(tmp_path, stderr):
    process, _ = stalled_server(tmp_path, stderr)
    elapsed = signal_twice(process, signal.SIGTERM, signal.SIGTERM, 0.005)
    print("two SIGTERMs 5 ms apart: ended in %.3f s" % elapsed)
    assert elapsed < STOPPED_WITHIN and process.returncode == 0
    assert " signal signal=15" in server_log(tmp_path)


@pytest.mark.parametrize("run", range(10))
def test_sigint_then_sigterm_100_ms_later_end_a_server_whose_stderr_is_full(tmp_path, stderr, run):
    process, _ = stalled_server(tmp_path, stderr)
    elapsed = signal_twice(process, signal.SIGINT, signal.SIGTERM, 0.1)
    print("SIGINT then SIGTERM: ended in %.3f s" % elapsed)
    assert elapsed < STOPPED_WITHIN and process.returncode == 0


def test_eof_ends_a_server_whose_stderr_is_full(tmp_path, stderr):
    process, _ = stalled_server(tmp_path, stderr)
    started = time.monotonic()
    process.stdin.close()
    elapsed = ended_within(process, started)
    print("EOF: ended in %.3f s" % elapsed)
    assert elapsed < STOPPED_WITHIN and process.returncode == 0
    assert " shutdown" in server_log(tmp_path)


def test_a_signal_while_the_log_is_being_written_on_the_main_thread_never_deadlocks(tmp_path):
    """The handler runs on the main thread between two bytecodes, here while that thread
    holds the log's lock (stopped inside the write by a gate): it must wake the stop anyway,
    and a second signal of the other kind on top of it must change nothing."""
    watch = LogWatch()
    log = askrich.Log(str(tmp_path), stream=watch)
    append = log._append
    for run in range(20):
        inside, release, stopped = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def gated_append(data, inside=inside, release=release):
            inside.set()
            release.wait(WAIT)
            append(data)

        def signal_the_main_thread(inside=inside, release=release, stopped=stopped, seen=seen):
            inside.wait(WAIT)
            for signum in (signal.SIGTERM, signal.SIGINT) if run % 2 else (signal.SIGINT, signal.SIGTERM):
                signal.pthread_kill(threading.main_thread().ident, signum)
            seen["stopped while the log was held"] = stopped.wait(WAIT) and log.lock.locked()
            release.set()

        signals = askrich.StopSignals(stopped.set, log, deadline=3600)
        try:
            log._append = gated_append
            helper = threading.Thread(target=signal_the_main_thread)
            helper.start()
            log.event("busy", run=run)  # the main thread, inside the lock, waits on the gate
            log._append = append
            helper.join(WAIT)
        finally:
            signals.restore()
        assert seen == {"stopped while the log was held": True}, run
        watch.wait_for("signal", nth=run + 1)  # and logged, once the lock was free
    log.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="our own stderr descriptor is Linux's")
def test_closing_the_log_while_a_line_is_being_written_keeps_its_descriptor_until_the_write_ends(monkeypatch):
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w")
    lines = askrich.StderrLines(stream)
    ours = lines.descriptor
    writing, release = threading.Event(), threading.Event()
    real_write = os.write

    def slow_write(descriptor, data):
        if descriptor == ours:
            writing.set()
            release.wait(WAIT)
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", slow_write)
    writer = threading.Thread(target=lines.say, args=("a line\n",))
    writer.start()
    try:
        assert writing.wait(WAIT)
        lines.close()
        # The number is not given back while the write uses it: the process could reuse it
        # for another file (an answer's archive) and the line would land there.
        os.fstat(ours)
    finally:
        release.set()
        writer.join(WAIT)
    with pytest.raises(OSError):
        os.fstat(ours)
    assert os.read(read_end, 100) == b"a line\n"
    lines.say("after the close\n")  # dropped, not written anywhere
    stream.close()
    os.close(read_end)


def test_a_stop_that_hangs_ends_at_the_last_resort_with_the_commands_code(tmp_path):
    hung = ("import sys, threading\nsys.path.insert(0, %r)\nimport askrich\n"
            "askrich.StopSignals(lambda: None, askrich.Log(%r), code=3)\n"
            "print('ready', flush=True)\nthreading.Event().wait()\n" % (os.path.dirname(MODULE), str(tmp_path / "logs")))
    process = subprocess.Popen([sys.executable, "-c", hung], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout.readline() == b"ready\n"
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    elapsed = ended_within(process, started)
    assert process.returncode == 3 and askrich.STOP_DEADLINE_SECONDS <= elapsed < STOPPED_WITHIN, elapsed
    assert " shutdown-forced after_seconds=1.5" in server_log(tmp_path)


# -- the commands ---------------------------------------------------------------------------


def ask_file(tmp_path) -> str:
    path = tmp_path / "interview.json"
    path.write_text(json.dumps(interview()), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("command", ["demo", "ask"])
def test_demo_and_ask_end_on_sigint_then_sigterm_with_stderr_full(tmp_path, stderr, command):
    args = [command, "--link"] + ([ask_file(tmp_path)] if command == "ask" else [])
    process = start(tmp_path, stderr, args, stdin=subprocess.DEVNULL)
    stderr.read_until(rb"http://localhost:\d+/s/")
    stderr.fill()
    elapsed = signal_twice(process, signal.SIGINT, signal.SIGTERM, 0.1)
    print("%s: ended in %.3f s" % (command, elapsed))
    assert elapsed < STOPPED_WITHIN and process.returncode == 1  # stopped, not answered
    assert process.stdout.read() == b""


def test_the_inbox_served_here_ends_on_two_sigterms_with_stderr_full(tmp_path, stderr):
    process = start(tmp_path, stderr, ["inbox", "--link"], env={"ASK_USER_RICH_INBOX_PORT": str(free_port())},
                    stdin=subprocess.DEVNULL)
    assert process.stdout.readline().startswith(b"http://localhost:")
    stderr.read_until(b"until Ctrl-C")
    stderr.fill()
    elapsed = signal_twice(process, signal.SIGTERM, signal.SIGTERM, 0.005)
    print("inbox: ended in %.3f s" % elapsed)
    assert elapsed < STOPPED_WITHIN and process.returncode == 0
    assert " signal signal=15" in server_log(tmp_path)


HOOK_CALLS = {
    "ask-user-question": {"hook_event_name": "PreToolUse", "tool_name": "AskUserQuestion",
                          "tool_input": {"questions": [{"question": "Which one?", "header": "Pick",
                                                        "options": [{"label": "A"}, {"label": "B"}],
                                                        "multiSelect": False}]}},
    "permission-request": {"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                           "tool_input": {"command": "npm test", "description": "Run the tests"},
                           "permission_suggestions": []},
}


@pytest.mark.parametrize("hook", sorted(HOOK_CALLS))
def test_both_hooks_end_silently_on_sigterm_then_sigint_with_stderr_full(tmp_path, stderr, hook):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / ("hook-%s.on" % hook)).write_text("on")
    process = start(tmp_path, stderr, ["hook", hook])
    process.stdin.write(json.dumps(HOOK_CALLS[hook]).encode())
    process.stdin.close()
    stderr.read_until(rb"http://localhost:\d+/s/")
    stderr.fill()
    elapsed = signal_twice(process, signal.SIGTERM, signal.SIGINT, 0.005)
    print("hook %s: ended in %.3f s" % (hook, elapsed))
    assert elapsed < STOPPED_WITHIN and process.returncode == 0
    assert process.stdout.read() == b""  # the client asks in its terminal
    assert " signal signal=15" in server_log(tmp_path)


# -- the suite's own check: no process of ours outlives its test ---------------------------


def test_the_leftover_check_finds_this_runs_servers_only_and_wakes_on_their_exit(tmp_path):
    from helpers import leftovers

    ours = SubprocessServer(tmp_path / "ours")
    theirs = subprocess.Popen([sys.executable, MODULE], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                              if k != leftovers.RUN_MARK})
    try:
        ours.initialize()
        found = leftovers.our_servers()
        assert ours.process.pid in {pid for pid, _ in found} and theirs.pid not in {pid for pid, _ in found}
        mine = {key: argv for key, argv in found.items() if key[0] == ours.process.pid}
        assert leftovers.still_running(mine, 0.05) == mine
        ours.process.stdin.close()
        started = time.monotonic()
        assert leftovers.still_running(mine, WAIT) == {}
        assert time.monotonic() - started < WAIT / 2  # woken by the exit, not by the deadline
    finally:
        ours.close()
        theirs.stdin.close()
        theirs.wait(WAIT)
