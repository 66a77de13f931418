"""The front door (tests/README.md, "The front door"): the inbox's holder serves every form of
every process of this user on its one port, by forwarding each request to the process that owns
the token. Real server processes on one log folder; the holder is this test's own process where
a test must reach into it (its patience with a slow owner), a subprocess elsewhere."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import pytest

from helpers.inbox_support import Agent, free_port, read_key
from helpers.support import WAIT, EventsReader, api_url, askrich, http_request, quiet_runtime, submit, watched_runtime
from form.test_hardening_http import exchange  # a request written byte for byte, the answer whole

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process signals and file modes are POSIX")

ONE_QUESTION = {"title": "Mine", "questions": [{"id": "q", "header": "ok?", "options": [
    {"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}]}


class Trap:
    """A listener of the test's own: the door must never connect to it, whatever a request says."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.settimeout(0)
        self.port = self.socket.getsockname()[1]

    def connections(self) -> int:
        count = 0
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return count
            connection.close()
            count += 1

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def door(tmp_path):
    """This process holds the door (its inbox on a free port); `agent(...)` starts another
    process, one interview asked, on the same log folder."""
    port = free_port()
    logs = tmp_path / "logs"
    runtime = watched_runtime(logs, inbox_port=port)
    log = runtime.watch
    mine = runtime.open_interview(dict(ONE_QUESTION))
    log.wait_for("inbox-holding")
    started = []

    def agent(name, title, **kwargs):
        started.append(Agent(logs, port, name, tmp_path / name, title, **kwargs))
        return started[-1]

    yield runtime, mine, agent, port
    for one in started:
        one.close()
    runtime.close()


def plant_owner(tmp_path, port: int, token: str, **more) -> None:
    """A registry entry of a live process of ours (the test's parent) that serves `token` on
    `port`, written as our own registry files are (0600), or it is not read."""
    entry = dict({"pid": os.getppid(), "startedAt": "", "agent": None, "project": "", "interviews": [],
                  "port": port, "forms": [askrich.token_digest(token)]}, **more)
    planted = tmp_path / "logs" / "inbox" / ("%d.json" % os.getppid())
    planted.write_text(json.dumps(entry))
    planted.chmod(0o600)


def test_two_processes_forms_through_one_port_with_their_own_answers_headers_and_streams(door):
    runtime, mine, agent, port = door
    other = agent("codex", "Theirs")
    origin = "http://localhost:%d" % port
    # Every URL shown is the door's; each process's own port keeps working.
    assert runtime.form_url(mine) == "%s/s/%s" % (origin, mine.token) and runtime.own_url(mine) != runtime.form_url(mine)
    assert other.url.startswith(origin + "/s/")
    for form in (runtime.form_url(mine), other.url):
        page = http_request(form)
        assert page.status == 200 and b"/assets/js/main.js" in page.body
        assert page.headers["Content-Security-Policy"] == askrich.CONTENT_SECURITY_POLICY
        assert page.headers["X-Frame-Options"] == "DENY"
    theirs = http_request(api_url(other.url)).json()
    assert theirs["spec"]["title"] == "Theirs" and theirs["id"] == other.session
    own = http_request(api_url(other.url.replace(origin, "http://localhost:%d" % own_port(other)))).json()
    assert own == theirs
    assert http_request(origin + "/assets/js/main.js").status == 200

    # An append reaches the page's stream through the door; the submit through the door
    # settles the call that waits at the owner.
    events = EventsReader(api_url(other.url, "events"), "state")
    try:
        assert events.headers["Content-Type"].startswith("text/event-stream")
        events.wait_for(lambda s: s["version"] == 1)
        waiting = other.server.request("tools/call", {"name": "await_user_answers",
                                                      "arguments": {"sessionId": other.session}})
        events.wait_for(lambda s: s["waiting"], what="the call waiting")
        appended = other.server.tool("append_questions", {"sessionId": other.session, "questions": [
            {"id": "more", "header": "And this?"}]})
        assert appended["result"]["structuredContent"]["appended"] == 1
        events.wait_for(lambda s: s["version"] == 2, what="the appended version")
        progress = http_request(api_url(other.url, "progress"), "POST",
                                {"answered": 1, "deferred": 0, "needsInfo": 0, "open": 1})
        assert progress.status == 204
        reply = submit(other.url, {"q1": {"status": "answer", "selected": ["a"]}}, specVersion=2)
        assert reply.status == 200 and reply.json()["delivered"] is True
        result = other.server.response(waiting)["result"]["structuredContent"]
        assert result["status"] == "submitted" and result["answers"][0]["selected"] == ["a"]
        # The owner tells from the Host the door passed on unchanged where the person answered.
        assert {(row["by"], row["via"]) for row in result["answers"]} == {("person", "door")}
        events.wait_for(lambda s: s["state"] == "submitted")
    finally:
        events.close()
    # Settled, it stays readable through the door; a refused submit comes back unchanged.
    again = submit(other.url, {})
    assert again.status == 409 and again.json()["code"] == "not-pending"
    assert http_request(api_url(other.url, "state")).json()["state"] == "submitted"


