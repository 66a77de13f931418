"""Shared test helpers: the server in-process and as a subprocess, and a raw HTTP client.

A module of its own (not conftest.py): tests/browser has a conftest.py too, and a test that
imported "conftest" by name could get either one.

The in-process harness drives `McpServer` over OS pipes (the same byte streams stdio gives
it); the subprocess harness runs `python3 askrich.py` exactly as an MCP client would. Both
read stdout on a thread into a queue, so a test waits on a message with a hard timeout
instead of sleeping. The same holds for everything else a test waits for: an interview's
state (`wait_for_interview`, woken by the interview's own condition), a log line
(`LogWatch`, woken by the write), threads ending (`threads_still_running`, woken by join).
"""

from __future__ import annotations

import errno
import http.client
import io
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import askrich  # noqa: E402

MODULE = os.path.join(ROOT, "askrich.py")
WAIT = 10.0  # seconds any single expected message may take on a loaded CI machine


class Discard:
    """A log stream that keeps nothing: what a test that does not read the server's stderr
    gives its Log (an open(os.devnull) would be a file handle no one closes)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


DISCARD = Discard()


def form_strings(tag: str) -> dict:
    """The form's strings in one language, as shipped: assets/i18n/<tag>.json."""
    with open(os.path.join(ROOT, "assets", "i18n", "%s.json" % tag), encoding="utf-8") as handle:
        return json.load(handle)


def choice(qid="q", *options, **extra):
    """A choice question with option ids `options` (labels are the ids upper-cased)."""
    question = {
        "id": qid,
        "header": "Question %s?" % qid,
        "options": [{"id": oid, "label": oid.upper()} for oid in options],
    }
    question.update(extra)
    return question


def interview(*questions, **extra):
    args = {"title": "Test interview", "questions": list(questions) or [choice("q", "a", "b")]}
    args.update(extra)
    return args


# One call of Claude Code's built-in AskUserQuestion, as its PreToolUse hook receives it
# (tests/cli/test_hook.py, tests/sessions/test_sessions_hook.py): a question text with quotes and a newline,
# a preview, a recommendation by the built-in's "(Recommended)" convention, and a multi-select.
ASKED_DB = 'Which "database" should we use?\nWe store orders.'
ASKED_LANGS = "Which client languages?"
ASK_USER_QUESTION = {"questions": [
    {"question": ASKED_DB, "header": "Database", "multiSelect": False, "options": [
        {"label": "Postgres (Recommended)", "description": "Row store we run already",
         "preview": "+--------+\n| orders |\n+--------+"},
        {"label": "MySQL", "description": "Ops knows it"}]},
    {"question": ASKED_LANGS, "header": "Langs", "multiSelect": True, "options": [
        {"label": "Python", "description": "p"}, {"label": "Go", "description": "g"},
        {"label": "Rust", "description": "r"}]}]}

def ask_link(peer, args=None, **params) -> dict:
    """ask_user_rich with delivery "link" on a legacy peer: the awaiting reply's structured part."""
    reply = peer.tool("ask_user_rich", dict(args or interview(), delivery="link"), **params)
    structured = reply["result"]["structuredContent"]
    assert structured["status"] == "awaiting"
    return structured


def quiet_runtime(log_dir, stream=None, **settings) -> askrich.Runtime:
    """A Runtime on `log_dir` that opens no browser and logs into `stream` (a StringIO)."""
    config = askrich.Config(log_dir=str(log_dir), open_browser=False, **settings)
    return askrich.Runtime(config, askrich.Log(str(log_dir), stream=stream if stream is not None else io.StringIO()))


def watched_runtime(log_dir, **settings) -> askrich.Runtime:
    """A quiet_runtime whose log a test waits on: its LogWatch is the runtime's `watch`."""
    watch = LogWatch()
    runtime = quiet_runtime(log_dir, watch, **settings)
    runtime.watch = watch
    return runtime


