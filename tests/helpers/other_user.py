"""Another user of this machine, for the tests that attack as one (tests/README.md, "Another
user of this machine"): code run under `setpriv` as uid/gid 65534 (nobody), with no groups.

That needs root (tests run as root here and in CI), or sudo without a password, and
util-linux's setpriv. Where either is missing the tests skip with the reason, unless
ASK_USER_RICH_TESTS_REQUIRE_OTHER_USER=1 (the test command sets it), which makes them fail instead.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading

import pytest

from helpers.support import WAIT

OTHER_UID = 65534
SETPRIV = ("setpriv", "--reuid=%d" % OTHER_UID, "--regid=%d" % OTHER_UID, "--clear-groups")


def _as_root() -> tuple:
    """What runs setpriv as root: nothing when we are root, else sudo without a password."""
    if os.geteuid() == 0:
        return ()
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ("sudo", "-n")
    raise LookupError("switching to another user needs root or sudo without a password")


def why_not() -> str | None:
    """Why code cannot run as another user here, or None."""
    if os.name != "posix":
        return "not a POSIX system"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    try:
        _as_root()
    except LookupError as problem:
        return str(problem)
    return None


def _command(code: str, *args: str) -> tuple:
    return _as_root() + SETPRIV + (sys.executable, "-I", "-u", "-c", code) + args


def require_other_user() -> None:
    reason = why_not()
    if reason is None:
        return
    if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_OTHER_USER") == "1":
        pytest.fail("%s, but ASK_USER_RICH_TESTS_REQUIRE_OTHER_USER=1" % reason)
    pytest.skip(reason)


def run_as_other_user(code: str, *args: str, timeout: float = WAIT) -> subprocess.CompletedProcess:
    """`python3 -c code args…` as uid 65534; its output as text."""
    require_other_user()
    return subprocess.run(_command(code, *args), capture_output=True,
                          text=True, timeout=timeout, cwd="/", env={"PATH": os.environ.get("PATH", "")})


class OtherUserProcess:
    """A long-running `python3 -c code args…` as uid 65534, each line of its stdout a JSON
    report, read on a thread so that a test waits on a report, never on a timer."""

    def __init__(self, code: str, *args: str) -> None:
        require_other_user()
        self.process = subprocess.Popen(
            _command(code, *args), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd="/", env={"PATH": os.environ.get("PATH", "")})
        self.reports: queue.Queue = queue.Queue()
        self.seen: list = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.reports.put(json.loads(line))
        self.reports.put(None)

    def wait_for(self, predicate, what: str, timeout: float = WAIT) -> dict:
        """The first report (kept or new) that `predicate` accepts."""
        for report in self.seen:
            if predicate(report):
                return report
        while True:
            try:
                report = self.reports.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError("the other user's process never reported %s; it reported %r"
                                     % (what, self.seen)) from None
            if report is None:
                raise AssertionError("the other user's process ended before %s: %s"
                                     % (what, self.process.stderr.read()))
            self.seen.append(report)
            if predicate(report):
                return report

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # sudo passes SIGTERM on; a SIGKILL would end sudo alone
            try:
                self.process.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait(WAIT)
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()


# The other user's attempt at each loopback: one JSON line, {"<address>": "bound" | <errno name>}.
TRY_BINDS = r"""
import errno, json, socket, sys
port = int(sys.argv[1])
outcome = {}
for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    with socket.socket(family) as attempt:
        attempt.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):  # shares a port only between sockets of one user
            attempt.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            attempt.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            attempt.bind((address, port))
            attempt.listen(1)
            outcome[address] = "bound"
        except OSError as error:
            outcome[address] = errno.errorcode.get(error.errno, str(error.errno))
print(json.dumps(outcome))
"""


def binds_as_other_user(port: int) -> dict:
    """What another user gets trying to listen on `port` on each loopback."""
    done = run_as_other_user(TRY_BINDS, str(port))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
