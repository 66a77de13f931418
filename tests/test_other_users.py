"""Another user of this machine attacks the form server and the inbox (tests/README.md, "Another
user of this machine"). The attacks run as uid 65534 through setpriv (tests/other_user.py);
the servers run as the test's own user."""

from __future__ import annotations

import os
import time

import pytest

from inbox_support import free_port
from other_user import OtherUserProcess, binds_as_other_user
from support import WAIT, LogWatch, askrich, interview

pytestmark = pytest.mark.skipif(os.name != "posix", reason="other users and setpriv are POSIX")


def runtime(log_dir, **settings):
    log = LogWatch()
    config = askrich.Config(log_dir=str(log_dir), open_browser=False, **settings)
    return askrich.Runtime(config, askrich.Log(str(log_dir), stream=log)), log


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
        assert form.own_url.startswith("http://localhost:%d/" % form_port)
        assert sorted(server.server_address[0] for server in rt.form_server.servers) == ["127.0.0.1", "::1"]
        for port in (form_port, inbox_port):
            assert binds_as_other_user(port) == {"127.0.0.1": "EADDRINUSE", "::1": "EADDRINUSE"}
    finally:
        rt.close()


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
            assert form.state_json().get("inbox", {}).get("url") is None
            key = open(os.path.join(str(tmp_path / "logs"), "inbox.key")).read().strip()
            # The probe asked the squatter for a proof, and sent it nothing of the key.
            probe = squatter.wait_for(lambda report: "request" in report, "the holder's probe")
            assert probe["request"].startswith("GET /api/inbox/prove?nonce=")
            assert all(key not in report.get("request", "") for report in squatter.seen)
            assert log.count("inbox-port-taken") == 1
        finally:
            rt.close()
    finally:
        squatter.close()


def read_key(log_dir) -> str:
    with open(os.path.join(str(log_dir), "inbox.key"), encoding="ascii") as handle:
        return handle.read().strip()


def test_the_inbox_key_changes_once_no_process_has_an_interview_and_only_then(tmp_path):
    from inbox_support import Agent
    from support import http_request, submit

    port = free_port()
    logs = tmp_path / "logs"
    rt, log = runtime(logs, inbox_port=port)
    agent = None
    try:
        first = rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding", nth=1)
        before = read_key(logs)
        agent = Agent(logs, port, "codex", tmp_path / "elsewhere", "Still waiting there")
        entry = logs / "inbox" / ("%d.json" % agent.pid)
        deadline = time.monotonic() + WAIT
        while not entry.exists():  # the agent's worker writes its entry within 250 ms
            assert time.monotonic() < deadline, "the agent never listed its interview"
            time.sleep(0.02)
        submit(first.url, {})
        rt.close()  # this process is gone, but another still waits: the key stays
        log.wait_for("inbox-released", nth=1)
        assert read_key(logs) == before
        agent.close()  # the last interview anywhere is gone with it
        agent = None
        rt, log = runtime(logs, inbox_port=port)
        second = rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding", nth=1)
        after = read_key(logs)
        assert after != before
        # What an old tab, a bookmark or a captured key holds now opens nothing.
        base = "http://127.0.0.1:%d" % port
        assert http_request("%s/api/inbox/%s" % (base, before)).status == 404
        assert http_request("%s/inbox/%s" % (base, before)).status == 404
        assert askrich.prove_inbox_holder(port, before) == "foreign"
        assert http_request("%s/api/inbox/%s" % (base, after)).json()["interviews"][0]["url"] == second.url
    finally:
        if agent is not None:
            agent.close()
        rt.close()