def two_tasks_then_restart(log_dir):
    """An earlier server makes a task on an interview the user answers and one on an interview
    still pending when it stops; then the next server starts on the same folder.
    (its runtime, its TaskRegistry, the answered task's id, the lost task's id, the answered
    interview)."""
    before = quiet_runtime(log_dir)
    tasks = askrich.TaskRegistry(before.log, before.archive, before.form_url)
    answered = before.open_interview(interview(choice("q", "a")))
    lost = before.open_interview(interview(choice("q", "a")))
    answered_task = tasks.create(answered, "Waiting", askrich.Cancellation())["taskId"]
    lost_task = tasks.create(lost, "Waiting", askrich.Cancellation())["taskId"]
    before.hub.submit(answered, {"answers": {"q": {"selected": ["a"]}}})
    before.close()
    after = quiet_runtime(log_dir)
    return after, askrich.TaskRegistry(after.log, after.archive, after.form_url), answered_task, lost_task, answered


def disk_full(*_args, **_kwargs):
    """A stand-in for a write or an fsync on a disk with no room left (monkeypatched in)."""
    raise OSError(errno.ENOSPC, "No space left on device")


def wait_for_file(path, present=True, timeout: float = WAIT) -> None:
    """Until a file is there (or gone, `present=False`): the inbox's registry files are written by
    its worker thread at most every 250 ms, and nothing else says when."""
    deadline = time.monotonic() + timeout
    while os.path.exists(path) != present:
        assert time.monotonic() < deadline, "%s never %s" % (path, "appeared" if present else "went")
        time.sleep(0.02)


def settled_long_ago(interview, seconds: float) -> None:
    """Move an interview's settle `seconds` into the past, as the expiry rules read it: the
    one place a test reaches into an interview's private fields (nothing public sets a clock)."""
    interview._settled_monotonic -= seconds


def wait_for_interview(interview, predicate, timeout: float = WAIT, what: str = "") -> None:
    """Block until `predicate(interview)` holds. The interview notifies its condition on every
    change a test can wait for (state, waiters, counts, streams), so this wakes on the change
    itself, never on a timer."""
    deadline = time.monotonic() + timeout

    def check():
        if predicate(interview):
            return True
        remaining = deadline - time.monotonic()
        return False if remaining <= 0 else remaining

    held = interview.wait_until(check)
    assert held, "interview %s: %s did not happen within %ss" % (interview.id, what or "the change", timeout)


class LogWatch:
    """The log lines a server writes to stderr, and a wait for the one a test expects.

    In-process it stands as the `Log`'s stream (every event is written there, whether or not
    the log file works); for a subprocess its stderr is fed in as it arrives. Either way the
    write wakes the wait.
    """

    def __init__(self) -> None:
        self.lines: list = []
        self._partial = ""
        self._arrived = threading.Condition()

    def write(self, text: str) -> int:
        with self._arrived:
            self._partial += text
            *complete, self._partial = self._partial.split("\n")
            self.lines.extend(complete)
            self._arrived.notify_all()
        return len(text)

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        with self._arrived:
            return "".join(line + "\n" for line in self.lines) + self._partial

    def _matching(self, events, fragments) -> list:
        found = []
        for line in self.lines:
            words = line.split(" ", 4)  # "[ask-user-rich] <time> <pid> <event> <fields>"
            # A fragment ending in a space ("task=ab.1 ") also matches the line's last field.
            if len(words) > 3 and words[3] in events and all(f in line + " " for f in fragments):
                found.append(line)
        return found

    def count(self, event, *fragments: str) -> int:
        """How many lines of `event` (a name or a tuple of names) hold every fragment so far."""
        with self._arrived:
            return len(self._matching(_names(event), fragments))

    def wait_for(self, event, *fragments: str, timeout: float = WAIT, nth: int = 1) -> str:
        """The `nth` line of `event` (a name or a tuple of names) that holds every fragment
        (`"interview=…"`), waiting for it."""
        events = _names(event)

        def found():
            lines = self._matching(events, fragments)
            return lines[nth - 1] if len(lines) >= nth else None

        with self._arrived:
            line = self._arrived.wait_for(found, timeout)
        assert line, "no %s %s (#%d) in the log within %ss:\n%s" % (
            "/".join(events), " ".join(fragments), nth, timeout, self.getvalue()[-4000:])
        return line


