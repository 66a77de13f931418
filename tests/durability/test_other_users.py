"""Another user of this machine attacks the form server and the inbox (tests/README.md, "Another
user of this machine"). The attacks run as uid 65534 through setpriv (tests/helpers/other_user.py);
the servers run as the test's own user."""

from __future__ import annotations

import json
import os
import time

import pytest

from helpers.inbox_support import free_port, read_key
from helpers.other_user import OtherUserProcess, binds_as_other_user, run_as_other_user
from helpers.support import WAIT, LogWatch, askrich, interview, watched_runtime

pytestmark = pytest.mark.skipif(os.name != "posix", reason="other users and setpriv are POSIX")


def runtime(log_dir, **settings):
    """A runtime on `log_dir` and the LogWatch its log writes to."""
    rt = watched_runtime(log_dir, **settings)
    return rt, rt.watch


@pytest.fixture
def loopbacks():
    """Both loopbacks, or a skip with the reason (and a failure where it must not skip)."""
    if not askrich.has_ipv6_loopback():
        if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_OTHER_USER") == "1":
            pytest.fail("this machine has no IPv6 loopback ([::1]) to attack")
        pytest.skip("this machine has no IPv6 loopback: URLs can only lead to 127.0.0.1")
    return ("127.0.0.1", "::1")


def test_another_user_can_bind_neither_loopback_on_a_forms_port_or_the_inboxs(tmp_path, loopbacks):
    nobody_holds = free_port()
    assert binds_as_other_user(nobody_holds) == {"127.0.0.1": "bound", "::1": "bound"}  # the attack works

    inbox_port = free_port()
    rt, log = runtime(tmp_path / "logs", inbox_port=inbox_port)
    try:
        form = rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding", "port=%d" % inbox_port)
        form_port = rt.form_server.port
        # The URL shown leads to one of the two (the door on the inbox's port, or the form's own).
        assert any(rt.form_url(form).startswith("http://localhost:%d/" % port) for port in (form_port, inbox_port))
        assert sorted(server.server_address[0] for server in rt.form_server.servers) == ["127.0.0.1", "::1"]
        for port in (form_port, inbox_port):
            assert binds_as_other_user(port) == {"127.0.0.1": "EADDRINUSE", "::1": "EADDRINUSE"}
    finally:
        rt.close()


def test_a_random_port_taken_on_the_other_loopback_is_given_back_and_another_tried(loopbacks):
    import socket
    import socketserver

    squatted = []  # [::1] ports another program holds when we come to them

    def make(address, family):
        if family == socket.AF_INET6 and len(squatted) < 3:
            squatted.append(address[1])
            raise OSError(98, "Address already in use")
        server = socketserver.TCPServer.__new__(socketserver.TCPServer)
        server.address_family = family
        socketserver.TCPServer.__init__(server, address, socketserver.BaseRequestHandler)
        return server

    listener = askrich.LoopbackListener.bind(make, "127.0.0.1", 0)
    try:
        assert len(squatted) == 3 and listener.port not in squatted
        assert [server.server_address[:2] for server in listener.servers] == [
            ("127.0.0.1", listener.port), ("::1", listener.port)]
        # The ports given back are free again: nothing of ours is left on them.
        assert all(askrich.port_is_free("127.0.0.1", port) for port in squatted)
    finally:
        listener.close()


SQUAT_V6 = r"""
import json, socket, sys
squat = socket.socket(socket.AF_INET6)
squat.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
squat.bind(("::1", int(sys.argv[1])))
squat.listen(8)
print(json.dumps({"listening": True}))
while True:
    connection, _ = squat.accept()
    print(json.dumps({"request": connection.recv(4096).decode("latin-1")}))
    connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{}")
    connection.close()
"""


def test_an_inbox_port_held_by_another_user_on_one_loopback_is_not_held_and_is_reported_once(tmp_path, loopbacks):
    port = free_port()
    squatter = OtherUserProcess(SQUAT_V6, str(port))
    try:
        squatter.wait_for(lambda report: report.get("listening"), "listening on [::1]")
        rt, log = runtime(tmp_path / "logs", inbox_port=port)
        try:
            form = rt.open_interview(interview(delivery="link"))
            log.wait_for("inbox-port-taken", "port=%d" % port)
            assert rt.inbox.server is None  # 127.0.0.1 was free, but only half the address
            assert askrich.form_state(rt, form).get("inbox", {}).get("url") is None
            key = read_key(tmp_path / "logs")
            # The probe asked the squatter for a proof, and sent it nothing of the key.
            probe = squatter.wait_for(lambda report: "request" in report, "the holder's probe")
            assert probe["request"].startswith("GET /api/inbox/prove?nonce=")
            assert all(key not in report.get("request", "") for report in squatter.seen)
            assert log.count("inbox-port-taken") == 1
        finally:
            rt.close()
    finally:
        squatter.close()


