"""Shared helpers for the zipapp, version-matrix and registration tests.

Everything here drives real processes (the builder, the built askrich.pyz under several
interpreters, the Claude Code CLI) and bounds each of them with a hard timeout, so a hang is a
failure with a message, never a stuck run.
"""

import glob
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
import zipfile

from helpers.support import api_url, http_request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILDER = os.path.join(ROOT, "build_zipapp.py")


def _pyenv_versions() -> str:
    """Where pyenv keeps its interpreters: ASK_USER_RICH_TEST_PYENV, else $PYENV_ROOT/versions,
    else `pyenv root`, else ~/.pyenv."""
    if os.environ.get("ASK_USER_RICH_TEST_PYENV"):
        return os.environ["ASK_USER_RICH_TEST_PYENV"]
    root = os.environ.get("PYENV_ROOT")
    if not root:
        try:
            root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            root = ""
    return os.path.join(root or os.path.expanduser("~/.pyenv"), "versions")


PYENV_VERSIONS = _pyenv_versions()
SUPPORTED = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]

# Hard limits (seconds) for every child process and every wait on one.
BUILD_TIMEOUT = 120
RUN_TIMEOUT = 60
REPLY_TIMEOUT = 30
HTTP_TIMEOUT = 15

INTERVIEW = {
    "title": "Zipapp smoke test",
    "questions": [{"id": "q", "header": "Pick?", "options": [{"id": "a", "label": "A"}]}],
    "delivery": "link",
}


def interpreter(version):
    """The real binary of a pyenv-installed CPython `version` (e.g. "3.8"), or None if absent."""
    for folder in sorted(glob.glob(os.path.join(PYENV_VERSIONS, version + ".*"))):
        # 3.1 must not match 3.10: only <version>.<patch> folders count.
        rest = os.path.basename(folder)[len(version) + 1:]
        if not rest.split("-")[0].isdigit():
            continue
        binary = os.path.join(folder, "bin", "python" + version)
        if os.access(binary, os.X_OK):
            return binary
    return None


def oldest_and_newest():
    """[(version, binary)] for the oldest and the newest supported CPython on the machine and
    the one running the tests, each once; absent pyenv versions are left out."""
    found = [(v, interpreter(v)) for v in (SUPPORTED[0], SUPPORTED[-1])]
    chosen = [(v, path) for v, path in found if path]
    current = "%d.%d" % sys.version_info[:2]
    if current not in [v for v, _ in chosen]:
        chosen.append((current, sys.executable))
    return chosen


def child_env(tmp, **extra):
    """An environment for a server child: private log dir and code cache, no browser."""
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("ASK_USER_RICH_"):
            del env[name]
    env["ASK_USER_RICH_LOG_DIR"] = os.path.join(str(tmp), "logs")
    env["ASK_USER_RICH_OPEN"] = "0"
    env["ASK_USER_RICH_INBOX_PORT"] = "0"  # never the user's inbox on its well-known port
    env["XDG_CACHE_HOME"] = os.path.join(str(tmp), "cache")
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


def build(output, root=ROOT, env=None, args=(), python=None):
    """Run build_zipapp.py from `root`; return the CompletedProcess (text)."""
    cmd = [python or sys.executable, os.path.join(root, "build_zipapp.py")]
    if output is not None:
        cmd += ["-o", str(output)]
    cmd += list(args)
    return subprocess.run(cmd, cwd=str(root), env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=BUILD_TIMEOUT)


def build_ok(output, **kwargs):
    proc = build(output, **kwargs)
    assert proc.returncode == 0, "build failed:\n%s\n%s" % (proc.stdout, proc.stderr)
    return proc


_BUILT = {}


def shared_tree(tmp_path_factory):
    """A copy of the checkout's askrich.py, build_zipapp.py and assets/, taken once per session,
    so that edits to the working tree while the tests run cannot make two builds differ."""
    if "tree" not in _BUILT:
        _BUILT["tree"] = copy_tree(str(tmp_path_factory.mktemp("shared-tree")))
    return _BUILT["tree"]