def own_port(agent) -> int:
    """The port of the agent's own form server, from its log."""
    line = agent.server.log.wait_for("http-started")
    return int(line.rsplit("port=", 1)[1].split()[0])


def test_uploads_pass_through_the_door_bounded_as_at_the_owner(door):
    runtime, mine, agent, port = door
    image = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 300
    upload = http_request(api_url(runtime.form_url(mine), "attachments"), "POST", image, headers={
        "Content-Type": "image/png", "X-Attachment-Name": "shot%20one.png"})
    assert upload.status == 201, upload.body
    entry = upload.json()
    assert entry["name"] == "shot one.png" and entry["bytes"] == len(image)
    back = http_request(api_url(runtime.form_url(mine), "attachments/" + entry["id"]))
    assert back.status == 200 and back.body == image and back.headers["Content-Type"] == "image/png"
    assert http_request(api_url(runtime.form_url(mine), "attachments/" + entry["id"]), "DELETE").status == 204
    # Over the limit: refused at the door, before a byte goes on.
    answer = exchange(port, ("POST /api/s/%s/attachments HTTP/1.1\r\nHost: localhost:%d\r\n"
                                "X-Attachment-Name: big\r\nContent-Length: %d\r\n\r\n"
                                % (mine.token, port, 10 * 1024 * 1024 + 1)).encode())
    assert answer.status == 413 and answer.json()["code"] == "too-large"
    missing = http_request(api_url(runtime.form_url(mine), "submit"), "POST", b"{}", headers={
        "Content-Type": "application/json", "Content-Length": ""})
    assert missing.status in (400, 411)


def test_the_door_forwards_only_to_ports_our_registry_names(door):
    runtime, mine, agent, port = door
    trap = Trap()
    other = agent("codex", "Forwarded")  # a form the door forwards (the holder's own it answers itself)
    try:
        for token in (mine.token, other.url.rsplit("/", 1)[1]):
            tricks_on(port, trap, token)
        assert trap.connections() == 0
    finally:
        trap.close()


def tricks_on(port: int, trap: Trap, token: str) -> None:
    """Requests that try to make the door connect elsewhere: each is refused, or (a Host naming
    another port is still one of our loopback names) served by the token's own owner."""
    tricks = [
        # absolute-form request lines naming the trap
        b"GET http://127.0.0.1:%d/s/%s HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (trap.port, token.encode(), port),
        b"GET http://127.0.0.1:%d/api/s/%s/state HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (
            trap.port, token.encode(), trap.port),
        # a Host that names the trap's port
        b"GET /api/s/%s/state HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (token.encode(), trap.port),
        b"GET /s/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (token.encode(), trap.port),
        # path tricks and encoded slashes
        b"GET /s/../api/s/%s/state HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (token.encode(), port),
        b"GET /s/%s/../../127.0.0.1:%d/ HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (token.encode(), trap.port, port),
        b"GET /api/s/%s%%2F..%%2F..%%2Fx/state HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (token.encode(), port),
        b"GET /api/s/%s/attachments/..%%2f..%%2f HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (token.encode(), port),
        b"GET /s/127.0.0.1:%d HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (trap.port, port),
        b"GET //127.0.0.1:%d/s/%s HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (trap.port, token.encode(), port),
        b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (trap.port, trap.port),
    ]
    for trick in tricks:
        answer = exchange(port, trick)
        assert answer.status in (200, 400, 403, 404, 405, 501), (trick, answer.raw[:200])


