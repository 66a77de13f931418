"""Stand-ins for the desktop's notifiers and a loopback push target, for the tests of notices
(tests/README.md, "Notices")."""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
import time

from helpers.support import WAIT, LoopbackReports, askrich

# What an agent may write into a title or call itself: shell, AppleScript, PowerShell and XML
# would each read some of it as code if it ever reached them unescaped.
HOSTILE = (
    'Say "hi" and \'bye\'',
    "back`tick` $(touch /tmp/owned) ${HOME} `whoami`",
    "line one\nline two\r\n\tthree",
    'end tell\ndo shell script "touch /tmp/owned"\n-- " & quit',
    "$env:PATH; Remove-Item -Recurse C:\\ `n @(1) $(Get-Date) '; exit 1",
    "<b>&amp; a < b & c > d</b> ]]> <!--",
    "-n --version",
)

NOTIFIERS = ("notify-send", "osascript", "powershell.exe")


class Clock(askrich.NoticeClock):
    """The scheduler's time, moved by the test: the scheduler sleeps until something changes
    (never until a deadline passes on its own), and each time it goes to sleep it has judged
    the time the test set last."""

    def __init__(self) -> None:
        self.time = 1000.0
        self.naps = 0
        self.condition = None  # what the scheduler sleeps on
        self.slept = threading.Event()

    def now(self) -> float:
        return self.time

    def sleep(self, condition, until) -> None:
        self.condition = condition
        self.naps += 1
        self.slept.set()
        condition.notify_all()
        condition.wait()

    def at(self, when: float) -> None:
        """Move to `when` and wait until the scheduler has looked at it and sleeps again."""
        assert self.slept.wait(WAIT), "the scheduler never slept"
        with self.condition:
            naps = self.naps
            self.time = when
            self.condition.notify_all()
            assert self.condition.wait_for(lambda: self.naps > naps, WAIT)


class StandIns(LoopbackReports):
    """notify-send, osascript and powershell.exe in a folder of their own, to put first on
    PATH: each reports its name and argv as one JSON line, then exits 0. `hang=True` makes them
    wait for ever after reporting; `click=True` makes notify-send print the "open" action, as it
    does when the person clicks it. `notify-send --help` says it takes --action."""

    def __init__(self, folder, hang: bool = False, click: bool = False) -> None:
        super().__init__()
        self.folder = str(folder)
        os.makedirs(self.folder, exist_ok=True)
        for name in NOTIFIERS:
            path = os.path.join(self.folder, name)
            with open(path, "w", encoding="utf-8") as script:
                script.write(STAND_IN % {"python": sys.executable, "port": self.port, "name": name,
                                         "hang": hang, "click": click})
            os.chmod(path, 0o755)

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def calls(self) -> list:
        return [json.loads(line) for line in self.lines]

    def wait_call(self, count: int = 1, timeout: float = WAIT) -> dict:
        """The `count`-th run of a notifier: {"name", "argv", "started"}."""
        return self.wait_until(lambda: json.loads(self.lines[count - 1]) if len(self.lines) >= count else None,
                               timeout, "notifier run #%d" % count)


STAND_IN = """#!%(python)s
import json, socket, sys, threading, time
if sys.argv[1:] == ["--help"]:
    print("  -A, --action=[NAME=]Text...       Specifies the actions to display to the user.")
    sys.exit(0)
report = {"name": %(name)r, "argv": sys.argv[1:], "started": time.time()}
with socket.create_connection(("127.0.0.1", %(port)d), 10) as s:
    s.sendall(json.dumps(report).encode("utf-8") + b"\\n")
if %(click)r and %(name)r == "notify-send":
    print("open", flush=True)
if %(hang)r:
    threading.Event().wait()
"""


class PushServer:
    """A loopback HTTP server that takes POSTs as ntfy and the webhooks do, and records each
    (path, headers, body). mode "ok" answers 200, "refuse" 403, "hang" never answers until
    close()."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.requests: list = []
        self.arrived = threading.Condition()
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.arrived:
                    outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body,
                                           "at": time.time()})
                    outer.arrived.notify_all()
                if outer.mode == "hang":
                    outer.release.wait(WAIT)
                    return
                status = 403 if outer.mode == "refuse" else 200
                payload = b'{"id":"x"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/topic") -> str:
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def wait_request(self, count: int = 1, timeout: float = WAIT) -> dict:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= count, timeout), "no push arrived"
            return self.requests[count - 1]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "PushServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