def another_agent(logs, port, folder, title):
    """A server process of the same user asking `title`, once its registry entry is written
    (within 250 ms of the question)."""
    from helpers.inbox_support import Agent

    agent = Agent(logs, port, "codex", folder, title)
    agent.server.log.wait_for("inbox-listed")
    return agent


@pytest.fixture
def holder(tmp_path):
    """(runtime, its log, the log folder, the inbox port, agents): a process holding the inbox
    for its first interview; the agents (another_agent) a test starts there end with it."""
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = runtime(logs, inbox_port=port)
    agents: list = []
    try:
        first = rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding", nth=1)
        yield rt, log, logs, port, first, agents
    finally:
        for agent in agents:
            agent.close()
        rt.close()


def test_the_inbox_key_changes_once_no_process_has_an_interview_and_only_then(tmp_path, holder):
    from helpers.support import http_request

    rt, log, logs, port, first, agents = holder
    before = read_key(logs)
    agent = another_agent(logs, port, tmp_path / "elsewhere", "Still waiting there")
    agents.append(agent)
    rt.close()  # this process ends, but another still waits: the key stays
    assert read_key(logs) == before
    agent.close()  # the last interview anywhere is gone with it
    assert not (logs / "inbox.key").exists()
    later, later_log = runtime(logs, inbox_port=port)
    try:
        second = later.open_interview(interview(delivery="link"))
        later_log.wait_for("inbox-holding")
        after = read_key(logs)
        assert after != before
        # What an old tab, a bookmark or a captured key holds now opens nothing.
        base = "http://127.0.0.1:%d" % port
        assert http_request("%s/api/inbox/%s" % (base, before)).status == 404
        assert http_request("%s/inbox/%s" % (base, before)).status == 404
        assert askrich.prove_inbox_holder(port, before) == "foreign"
        assert http_request("%s/api/inbox/%s" % (base, after)).json()["interviews"][0]["interviewId"] == second.id
    finally:
        later.close()


# -- files another user plants, and a disk that fills --------------------------------------------


PLANT_LOG = r"""
import os, sys
descriptor = os.open(os.path.join(sys.argv[1], "server.log"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
os.fchmod(descriptor, 0o666)
os.close(descriptor)
"""


def test_a_server_log_planted_by_another_user_in_a_shared_folder_is_not_written(tmp_path):
    import shutil
    import stat
    import tempfile

    shared = tempfile.mkdtemp(prefix="ask-user-rich-shared-", dir="/tmp")
    try:
        os.chmod(shared, 0o1777)  # a shared, sticky log folder, as /tmp is
        planted = run_as_other_user(PLANT_LOG, shared)
        assert planted.returncode == 0, planted.stderr
        path = os.path.join(shared, "server.log")
        assert os.stat(path).st_uid == 65534
        stream = LogWatch()
        log = askrich.Log(shared, stream=stream)
        log.event("page-view", title="Rotate the production keys", agent="Mozilla/5.0")
        log.close()
        assert os.path.getsize(path) == 0  # nothing reached the planted file
        degraded = stream.wait_for("log-degraded")
        assert "server.log" in degraded
        assert "page-view" in stream.getvalue()  # stderr still has every line
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 and os.stat(path).st_uid == 65534
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_fifo_as_a_registry_file_blocks_no_one(tmp_path):
    import subprocess
    import sys
    import threading

    folder = tmp_path / "inbox"
    folder.mkdir(mode=0o700)
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        os.mkfifo(str(folder / ("%d.json" % alive.pid)), 0o600)
        registry = askrich.InboxRegistry(str(tmp_path))
        found = []
        scanning = threading.Thread(target=lambda: found.append(registry.scan()[1]), daemon=True)
        scanning.start()
        scanning.join(WAIT)
        assert not scanning.is_alive(), "the scan is blocked opening the FIFO"
        assert found == [[]]
    finally:
        alive.stdin.close()
        alive.wait(WAIT)