def test_unknown_tokens_a_foreign_host_and_a_foreign_origin_are_refused_at_the_door(door):
    runtime, mine, agent, port = door
    base = "http://127.0.0.1:%d" % port
    missing = http_request(base + "/s/" + "A" * 24)
    assert missing.status == 404 and missing.body == b"Interview not found or expired."
    assert http_request(base + "/api/s/%s/state" % ("A" * 24)).json()["code"] == "not-found"
    foreign = http_request(base + "/s/" + mine.token, headers={"Host": "evil.example:%d" % port})
    assert foreign.status == 403 and foreign.json()["code"] == "forbidden-host"
    cross = http_request(api_url(runtime.form_url(mine), "submit"), "POST", {"answers": {}},
                         headers={"Origin": "http://evil.example"})
    assert cross.status == 403 and cross.json()["code"] == "forbidden-origin"
    assert mine.is_pending()
    same = http_request(api_url(runtime.form_url(mine), "state"), headers={"Origin": "http://localhost:%d" % port})
    assert same.status == 200
    # A page that lost its connection proves the server through the door: the owner, found by
    # the token's digest, answers; a digest nobody serves is a 404.
    other = agent("codex", "Proved")
    token = other.url.rsplit("/", 1)[1]
    nonce = "ab" * 16
    named = "/api/prove?nonce=%s&token-sha256=%s" % (nonce, askrich.token_digest(token))
    proof = http_request(base + named)
    # For the door's origin, which the owner holds too: the page there takes it.
    assert proof.json() == {"proof": askrich.origin_proof(token, nonce, base), "origin": base}
    # Asked at its own port, the owner proves for that port only: a program that passes the
    # question on from another port gets nothing it can show there.
    at_owner = "http://127.0.0.1:%d" % own_port(other)
    assert http_request(at_owner + named).json()["origin"] == at_owner
    relayed = http_request(at_owner + named, headers={"Host": "localhost:%d" % (port + 1 if port < 65535 else port - 1)})
    assert relayed.status == 403
    assert http_request(base + "/api/prove?nonce=%s&token-sha256=%s" % (nonce, "0" * 64)).status == 404
    assert http_request(base + "/api/prove?nonce=%s&token-sha256=xyz" % nonce).status == 400


def test_a_dead_owner_is_a_502_and_a_stopped_one_a_504_never_a_hung_door(door, tmp_path):
    runtime, mine, agent, port = door
    # A registry entry of a live process of ours whose port nobody listens on any more.
    closed = free_port()
    token = "Z" * 24
    plant_owner(tmp_path, closed, token)
    page = http_request("http://localhost:%d/s/%s" % (port, token))
    assert page.status == 502 and page.headers["Content-Type"].startswith("text/plain")
    assert b"does not answer" in page.body
    api = http_request("http://localhost:%d/api/s/%s/state" % (port, token))
    assert api.status == 502 and api.json()["code"] == "owner-unreachable"

    # A stopped owner that holds no share of this door (every process that shows a door URL
    # holds the door's port too, and a stopped one would keep its share of the connections
    # waiting): its own door is on another port, its entry in the same registry.
    stopped = Agent(tmp_path / "logs", free_port(), "codex", tmp_path / "codex", "Stopped")
    through = "http://localhost:%d/api/s/%s/state" % (port, stopped.url.rsplit("/", 1)[1])
    runtime.inbox.answer_seconds = 0.5
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        slow = http_request(through)
        assert slow.status == 504 and slow.json()["code"] == "owner-timeout"
        # The door still serves everyone else meanwhile.
        assert http_request(api_url(runtime.form_url(mine), "state")).status == 200
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
    try:
        assert http_request(through).status == 200
    finally:
        stopped.close()


