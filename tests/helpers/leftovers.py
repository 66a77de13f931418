"""The askrich.py processes this test run started, found by a mark in their environment.

tests/conftest.py sets RUN_MARK for the run; every process a test starts inherits it (the
helpers copy os.environ), so /proc tells ours apart from every other run's and the user's own.
After each test the survivors it started get LEFTOVER_GRACE seconds to end (a wait on a pidfd,
woken by the exit itself); one still running then is killed and named with its test, and the
run fails (tests/conftest.py).
"""

from __future__ import annotations

import os
import select
import time

RUN_MARK = "ASK_USER_RICH_TEST_RUN"
LEFTOVER_GRACE = 5.0  # seconds a process may outlive its test while it shuts down


def our_servers() -> dict:
    """(pid, start time) -> command line, for each live askrich.py or .pyz of this run."""
    mark = ("%s=%s" % (RUN_MARK, os.environ.get(RUN_MARK, ""))).encode()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                argv = handle.read().split(b"\0")
            if not any(os.path.basename(arg).startswith(b"askrich") for arg in argv):
                continue
            with open("/proc/%s/environ" % name, "rb") as handle:
                if mark not in handle.read().split(b"\0"):
                    continue
            with open("/proc/%s/stat" % name, "rb") as handle:
                started = handle.read().rsplit(b")", 1)[1].split()[19]
        except (OSError, IndexError):  # gone meanwhile, or another user's
            continue
        found[(int(name), started)] = b" ".join(argv).decode("utf-8", "replace").strip()
    return found


def still_running(servers: dict, patience: float) -> dict:
    """Those of `servers` (as our_servers gives them) that have not ended within `patience`
    seconds, all waited on against one deadline."""
    handles = {}
    for key in servers:
        try:
            handles[key] = os.pidfd_open(key[0])
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + patience
    try:
        return {key: servers[key] for key, fd in handles.items()
                if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]}
    finally:
        for fd in handles.values():
            os.close(fd)


def can_check() -> bool:
    return os.path.isdir("/proc/self") and hasattr(os, "pidfd_open")
