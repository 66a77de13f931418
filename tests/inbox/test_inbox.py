"""The inbox (tests/README.md, "The inbox"): every pending interview of every server process of this user, on
one page at one address. Real server processes on one log folder, each a different agent in a
different folder; the tests wait on the inbox's own stream, on log lines and on files."""

from __future__ import annotations

import http.server
import json
import io
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.inbox_support import Agent, inbox_events, free_port, read_key, titles
from helpers.support import MODULE, WAIT, EventsReader, api_url, askrich, http_request, submit, watched_runtime

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process and file-mode checks are POSIX")


@pytest.fixture
def agents(tmp_path):
    started = []

    def start(port, name, folder, title, **kwargs):
        agent = Agent(tmp_path / "logs", port, name, tmp_path / folder, title, **kwargs)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


def holder_of(log_dir, port):
    """The inbox's key, once some process holds the port and proved it."""
    key = read_key(log_dir)
    assert askrich.prove_inbox_holder(port, key) == "ours"
    return key


def test_three_agents_in_three_folders_are_listed_and_an_answer_leaves_within_a_second(tmp_path, agents):
    port = free_port()
    logs = tmp_path / "logs"
    claude = agents(port, "claude-code", "web-app", "Database choice", questions=12)
    claude.server.log.wait_for("inbox-holding")  # each one that shows a door URL holds the port
    codex = agents(port, "codex", "api-server", "API versioning", questions=4)
    gemini = agents(port, "gemini-cli", "docs-site", "Docs layout", questions=2)
    stream = inbox_events(port, holder_of(logs, port))
    try:
        assert stream.status == 200
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        listing = stream.wait_for(lambda l: len(l["interviews"]) == 3, what="three interviews")
        assert listing["holder"] in (claude.pid, codex.pid, gemini.pid)  # whichever the kernel chose
        assert titles(listing) == ["Database choice", "API versioning", "Docs layout"]  # oldest first
        rows = {row["title"]: row for row in listing["interviews"]}
        for agent, label in ((claude, "Claude Code"), (codex, "Codex"), (gemini, "Gemini CLI")):
            row = rows[agent.title]
            assert row["agent"] == label
            assert row["project"] == agent.folder
            assert row["pid"] == agent.pid
            assert row["url"] == agent.url and row["interviewId"] == agent.session
            assert row["answered"] == 0 and row["followUpsUnseen"] == 0 and row["waiting"] is False
        assert rows["Database choice"]["questions"] == 12

        # The JSON says the same, and the page is served under the key.
        key = read_key(logs)
        same = http_request("http://127.0.0.1:%d/api/inbox/%s" % (port, key)).json()
        assert dict(same, holder=listing["holder"]) == listing  # served by any of the three
        page = http_request("http://localhost:%d/inbox/%s" % (port, key))
        assert page.status == 200 and b"/assets/js/inbox.js" in page.body

        # Each process keeps its own private file while it has something pending.
        for agent in (claude, codex, gemini):
            path = logs / "inbox" / ("%d.json" % agent.pid)
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(logs / "inbox").st_mode) == 0o700
        assert stat.S_IMODE(os.stat(logs / "inbox.key").st_mode) == 0o600

        # Answering one removes its row within a second.
        assert submit(codex.url, {}).status == 200
        answered = time.monotonic()
        listing = stream.wait_for(lambda l: "API versioning" not in titles(l), timeout=WAIT, what="the answered one gone")
        assert time.monotonic() - answered < 1.0
        assert titles(listing) == ["Database choice", "Docs layout"]
        # Its file stays while the answered form can be read (the front door serves it), and
        # lists nothing pending.
        entry = json.loads((logs / "inbox" / ("%d.json" % codex.pid)).read_text())
        assert entry["interviews"] == [] and len(entry["forms"]) == 1
    finally:
        stream.close()