class KeepingOwner:
    """An owner of the test's own that keeps each connection for the door's next request, as
    ours do when the door asks (`X-Ask-User-Rich-Door: keep-alive`): it counts connections and
    the requests each carried, and can end a kept connection between two requests."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.port = self.socket.getsockname()[1]
        self.connections, self.requests, self.end_next = 0, [], False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection) -> None:
        reader = connection.makefile("rb")
        with connection, reader:
            while True:
                head = []
                for line in reader:
                    if line in (b"\r\n", b"\n"):
                        break
                    head.append(line.decode("latin-1").strip())
                if not head:
                    return
                self.requests.append(head)
                body = json.dumps({"request": len(self.requests)}).encode()
                connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n"
                                   b"Connection: keep-alive\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                if self.end_next:  # the owner ends the kept connection before the door's next request
                    self.end_next = False
                    return


def test_the_door_keeps_its_connection_to_an_owner_and_goes_anew_when_the_owner_ended_it(door, tmp_path):
    runtime, mine, agent, port = door
    owner = KeepingOwner()
    token = "K" * 24
    plant_owner(tmp_path, owner.port, token)
    state = "http://localhost:%d/api/s/%s/state" % (port, token)
    answers = [http_request(state) for _ in range(3)]
    # One connection carried all three; the page never sees the door's own Connection header.
    assert [answer.json() for answer in answers] == [{"request": 1}, {"request": 2}, {"request": 3}]
    assert all(answer.status == 200 and "Connection" not in answer.headers for answer in answers)
    assert owner.connections == 1
    assert all("X-Ask-User-Rich-Door: keep-alive" in head for head in owner.requests)
    # The owner ends the kept connection: the next request goes on a new one, and is answered.
    owner.end_next = True
    assert http_request(state).json() == {"request": 4}
    deadline = time.monotonic() + WAIT
    while owner.connections == 1 and time.monotonic() < deadline:
        assert http_request(state).status == 200
    assert owner.connections == 2 and len(owner.requests) <= 6  # none lost, none sent twice
    owner.socket.close()


def test_a_kept_connection_is_back_for_the_next_request_before_the_page_has_the_answer(door, tmp_path, monkeypatch):
    """A page sends its next request as soon as it has an answer: by then the connection to
    the owner must be free again, or the door opens another one (a slow machine showed it)."""
    runtime, mine, agent, port = door
    owner = KeepingOwner()
    token = "L" * 24
    plant_owner(tmp_path, owner.port, token)
    free_when_written = []
    real = askrich._send_to_page

    def sending(request, chunk):
        free_when_written.append(len(runtime.inbox.owners.idle.get(owner.port, [])))
        return real(request, chunk)

    monkeypatch.setattr(askrich, "_send_to_page", sending)
    for number in (1, 2):
        assert http_request("http://localhost:%d/api/s/%s/state" % (port, token)).json() == {"request": number}
    assert free_when_written == [1, 1] and owner.connections == 1
    owner.socket.close()


def test_a_kept_connection_gets_a_whole_body_and_a_refusal_does_not_leave_half_of_one(door):
    """Our owners read a kept request's body whole before any route: what a refusal leaves
    unread is never taken for the next request on the kept connection."""
    runtime, mine, agent, port = door
    other = agent("codex", "Kept", questions=1)
    # Refused for its type before its body is read: 5,000 bytes the route leaves unread.
    bad = http_request(api_url(other.url, "progress"), "POST", b'{"answered": 1' + b" " * 5000 + b"}",
                       headers={"Content-Type": "text/plain"})
    assert bad.status == 415
    for _ in range(3):
        assert http_request(api_url(other.url, "state")).json()["state"] == "pending"
    assert submit(other.url, {"q1": {"status": "answer", "selected": ["b"]}}).status == 200
    assert http_request(api_url(other.url, "state")).json()["state"] == "submitted"


def test_a_stale_proof_is_proved_again_by_the_worker_not_by_whoever_asks_for_the_url(tmp_path, monkeypatch):
    """A form's URL is asked for under other locks (a task's status): once the holder was proved,
    asking never waits on the network; the inbox's worker proves the holder again. (Where
    processes cannot share the door's port: on Linux each holds it.)"""
    monkeypatch.setattr(askrich, "DOOR_SHARED", False)
    port = free_port()
    logs = tmp_path / "logs"
    holder = Agent(logs, port, "codex", tmp_path / "codex", "Held")
    runtime = quiet_runtime(logs, inbox_port=port)
    try:
        mine = runtime.open_interview(dict(ONE_QUESTION))
        door = "http://localhost:%d/s/" % port
        assert runtime.form_url(mine).startswith(door) and runtime.inbox.server is None
        provers, proved, real = [], threading.Event(), askrich.probe_inbox_holder

        def watched(*args, **kwargs):
            provers.append(threading.current_thread().name)
            try:
                return real(*args, **kwargs)
            finally:
                proved.set()

        monkeypatch.setattr(askrich, "probe_inbox_holder", watched)
        deadline = time.monotonic() + WAIT
        while not proved.is_set():  # (a probe of the worker's own may be under way: it ages the proof again)
            assert time.monotonic() < deadline, "the worker never proved the holder again"
            runtime.inbox.probed -= 60  # the proof went stale
            assert runtime.form_url(mine).startswith(door)  # the last proof's answer, at once
            proved.wait(0.5)
        assert provers and set(provers) == {"ask-user-rich-inbox"}
        assert runtime.form_url(mine).startswith(door)
    finally:
        runtime.close()
        holder.close()


