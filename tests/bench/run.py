#!/usr/bin/env python3
"""The benchmark (tests/bench/README.md): start-up, memory, latency, a 1,000-question form, 50 at once.

    python3 tests/bench/run.py            # the full run (about 3 minutes on 2 cores)
    python3 tests/bench/run.py --quick    # fewer runs, same figures (about 1 minute)
    python3 tests/bench/run.py --tiny     # one or two runs of everything, a 30-question form:
                                          # proves the benchmark works (tests/cli/test_bench_smoke.py)

Prints a table (median, min, max and the budget of every figure) and writes the same as JSON to
tests/.artifacts/bench/results.json (or --json PATH).

How it measures, so the figures mean what they say:
- Every process runs the real interpreter binary (`os.path.realpath(sys.executable)`, never a
  pyenv shim script), and the interpreter's floor (`python3 -c pass`, also with `-S -I`) is
  measured in the same run, interleaved with the server starts, so a busy moment of this shared
  machine hits all of them alike. A start ends when the `initialize` reply line is read (and the
  `tools/list` reply, sent after the reply as a client does); the floor ends when the process
  exits.
- The `.pyz` is built from this tree into tests/.artifacts/bench/ (dist/ is left alone); its
  per-user code cache lives in a private XDG_CACHE_HOME there, warmed by one start first (that
  first start is reported too).
- Memory is VmRSS from /proc/PID/status, two seconds after the server went idle (it idles for
  hours in real use).
- Latencies over stdio use a `python3 askrich.py` subprocess; every stdout line is
  time-stamped by a reader thread as it arrives.
- Browser figures use Debian's Chromium through Playwright. Page-side times come from
  `performance.now()`; "frame" times end in a task queued from the next requestAnimationFrame,
  so style, layout and the frame's wait for vsync are included. Page and benchmark clocks are
  matched by a calibration round trip.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(HERE))

import askrich  # noqa: E402
import build_zipapp  # noqa: E402
from helpers.inbox_support import free_port, read_key  # noqa: E402
from helpers.support import api_url, http_request, vm_status  # noqa: E402

PYTHON = os.path.realpath(sys.executable)
MODULE = os.path.join(ROOT, "askrich.py")
ARTIFACTS = os.path.join(ROOT, "tests", ".artifacts", "bench")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WAIT = 60.0  # seconds any single step may take before the benchmark gives up
IDLE_SECONDS = 2.0  # memory is read after the server has had nothing to do for this long

# (key, label, unit, budget): the budget is an upper bound on the median, or None (reported
# only). A budget in "x" is a ratio to the floor measured in the same run.
FIGURES = [
    ("floor", "python3 -c pass (the floor)", "ms", None),
    ("floor_si", "python3 -S -I -c pass", "ms", None),
    ("py_initialize", "askrich.py: spawn -> initialize", "ms", None),
    ("py_initialize_ratio", "askrich.py: spawn -> initialize / floor", "x", 2.0),
    ("py_tools_list", "askrich.py: spawn -> tools/list", "ms", None),
    ("py_tools_list_ratio", "askrich.py: spawn -> tools/list / floor", "x", None),
    ("pyz_initialize", ".pyz: spawn -> initialize", "ms", None),
    ("pyz_initialize_ratio", ".pyz: spawn -> initialize / floor", "x", 1.3),
    ("pyz_tools_list", ".pyz: spawn -> tools/list", "ms", None),
    ("pyz_tools_list_ratio", ".pyz: spawn -> tools/list / floor", "x", None),
    ("pyz_first_initialize", ".pyz: first start (code cache miss) -> initialize", "ms", None),
    ("py_si_initialize", "askrich.py -S -I: spawn -> initialize", "ms", None),
    ("py_si_initialize_ratio", "askrich.py -S -I: spawn -> initialize / floor -S -I", "x", None),
    ("pyz_si_initialize", ".pyz -S -I: spawn -> initialize", "ms", None),
    ("pyz_si_initialize_ratio", ".pyz -S -I: spawn -> initialize / floor -S -I", "x", None),
    ("floor_cpu", "python3 -c pass: CPU time (user + system)", "ms", None),
    ("py_cpu_ratio", "askrich.py: CPU time, start to exit after tools/list / floor", "x", None),
    ("pyz_cpu_ratio", ".pyz: CPU time, start to exit after tools/list / floor", "x", None),
    ("floor_si_cpu", "python3 -S -I -c pass: CPU time", "ms", None),
    ("py_si_cpu_ratio", "askrich.py -S -I: CPU time / floor -S -I", "x", None),
    ("pyz_si_cpu_ratio", ".pyz -S -I: CPU time / floor -S -I", "x", None),
    ("floor_rss", "python3 idle, reading stdin: VmRSS (the floor)", "MB", None),
    ("py_rss_initialize", "askrich.py: idle VmRSS after initialize", "MB", 24.0),
    # The away policy and the history load only once used: the person's setting costs nothing idle.
    ("py_away_rss_initialize", "askrich.py, away policy recommended: idle VmRSS after initialize", "MB", 24.0),
    ("py_rss_served", "askrich.py: idle VmRSS after a served interview", "MB", None),
    ("pyz_rss_initialize", ".pyz: idle VmRSS after initialize", "MB", 16.0),
    ("pyz_rss_served", ".pyz: idle VmRSS after a served interview", "MB", 24.0),
    ("link_first", "ask_user_rich link -> URL, first call (starts the form server)", "ms", None),
    ("link_warm", "ask_user_rich link -> URL, warm", "ms", None),
    ("submit_http", "HTTP submit -> 200 (log dir on disk)", "ms", None),
    ("submit_result", "HTTP submit -> tool result on stdout (log dir on disk)", "ms", None),
    ("archive_fsync", "  of which: the archive's write + fsync on that disk, measured apart", "ms", None),
    ("submit_bare", "bare durable stdlib handler: POST -> line on stdout (disk)", "ms", None),
    ("submit_vs_bare", "HTTP submit -> tool result / bare handler (disk)", "x", 1.5),
    ("submit_http_tmpfs", "HTTP submit -> 200 (log dir on tmpfs)", "ms", None),
    ("submit_result_tmpfs", "HTTP submit -> tool result on stdout (log dir on tmpfs)", "ms", 2.0),
    ("submit_bare_tmpfs", "bare durable stdlib handler: POST -> line on stdout (tmpfs)", "ms", None),
    ("submit_vs_bare_tmpfs", "HTTP submit -> tool result / bare handler (tmpfs)", "x", None),
    ("append_visible", "append_questions -> new question shown in Chromium", "ms", 200.0),
    ("small_interactive", "5-question form: navigation -> form interactive (the page's floor)", "ms", None),
    ("big_validate", "{big} interview: validation", "ms", None),
    ("big_call", "{big} interview: ask_user_rich link call over stdio", "ms", None),
    ("big_api_bytes", "{big} interview: /api/s size", "KB", None),
    ("big_api_ms", "{big} interview: /api/s served in", "ms", None),
    ("big_interactive", "{big} interview: navigation -> form interactive", "ms", 1500.0),
    ("big_step_frame", "{big}: next/previous screen (key -> frame)", "ms", 50.0),
    ("big_step_script", "{big}: next/previous screen (script only)", "ms", None),
    ("big_review_frame", "{big}: End -> review screen (key -> frame)", "ms", 50.0),
    ("big_home_frame", "{big}: Home -> first screen (key -> frame)", "ms", 50.0),
    ("big_append_visible", "{big}: append_questions -> shown in Chromium", "ms", None),
    ("many_open", "{many} at once: open all (ask_user_rich link)", "ms", None),
    ("many_submit_http", "{many} at once: each HTTP submit -> 200", "ms", None),
    ("many_all_results", "{many} at once: submits sent -> every result on stdout", "ms", None),
    ("many_lost", "{many} at once: interviews lost", "count", 0),
    ("many_rss", "{many} at once: VmRSS after", "MB", None),
    ("sigint_exit", "SIGINT -> process exit (a wait in flight, the form server up)", "ms", 100.0),
    ("sigint_exit_modern", "SIGINT -> process exit (a modern wait with progress, the form server up)", "ms", 100.0),
    ("inbox_off_cpu", "inbox off, an interview pending: idle CPU per second", "ms", None),
    ("inbox_holder_cpu", "inbox holder, an interview pending: idle CPU per second", "ms", None),
    ("inbox_other_cpu", "inbox not held, an interview pending: idle CPU per second", "ms", None),
    ("inbox_off_rss", "inbox off, an interview pending: VmRSS", "MB", None),
    ("inbox_holder_rss", "inbox holder, an interview pending: VmRSS", "MB", None),
    ("inbox_other_rss", "inbox not held, an interview pending: VmRSS", "MB", None),
    ("door_direct_submit", "front door: HTTP submit -> 200, direct to the owner's port (log dir on disk)", "ms", None),
    ("door_submit", "front door: HTTP submit -> 200, through the door (log dir on disk)", "ms", None),
    ("door_submit_ratio", "front door: submit through the door / direct (log dir on disk)", "x", 1.3),
    ("door_direct_submit_tmpfs", "front door: HTTP submit -> 200, direct (log dir on tmpfs)", "ms", None),
    ("door_submit_tmpfs", "front door: HTTP submit -> 200, through the door (log dir on tmpfs)", "ms", None),
    ("door_submit_ratio_tmpfs", "front door: submit through the door / direct (log dir on tmpfs)", "x", 1.3),
    ("door_direct_append", "front door: append_questions -> page's event, direct", "ms", None),
    ("door_append", "front door: append_questions -> page's event, through the door", "ms", None),
    ("door_append_extra", "front door: the event's extra time through the door", "ms", 20.0),
    ("door_holder_rss_alone", "front door: holder's VmRSS, its own form only", "MB", None),
    ("door_holder_rss_ten", "front door: holder's VmRSS, {door} other processes registered", "MB", None),
    ("door_scale_listing", "front door, {scale} processes each with an interview pending: inbox listing", "ms", 50.0),
    ("door_scale_direct_submit", "front door, {scale} processes: HTTP submit -> 200, direct", "ms", None),
    ("door_scale_submit", "front door, {scale} processes: HTTP submit -> 200, through the door", "ms", None),
    ("door_scale_submit_ratio", "front door, {scale} processes: submit through the door / direct", "x", 1.3),
    ("door_scale_event", "front door, {scale} processes: a new interview -> the open inbox's event", "ms", 1000.0),
]
BROWSER_FIGURES = {
    "append_visible", "small_interactive", "big_interactive", "big_step_frame", "big_step_script", "big_review_frame",
    "big_home_frame", "big_append_visible",
}

MODES = {
    # spawn: starts per variant; memory: servers per variant; latency: rounds; loads: page loads
    # of the big form; steps: screen changes per load; questions x options; many: interviews.
    # inbox: seconds the inbox's processes are watched idle. shutdown: servers stopped by SIGINT
    # per variant. door: processes registered at the holder; door_rounds: submits each way,
    # through the door and direct, alternately (a shared machine's noise needs many).
    "full": dict(spawn=21, memory=3, latency=21, loads=5, steps=20, questions=1000, options=20, many=50, appends=10,
                 inbox=30, shutdown=21, door=10, door_rounds=30, scale=50),
    "quick": dict(spawn=9, memory=2, latency=9, loads=2, steps=10, questions=1000, options=20, many=50, appends=5,
                  inbox=10, shutdown=9, door=10, door_rounds=15, scale=50),
    "tiny": dict(spawn=2, memory=1, latency=2, loads=1, steps=3, questions=30, options=5, many=5, appends=2,
                 inbox=1, shutdown=2, door=2, door_rounds=2, scale=3),
}


# ============================================================================================
# Small helpers
# ============================================================================================


def now_ms() -> float:
    return time.perf_counter() * 1000.0


def server_env(log_dir: str, cache_dir: str | None = None) -> dict:
    env = dict(os.environ)
    env["ASK_USER_RICH_LOG_DIR"] = log_dir
    env["ASK_USER_RICH_OPEN"] = "0"
    env["ASK_USER_RICH_INBOX_PORT"] = "0"  # a bench that measures the inbox names its own port
    if cache_dir is not None:
        env["XDG_CACHE_HOME"] = cache_dir
    return env


def line(message) -> bytes:
    return (json.dumps(message) + "\n").encode()


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def read_reply(stream, request_id):
    while True:
        raw = stream.readline()
        if not raw:
            raise RuntimeError("the server closed stdout before answering request %r" % request_id)
        message = json.loads(raw)
        if message.get("id") == request_id:
            return message


# ============================================================================================
# Start-up
# ============================================================================================


def reap(process) -> float:
    """Wait for the process; the CPU time (user + system) it used, in ms."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return (usage.ru_utime + usage.ru_stime) * 1000.0