def _names(event) -> tuple:
    return (event,) if isinstance(event, str) else tuple(event)


def threads_still_running(before, timeout: float = WAIT) -> list:
    """The threads started since `before` (a `threading.enumerate()` snapshot) that are still
    alive once each had until the deadline to end; joining returns the moment a thread ends."""
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread not in before and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in threading.enumerate() if thread not in before]


class LineReader:
    """Collects the JSON lines a server writes; every line must be exactly one JSON value."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue = queue.Queue()
        self.raw: list = []
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:
        for line in iter(stream.readline, b""):
            self.raw.append(line)
            assert line.endswith(b"\n"), line
            self.lines.put(json.loads(line.decode("utf-8")))
        self.lines.put(EOFError())

    def next(self, timeout: float = WAIT):
        item = self.lines.get(timeout=timeout)
        if isinstance(item, EOFError):
            raise item
        return item


class McpPeer:
    """The client side of one server: send messages, receive responses by id."""

    def __init__(self, write, reader: LineReader) -> None:
        self._write = write
        self.reader = reader
        self.pending: list = []  # messages received while waiting for something else
        self.next_id = 0
        self.sent: list = []  # every message sent that parsed as JSON: which request an answer is to

    def send(self, message) -> None:
        data = message if isinstance(message, bytes) else (json.dumps(message) + "\n").encode()
        try:
            value = json.loads(data.decode("utf-8"))
        except ValueError:
            value = None
        self.sent.extend(value if isinstance(value, list) else [value])
        self._write(data)

    def request(self, method, params=None, **extra):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        message.update(extra)
        self.send(message)
        return self.next_id

    def notify(self, method, params=None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def receive(self, predicate, timeout: float = WAIT):
        for index, message in enumerate(self.pending):
            if predicate(message):
                return self.pending.pop(index)
        while True:
            message = self.reader.next(timeout)
            if predicate(message):
                return message
            self.pending.append(message)

    def response(self, request_id, timeout: float = WAIT):
        return self.receive(
            lambda m: isinstance(m, dict) and m.get("id") == request_id and "method" not in m,
            timeout,
        )

    def call(self, method, params=None, timeout: float = WAIT):
        return self.response(self.request(method, params), timeout)

    def initialize(self, capabilities=None, version="2025-11-25"):
        reply = self.call(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "tests", "version": "1"},
            },
        )
        self.notify("notifications/initialized")
        return reply

    def tool(self, name, arguments, timeout: float = WAIT, **params):
        params.update({"name": name, "arguments": arguments})
        return self.call("tools/call", params, timeout)


class InProcessServer(McpPeer):
    """McpServer on pipes inside the test process."""

    def __init__(self, runtime) -> None:
        in_read, self._in_write = os.pipe()
        out_read, out_write = os.pipe()
        writer = os.fdopen(out_write, "wb")
        self.server = askrich.McpServer(runtime, os.fdopen(in_read, "rb"), writer)
        self.runtime = runtime
        self.thread = threading.Thread(target=self._serve, args=(writer,), daemon=True)
        self.thread.start()
        super().__init__(self._write_bytes, LineReader(os.fdopen(out_read, "rb")))

    def _serve(self, writer) -> None:
        try:
            self.server.serve()
        finally:
            writer.close()

    def _write_bytes(self, data: bytes) -> None:
        os.write(self._in_write, data)

    def close(self) -> None:
        try:
            os.close(self._in_write)
        except OSError:
            pass
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the server did not stop at stdin EOF"


class SubprocessServer(McpPeer):
    """`python3 askrich.py` as an MCP client starts it."""

    def __init__(self, log_dir, env=None, args=(), executable=None, cwd=None) -> None:
        environment = dict(os.environ)
        environment.update(
            {
                "ASK_USER_RICH_LOG_DIR": str(log_dir),
                "ASK_USER_RICH_OPEN": "0",
                "ASK_USER_RICH_INBOX_PORT": "0",  # a test opts in with a free port of its own
                "ASK_USER_RICH_NOTIFY": "off",  # and to notices with a stand-in notifier
                # Whatever a server might cache stays out of the user's cache folder.
                "XDG_CACHE_HOME": str(log_dir) + "-cache",
            }
        )
        environment.update(env or {})
        self.process = subprocess.Popen(
            [executable or sys.executable, MODULE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
            cwd=cwd,
        )
        self.stderr_lines: list = []
        self.log = LogWatch()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        super().__init__(self._write_bytes, LineReader(self.process.stdout))

    def _drain_stderr(self) -> None:
        for line in iter(self.process.stderr.readline, b""):
            text = line.decode("utf-8", "replace")
            self.stderr_lines.append(text)
            self.log.write(text)

    def _write_bytes(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def close(self, timeout: float = WAIT) -> int:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


class HttpResponse:
    def __init__(self, status, headers, body) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))


def http_request(url, method="GET", body=None, headers=None, timeout=WAIT, connect_host=None) -> HttpResponse:
    """A raw request with full control of Host, Origin and Content-Type; a dict or list body is
    sent as JSON. `connect_host` connects there instead of the URL's host (give the Host header)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(connect_host or parts.hostname, parts.port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = dict({"Content-Type": "application/json"}, **(headers or {}))
        connection.request(method, parts.path + ("?" + parts.query if parts.query else ""), body, headers or {})
        response = connection.getresponse()
        return HttpResponse(response.status, response.headers, response.read())
    finally:
        connection.close()