@pytest.mark.parametrize("door_served", [None, "0.0.1", askrich.__version__])
def test_a_holder_that_proves_the_key_but_serves_no_door_leaves_each_form_at_its_own_port(tmp_path, door_served):
    """An older ask-user-rich holding the port during an upgrade proves the key (the inbox link
    works) but has no door routes, and one of another version would serve its own assets with
    our page: a process then shows its own port, never a door link that would answer 404 or
    mix two versions. Only a holder whose door is of our version gets our forms' links."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    logs = tmp_path / "logs"

    class OlderHolder(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the base class's name)
            key = read_key(logs)
            nonce = self.path.split("nonce=", 1)[1]
            # An older version proves the key for no origin; ours, for the one asked at.
            answer = {"proof": askrich.origin_proof(key, nonce, "http://127.0.0.1:%d" % port)
                      if door_served == askrich.__version__ else askrich.proof_of(key, nonce)}
            if door_served:
                answer["door"] = door_served
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    holder = ThreadingHTTPServer(("127.0.0.1", 0), OlderHolder)
    threading.Thread(target=holder.serve_forever, daemon=True).start()
    port = holder.server_address[1]
    runtime = quiet_runtime(logs, inbox_port=port)
    try:
        mine = runtime.open_interview(dict(ONE_QUESTION))
        through = door_served == askrich.__version__
        assert runtime.form_url(mine) == ("http://localhost:%d/s/%s" % (port, mine.token) if through else runtime.own_url(mine))
        assert runtime.inbox.holder == "ours"  # it proved the key: the form's inbox link works
        said = askrich._doctor_door(runtime.config)[0]
        assert ("serves the forms" in said) if through else ("another version" in said)
    finally:
        runtime.close()
        holder.shutdown()
        holder.server_close()


def test_the_inbox_links_a_form_of_another_version_at_its_own_port(door, tmp_path):
    """The door serves its own version's assets: a form whose process is of another version
    is listed at that process's own port, one of ours through the door."""
    runtime, mine, agent, port = door
    other = agent("codex", "Same version")
    token = "V" * 24
    row = {"interviewId": "0123456789ab", "title": "Older", "url": "http://localhost:4999/s/" + token,
           "questions": 1, "answered": 0, "followUpsUnseen": 0, "createdAt": "2026-01-01T00:00:00Z",
           "waiting": True}
    plant_owner(tmp_path, 4999, token, interviews=[row], version="0.0.1")
    urls = {item["title"]: item["url"] for item in runtime.inbox.fresh_listing()["interviews"]}
    assert urls["Older"] == row["url"]
    assert urls["Same version"] == other.url and other.url.startswith("http://localhost:%d/s/" % port)
    assert urls["Mine"] == runtime.form_url(mine)