def test_killing_the_first_holder_leaves_the_inbox_at_the_same_address_with_no_wait(tmp_path, agents):
    port = free_port()
    logs = tmp_path / "logs"
    first = agents(port, "claude-code", "one", "First")
    first.server.log.wait_for("inbox-holding")
    second = agents(port, "codex", "two", "Second")
    third = agents(port, "gemini-cli", "three", "Third")
    for agent in (second, third):  # each holds the door beside the first: no takeover to wait for
        agent.server.log.wait_for("inbox-holding")
    key = holder_of(logs, port)
    stream = inbox_events(port, key)
    stream.wait_for(lambda l: len(l["interviews"]) == 3, what="three interviews")
    stream.close()

    first.kill()
    stream = inbox_events(port, key)  # at once: the same address, the same key
    try:
        listing = stream.wait_for(lambda l: titles(l) == ["Second", "Third"], what="the two left")
        assert listing["holder"] in (second.pid, third.pid)
        assert "inbox-port-taken" not in second.server.log.getvalue() + third.server.log.getvalue()
        # The dead holder's file was dropped by whoever noticed.
        dropped = "inbox-entry-dropped pid=%d " % first.pid
        deadline = time.monotonic() + WAIT
        while dropped not in second.server.log.getvalue() + third.server.log.getvalue():
            assert time.monotonic() < deadline, "nobody dropped the dead holder's file"
            time.sleep(0.05)
    finally:
        stream.close()


