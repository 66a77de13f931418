"""A checkout server (`python3 askrich.py`) restarts from cached bytecode once it idles after
the handshake, to give back the memory its own parse left behind (askrich.py, "Restart from
bytecode"). These tests hold it to "nothing is lost": the same pid, the handshake kept, every
message answered, signals kept, and no restart where one would be wrong."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from hypothesis import given, strategies as st

import hypothesis_profiles
from delivery_support import FLAT_INTERVIEW, fetch, submit_like_a_browser
from support import MODULE, ROOT, WAIT, SubprocessServer

import askrich

RESTART_WAIT = askrich.RESTART_QUIET_SECONDS + WAIT


def log_events(log_dir) -> list:
    path = os.path.join(str(log_dir), "server.log")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [line.split(" ", 3)[2].strip() for line in handle if line.count(" ") >= 2]


def wait_for_event(log_dir, event: str, timeout: float = RESTART_WAIT) -> None:
    deadline = time.monotonic() + timeout
    while event not in log_events(log_dir):
        assert time.monotonic() < deadline, "no %r in the log: %s" % (event, log_events(log_dir))
        time.sleep(0.005)


def command_line(pid: int) -> list:
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        return handle.read().decode().split("\0")[:-1]


def restarted_into_bytecode(peer, cache_dir) -> str:
    """The cached .pyc the server now runs from, asserting it is one of ours."""
    argv = command_line(peer.process.pid)
    code = argv[-1]
    assert code.endswith(".pyc") and os.path.dirname(code) == os.path.join(cache_dir, "ask-user-rich"), argv
    assert os.path.basename(code).startswith("checkout-%s-" % sys.implementation.cache_tag), argv
    return code


# -- StdinPipe: the reader that knows when it holds nothing ------------------------------------


@hypothesis_profiles.examples(ci=60, long=2000)
@given(
    data=st.binary(max_size=3000).map(lambda b: b.replace(b"x", b"\n")) | st.lists(
        st.sampled_from([b"\n", b"ab", b"{}\n", b"x" * 700, b"\n\n"]), max_size=40).map(b"".join),
    chunks=st.lists(st.integers(min_value=1, max_value=900), min_size=1, max_size=10),
    limit=st.integers(min_value=1, max_value=1200),
)
def test_stdin_pipe_yields_the_same_lines_as_a_buffered_reader(data, chunks, limit):
    """bounded_lines over StdinPipe equals bounded_lines over a BufferedReader, however the
    bytes are split into writes, and long lines are cut or skipped the same way."""
    read_fd, write_fd = os.pipe()

    def write_in_chunks():
        position, index = 0, 0
        while position < len(data):
            size = chunks[index % len(chunks)]
            os.write(write_fd, data[position:position + size])
            position, index = position + size, index + 1
        os.close(write_fd)

    writer = threading.Thread(target=write_in_chunks)
    writer.start()
    try:
        got = list(askrich.bounded_lines(askrich.StdinPipe(read_fd), limit))
    finally:
        writer.join()
        os.close(read_fd)
    assert got == list(askrich.bounded_lines(io.BufferedReader(io.BytesIO(data)), limit))


def test_stdin_pipe_is_quiet_only_when_it_holds_nothing_and_nothing_arrives():
    read_fd, write_fd = os.pipe()
    try:
        pipe = askrich.StdinPipe(read_fd)
        assert pipe.quiet_for(0.01)
        os.write(write_fd, b"one\ntwo\n")
        assert not pipe.quiet_for(0.01)  # waiting in the pipe
        assert pipe.readline() == b"one\n"
        assert not pipe.quiet_for(0.01)  # "two" is held by the reader itself
        assert pipe.readline() == b"two\n"
        assert pipe.quiet_for(0.01)
    finally:
        os.close(read_fd)
        os.close(write_fd)


# -- the restart, in the real process ----------------------------------------------------------


def test_an_idle_checkout_server_restarts_from_bytecode_in_place_and_keeps_its_handshake(tmp_path):
    logs = tmp_path / "logs"
    peer = SubprocessServer(logs)
    try:
        reply = peer.initialize({"elicitation": {"form": {}}}, version="2025-06-18")
        assert reply["result"]["protocolVersion"] == "2025-06-18"
        assert peer.call("logging/setLevel", {"level": "info"})["result"] == {}
        pid = peer.process.pid
        # The old image says it restarts; the new one says it resumed, at the level the client
        # chose before the restart and with the protocol version it negotiated.
        restart = peer.receive(lambda m: m.get("method") == "notifications/message"
                               and m["params"]["data"]["event"] == "restart", RESTART_WAIT)
        resumed = peer.receive(lambda m: m.get("method") == "notifications/message"
                               and m["params"]["data"]["event"] == "resume")
        assert resumed["params"]["data"]["protocol"] == "2025-06-18"
        assert peer.process.pid == pid and peer.process.poll() is None
        code = restarted_into_bytecode(peer, str(logs) + "-cache")
        assert restart["params"]["data"]["code"] == code
        assert os.stat(code).st_mode & 0o777 == 0o600
        assert oct(os.stat(os.path.dirname(code)).st_mode & 0o777) == oct(0o700)

        assert [tool["name"] for tool in peer.call("tools/list")["result"]["tools"]] == [
            "ask_user_rich", "append_questions", "await_user_answers"]
        # The client's elicitation capability came across: delivery "elicitation" asks it.
        call = peer.request("tools/call", {"name": "ask_user_rich",
                                           "arguments": dict(FLAT_INTERVIEW, delivery="elicitation")})
        elicit = peer.receive(lambda m: m.get("method") == "elicitation/create")
        assert "db" in elicit["params"]["requestedSchema"]["properties"]
        peer.send({"jsonrpc": "2.0", "id": elicit["id"], "result": {"action": "decline"}})
        result = peer.response(call)["result"]["structuredContent"]
        assert result["status"] == "declined" and result["via"] == "elicitation", result
    finally:
        assert peer.close() == 0
    events = log_events(logs)
    assert events.index("restart") < events.index("resume") < events.index("stdin-closed")
    assert events.count("start") == 1  # one server, one start


def test_the_restarted_server_serves_the_form_and_returns_the_answers(tmp_path):
    """The form's files are read beside askrich.py even though the process now runs a .pyc
    in the cache folder; a whole interview goes through."""
    logs = tmp_path / "logs"
    peer = SubprocessServer(logs)
    try:
        peer.initialize()
        wait_for_event(logs, "resume")
        opened = peer.tool("ask_user_rich", dict(FLAT_INTERVIEW, delivery="link"))["result"]["structuredContent"]
        status, headers, body = fetch(opened["url"].split("#")[0].rsplit("/s/", 1)[0] + "/assets/js/main.js")
        assert status == 200 and headers["Content-Type"].startswith("text/javascript"), status
        with open(os.path.join(ROOT, "assets", "js", "main.js"), "rb") as handle:
            assert body == handle.read()
        waiting = peer.request("tools/call", {"name": "await_user_answers",
                                              "arguments": {"sessionId": opened["sessionId"]}})
        submit_like_a_browser(opened["url"])
        result = peer.response(waiting)["result"]["structuredContent"]
        assert result["status"] == "submitted" and result["interviewId"] == opened["sessionId"]
    finally:
        assert peer.close() == 0


def test_messages_sent_while_the_server_restarts_are_all_answered(tmp_path):
    logs = tmp_path / "logs"
    peer = SubprocessServer(logs)
    try:
        peer.initialize()
        wait_for_event(logs, "restart")  # the old image is on its way out: speak now
        ids = [peer.request("ping") for _ in range(30)]
        for request_id in ids:
            assert peer.response(request_id)["result"] == {}
        wait_for_event(logs, "resume")
    finally:
        assert peer.close() == 0


def test_a_stop_signal_pending_across_the_exec_stops_the_new_image_cleanly(tmp_path):
    """The old image blocks SIGTERM across its exec; a SIGTERM that came meanwhile is pending
    in the new image, which must take it as a stop (exit 0), not die of it or lose it."""
    env = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"), ASK_USER_RICH_OPEN="0",
               ASK_USER_RICH_RESUME=json.dumps({"protocolVersion": "2025-11-25"}))
    launcher = (
        "import os, signal, sys\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"  # pending, as if sent during the exec
        "os.execv(sys.executable, [sys.executable, %r])\n" % MODULE
    )
    process = subprocess.Popen([sys.executable, "-c", launcher], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert process.wait(WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    events = log_events(tmp_path / "logs")
    assert "resume" in events and "signal" in events and "start" not in events, events


def test_a_resumed_server_answers_tools_call_without_a_new_initialize(tmp_path):
    """What the client sees after a restart: the session goes on, no second handshake."""
    env = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"), ASK_USER_RICH_OPEN="0",
               ASK_USER_RICH_RESUME=json.dumps({"protocolVersion": "2025-11-25", "logLevel": "warning"}))
    process = subprocess.run(
        [sys.executable, MODULE], env=env, timeout=WAIT, capture_output=True,
        input=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"await_user_answers",'
              b'"arguments":{"sessionId":"nope"}}}\n',
    )
    assert process.returncode == 0
    reply = json.loads(process.stdout.splitlines()[0])
    assert reply["id"] == 1 and reply["result"]["isError"] is True


def test_no_restart_once_a_tool_was_called_or_with_the_code_cache_off(tmp_path):
    for name, env, first in (
        ("after-a-call", {}, ("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": "x"}})),
        ("cache-off", {"ASK_USER_RICH_CODE_CACHE": "0"}, ("ping", None)),
    ):
        logs = tmp_path / name
        peer = SubprocessServer(logs, env=env)
        try:
            peer.initialize()
            peer.call(*first)
            time.sleep(askrich.RESTART_QUIET_SECONDS + 1.0)
            assert peer.call("ping")["result"] == {}
            assert command_line(peer.process.pid)[-1] == MODULE, name
        finally:
            assert peer.close() == 0
        assert "restart" not in log_events(logs), name


def test_a_checkout_edited_since_the_start_is_not_restarted_into(tmp_path):
    """A `git pull` while the server runs must not swap in other code mid-session."""
    checkout = tmp_path / "checkout"
    shutil.copytree(os.path.join(ROOT, "assets"), str(checkout / "assets"))
    shutil.copy(MODULE, str(checkout / "askrich.py"))
    env = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"), ASK_USER_RICH_OPEN="0",
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    process = subprocess.Popen([sys.executable, str(checkout / "askrich.py")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        process.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
                            b'{"protocolVersion":"2025-11-25","capabilities":{}}}\n')
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1
        with open(str(checkout / "askrich.py"), "a", encoding="utf-8") as handle:
            handle.write("\n# edited\n")
        wait_for_event(tmp_path / "logs", "restart-skipped")
        process.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
        process.stdin.flush()
        assert json.loads(process.stdout.readline()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert command_line(process.pid)[-1] == str(checkout / "askrich.py")
        process.stdin.close()
        assert process.wait(WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with open(str(tmp_path / "logs" / "server.log"), encoding="utf-8") as handle:
        assert "changed since the server started" in handle.read()


def test_the_bytecode_cache_is_reused_and_kept_small(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = tmp_path / "askrich.py"
    shutil.copy(MODULE, str(source))
    restart = askrich.BytecodeRestart(str(source))
    first = restart.cached_code()
    stamp = os.stat(first).st_mtime_ns
    assert restart.cached_code() == first and os.stat(first).st_mtime_ns == stamp  # a hit: not rewritten
    with open(first, "r+b") as handle:  # damaged: compiled afresh
        handle.truncate(40)
    assert restart.cached_code() == first and os.path.getsize(first) > 1000
    for n in range(6):  # other versions of the file: only the newest few are kept
        with open(str(source), "a", encoding="utf-8") as handle:
            handle.write("# version %d\n" % n)
        askrich.BytecodeRestart(str(source)).cached_code()
    kept = [name for name in os.listdir(str(tmp_path / "ask-user-rich")) if name.startswith("checkout-")]
    assert len(kept) == 4, kept  # store_code()'s default


def test_only_a_checkout_run_as_a_script_on_posix_plans_a_restart(tmp_path, monkeypatch):
    plan = askrich.BytecodeRestart.plan
    monkeypatch.setattr(sys, "stdin", None)  # started with stdin closed
    assert plan("__main__", MODULE, {}) is None
    with open(os.devnull, "rb") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert plan("__main__", MODULE, {}).stdin_fd == stdin.fileno()
        assert plan("askrich", MODULE, {}) is None  # imported: the tests, the .pyz
        assert plan("__main__", "/cache/checkout-x.pyc", {}) is None  # already restarted
        assert plan("__main__", MODULE, {"ASK_USER_RICH_CODE_CACHE": "0"}) is None
        assert plan("__main__", str(tmp_path / "gone.py"), {}) is None


def test_without_a_usable_cache_folder_the_server_logs_why_and_serves_on(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    logs = tmp_path / "logs"
    peer = SubprocessServer(logs, env={"XDG_CACHE_HOME": str(blocker)})
    try:
        peer.initialize()
        wait_for_event(logs, "restart-skipped")
        assert peer.call("ping")["result"] == {}
        assert command_line(peer.process.pid)[-1] == MODULE
        opened = peer.tool("ask_user_rich", dict(FLAT_INTERVIEW, delivery="link"))["result"]["structuredContent"]
        assert opened["status"] == "awaiting"
    finally:
        assert peer.close() == 0
    assert "restart" not in log_events(logs)