def test_a_public_url_is_shown_and_accepted_and_the_door_still_binds_loopback_only(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    public = "https://devbox.example-tailnet.ts.net:8443"
    runtime = quiet_runtime(logs, inbox_port=port, public_url=public)
    try:
        form = runtime.open_interview(dict(ONE_QUESTION))
        assert runtime.form_url(form) == "%s/s/%s" % (public, form.token)
        assert {server.server_address[0] for server in runtime.inbox.server.servers} <= {"127.0.0.1", "::1"}
        local = "http://127.0.0.1:%d" % port
        path = "/api/s/%s/state" % form.token
        tunnel = {"Host": "devbox.example-tailnet.ts.net:8443", "Origin": public}
        assert http_request(local + path, headers=tunnel).status == 200
        assert http_request(local + path, headers={"Host": "other.example-tailnet.ts.net"}).status == 403
        assert http_request(local + path, headers={"Origin": "https://evil.example"}).status == 403
        listing = http_request(local + "/api/inbox/" + read_key(logs)).json()
        assert listing["interviews"][0]["url"] == runtime.form_url(form)
        reply = http_request(local + "/api/s/%s/submit" % form.token, "POST", {"answers": {}}, headers=tunnel)
        assert reply.status == 200, reply.body
        assert {row["via"] for row in form.settled_result()["answers"]} == {"public"}
    finally:
        runtime.close()


def test_the_url_falls_back_to_the_process_port_when_the_door_is_off_or_foreign(tmp_path):
    off = quiet_runtime(tmp_path / "a")
    try:
        form = off.open_interview(dict(ONE_QUESTION))
        assert off.form_url(form) == off.own_url(form)
    finally:
        off.close()
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(1)
    port = squatter.getsockname()[1]
    closer = threading.Thread(target=lambda: [squatter.accept()[0].close() for _ in range(4)], daemon=True)
    closer.start()
    beside = quiet_runtime(tmp_path / "b", inbox_port=port)
    try:
        form = beside.open_interview(dict(ONE_QUESTION))
        assert beside.form_url(form) == beside.own_url(form)  # the door's port is not ours: the form's own address
        assert http_request(beside.form_url(form)).status == 200
    finally:
        beside.close()
        squatter.close()


def test_doctor_reports_the_door_the_fallback_and_whether_the_public_url_reaches_us(door, tmp_path):
    runtime, mine, agent, port = door
    agent("codex", "Another")
    env = {"ASK_USER_RICH_LOG_DIR": str(tmp_path / "logs"), "ASK_USER_RICH_INBOX_PORT": str(port)}
    lines = askrich._doctor_door(askrich.Config.from_env(env)[0])
    # The agent's forms (the doctor counts the registry files of other processes: here, the
    # test's own process holds the door).
    assert lines[0] == "front door: http://localhost:%d serves the forms of 1 process" % port
    assert "fall back to their own process's port" in lines[1]
    # A public URL that reaches this door (here, another loopback name for it) and one that does not.
    lines = askrich._doctor_door(askrich.Config.from_env(dict(env, ASK_USER_RICH_PUBLIC_URL="http://127.0.0.1:%d" % port))[0])
    assert lines[-1] == "public URL: http://127.0.0.1:%d (every URL shown starts with it): reaches our front door from here" % port
    closed = free_port()
    lines = askrich._doctor_door(askrich.Config.from_env(dict(env, ASK_USER_RICH_PUBLIC_URL="http://localhost:%d" % closed))[0])
    assert "does NOT reach us from here" in lines[-1]
    off = askrich._doctor_door(askrich.Config.from_env(dict(env, ASK_USER_RICH_INBOX_PORT="0"))[0])
    assert off == ["front door: off (ASK_USER_RICH_INBOX_PORT=0); every form is shown at its own process's port"]


def test_every_url_the_agent_and_the_person_see_is_the_doors(tmp_path):
    """The result, every progress message and the form's own inbox link lead through the door."""
    from helpers.support import InProcessServer

    port = free_port()
    logs = tmp_path / "logs"
    runtime = quiet_runtime(logs, inbox_port=port, progress_ms=30)
    peer = InProcessServer(runtime)
    try:
        peer.initialize()
        awaiting = peer.tool("ask_user_rich", dict(ONE_QUESTION, delivery="link"))["result"]["structuredContent"]
        door = "http://localhost:%d/s/" % port
        assert awaiting["url"].startswith(door)
        assert door in peer.tool("await_user_answers", {"sessionId": awaiting["sessionId"], "timeoutSeconds": 1})[
            "result"]["content"][0]["text"]
        peer.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": awaiting["sessionId"]},
                                    "_meta": {"progressToken": "tok"}})
        messages = [peer.receive(lambda m: m.get("method") == "notifications/progress")["params"]["message"]
                    for _ in range(3)]
        assert all(message.endswith(". Form: " + awaiting["url"]) for message in messages)
        assert submit(awaiting["url"], {}).status == 200
    finally:
        peer.close()
        runtime.close()


