"""Notices: how soon the notifier starts once a notice is due, and what armed reminders cost an
idle server (tests/bench/README.md, "Notices").

    python3 tests/bench/notices.py [--runs N] [--idle SECONDS]

The notifier is a stand-in notify-send (a /bin/sh script that writes the time it started), so
the figure is ours: the scheduler waking and the process spawned, not a desktop's daemon.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import askrich  # noqa: E402
from helpers.support import SubprocessServer, choice, interview  # noqa: E402
from run import cpu_ms  # noqa: E402

# `--help` is how the server asks whether notify-send takes actions: not a notice.
STAND_IN = '#!/bin/sh\n[ "$1" = --help ] && exit 0\ndate +%%s.%%N >> %s\n'


def stand_in(folder: str) -> tuple:
    """(the bin folder holding notify-send, the file each run appends its start time to)."""
    bin_dir = os.path.join(folder, "bin")
    os.makedirs(bin_dir)
    starts = os.path.join(folder, "starts.txt")
    path = os.path.join(bin_dir, "notify-send")
    with open(path, "w") as script:
        script.write(STAND_IN % starts)
    os.chmod(path, 0o755)
    return bin_dir, starts


def started(starts: str, count: int, timeout: float = 10.0) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(starts) as handle:
                lines = [float(line) for line in handle if line.strip()]
        except OSError:
            lines = []
        if len(lines) >= count:
            return lines
        time.sleep(0.01)  # a benchmark's own polling, on a file the stand-in writes
    raise SystemExit("the stand-in notifier ran %d times, not %d" % (len(lines), count))


class WallClock(askrich.NoticeClock):
    """The scheduler's clock on the wall's time, which the stand-in's `date` also reads."""

    def now(self) -> float:
        return time.time()


def due_to_start(runs: int, delay: int) -> list:
    """Milliseconds from the moment a notice was due to the notifier's start, in-process on the
    wall clock: `delay` 0 is a link (due when armed), else a browser-opened form."""
    with tempfile.TemporaryDirectory() as folder:
        bin_dir, starts = stand_in(folder)
        config = askrich.Config(log_dir=os.path.join(folder, "logs"), open_browser=False, notify="desktop",
                                notify_after=delay)
        runtime = askrich.Runtime(config, askrich.Log(config.log_dir, stream=open(os.devnull, "w")))
        # The desktop's facts are read as a server reads them, on the first notice (its cost is
        # in the first run's figure).
        os.environ.update({"PATH": bin_dir + os.pathsep + os.environ["PATH"],
                           "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"})
        runtime.notices = askrich.Notices(config, runtime.log, folder, clock=WallClock(), form_url=runtime.form_url)
        latencies = []
        try:
            for run in range(runs):
                form = runtime.open_interview(interview(choice("q", "a")))
                armed = time.time()
                runtime.notices.arm(form, opened=delay > 0)
                due = armed + delay  # armed just before: the notice is due no later than this
                latencies.append((started(starts, run + 1)[-1] - due) * 1000)
        finally:
            runtime.close()
    return latencies


def link_call_to_start(runs: int) -> list:
    """Milliseconds from an `ask_user_rich` call with delivery link written to a real server's
    stdin to the notifier's start."""
    latencies = []
    with tempfile.TemporaryDirectory() as folder:
        bin_dir, starts = stand_in(folder)
        env = {"ASK_USER_RICH_NOTIFY": "desktop", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
               "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
        server = SubprocessServer(os.path.join(folder, "logs"), env=env)
        try:
            server.initialize()
            for run in range(runs):
                sent = time.time()
                server.tool("ask_user_rich", interview(choice("q", "a"), delivery="link"))
                latencies.append((started(starts, run + 1)[-1] - sent) * 1000)
        finally:
            server.close()
    return latencies


def idle_cpu(notify: str, seconds: float) -> float:
    """CPU milliseconds a server used over `seconds` of idling with one interview pending
    (delivery link), with reminders armed or notices off."""
    with tempfile.TemporaryDirectory() as folder:
        bin_dir, starts = stand_in(folder)
        env = {"ASK_USER_RICH_NOTIFY": notify, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
               "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
        server = SubprocessServer(os.path.join(folder, "logs"), env=env)
        try:
            server.initialize()
            server.tool("ask_user_rich", interview(choice("q", "a"), delivery="link"))
            if notify != "off":
                server.log.wait_for("notice-sent")
            time.sleep(1.0)  # let start-up work settle before the window
            before = cpu_ms(server.process.pid)
            time.sleep(seconds)
            return cpu_ms(server.process.pid) - before
        finally:
            server.close()


def summary(values: list) -> dict:
    """The first run apart (it reads the desktop's facts, once per process), then the rest."""
    ordered = sorted(values[1:])
    return {"first": round(values[0], 1), "median": round(statistics.median(ordered), 1),
            "p90": round(ordered[int(len(ordered) * 0.9) - 1], 1), "max": round(ordered[-1], 1), "runs": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    threading.current_thread().name = "bench"
    report = {
        "due → notifier started, link (ms)": summary(due_to_start(args.runs, 0)),
        "due → notifier started, 1 s after an opened form (ms)": summary(due_to_start(args.runs, 1)),
        "ask_user_rich (link) on stdin → notifier started (ms)": summary(link_call_to_start(args.runs)),
        "idle CPU, %gs, one pending interview, reminders armed (ms)" % args.idle: round(idle_cpu("desktop", args.idle), 1),
        "idle CPU, %gs, one pending interview, notices off (ms)" % args.idle: round(idle_cpu("off", args.idle), 1),
    }
    for name, value in report.items():
        print("%-62s %s" % (name, value))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