FULL_DISK = r"""
import json, os, resource, signal, sys, threading
sys.path.insert(0, sys.argv[1])
import askrich
log_dir, port = sys.argv[2], int(sys.argv[3])
events = {}
happened = threading.Condition()

def heard(level, event, fields, about=None):
    with happened:
        events[event] = fields
        happened.notify_all()

def wait_for(event):
    with happened:
        assert happened.wait_for(lambda: event in events, 10), event

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))  # every file stops at 100 bytes: a full disk
log = askrich.Log(log_dir, stream=sys.stderr)
log.listener = heard
rt = askrich.Runtime(askrich.Config(log_dir=log_dir, open_browser=False, inbox_port=port), log)
form = rt.open_interview({"title": "Written once the disk has room", "questions": [{"id": "q", "header": "Ok?"}]})
wait_for("inbox-write-failed")
entry = os.path.join(log_dir, "inbox", "%d.json" % os.getpid())
print(json.dumps({"failed": events["inbox-write-failed"]["reason"], "entry": os.path.exists(entry),
                  "left": sorted(os.listdir(os.path.join(log_dir, "inbox")))}), flush=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # room again
wait_for("inbox-written-again")
with open(entry) as written:
    print(json.dumps({"entry": json.load(written)["interviews"][0]["title"]}), flush=True)
rt.close()
"""


def test_the_inbox_writes_its_entry_again_once_a_full_disk_has_room(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FULL_DISK, os.path.dirname(askrich.__file__),
                           str(tmp_path / "logs"), str(free_port())], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    failed, recovered = [json.loads(line) for line in done.stdout.splitlines()]
    assert "File too large" in failed["failed"] and failed["entry"] is False
    assert failed["left"] == []  # no temporary file left behind
    assert recovered == {"entry": "Written once the disk has room"}


def test_a_new_interview_of_another_process_is_listed_at_once(tmp_path, holder):
    from helpers.support import http_request

    rt, log, logs, port, first, agents = holder
    listing = "http://127.0.0.1:%d/api/inbox/%s" % (port, read_key(logs))
    assert len(http_request(listing).json()["interviews"]) == 1  # the holder has looked at the folder
    agents.append(another_agent(logs, port, tmp_path / "elsewhere", "Asked just now"))
    # No page watches and no form is open: still there at the first request after, not 5 s later.
    titles = [row["title"] for row in http_request(listing).json()["interviews"]]
    assert "Asked just now" in titles


def test_temporary_files_left_by_a_killed_process_are_removed_at_start_and_fresh_ones_kept(tmp_path):
    logs = tmp_path / "logs"
    stale, fresh = [], []
    for folder, name in (("answers", "2026-01-01-ab.json.tmp"), ("tasks", "abc.json.tmp"),
                         ("inbox", ".999999.json.tmp"), ("", "inbox.key.999999.tmp")):
        (logs / folder).mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(str(logs / folder), 0o700)
        old, new = logs / folder / name, logs / folder / ("new-" + name)
        for path in (old, new):
            path.write_bytes(b"{")
        hour_ago = time.time() - 3600
        os.utime(str(old), (hour_ago, hour_ago))
        stale.append(old)
        fresh.append(new)  # perhaps another live process writing it right now
    rt, log = runtime(logs)
    try:
        assert [path for path in stale if path.exists()] == []
        assert all(path.exists() for path in fresh)
        assert "count=4" in log.wait_for("temporaries-removed")
    finally:
        rt.close()


def test_a_forms_ticket_opens_the_inbox_once_and_its_session_header_opens_every_session_route(tmp_path, holder):
    from helpers.support import http_request

    rt, log, logs, port, first, agents = holder
    key = read_key(logs)
    to_inbox = http_request(rt.form_url(first).replace("/s/", "/api/s/") + "/inbox")
    assert to_inbox.status == 303 and key not in to_inbox.headers["Location"]
    # The page the ticket opens holds nothing secret; it exchanges the ticket itself.
    page = http_request(to_inbox.headers["Location"])
    assert page.status == 200 and "Set-Cookie" not in page.headers
    entered = http_request(to_inbox.headers["Location"], "POST")
    assert entered.status == 200 and "Set-Cookie" not in entered.headers
    session, verifier = entered.json()["session"], entered.json()["verifier"]
    assert key not in session and key not in verifier
    assert verifier == askrich.page_verifier(key, session.split(".")[1])
    assert http_request(to_inbox.headers["Location"], "POST").status == 404  # a ticket opens once
    base = "http://localhost:%d" % port
    with_session = {"X-Ask-User-Rich-Session": session}
    assert http_request(base + "/inbox/listing", headers=with_session).json()["interviews"][0]["interviewId"] == first.id
    assert http_request(base + "/inbox/share", headers=with_session).status == 404  # no public URL set
    for path in ("/inbox/listing", "/inbox/events", "/inbox/share"):
        assert http_request(base + path).status == 404  # without the session, as for a wrong key
        forged = session[:-1] + ("1" if session.endswith("0") else "0")
        assert http_request(base + path, headers={"X-Ask-User-Rich-Session": forged}).status == 404
        # A cookie opens nothing: browsers send cookies to every port of localhost.
        assert http_request(base + path, headers={"Cookie": "ask-user-rich-inbox=" + session}).status == 404