class Impostor:
    """Something else on the inbox's port: it answers every request, proves nothing, and
    remembers every request line and header it was sent."""

    def __init__(self, port: int, answer=b'{"proof": "00"}') -> None:
        self.seen = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.requestline + "\n" + str(self.headers))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def inbox_command(tmp_path, port, *args, timeout=WAIT):
    env = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"), ASK_USER_RICH_OPEN="0",
               ASK_USER_RICH_INBOX_PORT=str(port))
    return subprocess.Popen([sys.executable, MODULE, "inbox", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def test_the_inbox_command_refuses_an_impostor_on_the_port_without_revealing_the_key(tmp_path):
    port = free_port()
    impostor = Impostor(port)
    try:
        done = inbox_command(tmp_path, port, "--link")
        out, err = done.communicate(timeout=WAIT)
        key = read_key(tmp_path / "logs")
        assert done.returncode == 1
        assert b"cannot prove it is ask-user-rich's inbox" in err
        assert b"ASK_USER_RICH_INBOX_PORT" in err
        assert key.encode() not in out + err
        assert out == b""
        assert impostor.seen and all(key not in request for request in impostor.seen)
        assert all(request.startswith("GET /api/inbox/prove?nonce=") for request in impostor.seen)
    finally:
        impostor.close()


def test_a_server_beside_an_impostor_reports_it_once_and_its_forms_work(tmp_path, agents):
    port = free_port()
    impostor = Impostor(port, answer=b"not json")
    try:
        agent = agents(port, "claude-code", "proj", "Beside an impostor")
        agent.server.log.wait_for("inbox-port-taken", "port=%d" % port)
        state = http_request(agent.url.replace("/s/", "/api/s/") + "/state").json()
        assert state["state"] == "pending"
        # The form never learns an address whose holder could not prove the key.
        assert state["inbox"] == {"waiting": 0, "url": None}
        assert submit(agent.url, {}).status == 200
        key = read_key(tmp_path / "logs")
        assert all(key not in request for request in impostor.seen)
        assert "".join(agent.server.stderr_lines).count("inbox-port-taken") == 1
    finally:
        impostor.close()


def test_the_inbox_command_serves_the_inbox_itself_when_nobody_holds_it(tmp_path, agents):
    port = free_port()
    command = inbox_command(tmp_path, port, "--link")
    try:
        url = link_of(command.stdout)
        key = read_key(tmp_path / "logs")
        assert url == "http://localhost:%d/inbox/%s" % (port, key)
        stream = inbox_events(port, key)
        try:
            listing = stream.wait_for(lambda l: True)
            assert listing == {"interviews": [], "holder": command.pid}
            # A server started now finds the port held by an inbox that proves the key: it
            # lists its interview there (and holds the port beside it, as ours all do).
            agent = agents(port, "codex", "later", "Asked while the command serves")
            listing = stream.wait_for(lambda l: titles(l) == ["Asked while the command serves"])
            assert listing["holder"] == command.pid
            # Another `inbox` command sees the holder proves the key, prints the link, and leaves.
            other = inbox_command(tmp_path, port, "--link")
            out, err = other.communicate(timeout=WAIT)
            assert other.returncode == 0, err
            assert out == url.encode() + b"\n"  # the address alone, for open "$(askrich.py inbox --link)"
            assert url.encode() not in err
            submit(agent.url, {})
            stream.wait_for(lambda l: l["interviews"] == [], what="the empty inbox")
            agent.close()  # it held the door since it showed a door URL: until it exits
        finally:
            stream.close()
    finally:
        command.send_signal(2)
        assert command.wait(WAIT) == 0
    assert askrich.prove_inbox_holder(port, key) == "free"
    # Nobody has an interview pending any more: the key is retired, the next inbox gets a new one.
    assert not (tmp_path / "logs" / "inbox.key").exists()


def test_the_inbox_command_opens_the_browser_without_the_key_on_any_command_line(tmp_path, agents):
    """An opener's argv is readable by every user (/proc/<pid>/cmdline): it gets a private file
    that redirects to the inbox, never the inbox's address."""
    port = free_port()
    agents(port, "codex", "here", "Waiting")
    seen = tmp_path / "argv.json"
    opener = tmp_path / "opener.py"
    opener.write_text("import json, sys\nopen(%r, 'w').write(json.dumps(sys.argv))\n" % str(seen))
    env = dict(os.environ, ASK_USER_RICH_LOG_DIR=str(tmp_path / "logs"), ASK_USER_RICH_INBOX_PORT=str(port),
               ASK_USER_RICH_OPEN_CMD="%s %s" % (sys.executable, opener))
    done = subprocess.run([sys.executable, MODULE, "inbox"], env=env, capture_output=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    key = read_key(tmp_path / "logs")
    argv = json.loads(seen.read_text())
    assert not any(key in arg for arg in argv)
    assert argv[-1].startswith("file://")
    way_in = Path(argv[-1][len("file://"):])
    assert way_in.stat().st_mode & 0o777 == 0o600
    assert 'content="0;url=http://localhost:%d/inbox/%s"' % (port, key) in way_in.read_text()


def link_of(stdout) -> str:
    """The address `inbox --link` printed: its first line on stdout, alone."""
    for line in iter(stdout.readline, b""):
        assert line.startswith(b"http://") and line.endswith(b"\n"), line
        return line.decode().strip()
    raise AssertionError("the inbox command printed no address")


# -- one process, in-process --------------------------------------------------------------------


def inbox_runtime(log_dir, port):
    rt = watched_runtime(log_dir, inbox_port=port)
    return rt, rt.watch


def inbox_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ask-user-rich-inbox")]


def test_a_process_does_no_inbox_work_until_it_shows_a_door_url_and_then_holds_the_door_until_it_exits(
        tmp_path, monkeypatch):
    # A settled form stays readable (and served by the front door) for 30 minutes; here, a moment.
    monkeypatch.setattr(askrich, "SETTLED_RETENTION_SECONDS", 0.5)
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = inbox_runtime(logs, port)
    try:
        assert rt.inbox.worker is None and inbox_threads() == []
        interview = rt.open_interview({"title": "One", "questions": [{"id": "q", "header": "ok?"}]})
        log.wait_for("inbox-holding")
        entry = logs / "inbox" / ("%d.json" % os.getpid())
        log.wait_for("inbox-listed", "entry=%s" % entry.name)
        key = read_key(logs)
        submit(rt.form_url(interview), {})
        # Nothing is readable any more, but the door URL is out there (a chat, a notice): the
        # port stays ours, and the entry says this process lives (so the key stays too).
        deadline = time.monotonic() + WAIT
        while json.loads(entry.read_text())["forms"]:
            assert time.monotonic() < deadline, "the settled form was never dropped"
            time.sleep(0.05)
        assert json.loads(entry.read_text())["interviews"] == []
        assert askrich.prove_inbox_holder(port, key) == "ours"
    finally:
        rt.close()
    assert not entry.exists()
    assert inbox_threads() == []
    assert askrich.prove_inbox_holder(port, key) == "free"


def test_nothing_of_the_inbox_exists_with_the_port_off(tmp_path):
    rt, log = inbox_runtime(tmp_path / "logs", 0)
    try:
        interview = rt.open_interview({"title": "Off", "questions": [{"id": "q", "header": "ok?"}]})
        state = http_request(rt.form_url(interview).replace("/s/", "/api/s/") + "/state").json()
        assert state == {"state": "pending", "waiting": False, "version": 1}
        assert inbox_threads() == []
        assert not (tmp_path / "logs" / "inbox").exists()
        assert not (tmp_path / "logs" / "inbox.key").exists()
    finally:
        rt.close()


def test_a_shared_log_folder_gets_no_inbox_and_forms_work(tmp_path):
    # Modes decide, not who may write: root is refused such a folder too.
    logs = tmp_path / "logs"
    logs.mkdir()
    logs.chmod(0o757)
    rt, log = inbox_runtime(logs, free_port())
    try:
        interview = rt.open_interview({"title": "Shared", "questions": [{"id": "q", "header": "ok?"}]})
        assert "can be written by group or others" in log.wait_for("inbox-unavailable")
        assert not (logs / "inbox.key").exists() and not (logs / "inbox").exists()
        state = http_request(rt.form_url(interview).replace("/s/", "/api/s/") + "/state").json()
        assert "inbox" not in state
        assert submit(rt.form_url(interview), {}).status == 200
    finally:
        rt.close()


def test_a_key_file_others_can_read_is_refused(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o700)
    (logs / "inbox.key").write_text("A" * 24 + "\n")
    (logs / "inbox.key").chmod(0o644)
    with pytest.raises(askrich.InboxUnavailable, match="not private"):
        askrich.load_inbox_key(str(logs))
    (logs / "inbox.key").unlink()
    os.symlink(str(tmp_path / "elsewhere"), str(logs / "inbox.key"))
    with pytest.raises(askrich.InboxUnavailable):
        askrich.load_inbox_key(str(logs))


def test_the_holder_checks_host_and_origin_and_sends_the_forms_headers(tmp_path):
    port = free_port()
    rt, log = inbox_runtime(tmp_path / "logs", port)
    try:
        rt.open_interview({"title": "Headers", "questions": [{"id": "q", "header": "ok?"}]})
        log.wait_for("inbox-holding")
        key = read_key(tmp_path / "logs")
        base = "http://127.0.0.1:%d" % port
        page = http_request(base + "/inbox/" + key)
        assert page.status == 200
        assert page.headers["Content-Security-Policy"] == askrich.CONTENT_SECURITY_POLICY
        for name, value in (("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
                            ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY")):
            assert page.headers[name] == value
        wrong = key[:-1] + ("y" if key.endswith("x") else "x")  # a key that ends in x is 1 in 64
        assert http_request(base + "/inbox/" + wrong).status == 404
        assert http_request(base + "/api/inbox/" + "A" * 24).status == 404
        assert http_request(base + "/api/inbox/%s/events" % ("B" * 24)).status == 404
        assert http_request(base + "/inbox/" + key, headers={"Host": "evil.example:%d" % port}).status == 403
        assert http_request(base + "/api/inbox/" + key, headers={"Origin": "http://evil.example"}).status == 403
        assert http_request(base + "/api/inbox/" + key, headers={"Origin": "null"}).status == 403
        assert http_request(base + "/api/inbox/" + key, headers={
            "Origin": "http://localhost:%d" % port}).status == 200
        assert http_request(base + "/api/inbox/prove?nonce=xyz").status == 400
        assert http_request(base + "/api/inbox/" + key, "POST", {}).status == 405
        # The form's own routes are not served on the inbox's port.
        assert http_request(base + "/s/" + key).status == 404
        assert http_request(base + "/assets/js/inbox.js").status == 200
        nonce = "ab" * 16
        # Proved for the origin asked at (scheme, host and port), which the page checks with its own.
        assert http_request(base + "/api/inbox/prove?nonce=" + nonce).json() == {
            "proof": askrich.origin_proof(key, nonce, base), "origin": base, "door": askrich.__version__}
        named = http_request(base + "/api/inbox/prove?nonce=" + nonce, headers={"Host": "localhost:%d" % port})
        assert named.json()["proof"] == askrich.origin_proof(key, nonce, "http://localhost:%d" % port)
        # A page opened through a ticket names its session (not a secret) and checks pageProof.
        session = "0123456789abcdef01234567"
        proved = http_request(base + "/api/inbox/prove?nonce=%s&session=%s" % (nonce, session)).json()
        assert proved["pageProof"] == askrich.origin_proof(askrich.page_verifier(key, session), nonce, base)
        assert http_request(base + "/api/inbox/prove?nonce=%s&session=xyz" % nonce).status == 400
    finally:
        rt.close()


def test_a_form_learns_how_many_more_wait_elsewhere_through_its_own_stream(tmp_path, agents):
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = inbox_runtime(logs, port)
    try:
        interview = rt.open_interview({"title": "Mine", "questions": [{"id": "q", "header": "ok?"}]})
        log.wait_for("inbox-holding")
        state_url = rt.form_url(interview).replace("/s/", "/api/s/") + "/state"
        assert http_request(state_url).json()["inbox"]["waiting"] == 0
        other = agents(port, "codex", "elsewhere", "Theirs")
        other.ask("Theirs too")
        events = form_events(rt.form_url(interview))
        try:
            state = events.wait_for(lambda s: s.get("inbox", {}).get("waiting") == 2)
            assert state["inbox"]["url"] == "/api/s/%s/inbox" % interview.token
            assert state["state"] == "pending" and state["version"] == 1
            submit(other.url, {})
            events.wait_for(lambda s: s["inbox"]["waiting"] == 1)
        finally:
            events.close()
    finally:
        rt.close()


def form_events(url):
    """A form's /events stream, read the same way (its events are `state`)."""
    return EventsReader(api_url(url, "events"), "state")


def test_stale_entries_of_dead_processes_are_dropped(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    rt, log = inbox_runtime(logs, port)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    folder = logs / "inbox"
    try:
        rt.open_interview({"title": "Alive", "questions": [{"id": "q", "header": "ok?"}]})
        log.wait_for("inbox-holding")
        stale = folder / ("%d.json" % gone.pid)
        stale.write_text('{"pid": %d, "startedAt": "", "agent": "Ghost", "project": "/x", "interviews": '
                         '[{"interviewId": "0123456789ab", "title": "Ghost", "url": "http://localhost:1/s/x", '
                         '"questions": 1, "answered": 0, "followUpsUnseen": 0, "createdAt": "2020-01-01T00:00:00.000Z", '
                         '"waiting": false}]}' % gone.pid)
        stream = inbox_events(port, read_key(logs))
        try:
            listing = stream.wait_for(lambda l: True)
            assert titles(listing) == ["Alive"]
        finally:
            stream.close()
        log.wait_for("inbox-entry-dropped", "pid=%d " % gone.pid)
        assert not stale.exists()
    finally:
        rt.close()


def test_a_registry_folder_another_user_could_write_into_is_not_read(tmp_path):
    # Its entries name the ports the front door forwards to: a planted one would be a redirect.
    folder = tmp_path / "inbox"
    folder.mkdir()
    me = os.getppid()  # alive, and not this process
    (folder / ("%d.json" % me)).write_text(
        '{"pid": %d, "agent": null, "project": "/p", "interviews": [{"interviewId": "a", "title": "Planted", '
        '"url": "http://localhost:9/s/t", "createdAt": "2020"}]}' % me)
    folder.chmod(0o777)
    registry = askrich.InboxRegistry(str(tmp_path))
    assert registry.scan() == ((), [])
    folder.chmod(0o700)
    assert [row["title"] for row in registry.scan()[1][0]["interviews"]] == ["Planted"]


def test_a_damaged_or_hostile_registry_file_costs_only_its_own_rows(tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir(mode=0o700)
    registry = askrich.InboxRegistry(str(tmp_path))
    me = os.getppid()  # alive, and not this process
    (folder / ("%d.json" % me)).write_text(
        '{"pid": %d, "agent": 7, "project": "/p", "interviews": ['
        '{"interviewId": "a", "title": "Fine", "url": "http://localhost:9/s/t", "createdAt": "2020", "answered": -1},'
        '{"interviewId": "b", "title": "Script", "url": "javascript:alert(1)", "createdAt": "2020"},'
        '{"interviewId": "c", "title": 5, "url": "http://localhost:9/s/u", "createdAt": "2020"}]}' % me)
    _, entries = registry.scan()
    assert len(entries) == 1
    assert entries[0]["agent"] is None
    assert [row["title"] for row in entries[0]["interviews"]] == ["Fine"]
    assert entries[0]["interviews"][0]["answered"] == 0
    (folder / ("%d.json" % me)).write_text("{not json")
    assert registry.scan()[1] == []


def test_the_doors_lookup_of_a_new_form_reads_the_changed_file_and_checks_only_its_process(tmp_path, monkeypatch):
    # Fifty processes of ours each holding the door: a request for a form made a moment ago
    # must not pay a liveness check of every other process before it is forwarded.
    folder = tmp_path / "inbox"
    folder.mkdir(mode=0o700)
    registry = askrich.InboxRegistry(str(tmp_path))
    living, checked = set(range(900001, 900011)), []
    monkeypatch.setattr(askrich, "pid_alive", lambda pid: checked.append(pid) or pid in living)
    digest = "a" * 64

    def entry(pid, forms):
        (folder / ("%d.json" % pid)).write_text(json.dumps(
            {"pid": pid, "interviews": [], "port": pid - 890000, "forms": forms}))

    for pid in living:
        entry(pid, [])
    entry(900099, [digest])  # a process that is gone named it once
    assert len(registry.scan()[1]) == 10 and len(checked) == 11
    del checked[:]
    entry(900005, [digest])  # the form is new: one file changed since the scan
    assert registry.lookup(digest)["port"] == 10005
    assert checked == [900005]
    living.discard(900005)
    assert registry.lookup(digest) is None and registry.lookup("b" * 64) is None
    assert [entry["port"] for entry in registry.scan()[1] if digest in entry["forms"]] == []


def test_the_unseen_follow_ups_count_comes_from_the_form_and_grows_with_appends(tmp_path):
    rt, _ = inbox_runtime(tmp_path / "logs", 0)
    try:
        interview = rt.open_interview({"title": "F", "questions": [{"id": "q", "header": "ok?"}]})
        assert askrich.inbox_row(interview, rt.own_url(interview))["followUpsUnseen"] == 0
        rt.append_questions(interview.id, [{"id": "f1", "header": "More?"}])
        assert askrich.inbox_row(interview, rt.own_url(interview))["followUpsUnseen"] == 1  # no form said otherwise yet
        progress = rt.form_url(interview).replace("/s/", "/api/s/") + "/progress"
        body = {"answered": 1, "deferred": 0, "needsInfo": 0, "open": 1, "followUpsUnseen": 0}
        assert http_request(progress, "POST", body).status == 204
        assert askrich.inbox_row(interview, rt.own_url(interview))["followUpsUnseen"] == 0
        assert askrich.inbox_row(interview, rt.own_url(interview))["answered"] == 1
        rt.append_questions(interview.id, [{"id": "f2", "header": "And?"}, {"id": "f3", "header": "Also?"}])
        assert askrich.inbox_row(interview, rt.own_url(interview))["followUpsUnseen"] == 2
    finally:
        rt.close()


def test_doctor_reports_who_holds_the_inbox_and_how_many_wait(tmp_path, agents):
    port = free_port()
    env = {"ASK_USER_RICH_LOG_DIR": str(tmp_path / "logs"), "ASK_USER_RICH_INBOX_PORT": str(port)}
    assert "inbox: 127.0.0.1:%d free (no ask-user-rich process serves it); 0 waiting" % port in askrich._doctor_inbox(
        askrich.Config.from_env(env)[0])
    agent = agents(port, "codex", "p", "Waiting")
    agent.server.log.wait_for("inbox-holding")
    line = askrich._doctor_inbox(askrich.Config.from_env(env)[0])
    assert line == ("inbox: 127.0.0.1:%d held by ask-user-rich pid %d; 1 waiting; open it with: "
                    "askrich.py inbox" % (port, agent.pid))
    assert read_key(tmp_path / "logs") not in line
    off = askrich._doctor_inbox(askrich.Config.from_env(dict(env, ASK_USER_RICH_INBOX_PORT="0"))[0])
    assert off == "inbox: off (ASK_USER_RICH_INBOX_PORT=0)"
    out = io.StringIO()
    askrich.run_doctor(environ=env, facts=None, out=out)
    assert "held by ask-user-rich pid %d; 1 waiting" % agent.pid in out.getvalue()


def test_the_configuration_reads_the_inbox_port():
    assert askrich.Config.from_env({})[0].inbox_port == 47615
    assert askrich.Config.from_env({"ASK_USER_RICH_INBOX_PORT": "0"})[0].inbox_port == 0
    config, warnings = askrich.Config.from_env({"ASK_USER_RICH_INBOX_PORT": "seven"})
    assert config.inbox_port == 47615 and "ASK_USER_RICH_INBOX_PORT" in warnings[0]
    assert askrich.Config().inbox_port == 0  # built in code: no inbox unless asked


def test_a_form_of_a_process_that_does_not_hold_the_inbox_links_to_it_once_the_holder_proved_the_key(
        tmp_path, agents, monkeypatch):
    monkeypatch.setattr(askrich, "DOOR_SHARED", False)  # where processes cannot share the port
    port = free_port()
    logs = tmp_path / "logs"
    holder = agents(port, "codex", "elsewhere", "Held there")
    holder.server.log.wait_for("inbox-holding")
    rt, log = inbox_runtime(logs, port)
    try:
        interview = rt.open_interview({"title": "Mine", "questions": [{"id": "q", "header": "ok?"}]})
        events = form_events(rt.form_url(interview))
        try:
            state = events.wait_for(lambda s: (s.get("inbox") or {}).get("url") is not None)
            # The form's own way to the inbox (a one-time ticket), never the inbox's key.
            assert state["inbox"] == {"waiting": 1, "url": "/api/s/%s/inbox" % interview.token}
            assert read_key(logs) not in json.dumps(state)
            assert rt.inbox.server is None  # it never held the port: the holder proved the key
        finally:
            events.close()
    finally:
        rt.close()


# -- what the worker does next: a pure function of plain facts ----------------------------------


def facts(**changes):
    """A worker that holds nothing, proved the holder once, wrote and read the folder at 0, and
    may try to bind at 5."""
    base = {"now": 1.0, "closed": False, "active": True, "streams": 0, "formsOpen": False, "holding": False,
            "holderKnown": True, "probed": 0.0, "dirty": False, "lastWrite": 0.0, "lastScan": 0.0,
            "nextTry": 5.0, "readableUntil": None, "reprove": False}
    base.update(changes)
    return base


@pytest.mark.parametrize("changes, expected", [
    # nothing to do, or closing: the worker ends
    ({"active": False}, (True, 0, False, False, False, False)),
    ({"closed": True, "dirty": True}, (True, 0, False, False, False, False)),
    # idle: sleep until the next bind attempt (which also reads the folder)
    ({}, (False, 4.0, False, False, False, False)),
    # a retry: bind; the holder was proved before and no form is open, so no proof is asked
    ({"now": 5.0}, (False, 0, False, True, False, True)),
    # the first attempt: a failed bind asks whoever holds the port to prove the key
    ({"now": 5.0, "holderKnown": False}, (False, 0, False, True, True, True)),
    # holding the port: no bind attempts; the folder every 5 s
    ({"holding": True, "nextTry": float("-inf")}, (False, 4.0, False, False, False, False)),
    # a change: written at most every 250 ms
    ({"dirty": True, "lastWrite": 0.9}, (False, 0.15, False, False, False, False)),
    ({"dirty": True}, (False, 0, True, False, False, False)),
    # a page watching: the folder every half second
    ({"holding": True, "streams": 1, "now": 0.5}, (False, 0, False, False, False, True)),
    # a form opened and the holder not proved lately: who holds the door, now, with a proof
    ({"formsOpen": True, "now": 6.0, "probed": 0.5, "nextTry": 10.0}, (False, 0, False, True, True, True)),
    ({"formsOpen": True, "now": 1.0, "probed": 0.5, "nextTry": 10.0}, (False, 1.0, False, False, False, False)),
    # a URL shown on a stale proof (no form open): the worker proves the holder now, not the caller
    ({"reprove": True, "now": 1.0, "nextTry": 5.0}, (False, 0, False, True, True, False)),
    ({"reprove": True, "holding": True, "nextTry": float("-inf")}, (False, 4.0, False, False, False, False)),
    # a settled form stops being readable: wake then, to drop it from the entry
    ({"holding": True, "readableUntil": 2.5}, (False, 1.5, False, False, False, False)),
])
def test_the_workers_next_step_is_planned_from_plain_facts(changes, expected):
    step = askrich.plan_inbox_step(facts(**changes))
    assert (step.finish, pytest.approx(step.wait), step.write, step.bind, step.probe, step.scan) == expected
