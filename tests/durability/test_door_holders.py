"""Nobody else ever holds the door (tests/README.md, "Another user of this machine"): every
process of ours that handed out a door URL holds the door's port at once, so another user
(uid 65534 through setpriv, tests/helpers/other_user.py) never binds it while one of ours lives, and
the door survives any one of them being killed; the key, tickets and the door's forwarding
answer only to what is ours."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from helpers.inbox_support import Agent, free_port, read_key
from helpers.other_user import OtherUserProcess
from helpers.support import askrich, http_request, interview, submit
from test_other_users import runtime

pytestmark = pytest.mark.skipif(not askrich.DOOR_SHARED, reason="the kernel shares a port with one user only on Linux")

# Tries to bind the port on both loopbacks, over and over, as an attacker spinning on bind()
# would; reports {"spinning": port} once, then {"bound": address} for every bind that worked.
SPINNER = r"""
import json, socket, sys, time
port = int(sys.argv[1])
print(json.dumps({"spinning": port}), flush=True)
held = []
while True:
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        attempt = socket.socket(family)
        attempt.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        attempt.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            attempt.bind((address, port))
            attempt.listen(16)
            held.append(attempt)
            print(json.dumps({"bound": address}), flush=True)
        except OSError:
            attempt.close()
    time.sleep(0.002)
"""


def door_state(port: int, agent) -> int:
    token = agent.url.rsplit("/", 1)[1]
    return http_request("http://127.0.0.1:%d/api/s/%s/state" % (port, token), timeout=5).status


def test_killing_any_holder_leaves_no_gap_and_another_user_never_binds_the_door(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    agents = [Agent(logs, port, "agent-%d" % n, tmp_path / str(n), "Asked by %d" % n) for n in range(3)]
    spinner = None
    try:
        for agent in agents:
            assert agent.url.startswith("http://localhost:%d/s/" % port)  # each handed out a door URL
        spinner = OtherUserProcess(SPINNER, str(port))
        spinner.wait_for(lambda report: "spinning" in report, "its first try")
        for round_ in range(20):
            victim = round_ % 3  # the first one started is killed first
            agents[victim].kill()
            # At once, with no wait: the other two answer at the door's port.
            for agent in agents:
                if agent is not agents[victim]:
                    assert door_state(port, agent) == 200, "round %d" % round_
            agents[victim] = Agent(logs, port, "agent-%d" % round_, tmp_path / ("r%d" % round_), "Round %d" % round_)
        # A submit through the door lands at its owner.
        token = agents[1].url.rsplit("/", 1)[1]
        sent = http_request("http://127.0.0.1:%d/api/s/%s/submit" % (port, token), "POST",
                            {"answers": {"q%d" % n: {"selected": ["a"]} for n in (1, 2, 3)}},
                            headers={"Host": "localhost:%d" % port})
        assert sent.status == 200, sent.body
        assert not [report for report in spinner.seen if "bound" in report]
        assert spinner.process.poll() is None
    finally:
        if spinner is not None:
            spinner.close()
        for agent in agents:
            agent.close()
    assert not [report for report in spinner.seen if "bound" in report], spinner.seen


def test_the_key_is_retired_when_none_of_ours_lives_whatever_holds_the_port(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    spinner = OtherUserProcess(SPINNER, str(port))
    try:
        spinner.wait_for(lambda report: report.get("bound") == "127.0.0.1", "the port taken first")
        rt, log = runtime(logs, inbox_port=port)
        try:
            form = rt.open_interview(interview(delivery="link"))
            assert rt.form_url(form) == rt.own_url(form)  # the door is not ours: the form's own port
            assert (logs / "inbox.key").exists()
        finally:
            rt.close()
        # The port is still taken, but no process of ours lives: the key goes all the same.
        assert not (logs / "inbox.key").exists()
    finally:
        spinner.close()


def test_an_old_keys_sessions_and_tickets_open_nothing_and_a_settled_form_leads_nowhere(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = runtime(logs, inbox_port=port)
    try:
        form = rt.open_interview(interview(delivery="link"))
        other = rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding")
        ticket, unused = rt.inbox.ticket_url(), rt.inbox.ticket_url()
        session = http_request(ticket, "POST").json()["session"]
        old = read_key(logs)
        door_form, door_other = rt.form_url(form), rt.form_url(other)
        # A settled form's link to the inbox opens nothing, however fresh the link.
        assert http_request(door_form.replace("/s/", "/api/s/") + "/inbox").status == 303
        assert submit(rt.own_url(form), {"q": {"selected": ["a"]}}).status == 200
        assert http_request(door_form.replace("/s/", "/api/s/") + "/inbox").status == 404
        assert http_request(door_other.replace("/s/", "/api/s/") + "/inbox").status == 303
    finally:
        rt.close()
    assert not (logs / "inbox.key").exists()
    later, later_log = runtime(logs, inbox_port=port)
    try:
        later.open_interview(interview(delivery="link"))
        later_log.wait_for("inbox-holding")
        assert read_key(logs) != old
        base = "http://localhost:%d" % port
        assert http_request(base + "/inbox/listing", headers={"X-Ask-User-Rich-Session": session}).status == 404
        assert http_request(unused, "POST").status == 404
    finally:
        later.close()


def test_a_ticket_is_redeemed_once_whichever_process_redeems_it(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    first, first_log = runtime(logs, inbox_port=port)
    second, second_log = runtime(logs, inbox_port=port)
    try:
        first.open_interview(interview(delivery="link"))
        second.open_interview(interview(delivery="link"))
        first_log.wait_for("inbox-holding")
        second_log.wait_for("inbox-holding")
        assert first.inbox.server is not None and second.inbox.server is not None  # both hold the door
        ticket = first.inbox.ticket_url().rsplit("/", 1)[1]
        assert second.inbox.redeem(ticket) is not None
        assert first.inbox.redeem(ticket) is None
        assert second.inbox.redeem(ticket) is None
    finally:
        second.close()
        first.close()


def test_a_key_another_process_replaced_is_used_at_once_for_tickets_sessions_and_the_key_route(tmp_path):
    """Two processes that start at once may each retire the other's key; whichever key the file
    holds is the one every ticket, session and key link is made and checked with, from the next
    request on, not from the worker's next look (5 s later)."""
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = runtime(logs, inbox_port=port)
    try:
        rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding")
        old = read_key(logs)
        askrich.retire_inbox_key(str(logs))  # as the other process does when it finds nobody else
        new = askrich.load_inbox_key(str(logs))
        assert new != old
        ticket = rt.inbox.ticket_url().rsplit("/", 1)[1]
        assert askrich.inbox_pass_nonce(new, "ticket", ticket) is not None  # made with the new key
        session = rt.inbox.redeem(ticket)["session"]
        base = "http://localhost:%d" % port
        assert http_request(base + "/inbox/listing", headers={"X-Ask-User-Rich-Session": session}).status == 200
        assert http_request("%s/api/inbox/%s" % (base, new)).status == 200
        assert http_request("%s/api/inbox/%s" % (base, old)).status == 404
    finally:
        rt.close()