def time_floor(flags) -> tuple[float, float]:
    """(wall ms, CPU ms) of `python3 -c pass`."""
    started = now_ms()
    process = subprocess.Popen([PYTHON, *flags, "-c", "pass"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = reap(process)
    return now_ms() - started, cpu


def time_start(argv, env) -> tuple[float, float, float]:
    """(spawn -> initialize reply, spawn -> tools/list reply, CPU of the whole run) in ms, the
    way a client talks; the run ends at stdin EOF right after the tools/list reply."""
    started = now_ms()
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=env)
    try:
        process.stdin.write(line(INITIALIZE))
        process.stdin.flush()
        read_reply(process.stdout, 1)
        initialized = now_ms() - started
        process.stdin.write(line(INITIALIZED) + line(TOOLS_LIST))
        process.stdin.flush()
        reply = read_reply(process.stdout, 2)
        listed = now_ms() - started
        if len(reply["result"]["tools"]) != 3:
            raise RuntimeError("tools/list did not list the three tools")
    finally:
        process.stdin.close()
        cpu = reap(process)
    return initialized, listed, cpu


def bench_startup(mode: dict, pyz: str, work: str, results: dict) -> None:
    log_dir = os.path.join(work, "logs-startup")
    cache = os.path.join(work, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    env = server_env(log_dir, cache)
    first = time_start([PYTHON, pyz], env)[0]  # compiles and stores the code cache
    if not any(name.endswith(".pyc") for name in os.listdir(os.path.join(cache, "ask-user-rich"))):
        raise RuntimeError("the .pyz wrote no code cache under %s" % cache)
    variants = {
        "py": [PYTHON, MODULE],
        "pyz": [PYTHON, pyz],
        "py_si": [PYTHON, "-S", "-I", MODULE],
        "pyz_si": [PYTHON, "-S", "-I", pyz],
    }
    samples = {key: [] for key in ("floor", "floor_si", "floor_cpu", "floor_si_cpu", "pyz_first_initialize")}
    for name in variants:
        for what in ("_initialize", "_tools_list", "_cpu"):
            samples[name + what] = []
    samples["pyz_first_initialize"].append(first)
    for _ in range(mode["spawn"]):
        # Interleaved: a noisy moment of the machine falls on every variant alike.
        for key, flags in (("floor", []), ("floor_si", ["-S", "-I"])):
            wall, cpu = time_floor(flags)
            samples[key].append(wall)
            samples[key + "_cpu"].append(cpu)
        for name, argv in variants.items():
            initialized, listed, cpu = time_start(argv, env)
            samples[name + "_initialize"].append(initialized)
            samples[name + "_tools_list"].append(listed)
            samples[name + "_cpu"].append(cpu)
    for key, values in samples.items():
        results[key] = figure(values)
    for name in ("py", "pyz"):
        for what in ("initialize", "tools_list"):
            results["%s_%s_ratio" % (name, what)] = ratio(samples["%s_%s" % (name, what)], samples["floor"])
    for name in ("py_si", "pyz_si"):
        results[name + "_initialize_ratio"] = ratio(samples[name + "_initialize"], samples["floor_si"])
    for name in ("py", "pyz"):
        results[name + "_cpu_ratio"] = ratio(samples[name + "_cpu"], samples["floor_cpu"])
        results[name + "_si_cpu_ratio"] = ratio(samples[name + "_si_cpu"], samples["floor_si_cpu"])


# ============================================================================================
# An MCP client over a subprocess's stdio
# ============================================================================================


class Client:
    """Talks to one server process; every stdout line is time-stamped when it arrives."""

    def __init__(self, argv, env) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env)
        self.lock = threading.Lock()
        self.replies: dict = {}
        self.arrived = threading.Condition(self.lock)
        self.next_id = 100
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in iter(self.process.stdout.readline, b""):
            stamp = now_ms()
            message = json.loads(raw)
            if "id" in message and "method" not in message:
                with self.lock:
                    self.replies[message["id"]] = (stamp, message)
                    self.arrived.notify_all()

    def send(self, method, params=None) -> int:
        with self.lock:
            self.next_id += 1
            request_id = self.next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.write([message])
        return request_id

    def write(self, messages) -> None:
        self.process.stdin.write(b"".join(line(m) for m in messages))
        self.process.stdin.flush()

    def reply(self, request_id, timeout=WAIT):
        """(arrival time in ms, the response)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: request_id in self.replies, timeout):
                raise RuntimeError("no reply to request %d within %ss" % (request_id, timeout))
            return self.replies.pop(request_id)

    def call(self, method, params=None):
        return self.reply(self.send(method, params))[1]

    def tool(self, name, arguments) -> int:
        return self.send("tools/call", {"name": name, "arguments": arguments})

    def tool_result(self, request_id, timeout=WAIT):
        stamp, message = self.reply(request_id, timeout)
        result = message.get("result")
        if not isinstance(result, dict) or result.get("isError"):
            raise RuntimeError("tool call failed: %s" % json.dumps(message)[:500])
        return stamp, result["structuredContent"]

    def initialize(self) -> None:
        self.call("initialize", INITIALIZE["params"])
        self.write([INITIALIZED])

    def close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def request(url, method="GET", body=None):
    """(status, body bytes, ms) of one request on a new connection, as the form makes them
    (to 127.0.0.1 by address, so name resolution is not part of the figure)."""
    port = urllib.parse.urlsplit(url).port
    started = now_ms()
    response = http_request(url, method, body, headers={"Host": "localhost:%d" % port}, timeout=WAIT,
                            connect_host="127.0.0.1")
    return response.status, response.body, now_ms() - started


def wait_until_waiting(url, timeout=WAIT) -> None:
    """Until a call waits on the interview (the /state JSON says so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body, _ = request(api_url(url, "state"))
        if status == 200 and json.loads(body)["waiting"]:
            return
        time.sleep(0.002)
    raise RuntimeError("no call started waiting on %s" % url)


def small_interview(title="Bench", questions=3) -> dict:
    return {
        "title": title,
        "delivery": "link",
        "questions": [
            {"id": "q%d" % i, "header": "Question %d?" % i,
             "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}], "recommended": "a"}
            for i in range(1, questions + 1)
        ],
    }


def answers_for(interview: dict, note: str) -> dict:
    return {"answers": {q["id"]: {"status": "answer", "selected": ["b"], "notes": note}
                        for q in interview["questions"]}}


def serve_like_a_browser(url: str) -> None:
    """What a page load fetches: the page, every asset, the interview, a progress post."""
    base = url.split("/s/", 1)[0]
    for status, _, _ in [request(url)] + [request("%s/assets/%s" % (base, name)) for name in sorted(askrich.ASSET_FILES)]:
        if status != 200:
            raise RuntimeError("the form server answered %d to an asset" % status)
    status, _, _ = request(api_url(url))
    if status != 200:
        raise RuntimeError("/api/s answered %d" % status)
    request(api_url(url, "progress"), "POST", {"answered": 1, "deferred": 0, "needsInfo": 0, "open": 2})


# ============================================================================================
# Memory and stdio latency
# ============================================================================================


def bench_memory(mode: dict, pyz: str, work: str, results: dict) -> None:
    log_dir = os.path.join(work, "logs-memory")
    env = server_env(log_dir, os.path.join(work, "cache"))
    demo = json.loads(askrich.read_asset("demo.json"))
    demo["delivery"] = "link"
    samples = {key: [] for key in ("py_rss_initialize", "py_rss_served", "pyz_rss_initialize", "pyz_rss_served",
                                   "py_away_rss_initialize")}
    floor = []
    for _ in range(mode["memory"]):
        process = subprocess.Popen([PYTHON, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        process.stdout.readline()
        time.sleep(IDLE_SECONDS)
        floor.append(vm_status(process.pid)["VmRSS"])
        process.communicate(b"")
        client = Client([PYTHON, MODULE], dict(env, ASK_USER_RICH_AWAY="recommended"))
        try:
            client.initialize()
            time.sleep(IDLE_SECONDS)
            samples["py_away_rss_initialize"].append(vm_status(client.process.pid)["VmRSS"])
        finally:
            client.close()
        for name, argv in (("py", [PYTHON, MODULE]), ("pyz", [PYTHON, pyz])):
            client = Client(argv, env)
            try:
                client.initialize()
                time.sleep(IDLE_SECONDS)
                samples[name + "_rss_initialize"].append(vm_status(client.process.pid)["VmRSS"])
                _, opened = client.tool_result(client.tool("ask_user_rich", demo))
                waiting = client.tool("await_user_answers", {"sessionId": opened["sessionId"]})
                serve_like_a_browser(opened["url"])
                wait_until_waiting(opened["url"])
                status, body, _ = request(api_url(opened["url"], "submit"), "POST",
                                       {"answers": {"db": {"status": "answer", "selected": ["pg"]}}})
                if status != 200:
                    raise RuntimeError("demo submit answered %d: %s" % (status, body[:200]))
                client.tool_result(waiting)
                time.sleep(IDLE_SECONDS)
                samples[name + "_rss_served"].append(vm_status(client.process.pid)["VmRSS"])
            finally:
                client.close()
    results["floor_rss"] = figure(floor)
    for key, values in samples.items():
        results[key] = figure(values)


def cpu_ms(pid: int) -> float:
    """The CPU time a live process's threads used so far, in ms: the scheduler's nanosecond
    counts of every thread (/proc/PID/stat's clock ticks are 10 ms, too coarse for an idle
    server), or those ticks where the kernel keeps no such counts."""
    try:
        total = 0
        for task in os.listdir("/proc/%d/task" % pid):
            total += int(askrich.read_proc("/proc/%d/task/%s/schedstat" % (pid, task)).split()[0])
        return total / 1e6
    except (OSError, ValueError, IndexError, AttributeError):
        fields = askrich.proc_stat(pid)  # utime and stime, in clock ticks
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def bench_inbox(mode: dict, pyz: str, work: str, results: dict) -> None:
    """Three .pyz servers with one interview pending each and nothing else to do: one with the
    inbox off, then two on one log folder and one inbox port (the first holds it, the second
    lists its entry and retries the bind every 5 s). Their CPU over `inbox` idle seconds, and
    their memory."""
    port = free_port()
    log_dir = os.path.join(work, "logs-inbox")
    off_env = server_env(os.path.join(work, "logs-inbox-off"), os.path.join(work, "cache"))
    on_env = dict(server_env(log_dir, os.path.join(work, "cache")), ASK_USER_RICH_INBOX_PORT=str(port))
    clients = []
    try:
        for env in (off_env, on_env, on_env):
            client = Client([PYTHON, pyz], env)
            clients.append(client)
            client.initialize()
            _, opened = client.tool_result(client.tool("ask_user_rich", small_interview("Inbox bench")))
            if env is on_env:
                # The first with the inbox on holds it before the next starts, and the next has
                # its entry written and the holder proved before the watch begins.
                shown_at_door(opened, port)
        time.sleep(IDLE_SECONDS)
        seconds = mode["inbox"]
        before = [cpu_ms(c.process.pid) for c in clients]
        time.sleep(seconds)
        after = [cpu_ms(c.process.pid) for c in clients]
        for index, name in enumerate(("off", "holder", "other")):
            results["inbox_%s_cpu" % name] = figure([(after[index] - before[index]) / seconds])
            results["inbox_%s_rss" % name] = figure([vm_status(clients[index].process.pid)["VmRSS"]])
    finally:
        for client in clients:
            client.close()


class StampedEvents:
    """A form's events stream read raw on a thread, each `state` event's JSON stamped (ms) as
    its line arrives: what a page's EventSource would get, and when."""

    def __init__(self, url: str) -> None:
        import socket

        parts = urllib.parse.urlsplit(api_url(url, "events"))
        self.socket = socket.create_connection(("127.0.0.1", parts.port), timeout=WAIT)
        self.socket.sendall(("GET %s HTTP/1.0\r\nHost: localhost:%d\r\n\r\n" % (parts.path, parts.port)).encode())
        self.events: list = []
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.socket.makefile("rb"):
            if raw.startswith(b"data: "):
                stamp = now_ms()
                with self.arrived:
                    self.events.append((stamp, json.loads(raw[6:])))
                    self.arrived.notify_all()

    def wait_version(self, version: int) -> float:
        """When the first event of `version` arrived."""
        with self.arrived:
            found = self.arrived.wait_for(lambda: any(e["version"] >= version for _, e in self.events), WAIT)
            if not found:
                raise RuntimeError("no event of version %d" % version)
            return next(stamp for stamp, e in self.events if e["version"] >= version)

    def close(self) -> None:
        self.socket.close()


def shown_at_door(opened: dict, port: int) -> None:
    """The form's URL is the front door's on `port`: its process holds the door or proved the
    holder ours, and its registry file names the form (written before a door URL goes out),
    so no wait on the file is needed."""
    if not opened["url"].startswith("http://localhost:%d/" % port):
        raise RuntimeError("the form shows %s, not the door" % opened["url"])


def door_folder(base: str, prefix: str):
    """A fresh log folder under `base` and a free inbox port: (port, folder, logs, env)."""
    import tempfile

    port = free_port()
    folder = tempfile.mkdtemp(dir=base, prefix=prefix)
    logs = os.path.join(folder, "logs")
    return port, folder, logs, dict(server_env(logs), ASK_USER_RICH_INBOX_PORT=str(port))


def own_url(log_dir: str, pid: int, session: str) -> str:
    """A form's own address (its process's port), from that process's registry file."""
    with open(os.path.join(log_dir, "inbox", "%d.json" % pid)) as handle:
        entry = json.load(handle)
    found = [row["url"] for row in entry["interviews"] if row["interviewId"] == session]
    if not found:
        raise RuntimeError("the registry does not name the form whose door URL was shown")
    return found[0]


def bench_door(mode: dict, work: str, results: dict) -> None:
    """The front door's cost: a holder and an owner, two `askrich.py` on one log folder, the
    owner's forms shown at the holder's door. Submit -> 200 direct to the owner's port and
    through the door, alternately, with the log folder on disk (the archive is fsynced before
    the 200, as users run it) and on tmpfs (the server's own cost); an append's event on two
    streams of one form at once, one direct and one through the door; then the holder's memory
    with `door` more processes registered, each with a form."""
    door_round_trips(mode, work, results, "", everything=True)
    if os.path.isdir("/dev/shm"):
        door_round_trips(mode, "/dev/shm", results, "_tmpfs", everything=False)
    door_scale(mode, work, results)


def door_round_trips(mode: dict, base: str, results: dict, suffix: str, everything: bool) -> None:
    port, folder, logs, env = door_folder(base, "askrich-door-")
    clients = []
    try:
        holder = Client([PYTHON, MODULE], env)
        clients.append(holder)
        holder.initialize()
        holder.tool_result(holder.tool("ask_user_rich", small_interview("Held")))
        owner = Client([PYTHON, MODULE], env)
        clients.append(owner)
        owner.initialize()
        direct, door, direct_event, door_event = [], [], [], []
        for round_number in range(mode["door_rounds"] * 2 + 1):
            interview = small_interview("Door %d" % round_number)
            _, opened = owner.tool_result(owner.tool("ask_user_rich", interview))
            shown_at_door(opened, port)
            own = own_url(logs, owner.process.pid, opened["sessionId"])
            if everything:
                through, straight = door_append(owner, opened, own)
            waiting = owner.tool("await_user_answers", {"sessionId": opened["sessionId"]})
            url = opened["url"] if round_number % 2 else own  # alternately, so load hits both alike
            wait_until_waiting(url)
            status, body, took = request(api_url(url, "submit"), "POST", answers_for(interview, "d"))
            if status != 200 or not json.loads(body)["delivered"]:
                raise RuntimeError("submit answered %d: %s" % (status, body[:200]))
            owner.tool_result(waiting)
            if round_number:  # the first round warmed every code path
                (door if round_number % 2 else direct).append(took)
                if everything:
                    door_event.append(through)
                    direct_event.append(straight)
        results["door_direct_submit" + suffix] = figure(direct)
        results["door_submit" + suffix] = figure(door)
        results["door_submit_ratio" + suffix] = figure([statistics.median(door) / statistics.median(direct)])
        if everything:
            results["door_direct_append"] = figure(direct_event)
            results["door_append"] = figure(door_event)
            results["door_append_extra"] = figure([a - b for a, b in zip(door_event, direct_event)])
            door_memory(mode, holder, env, port, clients, results)
    finally:
        for client in clients:
            client.close()
        shutil.rmtree(folder, ignore_errors=True)


def door_append(owner, opened: dict, own: str):
    """(through the door, direct): ms from append_questions sent to the new version's event."""
    streams = [StampedEvents(opened["url"]), StampedEvents(own)]
    try:
        for stream in streams:
            stream.wait_version(1)
        sent = now_ms()
        owner.tool_result(owner.tool("append_questions", {"sessionId": opened["sessionId"], "questions": [
            {"id": "more", "header": "More?"}]}))
        return tuple(stream.wait_version(2) - sent for stream in streams)
    finally:
        for stream in streams:
            stream.close()


def door_memory(mode: dict, holder, env: dict, port: int, clients: list, results: dict) -> None:
    time.sleep(IDLE_SECONDS)
    results["door_holder_rss_alone"] = figure([vm_status(holder.process.pid)["VmRSS"]])
    for index in range(mode["door"]):
        other = Client([PYTHON, MODULE], env)
        clients.append(other)
        other.initialize()
        _, opened = other.tool_result(other.tool("ask_user_rich", small_interview("Registered %d" % index)))
        shown_at_door(opened, port)
    time.sleep(IDLE_SECONDS + askrich.INBOX_RETRY_SECONDS)  # the holder has read them all
    results["door_holder_rss_ten"] = figure([vm_status(holder.process.pid)["VmRSS"]])


def door_scale(mode: dict, base: str, results: dict) -> None:
    """`scale` processes of ours (people run that many agents), each with an interview pending
    and each holding the door: the inbox listing's time, a submit through the door against one
    direct, and how soon a new interview reaches an inbox stream that is open."""
    port, folder, logs, env = door_folder(base, "askrich-scale-")
    clients = []
    try:
        for index in range(mode["scale"]):
            client = Client([PYTHON, MODULE], env)
            clients.append(client)
            client.initialize()
            client.tool_result(client.tool("ask_user_rich", small_interview("Scale %d" % index)))
        listing_url = "http://127.0.0.1:%d/api/inbox/%s" % (port, read_key(logs))
        times = []
        for _ in range(mode["door_rounds"]):
            status, body, took = request(listing_url)
            if status != 200 or len(json.loads(body)["interviews"]) < mode["scale"]:
                raise RuntimeError("the listing answered %d without every interview" % status)
            times.append(took)
        results["door_scale_listing"] = figure(times)
        stream = InboxEvents(listing_url + "/events", mode["scale"])
        try:
            sent = now_ms()
            clients[0].tool_result(clients[0].tool("ask_user_rich", small_interview("Scale, one more")))
            results["door_scale_event"] = figure([stream.wait_for("Scale, one more") - sent])
        finally:
            stream.close()
        direct, door = [], []
        owner = clients[-1]
        for round_number in range(mode["door_rounds"] * 2 + 1):
            interview = small_interview("Scaled door %d" % round_number)
            _, opened = owner.tool_result(owner.tool("ask_user_rich", interview))
            own = own_url(logs, owner.process.pid, opened["sessionId"])
            waiting = owner.tool("await_user_answers", {"sessionId": opened["sessionId"]})
            url = opened["url"] if round_number % 2 else own
            wait_until_waiting(url)
            status, body, took = request(api_url(url, "submit"), "POST", answers_for(interview, "s"))
            if status != 200:
                raise RuntimeError("submit answered %d: %s" % (status, body[:200]))
            owner.tool_result(waiting)
            if round_number:
                (door if round_number % 2 else direct).append(took)
        results["door_scale_direct_submit"] = figure(direct)
        results["door_scale_submit"] = figure(door)
        results["door_scale_submit_ratio"] = figure([statistics.median(door) / statistics.median(direct)])
    finally:
        for client in clients:
            client.close()
        shutil.rmtree(folder, ignore_errors=True)


class InboxEvents:
    """The inbox's events stream read raw on a thread: when each title first appeared (ms)."""

    def __init__(self, url: str, at_least: int) -> None:
        import socket

        parts = urllib.parse.urlsplit(url)
        self.socket = socket.create_connection(("127.0.0.1", parts.port), timeout=WAIT)
        self.socket.sendall(("GET %s HTTP/1.0\r\nHost: localhost:%d\r\n\r\n" % (parts.path, parts.port)).encode())
        self.seen: dict = {}
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        with self.arrived:  # the first listing, whole, before anything changes
            if not self.arrived.wait_for(lambda: len(self.seen) >= at_least, WAIT):
                raise RuntimeError("the inbox's stream never listed every interview")

    def _read(self) -> None:
        try:
            for raw in self.socket.makefile("rb"):
                if raw.startswith(b"data: "):
                    stamp = now_ms()
                    with self.arrived:
                        for row in json.loads(raw[6:])["interviews"]:
                            self.seen.setdefault(row["title"], stamp)
                        self.arrived.notify_all()
        except OSError:
            pass

    def wait_for(self, title: str) -> float:
        with self.arrived:
            if not self.arrived.wait_for(lambda: title in self.seen, WAIT):
                raise RuntimeError("%r never reached the inbox's stream" % title)
            return self.seen[title]

    def close(self) -> None:
        self.socket.close()


def fsync_cost(folder: str, size: int, runs: int) -> list:
    """What the archive's durable write costs by itself: temp file, fsync, rename, dir fsync."""
    os.makedirs(folder, exist_ok=True)
    from bare_durable import durable_write

    data = b"x" * size
    samples = []
    for i in range(runs):
        started = now_ms()
        path = durable_write(folder, "probe-%d.json" % i, data)
        samples.append(now_ms() - started)
        os.unlink(path)
    return samples


def bench_latency(mode: dict, work: str, results: dict) -> None:
    """ask_user_rich link -> URL, and submit -> 200 / -> tool result, with the log dir (and so
    the answer archive, fsynced before the submit is acknowledged) on disk, then on tmpfs where
    fsync is free: the second shows the server's own cost, the first what this disk adds."""
    latency_round(mode, os.path.join(work, "logs-latency"), results, "", with_link=True)
    if os.path.isdir("/dev/shm"):
        import tempfile

        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="askrich-bench-") as log_dir:
            latency_round(mode, log_dir, results, "_tmpfs", with_link=False)


class BareDurable:
    """tests/bench/bare_durable.py in a process of its own, writing into `folder`: a POST's
    time to its line on stdout."""

    def __init__(self, folder: str) -> None:
        self.process = subprocess.Popen([PYTHON, os.path.join(HERE, "bare_durable.py"), folder],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d/submit" % int(self.process.stdout.readline())

    def submit(self, answers: dict) -> float:
        sent = now_ms()
        status, _, _ = request(self.url, "POST", answers)
        self.process.stdout.readline()
        if status != 200:
            raise RuntimeError("the bare handler answered %d" % status)
        return now_ms() - sent

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def latency_round(mode: dict, log_dir: str, results: dict, suffix: str, with_link: bool) -> None:
    client = Client([PYTHON, MODULE], server_env(log_dir))
    bare = BareDurable(os.path.join(log_dir, "bare"))  # the same disk, the same rounds
    try:
        client.initialize()
        link, submit_http, submit_result, submit_bare = [], [], [], []
        for round_number in range(mode["latency"] + 1):
            interview = small_interview("Latency %d" % round_number)
            started = now_ms()
            stamp, opened = client.tool_result(client.tool("ask_user_rich", interview))
            link.append(stamp - started)
            waiting = client.tool("await_user_answers", {"sessionId": opened["sessionId"]})
            wait_until_waiting(opened["url"])
            sent = now_ms()
            status, body, _ = request(api_url(opened["url"], "submit"), "POST", answers_for(interview, "r%d" % round_number))
            answered = now_ms()
            if status != 200 or not json.loads(body)["delivered"]:
                raise RuntimeError("submit answered %d: %s" % (status, body[:200]))
            stamp, result = client.tool_result(waiting)
            if result["status"] != "submitted" or result["answers"][0]["notes"] != "r%d" % round_number:
                raise RuntimeError("the tool result is not the submitted answers")
            bare_ms = bare.submit(answers_for(interview, "r%d" % round_number))
            if round_number:  # the first round warmed the HTTP handler's code paths
                submit_http.append(answered - sent)
                submit_result.append(stamp - sent)
                submit_bare.append(bare_ms)
        results["submit_http" + suffix] = figure(submit_http)
        results["submit_result" + suffix] = figure(submit_result)
        results["submit_bare" + suffix] = figure(submit_bare)
        results["submit_vs_bare" + suffix] = ratio(submit_result, submit_bare)
        if with_link:
            results["link_first"] = figure(link[:1])
            results["link_warm"] = figure(link[1:])
            archive = os.path.join(log_dir, "answers")
            size = statistics.median(os.path.getsize(os.path.join(archive, n)) for n in os.listdir(archive))
            results["archive_fsync"] = figure(fsync_cost(os.path.join(log_dir, "fsync-probe"), int(size), mode["latency"]))
    finally:
        bare.close()
        client.close()


def bench_shutdown(mode: dict, work: str, results: dict) -> None:
    """SIGINT -> exit of a server with a call waiting on the user and the form server up: Claude
    Code sends SIGINT and, 100 ms later, SIGTERM (logging that SIGINT failed), so the exit must
    come first. Legacy: await_user_answers after initialize; modern: the same call with a
    progressToken (its ticker running too). Each run must exit 0, with `shutdown` in server.log."""
    for key, modern in (("sigint_exit", False), ("sigint_exit_modern", True)):
        times = []
        for run in range(mode["shutdown"]):
            log_dir = os.path.join(work, "logs-shutdown-%s-%d" % (key, run))
            client = Client([PYTHON, MODULE], server_env(log_dir))
            try:
                meta = {}
                if modern:
                    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                      "io.modelcontextprotocol/clientCapabilities": {},
                                      "progressToken": "bench"}}
                else:
                    client.initialize()
                opened_id = client.send("tools/call", dict({"name": "ask_user_rich",
                                                            "arguments": small_interview("Shutdown %d" % run)}, **meta))
                _, opened = client.tool_result(opened_id)
                client.send("tools/call", dict({"name": "await_user_answers",
                                                "arguments": {"sessionId": opened["sessionId"]}}, **meta))
                wait_until_waiting(opened["url"])
                watchdog = threading.Timer(WAIT, client.process.kill)
                watchdog.start()
                started = now_ms()
                client.process.send_signal(signal.SIGINT)
                code = client.process.wait()
                ended = now_ms()
                watchdog.cancel()
                if code != 0:
                    raise RuntimeError("SIGINT ended the server with exit code %s" % code)
                with open(os.path.join(log_dir, "server.log"), encoding="utf-8") as handle:
                    if " shutdown" not in handle.read():
                        raise RuntimeError("the server exited on SIGINT without logging its shutdown")
                times.append(ended - started)
            finally:
                client.close()
        results[key] = figure(times)


def bench_many(mode: dict, work: str, results: dict) -> None:
    """N interviews open at once, each awaited and answered concurrently; none may be lost."""
    count = mode["many"]
    log_dir = os.path.join(work, "logs-many")
    shutil.rmtree(log_dir, ignore_errors=True)
    client = Client([PYTHON, MODULE], server_env(log_dir))
    try:
        client.initialize()
        interviews = [small_interview("Many %d" % i, questions=5) for i in range(count)]
        started = now_ms()
        ids = [client.tool("ask_user_rich", interview) for interview in interviews]
        opened = [client.tool_result(request_id)[1] for request_id in ids]
        results["many_open"] = figure([now_ms() - started])
        waits = [client.tool("await_user_answers", {"sessionId": o["sessionId"]}) for o in opened]
        for o in opened:
            wait_until_waiting(o["url"])

        def submit(index):
            status, body, ms = request(api_url(opened[index]["url"], "submit"), "POST",
                                    answers_for(interviews[index], "interview %d" % index))
            return status, json.loads(body), ms

        started = now_ms()
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            replies = list(pool.map(submit, range(count)))
        lost = sum(1 for status, body, _ in replies if status != 200 or not body.get("delivered"))
        delivered = 0
        for index, request_id in enumerate(waits):
            try:
                _, result = client.tool_result(request_id, timeout=30)
            except RuntimeError:
                continue
            if (result["interviewId"] == opened[index]["sessionId"]
                    and all(a["notes"] == "interview %d" % index and a["selected"] == ["b"] for a in result["answers"])):
                delivered += 1
        all_results = now_ms() - started
        archived = len([n for n in os.listdir(os.path.join(log_dir, "answers")) if n.endswith(".json")])
        results["many_submit_http"] = figure([ms for _, _, ms in replies])
        results["many_all_results"] = figure([all_results])
        results["many_lost"] = figure([max(lost, count - delivered, count - archived)])
        results["many_rss"] = figure([vm_status(client.process.pid)["VmRSS"]])
    finally:
        client.close()


# ============================================================================================
# The big interview and the browser
# ============================================================================================


def big_interview(questions: int, options: int) -> dict:
    """Every question with a body, a recommendation and a described option list; some
    multi-select, some rank, some with option text fields: the form's every kind of screen."""
    items = []
    for i in range(1, questions + 1):
        question = {
            "id": "q%d" % i,
            "header": "Question %d: which of these %d options fits part %d of the plan?" % (i, options, i),
            "body": "Context for question **%d**: what we know so far, in a sentence or two." % i,
            "options": [
                {"id": "o%d" % j, "label": "Option %d of question %d" % (j, i),
                 "description": "What option *%d* of question %d means, with `code` in it." % (j, i)}
                for j in range(1, options + 1)
            ],
            "recommended": "o1",
            "rationale": "Option 1 is the safe default.",
        }
        if i % 10 == 0:
            question["multiSelect"] = True
            question["recommended"] = ["o1", "o2"]
        elif i % 25 == 0:
            question["kind"] = "rank"
            question["recommended"] = [o["id"] for o in question["options"]]
        elif i % 7 == 0:
            question["options"][0]["textInput"] = {"placeholder": "Why?", "required": True}
        if i > 1 and i % 5 == 0:
            question["dependsOn"] = ["q%d" % (i - 1)]
        items.append(question)
    return {"title": "A %d-question interview" % questions, "intro": "Many **questions**.",
            "delivery": "link", "questions": items}


# Installed before any page script: marks "interactive" (body.ready, then the next frame) and
# times every key press until the frame that shows its effect.
PAGE_PROBE = """
window.__bench = {interactive: null, keys: []};
new MutationObserver((records, observer) => {
  if (document.body && document.body.classList.contains('ready')) {
    observer.disconnect();
    requestAnimationFrame(() => setTimeout(() => { window.__bench.interactive = performance.now(); }, 0));
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['class']});
document.addEventListener('keydown', (e) => {
  const entry = {key: e.key, start: e.timeStamp, script: null, frame: null};
  window.__bench.keys.push(entry);
  window.addEventListener('keydown', () => { entry.script = performance.now() - entry.start; }, {once: true});
  requestAnimationFrame(() => setTimeout(() => { entry.frame = performance.now() - entry.start; }, 0));
}, true);
window.__watchRail = (qid) => new Promise((resolve) => {
  const seen = () => document.querySelector('#rail li[data-qid="' + qid + '"] .is-new')
    && document.querySelector('#notices [data-id="follow-ups"]');
  const done = () => requestAnimationFrame(() => setTimeout(() => resolve(performance.timeOrigin + performance.now()), 0));
  if (seen()) return done();
  const observer = new MutationObserver(() => { if (seen()) { observer.disconnect(); done(); } });
  observer.observe(document.body, {subtree: true, childList: true, attributes: true});
});
"""


class Browser:
    def __init__(self) -> None:
        from playwright.sync_api import sync_playwright

        self.manager = sync_playwright().start()
        self.browser = self.manager.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)

    def page(self):
        context = self.browser.new_context(viewport={"width": 1100, "height": 860})
        context.add_init_script(PAGE_PROBE)
        context.set_default_timeout(WAIT * 1000)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.bench_errors = errors
        return context, page

    def close(self) -> None:
        self.browser.close()
        self.manager.stop()


def clock_offset(page) -> float:
    """page wall-clock ms minus ours, from the calibration round trip with the least delay."""
    best = None
    for _ in range(7):
        before = time.time() * 1000
        theirs = page.evaluate("performance.timeOrigin + performance.now()")
        after = time.time() * 1000
        if best is None or after - before < best[0]:
            best = (after - before, theirs - (before + after) / 2)
    return best[1]


def time_append(client, page, session_id, offset, label, count) -> list:
    """append_questions over stdio -> the new question's rail chip and notice on screen."""
    samples = []
    for i in range(count):
        qid = "%s%d" % (label, i)
        watch = page.evaluate_handle("(qid) => { window.__seenAt = null; window.__watchRail(qid).then((t) => { window.__seenAt = t; }); }", qid)
        watch.dispose()
        sent = time.time() * 1000
        request_id = client.tool("append_questions", {
            "sessionId": session_id, "note": "A follow-up.",
            "questions": [{"id": qid, "header": "Follow-up %d?" % i,
                           "options": [{"id": "y", "label": "Yes"}, {"id": "n", "label": "No"}]}],
        })
        client.tool_result(request_id)
        page.wait_for_function("() => window.__seenAt !== null")
        samples.append(page.evaluate("window.__seenAt") - offset - sent)
        # The user looks at the follow-up, so the next one is new again.
        page.evaluate("document.querySelector('#notices [data-id=\"follow-ups\"]')?.remove()")
    return samples


def press_and_time(page, key: str) -> dict:
    page.keyboard.press(key)
    page.wait_for_function("() => window.__bench.keys.length && window.__bench.keys.at(-1).frame !== null")
    return page.evaluate("window.__bench.keys.at(-1)")


def bench_browser(mode: dict, work: str, results: dict, notes: list) -> None:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CHROMIUM") == "1":
            raise RuntimeError("%s is missing" % CHROMIUM)
        notes.append("browser figures skipped: %s is not installed (apt-get install chromium)" % CHROMIUM)
        return
    client = Client([PYTHON, MODULE], server_env(os.path.join(work, "logs-browser")))
    browser = Browser()
    try:
        client.initialize()
        # append -> visible, on a small form.
        _, opened = client.tool_result(client.tool("ask_user_rich", small_interview("Appends", 5)))
        context, page = browser.page()
        page.goto(opened["url"])
        page.wait_for_function("() => window.__bench.interactive !== null")
        results["small_interactive"] = figure([page.evaluate("window.__bench.interactive")])
        page.wait_for_function("() => document.querySelector('#rail li[data-qid]') !== null")
        time.sleep(0.3)  # the event stream is open
        results["append_visible"] = figure(time_append(client, page, opened["sessionId"], clock_offset(page), "f", mode["appends"]))
        check_page(page, notes, "append form")
        context.close()

        # The big interview.
        args = big_interview(mode["questions"], mode["options"])
        validate = []
        for _ in range(max(3, mode["loads"])):
            started = now_ms()
            askrich.validate_interview(args)
            validate.append(now_ms() - started)
        results["big_validate"] = figure(validate)
        started = now_ms()
        stamp, opened = client.tool_result(client.tool("ask_user_rich", args))
        results["big_call"] = figure([stamp - started])
        api_ms, api_size = [], None
        for _ in range(max(3, mode["loads"])):
            status, body, ms = request(api_url(opened["url"]))
            if status != 200:
                raise RuntimeError("/api/s answered %d" % status)
            api_ms.append(ms)
            api_size = len(body) / 1024.0
        results["big_api_bytes"] = figure([api_size])
        results["big_api_ms"] = figure(api_ms)

        interactive, step_frame, step_script, review, home = [], [], [], [], []
        for load in range(mode["loads"]):
            context, page = browser.page()  # a fresh profile: no draft, cold caches
            page.goto(opened["url"], wait_until="commit")
            page.wait_for_function("() => window.__bench.interactive !== null")
            interactive.append(page.evaluate("window.__bench.interactive"))
            page.locator("#main").focus()
            for i in range(mode["steps"]):
                entry = press_and_time(page, "ArrowRight" if i % 4 != 3 else "ArrowLeft")
                step_frame.append(entry["frame"])
                step_script.append(entry["script"])
            review.append(press_and_time(page, "End")["frame"])
            home.append(press_and_time(page, "Home")["frame"])
            if load == mode["loads"] - 1:
                time.sleep(0.3)
                results["big_append_visible"] = figure(
                    time_append(client, page, opened["sessionId"], clock_offset(page), "big", max(1, mode["appends"] // 2)))
            check_page(page, notes, "big form")
            context.close()
        results["big_interactive"] = figure(interactive)
        results["big_step_frame"] = figure(step_frame)
        results["big_step_script"] = figure(step_script)
        results["big_review_frame"] = figure(review)
        results["big_home_frame"] = figure(home)
    finally:
        browser.close()
        client.close()


def check_page(page, notes, what) -> None:
    if page.bench_errors:
        notes.append("%s: page errors: %s" % (what, "; ".join(page.bench_errors[:3])))


# ============================================================================================
# Figures, the table and the JSON
# ============================================================================================


def figure(values) -> dict:
    values = [float(v) for v in values]
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": len(values), "samples": [round(v, 3) for v in values]}


def ratio(values, floors) -> dict:
    """Each start over the floor measured in the same round (they ran back to back)."""
    return figure([v / f for v, f in zip(values, floors)])


def machine() -> dict:
    model = ""
    try:
        for row in subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True, timeout=10).stdout.splitlines():
            if row.startswith("Model name:"):
                model = row.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    chromium = ""
    if os.path.exists(CHROMIUM):
        try:
            chromium = subprocess.run([CHROMIUM, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "interpreter": PYTHON, "platform": platform.platform(), "chromium": chromium,
            "loadavg": os.getloadavg()}


def verdict(key, unit, budget, results):
    if budget is None or key not in results:
        return ""
    return "ok" if results[key]["median"] <= budget else "MISSED"


def format_value(value, unit) -> str:
    if unit == "x":
        return "%.2f" % value
    if unit == "count":
        return "%d" % value
    if unit in ("MB", "KB"):
        return "%.1f" % value
    return "%.1f" % value if value < 100 else "%.0f" % value


def label_of(label: str, mode: dict) -> str:
    return label.format(big="%s x %d" % (format(mode["questions"], ","), mode["options"]), many=mode["many"],
                        door=mode["door"], scale=mode["scale"])


def table(results, mode: dict) -> str:
    rows = ["| figure | median | min | max | runs | budget | |", "|---|---:|---:|---:|---:|---:|---|"]
    for key, label, unit, budget in FIGURES:
        if key not in results:
            rows.append("| %s | n/a | | | | | |" % label_of(label, mode))
            continue
        f = results[key]
        rows.append("| %s | %s %s | %s | %s | %d | %s | %s |" % (
            label_of(label, mode), format_value(f["median"], unit), unit, format_value(f["min"], unit),
            format_value(f["max"], unit), f["runs"],
            "" if budget is None else ("%s %s" % (format_value(budget, unit), unit) if unit != "x" else "%s×" % budget),
            verdict(key, unit, budget, results)))
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_const", dest="mode", const="quick", help="fewer runs")
    group.add_argument("--tiny", action="store_const", dest="mode", const="tiny",
                       help="one or two runs and a 30-question form: proves the benchmark runs")
    parser.add_argument("--json", default=os.path.join(ARTIFACTS, "results.json"), help="where to write the JSON")
    parser.add_argument("--only", default="", help="comma-separated parts: startup,memory,latency,many,browser,inbox,"
                        "shutdown,door")
    args = parser.parse_args(argv)
    mode_name = args.mode or "full"
    mode = MODES[mode_name]
    parts = [p for p in args.only.split(",") if p] or ["startup", "memory", "latency", "many", "browser", "inbox",
                                                       "shutdown", "door"]

    work = os.path.join(ARTIFACTS, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    pyz = os.path.join(work, "askrich.pyz")
    with open(pyz, "wb") as handle:
        handle.write(build_zipapp.build_bytes(build_zipapp.collect_files(ROOT)))

    results: dict = {}
    notes: list = []
    began = time.monotonic()
    for part in parts:
        started = time.monotonic()
        if part == "startup":
            bench_startup(mode, pyz, work, results)
        elif part == "memory":
            bench_memory(mode, pyz, work, results)
        elif part == "latency":
            bench_latency(mode, work, results)
        elif part == "many":
            bench_many(mode, work, results)
        elif part == "browser":
            bench_browser(mode, work, results, notes)
        elif part == "inbox":
            bench_inbox(mode, pyz, work, results)
        elif part == "shutdown":
            bench_shutdown(mode, work, results)
        elif part == "door":
            bench_door(mode, work, results)
        else:
            parser.error("unknown part %r" % part)
        print("[bench] %s done in %.1fs" % (part, time.monotonic() - started), file=sys.stderr)

    info = machine()
    report = {
        "mode": mode_name, "settings": mode, "machine": info, "seconds": round(time.monotonic() - began, 1),
        "notes": notes,
        "figures": {key: dict(results[key], label=label_of(label, mode), unit=unit, budget=budget,
                              verdict=verdict(key, unit, budget, results))
                    for key, label, unit, budget in FIGURES if key in results},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as handle:
        json.dump(report, handle, indent=2)
    print("ask-user-rich %s, benchmark mode %s: %d CPUs (%s), Python %s, %s"
          % (askrich.__version__, mode_name, info["nproc"], info["cpu"], info["python"], info["chromium"]))
    print(table(results, mode))
    for note in notes:
        print("note: " + note)
    print("JSON: %s" % os.path.relpath(args.json, os.getcwd()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