# -- handing a page's connection to its owner --------------------------------------------------


def landing_here(runtime, port: int, raw: bytes, before: bool):
    """A page's connection to the door's port taken by this process's door server: the kernel
    gives each new connection to one of the sockets that share the port, so a listener of the
    test's own shares it too (as ours do) until one lands there, and the door server takes
    that one as if it had accepted it. `raw` is written on it before the server sees it
    (`before`: the request line is there at once) or after; the answer is read to its end."""
    from form.test_hardening_http import Response, read_all
    import select

    with socket.socket() as shared:
        shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        shared.bind(("127.0.0.1", port))
        shared.listen(8)
        for _ in range(500):
            page = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
            if select.select([shared], [], [], 0.05)[0]:
                accepted, address = shared.accept()
                break
            page.close()  # it went to one of the processes: an empty connection, nothing asked
        else:
            raise AssertionError("no connection reached the test's share of the door")
    server = next(one for one in runtime.inbox.server.servers if one.address_family == socket.AF_INET)
    with page:
        if before:
            page.sendall(raw)
            accepted.recv(1, socket.MSG_PEEK)  # arrived: the request line is there when the server looks
        server.process_request(accepted, address)
        if not before:
            page.sendall(raw)
        return Response(read_all(page))


@pytest.fixture
def passed_on(monkeypatch):
    """How this process handled each page's connection: passed to the owner, or relayed."""
    seen = {"handed": [], "relayed": []}
    hand_over, forward = askrich.hand_over, askrich.forward_to_owner

    def counted_hand_over(server, connection, wait):
        handed = hand_over(server, connection, wait)
        if handed:
            seen["handed"].append("accepted" if not wait else "thread")
        return handed

    def counted_forward(request, how):
        seen["relayed"].append(request.path)
        return forward(request, how)

    monkeypatch.setattr(askrich, "hand_over", counted_hand_over)
    monkeypatch.setattr(askrich, "forward_to_owner", counted_forward)
    return seen


def test_a_page_connection_for_another_process_is_passed_to_the_owner_which_answers_on_it(door, passed_on):
    """The page, its state and its submit (body and all) reach the owner on the page's own
    connection, whether the request line was there when the connection was accepted or came
    after: this process only looks at it, passes it on and relays nothing."""
    from form.test_hardening_http import build

    runtime, mine, agent, port = door
    other = agent("codex", "Theirs")
    token = other.url.rsplit("/", 1)[1]
    host = [("Host", "localhost:%d" % port)]
    page = landing_here(runtime, port, build("GET", "/s/%s" % token, host), before=True)
    assert page.status == 200 and b"/assets/js/main.js" in page.body
    state = landing_here(runtime, port, build("GET", "/api/s/%s" % token, host), before=True)
    assert state.status == 200 and json.loads(state.body)["spec"]["title"] == "Theirs"
    waiting = other.server.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": other.session}})
    body = json.dumps({"answers": {"q1": {"status": "answer", "selected": ["b"]}}}).encode()
    sent = landing_here(runtime, port, build("POST", "/api/s/%s/submit" % token, host + [
        ("Content-Type", "application/json"), ("Origin", "http://localhost:%d" % port)], body), before=False)
    assert sent.status == 200 and json.loads(sent.body)["delivered"] is True
    result = other.server.response(waiting)["result"]["structuredContent"]
    assert result["answers"][0]["selected"] == ["b"] and result["answers"][0]["via"] == "door"
    assert passed_on == {"handed": ["accepted", "accepted", "thread"], "relayed": []}
    # This process's own form, and anything that is not a form, it serves itself.
    own = landing_here(runtime, port, build("GET", "/api/s/%s" % mine.token, host), before=True)
    assert own.status == 200 and json.loads(own.body)["spec"]["title"] == "Mine"
    assert landing_here(runtime, port, build("GET", "/assets/js/main.js", host), before=False).status == 200
    assert passed_on["handed"] == ["accepted", "accepted", "thread"]