class EventsReader:
    """A server-sent events route read on a thread: the JSON of every `event` event, in order.
    Tests wait on the events themselves (`wait_for`), never on a timer."""

    def __init__(self, url: str, event: str, headers=None, connect_host=None) -> None:
        self.event = event
        self.listings: list = []
        self.ended = False
        self.changed = threading.Condition()
        parts = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(connect_host or parts.hostname, parts.port, timeout=WAIT)
        self.connection.request("GET", parts.path, headers=headers or {})
        self.response = self.connection.getresponse()
        self.status = self.response.status
        self.headers = self.response.headers
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        event, data = None, []
        try:
            while True:
                line = self.response.fp.readline()
                if not line:
                    break
                line = line.decode("utf-8").rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif not line and event == self.event:
                    with self.changed:
                        self.listings.append(json.loads("\n".join(data)))
                        self.changed.notify_all()
                    event, data = None, []
                elif not line:
                    event, data = None, []
        except (OSError, ValueError):
            pass
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def wait_for(self, predicate, timeout: float = WAIT, what: str = "") -> dict:
        """The latest event's JSON once `predicate` accepts it, waiting for new events up to
        `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                if self.listings and predicate(self.listings[-1]):
                    return self.listings[-1]
                left = deadline - time.monotonic()
                if left <= 0 or self.ended:
                    raise AssertionError("the %s stream never showed %s; last: %s" % (
                        self.event, what or "the event wanted", self.listings[-1:] or "nothing"))
                self.changed.wait(left)

    def wait_ended(self, timeout: float = WAIT) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.ended, timeout), "the stream did not end"

    def close(self) -> None:
        try:
            self.connection.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        self.connection.close()


def api_url(interview_url: str, action: str = "") -> str:
    base, token = interview_url.split("/s/")
    return "%s/api/s/%s%s" % (base, token, "/" + action if action else "")


def vm_status(pid="self") -> dict:
    """VmRSS, VmHWM, ... of a live process (its /proc/PID/status), in MB."""
    text = askrich.read_proc("/proc/%s/status" % pid)
    assert text is not None, "no /proc/%s/status" % pid
    rows = (line.split(":", 1) for line in text.decode("ascii", "replace").splitlines() if line.startswith("Vm"))
    return {name: int(value.split()[0]) / 1024.0 for name, value in rows}


def wait_for_result(runtime, interview_id, timeout=None, cancellation=None):
    """The interview's settled result (structuredContent), or None on timeout or once
    `cancellation` (an askrich.Cancellation) is cancelled: a call that waits for the answers, as
    the agent's does (the form shows it waiting)."""
    hub = runtime.hub
    result, _ = hub.wait(hub.require(interview_id), cancellation=cancellation, timeout=timeout)
    return result