def shared_pyz(tmp_path_factory):
    """One askrich.pyz built from shared_tree() for the whole session (built on first use)."""
    if "path" not in _BUILT:
        folder = tmp_path_factory.mktemp("shared-build")
        path = os.path.join(str(folder), "askrich.pyz")
        env = dict(os.environ)
        env.pop("SOURCE_DATE_EPOCH", None)
        build_ok(path, root=shared_tree(tmp_path_factory), env=env)
        _BUILT["path"] = path
    return _BUILT["path"]


def copy_tree(dest):
    """A minimal source tree (askrich.py, build_zipapp.py, assets/) the tests may modify."""
    os.makedirs(dest, exist_ok=True)
    shutil.copy2(os.path.join(ROOT, "askrich.py"), dest)
    shutil.copy2(BUILDER, dest)
    shutil.copytree(os.path.join(ROOT, "assets"), os.path.join(dest, "assets"),
                    ignore=shutil.ignore_patterns("screenshots", "__pycache__"))
    return dest


def lone_copy(pyz, folder):
    """Copy the archive alone into an empty folder, executable, and return its path."""
    os.makedirs(folder, exist_ok=True)
    assert os.listdir(folder) == [], "expected an empty folder"
    target = os.path.join(folder, "askrich.pyz")
    shutil.copyfile(pyz, target)
    os.chmod(target, 0o755)
    return target


def run(cmd, cwd, env, stdin_data=""):
    """Run a short command to completion under RUN_TIMEOUT; return the CompletedProcess (text)."""
    return subprocess.run(cmd, cwd=str(cwd), env=env, input=stdin_data,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=RUN_TIMEOUT)