def test_a_stopped_owner_is_passed_no_connection_and_the_page_gets_the_relays_504(door, passed_on):
    from form.test_hardening_http import build

    runtime, mine, agent, port = door
    other = agent("codex", "Stopped")
    token = other.url.rsplit("/", 1)[1]
    runtime.inbox.answer_seconds = 0.5
    os.kill(other.pid, signal.SIGSTOP)
    try:
        slow = landing_here(runtime, port, build("GET", "/api/s/%s/state" % token, [("Host", "localhost:%d" % port)]),
                            before=True)
        assert slow.status == 504 and json.loads(slow.body)["code"] == "owner-timeout"
    finally:
        os.kill(other.pid, signal.SIGCONT)
    assert passed_on == {"handed": [], "relayed": ["/api/s/%s/state" % token]}


def test_the_form_index_names_each_form_s_owner_and_what_a_gone_process_left_is_removed(door, tmp_path):
    runtime, mine, agent, port = door
    folder = tmp_path / "logs" / "inbox"
    other = agent("codex", "Alive")
    # The link is there before the URL went out; each process's own end of the handoff too.
    theirs = folder / "forms" / askrich.token_digest(other.url.rsplit("/", 1)[1])
    assert os.readlink(str(theirs)) == str(other.pid)
    assert os.readlink(str(folder / "forms" / askrich.token_digest(mine.token))) == str(os.getpid())
    alive = folder / ("%d-%d.door" % (other.pid, port))
    assert alive.is_socket() and (folder / ("%d-%d.door" % (os.getpid(), port))).is_socket()
    assert oct((folder / "forms").stat().st_mode & 0o777) == "0o700"
    # A process killed with its form pending: its entry, its link and its socket stay behind
    # until another process of ours sees it is gone.
    gone = 2 ** 22 + 7  # past any pid the kernel hands out
    digest = "ab" * 32
    entry = {"pid": gone, "startedAt": "", "agent": None, "project": "", "interviews": [], "port": free_port(),
             "forms": [digest]}
    os.symlink(str(gone), str(folder / "forms" / digest))
    (folder / ("%d-%d.door" % (gone, port))).write_bytes(b"")
    # The entry last: a scan by this process's worker may come at any moment.
    (folder / ("%d.json" % gone)).write_text(json.dumps(entry))
    (folder / ("%d.json" % gone)).chmod(0o600)
    runtime.inbox._scan(force=True)
    assert not (folder / ("%d.json" % gone)).exists()
    assert not os.path.lexists(str(folder / "forms" / digest))
    assert not (folder / ("%d-%d.door" % (gone, port))).exists()
    assert os.path.lexists(str(theirs)) and alive.exists()
    # A process that ends removes its own.
    other.close()
    assert not os.path.lexists(str(theirs)) and not alive.exists()


def test_a_holder_stops_serving_at_once_without_knocking_on_the_shared_port(door, monkeypatch):
    """A connection to the door's port, which would wake the serving loop, goes to any process
    that shares the port, seldom the one stopping (with fifty processes, each exit took a second
    of knocking): the loop is woken by its own listening socket, shut down, instead."""
    runtime, mine, agent, port = door
    agent("codex", "Stays")
    listener = runtime.inbox.server
    knocks = []
    real = socket.create_connection
    monkeypatch.setattr(socket, "create_connection", lambda *args, **kwargs: knocks.append(args) or real(*args, **kwargs))
    runtime.inbox._release()
    assert knocks == [] and not any(thread.is_alive() for thread in listener.threads)
    monkeypatch.undo()
    # The other process still holds the door.
    assert http_request("http://localhost:%d/assets/js/main.js" % port).status == 200
