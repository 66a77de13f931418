"""Registration with Claude Code exactly as the README shows it: `claude mcp add-json` then
`claude mcp get ask-user-rich`, which spawns the server, runs the MCP handshake and prints
`✔ Connected`. Claude Code comes from npm (`@anthropic-ai/claude-code`) installed into a
temporary prefix and runs with a throwaway HOME, offline and without a login.

Gemini CLI (`@google/gemini-cli`) likewise: the settings.json entry of the README, then
`gemini mcp list` must show the server `Connected`. The official Python SDK client (the `mcp`
package of tests/requirements.txt) stands for every other stdio client: it connects with the
minimal environment it passes to servers and runs a link interview.

Skips only where npm (or, for the SDK, the `mcp` package) is absent. npm installs are kept for a
day under the system temp folder (ASK_USER_RICH_TEST_NPM_CACHE moves them), so repeated runs do
not reinstall.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the helper beside this file, whatever pytest's import mode
    sys.path.insert(0, _HERE)
import zipapp_support as zs  # noqa: E402

CLAUDE_PACKAGE = os.environ.get("ASK_USER_RICH_TEST_CLAUDE_CODE", "@anthropic-ai/claude-code")
GEMINI_PACKAGE = os.environ.get("ASK_USER_RICH_TEST_GEMINI_CLI", "@google/gemini-cli")
INSTALL_TIMEOUT = 600
CLI_TIMEOUT = 90
MAX_AGE = 24 * 3600


def _npm_install(package, prefix):
    npm = shutil.which("npm")
    tmp = "%s.%d.tmp" % (prefix, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.run(
        [npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save",
         "--loglevel=error", package],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=INSTALL_TIMEOUT)
    assert proc.returncode == 0, "npm install %s failed:\n%s" % (package, proc.stdout)
    shutil.rmtree(prefix, ignore_errors=True)
    os.replace(tmp, prefix)


def npm_cli(package, command):
    """The `command` of npm `package`, installed into a temporary prefix reused for a day."""
    if not shutil.which("npm"):
        pytest.skip("npm is not installed")
    root = os.environ.get("ASK_USER_RICH_TEST_NPM_CACHE") or os.path.join(
        tempfile.gettempdir(), "ask-user-rich-tests-npm")
    prefix = os.path.join(root, package.replace("/", "_").replace("@", ""))
    binary = os.path.join(prefix, "node_modules", ".bin", command)
    fresh = os.path.exists(binary) and time.time() - os.path.getmtime(prefix) < MAX_AGE
    if not fresh:
        os.makedirs(root, exist_ok=True)
        _npm_install(package, prefix)
    return binary


@pytest.fixture(scope="module")
def claude():
    return npm_cli(CLAUDE_PACKAGE, "claude")


@pytest.fixture(scope="module")
def gemini():
    return npm_cli(GEMINI_PACKAGE, "gemini")


def _claude_env(tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLAUDE", "ANTHROPIC", "MCP_", "XDG_", "ASK_USER_RICH_"))}
    env.update(zs.child_env(tmp_path))
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    })
    return env


def _cli(binary, args, env, cwd):
    return subprocess.run([binary] + args, env=env, cwd=str(cwd), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=CLI_TIMEOUT)


def _register_and_get(claude, tmp_path, entry):
    env = _claude_env(tmp_path)
    added = _cli(claude, ["mcp", "add-json", "--scope", "user", "ask-user-rich",
                             json.dumps(entry)], env, tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    got = _cli(claude, ["mcp", "get", "ask-user-rich"], env, tmp_path)
    # `claude mcp get` exits 0 even when the server fails, so the printed status is the verdict.
    return got.stdout + got.stderr


def _python3():
    return "python3" if shutil.which("python3") else sys.executable


def test_claude_code_connects_to_the_archive_registered_as_in_the_readme(claude, tmp_path, tmp_path_factory):
    pyz = zs.lone_copy(zs.shared_pyz(tmp_path_factory), str(tmp_path / "bin"))
    entry = {"type": "stdio", "command": _python3(), "args": [pyz], "timeout": 14400000}
    out = _register_and_get(claude, tmp_path, entry)
    assert "✔ Connected" in out, out
    assert "14400000" in out, out


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
        "command": _python3(), "args": [pyz], "timeout": 14400000}}}
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
    env = {"ASK_USER_RICH_OPEN": "0", "ASK_USER_RICH_LOG_DIR": str(tmp_path / "logs"),
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