class StdioChild:
    """A stdio MCP server child: one JSON message per line, checked as it arrives."""

    def __init__(self, cmd, cwd, env):
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        self.stderr = []
        self.bad_lines = []
        self.notifications = []
        self._next_id = 0
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw.decode("utf-8"))
            except ValueError:
                self.bad_lines.append(raw)
                continue
            self.lines.put(message)
        self.lines.put(None)

    def _read_stderr(self):
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace"))

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def notify(self, method, params=None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def silent_for(self, seconds):
        """Whether the server writes nothing to stdout for `seconds` (and is still running)."""
        try:
            message = self.lines.get(timeout=seconds)
        except queue.Empty:
            return self.proc.poll() is None
        if message is not None:
            self.notifications.append(message)
        return False

    def request(self, method, params=None, timeout=REPLY_TIMEOUT):
        """Send a request; return its response (result or error), collecting notifications."""
        self._next_id += 1
        ident = self._next_id
        message = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            try:
                reply = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError("no reply to %s within %ss; stderr:\n%s"
                                     % (method, timeout, "".join(self.stderr)))
            if reply is None:
                raise AssertionError("server exited (code %s) before answering %s; stderr:\n%s"
                                     % (self.proc.poll(), method, "".join(self.stderr)))
            if reply.get("id") == ident and "method" not in reply:
                assert not self.bad_lines, "non-JSON lines on stdout: %r" % self.bad_lines
                return reply
            self.notifications.append(reply)

    def result(self, method, params=None, timeout=REPLY_TIMEOUT):
        reply = self.request(method, params, timeout)
        assert "result" in reply, "%s failed: %r" % (method, reply)
        return reply["result"]

    def initialize(self):
        result = self.result("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "ask-user-rich-zipapp-tests", "version": "1"},
        })
        self.notify("notifications/initialized")
        return result

    def close(self, timeout=10):
        """Close stdin (EOF) and return the exit code; kill on timeout and fail."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("server did not exit within %ss of stdin EOF" % timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


_HTML_REF = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)
_CSS_REF = re.compile(r"""url\(\s*["']?([^"')]+)["']?\s*\)|@import\s+["']([^"']+)["']""", re.I)
_JS_REF = re.compile(
    r"""(?:\bimport|\bexport)\s[^'";]*?\bfrom\s*["']([^"']+)["']"""
    r"""|\bimport\s*["']([^"']+)["']"""
    r"""|\bimport\(\s*["']([^"']+)["']\s*\)""")


def _references(url, content_type, body):
    text = body.decode("utf-8", "replace")
    if "html" in content_type:
        found = _HTML_REF.findall(text)
    elif "css" in content_type:
        found = [a or b for a, b in _CSS_REF.findall(text)]
    elif "javascript" in content_type:
        found = [a or b or c for a, b, c in _JS_REF.findall(text)]
    else:
        found = []
    origin = urllib.parse.urlsplit(url)[:2]
    refs = []
    for ref in found:
        if ref.startswith(("data:", "#", "mailto:", "javascript:")):
            continue
        target = urllib.parse.urljoin(url, ref).split("#")[0]
        if urllib.parse.urlsplit(target)[:2] == origin:
            refs.append(target)
    return refs


def fetch_page_and_assets(page_url):
    """GET the form page and, transitively, every same-origin file it references.

    Returns {url: (status, content type, body)}. The page must reference at least one asset.
    """
    seen = {}
    pending = [page_url]
    while pending and len(seen) < 300:
        url = pending.pop(0)
        if url in seen:
            continue
        response = http_request(url, timeout=HTTP_TIMEOUT)
        status, body = response.status, response.body
        content_type = response.headers.get("Content-Type", "")
        seen[url] = (status, content_type, body)
        if status == 200:
            pending.extend(r for r in _references(url, content_type, body) if r not in seen)
    return seen


def check_page_and_assets(page_url, pyz=None):
    """Assert the page and all it references are served (200) and typed; with `pyz`, also that
    each /assets/ file is the archive's own copy, byte for byte."""
    fetched = fetch_page_and_assets(page_url)
    status, content_type, body = fetched[page_url]
    assert status == 200 and "text/html" in content_type, (status, content_type, body[:200])
    assets = [u for u in fetched if u != page_url]
    assert assets, "the form page references no assets: %r" % body[:500]
    failures = ["%s -> %s" % (u, s) for u, (s, _, _) in fetched.items() if s != 200]
    assert not failures, "assets not served: %s" % failures
    for url in assets:
        _, content_type, body = fetched[url]
        path = urllib.parse.urlsplit(url).path
        if path.endswith((".js", ".mjs")):
            assert "javascript" in content_type, (url, content_type)
        elif path.endswith(".css"):
            assert "text/css" in content_type, (url, content_type)
        if pyz and path.startswith("/assets/"):
            with zipfile.ZipFile(pyz) as archive:
                assert body == archive.read(path[1:]), "%s differs from the archive's copy" % url
    return sorted(urllib.parse.urlsplit(u).path for u in assets)


def tool_call(server, name, arguments, timeout=REPLY_TIMEOUT):
    result = server.result("tools/call", {"name": name, "arguments": arguments}, timeout)
    assert not result.get("isError"), "%s returned an error: %r" % (name, result)
    return result["structuredContent"]


def link_interview_round_trip(server, pyz=None):
    """Ask a link interview, check the served form, answer it over HTTP, collect the answers."""
    awaiting = tool_call(server, "ask_user_rich", INTERVIEW)
    assert awaiting["status"] == "awaiting", awaiting
    url = awaiting["url"]
    match = re.match(r"^(http://localhost:\d+)/s/([A-Za-z0-9_-]+)$", url)
    assert match, url
    served = check_page_and_assets(url, pyz)
    body = {"answers": {"q": {"status": "answer", "selected": ["a"]}}}
    response = http_request(api_url(url, "submit"), "POST", body, timeout=HTTP_TIMEOUT)
    assert response.status == 200, (response.status, response.body)
    done = tool_call(server, "await_user_answers", {"sessionId": awaiting["sessionId"]})
    assert done["status"] == "submitted", done
    answers = done["answers"]
    assert [a["id"] for a in answers] == ["q"], answers
    assert answers[0]["status"] == "answered" and answers[0]["selected"] == ["a"], answers
    return served


def handshake(server):
    """initialize + tools/list; return (serverInfo, tool names)."""
    init = server.initialize()
    assert init["serverInfo"]["name"] == "ask-user-rich", init
    tools = server.result("tools/list")["tools"]
    names = sorted(t["name"] for t in tools)
    assert names == ["append_questions", "ask_user_rich", "await_user_answers"], names
    return init["serverInfo"], names
