"""Permission asks: what `askrich.py hook permission-request` costs (tests/bench/README.md,
"Permission asks").

    python3 tests/bench/permission.py [--runs N] [--idle SECONDS] [--json PATH]

Three figures, each over real hook processes (the .pyz, as the plugin runs it, its code cache
warm) fed a Claude Code PermissionRequest on stdin:
- hook start -> form URL: from the spawn to the form's address on stderr (budget 150 ms median),
  beside the floor (`python3 -c pass`, same run) that no hook beats: on a loaded machine compare
  the two, not the budget;
- submit -> hook output: from the HTTP submit being sent to the decision's line on stdout
  (budget 50 ms median); and, reported, to the hook's exit (the form server closing);
- the transcript watch while waiting: the hook's CPU over an idle window, as a share of one
  core, with its session transcript there and not growing (budget 1%).
The inbox and the notices are off, as for a person without them: their own costs are
benchmarked apart (run.py's inbox rows, notices.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import askrich  # noqa: E402
import build_zipapp  # noqa: E402
from helpers.support import submit  # noqa: E402
from run import cpu_ms  # noqa: E402

BUDGETS = {"floor": None, "start_to_url": 150.0, "submit_to_output": 50.0, "submit_to_exit": None,
           "idle_core_percent": 1.0}
URL = re.compile(rb"http://localhost:\d+/s/[A-Za-z0-9_-]+")


def request(transcript: str) -> bytes:
    return json.dumps({
        "session_id": "bench", "transcript_path": transcript, "cwd": ROOT, "permission_mode": "default",
        "hook_event_name": "PermissionRequest", "tool_name": "Bash",
        "tool_input": {"command": "npm test", "description": "Run the tests"},
        "permission_suggestions": [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}],
    }).encode()


class Hook:
    """One hook process, turned on in its own log folder, fed one request."""

    def __init__(self, folder: str, pyz: str) -> None:
        logs = os.path.join(folder, "logs")
        os.makedirs(logs, exist_ok=True)
        open(os.path.join(logs, askrich.PERMISSION_SWITCH), "w").close()
        self.transcript = os.path.join(folder, "session.jsonl")
        with open(self.transcript, "w") as f:
            f.write('{"type": "user", "message": {"content": "Run the tests."}}\n')
        env = dict(os.environ, ASK_USER_RICH_LOG_DIR=logs, ASK_USER_RICH_OPEN="0", ASK_USER_RICH_INBOX_PORT="0",
                   ASK_USER_RICH_NOTIFY="off")
        self.started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, pyz, "hook", "permission-request"], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.process.stdin.write(request(self.transcript))
        self.process.stdin.close()

    def url(self) -> str:
        """The form's address, read from stderr as it comes; stamps when it came."""
        seen = b""
        while True:
            line = self.process.stderr.readline()
            if not line:
                raise SystemExit("the hook ended without a form URL:\n" + seen.decode(errors="replace"))
            seen += line
            found = URL.search(line)
            if found:
                self.url_at = time.monotonic()
                return found.group().decode()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()


def floor_ms() -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.monotonic() - started) * 1000


def one_round(folder: str, pyz: str) -> tuple:
    """(hook start -> form URL, submit -> the decision on stdout, submit -> the hook's exit), in ms."""
    hook = Hook(folder, pyz)
    try:
        url = hook.url()
        sent = time.monotonic()
        reply = submit(url, {"permission": {"selected": ["allow"]}})
        line = hook.process.stdout.readline()
        done = time.monotonic()
        hook.process.wait()
        ended = time.monotonic()
        assert reply.status == 200 and b'"behavior": "allow"' in line, (reply.status, line)
        return (hook.url_at - hook.started) * 1000, (done - sent) * 1000, (ended - sent) * 1000
    finally:
        hook.close()


def idle_share(folder: str, pyz: str, seconds: float) -> float:
    """The hook's CPU over `seconds` of waiting on the person, in percent of one core."""
    hook = Hook(folder, pyz)
    try:
        hook.url()
        time.sleep(1.0)  # start-up work settles before the window
        before = cpu_ms(hook.process.pid)
        time.sleep(seconds)
        return (cpu_ms(hook.process.pid) - before) / seconds / 10
    finally:
        hook.close()


def summary(values: list, unit: str, digits: int = 1, **extra) -> dict:
    return dict({"median": round(statistics.median(values), digits), "min": round(min(values), digits),
                 "max": round(max(values), digits), "runs": len(values), "unit": unit}, **extra)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    floors, starts, submits, exits = [], [], [], []
    with tempfile.TemporaryDirectory() as folder:
        pyz = os.path.join(folder, "askrich.pyz")
        with open(pyz, "wb") as handle:
            handle.write(build_zipapp.build_bytes(build_zipapp.collect_files(ROOT)))
        one_round(os.path.join(folder, "warm"), pyz)  # fills the code cache, as any first start
        for run in range(args.runs):
            floors.append(floor_ms())
            start, output, ended = one_round(os.path.join(folder, "r%d" % run), pyz)
            starts.append(start)
            submits.append(output)
            exits.append(ended)
        idle = idle_share(os.path.join(folder, "idle"), pyz, args.idle)
    figures = {
        "floor": summary(floors, "ms"),
        "start_to_url": summary(starts, "ms"),
        "submit_to_output": summary(submits, "ms"),
        "submit_to_exit": summary(exits, "ms"),
        "idle_core_percent": summary([idle], "%", digits=3, seconds=args.idle),
    }
    for key, figure in figures.items():
        budget = figure["budget"] = BUDGETS[key]
        figure["verdict"] = "-" if budget is None else "ok" if figure["median"] <= budget else "OVER"
        print("%-18s median %8.2f %-2s (min %.2f, max %.2f, %d runs)  budget %s: %s" % (
            key, figure["median"], figure["unit"], figure["min"], figure["max"], figure["runs"],
            "-" if budget is None else "%g" % budget, figure["verdict"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0 if all(figure["verdict"] != "OVER" for figure in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
