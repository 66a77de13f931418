"""What the session tests share: the stdio tap every one of them registers as the server, and for
the Codex and Gemini CLI sessions (tests/sessions/test_sessions_codex.py, tests/sessions/test_sessions_gemini.py)
the interview the scripted model asks, the answers the test submits, one round trip, and the
checks on what arrived where."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

from helpers import clients_support as cs
import pyte
from helpers.scripted_model import ToolUse
from helpers.support import WAIT, EventsReader, LoopbackReports, api_url, http_request, submit

import askrich  # noqa: E402 (after support, which puts the project root on sys.path)

# Markdown, a preview, non-ASCII text and a multi-select: what a CLI could mangle on the way.
ARGS = {"title": "Pick a database", "questions": [
    {"id": "db", "header": "Which database?", "body": "We store **orders**; ünïcødé ✓ survives.",
     "options": [{"id": "pg", "label": "Postgres", "description": "Row store",
                  "preview": "CREATE TABLE orders (id serial);"},
                 {"id": "my", "label": "MySQL"}], "recommended": "pg", "rationale": "We run it already."},
    {"id": "langs", "header": "Which client languages?", "multiSelect": True,
     "options": [{"id": "py", "label": "Python"}, {"id": "go", "label": "Go"}, {"id": "rs", "label": "Rust"}]}]}
NOTE = "Ops knows MySQL better."
# The one-question interview the Claude Code sessions ask.
PICK_A_DATABASE = {"title": "Pick a database", "questions": [
    {"id": "db", "header": "Which database?", "options": [
        {"id": "pg", "label": "Postgres"}, {"id": "my", "label": "MySQL"}], "recommended": "pg",
     "rationale": "We run it already."}]}
ANSWERS = {"db": {"selected": ["my"], "notes": NOTE}, "langs": {"selected": ["py", "rs"]}}
PROMPT = "Ask me which database to use."
SESSION_TIMEOUT = 60


def ended(process):
    """End the CLI (by its own id) if it still runs; everything it printed."""
    if process.poll() is None:
        process.kill()
    out, err = process.communicate()
    return (out or "") + (err or "")


def end_logged_servers(log_text: str, module: str) -> None:
    """Our server ends with the CLI's process group; should one have left that group, it is ended
    here by the pid it logged, but only while that pid is still our server, never a process that
    reused it."""
    import re
    import signal

    for pid in re.findall(r" start version=\S+ python=\S+ pid=(\d+)", log_text):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if module.encode() not in f.read():
                    continue
            os.kill(int(pid), signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError):
            continue


def assert_served_as_sent(spec):
    """The form serves exactly the interview ARGS describes: the call's arguments arrived intact
    (each served question also carries the interview version it arrived in)."""
    served = dict(spec, questions=[{k: v for k, v in q.items() if k != "version"} for q in spec["questions"]])
    assert served == askrich.validate_interview(ARGS)[0], json.dumps(spec, ensure_ascii=False)


def assert_answers(result):
    """The structured result of the submit ANSWERS made."""
    rows = {row["id"]: row for row in result["answers"]}
    assert rows["db"]["selected"] == ["my"] and rows["db"]["notes"] == NOTE, rows["db"]
    assert rows["langs"]["selected"] == ["py", "rs"], rows["langs"]
    assert result["status"] == "submitted" and result.get("archivePath"), result


# The tap a CLI starts instead of the server: it starts the server, relays both stdio streams
# line by line unchanged, and reports each line to the test once relayed (">" client to server,
# "<" server to client), so a test sees the exact protocol a CLI speaks and waits on a message
# having reached the CLI. A SIGTERM from the CLI goes on to the server; the tap ends with it.
TAP = """\
import json, signal, socket, subprocess, sys, threading
report = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10)
lock = threading.Lock()
def tell(direction, line):
    with lock:
        report.sendall(json.dumps([direction, line.decode("utf-8", "replace")]).encode() + b"\\n")
server = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
signal.signal(signal.SIGTERM, lambda *_: server.send_signal(signal.SIGTERM))
def inbound():
    for line in iter(sys.stdin.buffer.readline, b""):
        server.stdin.write(line)
        server.stdin.flush()
        tell(">", line)
    server.stdin.close()
threading.Thread(target=inbound, daemon=True).start()
for line in iter(server.stdout.readline, b""):
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
    tell("<", line)