# Listens on the port it is given as another user and reports what each connection sent.
LISTENER = r"""
import json, socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(json.dumps({"port": listener.getsockname()[1]}), flush=True)
while True:
    connection, _ = listener.accept()
    connection.settimeout(2)
    got = b""
    try:
        while True:
            chunk = connection.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    print(json.dumps({"got": got.decode("latin-1")}), flush=True)
    connection.close()
"""


def test_the_door_never_forwards_to_a_listener_that_is_not_ours(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = runtime(logs, inbox_port=port)
    stranger = OtherUserProcess(LISTENER)
    alive = subprocess.Popen(["sleep", "60"])  # a live process of ours, as a dead owner's pid reused
    try:
        rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding")
        foreign = stranger.wait_for(lambda report: "port" in report, "its port")["port"]
        # The kernel's word on whose listener it is, both ways the door can ask.
        assert askrich._listener_uids_by_netlink(foreign) == {65534} == askrich._listener_uids_by_proc(foreign)
        token = "T" * 24
        entry = {"pid": alive.pid, "interviews": [], "port": foreign, "forms": [askrich.token_digest(token)],
                 "version": askrich.__version__}
        path = logs / "inbox" / ("%d.json" % alive.pid)
        descriptor = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(entry, handle)
        base = "http://127.0.0.1:%d" % port
        answer = http_request(base + "/api/s/%s/submit" % token, "POST", {"answers": {}, "note": "a secret"})
        assert answer.status == 502 and answer.json()["code"] == "owner-unreachable"
        assert http_request(base + "/s/" + token).status == 502
        # The listener takes one connection at a time, in the order they came: once the test's
        # own, made after the door's requests, is reported, so is every connection before it.
        with socket.create_connection(("127.0.0.1", foreign)) as last:
            last.sendall(b"the test's own")
        stranger.wait_for(lambda report: report.get("got") == "the test's own", "the test's own connection")
        got = [report["got"] for report in stranger.seen if "got" in report]
        assert got[-1] == "the test's own" and all(sent == "" for sent in got[:-1]), got
    finally:
        alive.kill()
        alive.wait()
        stranger.close()
        rt.close()


# Opens as many connections to the port as it can, holds them a moment, closes them all at
# once and reports how many it had.
FLOOD = r"""
import json, socket, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(count):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=1))
    except OSError:
        pass
time.sleep(1)
for connection in held:
    connection.close()
print(json.dumps({"opened": len(held)}), flush=True)
"""


def test_the_door_answers_within_5_s_after_a_flood_of_connections_closes(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = runtime(logs, inbox_port=port)
    flood = None
    try:
        rt.open_interview(interview(delivery="link"))
        log.wait_for("inbox-holding")
        key = read_key(logs)
        flood = OtherUserProcess(FLOOD, str(port), "8000")
        opened = flood.wait_for(lambda report: "opened" in report, "the flood's end", timeout=120)["opened"]
        assert opened > 2000
        closed = time.monotonic()
        answer = http_request("http://127.0.0.1:%d/api/inbox/%s" % (port, key), timeout=5)
        assert answer.status == 200 and time.monotonic() - closed < 5
    finally:
        if flood is not None:
            flood.close()
        rt.close()
