"""Registration with Claude Code exactly as the README shows it: `claude mcp add-json` then
`claude mcp get ask-user-rich`, which spawns the server, runs the MCP handshake and prints
`✔ Connected`. Claude Code runs with a throwaway HOME, offline and without a login.

Gemini CLI likewise: the settings.json entry of the README, then `gemini mcp list` must show the
server `Connected`. The official Python SDK client (the `mcp` package of tests/requirements.txt)
stands for every other stdio client: it connects with the minimal environment it passes to
servers and runs a link interview.

The CLIs are the pinned ones of clients_support.py (installed by tests/run.sh, which makes their
absence a failure; run alone, these tests skip without them).
"""

import json
import os
import shutil
import subprocess
import re
import sys

import pytest

from helpers import zipapp_support as zs  # noqa: E402
from helpers import clients_support as cs  # noqa: E402


@pytest.fixture(scope="module")
def claude():
    return cs.cli("claude")


@pytest.fixture(scope="module")
def gemini():
    return cs.cli("gemini")


def _claude_env(tmp_path):
    return cs.offline_env(tmp_path)


def _cli(binary, args, env, cwd):
    return subprocess.run([binary] + args, env=env, cwd=str(cwd), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=cs.CLI_TIMEOUT)


def _register_and_get(claude, tmp_path, entry, env=None):
    env = env or _claude_env(tmp_path)
    added = _cli(claude, ["mcp", "add-json", "--scope", "user", "ask-user-rich",
                             json.dumps(entry)], env, tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    got = _cli(claude, ["mcp", "get", "ask-user-rich"], env, tmp_path)
    # `claude mcp get` exits 0 even when the server fails, so the printed status is the verdict.
    return got.stdout + got.stderr


def _served_requests(log):
    """[(method, era)] of the server log's `request` events, in order."""
    found = []
    for line in log.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] == "request":
            fields = dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', parts[3]))
            found.append((fields.get("method", "").strip('"'), fields.get("era", "").strip('"')))
    return found


def _python3():
    return "python3" if shutil.which("python3") else sys.executable


def test_claude_code_connects_to_the_archive_registered_as_in_the_readme(claude, tmp_path, tmp_path_factory, record_property):
    pyz = zs.lone_copy(zs.shared_pyz(tmp_path_factory), str(tmp_path / "bin"))
    entry = {"type": "stdio", "command": _python3(), "args": [pyz], "timeout": 14400000}
    env = _claude_env(tmp_path)
    out = _register_and_get(claude, tmp_path, entry, env)
    assert "✔ Connected" in out, out
    assert "14400000" in out, out
    # Claude Code asks modern first and stays modern when server/discover answers, so
    # discovery and the tool list must both be served in the 2026-07-28 era.
    log = cs.server_log(env)
    served = [(m, e) for m, e in _served_requests(log) if m in ("server/discover", "tools/list")]
    record_property("claude_code_era", ",".join(sorted({e for _m, e in served})))
    assert [m for m, _e in served if m == "server/discover"], log
    assert [m for m, _e in served if m == "tools/list"], log
    assert all(e == "modern" for _m, e in served), log


def test_claude_code_connects_to_a_checkout(claude, tmp_path):
    entry = {"type": "stdio", "command": _python3(),
             "args": [os.path.join(zs.ROOT, "askrich.py")], "timeout": 14400000}
    out = _register_and_get(claude, tmp_path, entry)
    assert "✔ Connected" in out, out


def test_claude_code_reports_a_server_that_cannot_start_as_not_connected(claude, tmp_path):
    """The control: the same check says something else when the server is not there."""
    entry = {"type": "stdio", "command": _python3(),
             "args": [str(tmp_path / "missing" / "askrich.pyz")], "timeout": 14400000}
    out = _register_and_get(claude, tmp_path, entry)
    assert "ask-user-rich" in out and "✔ Connected" not in out, out


def test_gemini_cli_connects_to_the_archive_from_its_settings_file(gemini, tmp_path, tmp_path_factory):
    pyz = zs.lone_copy(zs.shared_pyz(tmp_path_factory), str(tmp_path / "bin"))
    env = _claude_env(tmp_path)
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    (home / ".gemini").mkdir()
    settings = {"mcpServers": {"ask-user-rich": {
        "command": _python3(), "args": [pyz], "timeout": 14400000, "trust": True}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    # Gemini CLI starts MCP servers only in folders the user trusts.
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    listed = _cli(gemini, ["mcp", "list"], env, project)
    out = listed.stdout + listed.stderr
    line = [l for l in out.splitlines() if "ask-user-rich" in l]
    assert line and line[0].rstrip().endswith("Connected") and "Disconnected" not in line[0], out


def test_python_sdk_client_runs_a_link_interview_on_the_archive(tmp_path, tmp_path_factory):
    mcp = pytest.importorskip("mcp")
    anyio = pytest.importorskip("anyio")
    pyz = zs.lone_copy(zs.shared_pyz(tmp_path_factory), str(tmp_path / "bin"))
    env = {"ASK_USER_RICH_OPEN": "0", "ASK_USER_RICH_INBOX_PORT": "0", "ASK_USER_RICH_LOG_DIR": str(tmp_path / "logs"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    interview = dict(zs.INTERVIEW)
    seen = {}

    async def session():
        params = mcp.StdioServerParameters(command=sys.executable, args=[pyz], env=env)
        with anyio.fail_after(zs.RUN_TIMEOUT):
            async with mcp.Client(params, mode="legacy", read_timeout_seconds=zs.REPLY_TIMEOUT) as client:
                seen["server"] = client.server_info.name
                seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
                result = await client.call_tool("ask_user_rich", interview)
                seen["status"] = result.structured_content["status"]

    anyio.run(session)
    assert seen == {"server": "ask-user-rich", "status": "awaiting",
                    "tools": ["append_questions", "ask_user_rich", "await_user_answers"]}