sys.exit(server.wait())
"""


class StdioTap(LoopbackReports):
    """`with StdioTap(tmp_path) as tap:`; register `tap.argv` as the server's command line."""

    def __init__(self, folder, server_argv=None) -> None:
        super().__init__()
        script = os.path.join(str(folder), "tap.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(TAP)
        self.argv = [sys.executable, script, str(self.port)] + list(server_argv or [sys.executable, askrich.__file__])

    def messages(self, direction=None) -> list:
        """Every JSON-RPC message relayed so far, in order (one direction: ">" or "<")."""
        found = []
        for line in list(self.lines):
            way, text = json.loads(line)
            if direction in (None, way):
                try:
                    found.append(json.loads(text))
                except ValueError:
                    pass
        return found

    def wait_message(self, direction, predicate, timeout: float = WAIT, what: str = "the message", alive=None):
        """The first message relayed in `direction` that `predicate` accepts, waiting for it."""
        def found():
            for message in self.messages(direction):
                if predicate(message):
                    return message
            return None

        return self.wait_until(found, timeout, what, alive)


class Session:
    """What one session showed: the model's call, the served spec, the tools/call the server got,
    the submit-to-model latency, the model's next request, and the CLI's output."""


def round_trip(name, argv, env, cwd, model, opener, tap, answered, answers=None, before_submit=None,
               find_url=None):
    """Run the CLI `argv` through one interview: wait for the model's call and the form opening
    (or `find_url()`, for a link the opener never sees), wait until the call waits on the person
    (the form's own state stream), then (when the client asked for progress) answer one question
    and wait for that progress notification to reach the CLI, call `before_submit()`, submit
    `answers` (ANSWERS), and wait for the model request `answered(request)` accepts. Every process
    started here is ended by its id."""
    session = Session()
    process = subprocess.Popen(argv, env=env, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
    alive = lambda: process.poll() is None  # noqa: E731
    try:
        session.call = model.wait_for(lambda r: isinstance(r.answer, ToolUse),
                                      SESSION_TIMEOUT, "the call to ask_user_rich")
        url = find_url() if find_url else opener.wait(timeout=SESSION_TIMEOUT, alive=alive)
        session.spec = http_request(api_url(url)).json()["spec"]
        state = EventsReader(api_url(url, "events"), "state")
        try:
            state.wait_for(lambda s: s["waiting"], SESSION_TIMEOUT, "the call waiting")
        finally:
            state.close()
        session.request = tap.wait_message(">", lambda m: m.get("method") == "tools/call", what="tools/call")
        meta = session.request["params"].get("_meta") or {}
        session.progress = None
        if "progressToken" in meta:
            body = {"answered": 1, "deferred": 0, "needsInfo": 0, "open": len(session.spec["questions"]) - 1}
            assert http_request(api_url(url, "progress"), "POST", body).status == 204
            session.progress = tap.wait_message(
                "<", lambda m: m.get("method") == "notifications/progress"
                and "1 of %d answered" % len(session.spec["questions"]) in m["params"].get("message", ""),
                SESSION_TIMEOUT, "the progress notification", alive)
        if before_submit:
            before_submit()
        submitted = time.monotonic()
        reply = submit(url, answers or ANSWERS)
        assert reply.status == 200, reply.body
        session.after = model.wait_for(answered, SESSION_TIMEOUT, "the answers in the model's next request")
        session.latency = session.after.arrived - submitted
        session.out, session.err = process.communicate(timeout=SESSION_TIMEOUT)
    except AssertionError as failure:
        raise AssertionError("%s\n--- %s output:\n%s\n--- server log:\n%s"
                             % (failure, name, ended(process)[-3000:], cs.server_log(env)[-3000:]))
    finally:
        ended(process)
    session.returncode = process.returncode
    session.log = cs.server_log(env)
    session.result = next(m for m in tap.messages("<") if m.get("id") == session.request["id"])["result"]
    return session


def json_lines(out):
    """The JSON objects of a CLI's JSONL output (other lines skipped)."""
    events = []
    for line in out.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


# A long interview whose result is above the compact threshold: 300 questions, every one answered
# against the recommendation, every tenth with a note, so that every row needs the agent's eye.
BIG_COUNT = 300
BIG_ARGS = {"title": "Storage for every table", "questions": [
    {"id": "t%03d" % n, "header": "Which storage engine for table t%03d, which holds part %d of the orders?" % (n, n),
     "options": [{"id": "row", "label": "Row store"}, {"id": "col", "label": "Column store"},
                 {"id": "kv", "label": "Key-value"}], "recommended": "row"} for n in range(BIG_COUNT)]}
BIG_ANSWERS = {"t%03d" % n: dict({"selected": ["col"]}, **({"notes": "Table %d is scanned nightly." % n}
                                                           if n % 10 == 0 else {}))
               for n in range(BIG_COUNT)}


def assert_big_answers(result):
    """Every answer and note of BIG_ANSWERS, in a result however compact."""
    rows = {row["id"]: row for row in result["answers"]}
    assert len(rows) == BIG_COUNT, len(rows)
    for qid, answer in BIG_ANSWERS.items():
        assert rows[qid]["selected"] == ["col"], rows[qid]
        assert rows[qid].get("notes") == answer.get("notes"), rows[qid]


# -- an interactive session: Claude Code's full-screen UI in a pseudo-terminal ---------------------

API_KEY = "sk-ant-scripted-test"
COLUMNS, ROWS = 120, 40
INTERACTIVE_WAIT = 60  # seconds for any one thing an interactive session does (start, a turn, a poll)


def seed_home(env, work):
    """What a person's first run would ask (theme, the API key, trusting the folder), answered
    beforehand in the throwaway HOME, so that the session starts at its prompt."""
    with open(os.path.join(env["HOME"], ".claude.json"), "w", encoding="utf-8") as f:
        json.dump({"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 1,
                   "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
                   "projects": {str(work): {"hasTrustDialogAccepted": True, "allowedTools": []}}}, f)


# -- the person's terminal --------------------------------------------------------------------

class Terminal:
    """A CLI in a pseudo-terminal, its output rendered as a terminal would show it."""

    def __init__(self, argv, env, cwd, columns=COLUMNS, rows=ROWS):
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.changed = threading.Condition()
        self.ended = False
        self.frames = []  # every screen shown, flat: a state that lasts a moment is still seen
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        try:
            # A session of its own: its process group (the CLI and the servers it starts) ends
            # by one id, whatever the test did.
            self.process = subprocess.Popen(argv, env=env, cwd=str(cwd), stdin=slave, stdout=slave,
                                            stderr=slave, start_new_session=True)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self.fd = master
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the CLI closed the terminal
                data = b""
            with self.changed:
                if not data:
                    self.ended = True
                    self.changed.notify_all()
                    return
                self.stream.feed(data)
                flat = " ".join("\n".join(line.rstrip() for line in self.screen.display).split())
                if not self.frames or self.frames[-1] != flat:
                    self.frames.append(flat)
                self.changed.notify_all()

    def text(self):
        """The screen now, one line per row."""
        with self.changed:
            return "\n".join(line.rstrip() for line in self.screen.display)

    def flat(self):
        """The screen's words with all runs of blanks as one space, so that a text the UI
        wrapped over rows (with its indentation) still reads as one."""
        return " ".join(self.text().split())

    def wait_for(self, what, found, timeout=INTERACTIVE_WAIT):
        """Wait until found(flat screen text) is true; return that text. Fails naming `what`
        and showing the screen, if it does not come within `timeout` or the CLI ended."""
        return self._wait(lambda: [self.flat_now()], found, timeout,
                          "%s did not appear on the screen within %ss%s; the screen:\n%s", what)

    def wait_for_shown(self, what, found, timeout=INTERACTIVE_WAIT):
        """Like wait_for, but true of any screen shown so far, however briefly."""
        return self._wait(lambda: self.frames, found, timeout,
                          "%s was never shown within %ss%s; the last screen:\n%s", what)

    def flat_now(self):
        """flat(), with the lock already held."""
        return " ".join("\n".join(line.rstrip() for line in self.screen.display).split())

    def _wait(self, screens, found, timeout, failure, what):
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for flat in screens():
                    if found(flat):
                        return flat
                left = deadline - time.monotonic()
                if left <= 0 or self.ended:
                    raise AssertionError(failure % (what, timeout, " (the CLI ended)" if self.ended else "",
                                                    "\n".join(line.rstrip() for line in self.screen.display)))
                self.changed.wait(min(left, 1.0))

    def wait_for_text(self, text, timeout=INTERACTIVE_WAIT, what=None):
        return self.wait_for(what or repr(text), lambda flat: text in flat, timeout)

    def type(self, text):
        os.write(self.fd, text.encode("utf-8"))

    def close(self):
        """End the CLI's process group by its id: SIGTERM, then SIGKILL after 5 s."""
        if self.process.poll() is None:
            for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            try:  # the CLI is gone; anything left in its group is not
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.close(self.fd)
        self.reader.join(5)


DOWN, ENTER, ESCAPE = "\x1b[B", "\r", "\x1b"


# -- the person's browser -----------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


def require_chromium():
    """Skip without Chromium, or fail when the test command promised it."""
    import pytest

    if not os.path.exists(CHROMIUM):
        if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") == "1":
            pytest.fail("%s is missing but ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM=1" % CHROMIUM)
        pytest.skip("%s is not installed (apt-get install chromium)" % CHROMIUM)


@contextlib.contextmanager
def chromium_page():
    """A page of a headless Chromium that is closed however the test ends."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            yield browser.new_page()
        finally:
            browser.close()