def submit(interview_url, answers, **extra):
    body = {"answers": answers}
    body.update(extra)
    return http_request(api_url(interview_url, "submit"), "POST", body)


def answer_while_waited_on(runtime, form, answers, timeout: float = WAIT) -> dict:
    """Submit through the form while a call waits: what the call got."""
    got = []
    waiter = threading.Thread(target=lambda: got.append(wait_for_result(runtime, form.id, timeout)))
    waiter.start()
    wait_for_interview(form, lambda i: i.activity()["waiters"] > 0, what="the call waiting")
    reply = submit(runtime.form_url(form), answers)
    waiter.join(timeout)
    assert reply.status == 200, reply.body
    assert got, "the waiting call got nothing"
    return got[0]


class LoopbackReports:
    """Lines that helper scripts a client CLI runs (an opener, a stdio tap) send to the test over
    a loopback socket, one connection or many; `wait_for()` wakes on each line's arrival (what
    those scripts see is not ours to read otherwise: the CLI started them)."""

    def __init__(self) -> None:
        import socket

        self.lines: list = []
        self._arrived = threading.Condition()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(8)
        self.port = self._socket.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed: the test is over
                return
            thread = threading.Thread(target=self._read, args=(connection,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _read(self, connection) -> None:
        with connection, connection.makefile("rb") as stream:
            for line in iter(stream.readline, b""):
                with self._arrived:
                    self.lines.append(line.decode("utf-8").rstrip("\n"))
                    self._arrived.notify_all()

    def wait_until(self, found, timeout: float = WAIT, what: str = "the report", alive=None):
        """`found()` (called under the lock; None: not yet) once it holds, waiting for lines;
        `alive()` returning False (the CLI ended) ends the wait early, checked whenever the wait
        wakes (at least once a second)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                value = found()
                if value is not None:
                    return value
                left = deadline - time.monotonic()
                assert left > 0, "%s did not arrive within %ss" % (what, timeout)
                assert alive is None or alive(), "the client ended before %s arrived" % what
                self._arrived.wait(min(left, 1.0))

    def wait_for(self, predicate, timeout: float = WAIT, what: str = "the report", alive=None) -> str:
        """The first line `predicate` accepts, waiting for it (`alive` as in `wait_until`)."""
        return self.wait_until(lambda: next((line for line in self.lines if predicate(line)), None),
                               timeout, what, alive)

    def close(self) -> None:
        import socket

        try:  # wakes the accept() blocked on the thread (close alone would not)
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
        self._threads[0].join(WAIT)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RecordingOpener(LoopbackReports):
    """An ASK_USER_RICH_OPEN_CMD for a server a client CLI starts: it records each URL it is asked
    to open in `record` and reports it to the test, so `wait()` wakes on the opening itself.
    `with RecordingOpener(tmp_path) as opener:` then hand `opener.command` to the server's
    environment."""

    def __init__(self, folder) -> None:
        super().__init__()
        self.record = os.path.join(str(folder), "opened.txt")
        self.command = os.path.join(str(folder), "opener.py")
        # The opener exits 0 once the URL is recorded: the server then waits on the person, as it
        # would after a browser opened.
        with open(self.command, "w", encoding="utf-8") as f:
            f.write("#!%s\nimport socket, sys\nurl = sys.argv[-1]\n"
                    "with open(%r, 'a', encoding='utf-8') as f:\n    f.write(url + '\\n')\n"
                    "with socket.create_connection(('127.0.0.1', %d), 10) as s:\n"
                    "    s.sendall(url.encode('utf-8') + b'\\n')\n" % (sys.executable, self.record, self.port))
        os.chmod(self.command, 0o755)

    @property
    def urls(self) -> list:
        return list(self.lines)

    def wait(self, count: int = 1, timeout: float = WAIT, alive=None) -> str:
        """The `count`-th URL opened, waiting for it (`alive` as in `wait_until`)."""
        return self.wait_until(lambda: self.lines[count - 1] if len(self.lines) >= count else None,
                               timeout, "opening the form %d time(s)" % count, alive)
