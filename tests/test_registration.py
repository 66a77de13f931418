"""Registration with Claude Code exactly as the README shows it: `claude mcp add-json` then
`claude mcp get ask-user-rich`, which spawns the server, runs the MCP handshake and prints
`✔ Connected`. Claude Code comes from npm (`@anthropic-ai/claude-code`) installed into a
temporary prefix and runs with a throwaway HOME, offline and without a login.

Skips only where npm is absent. The npm install is kept for a day under the system temp folder
(ASK_USER_RICH_TEST_NPM_CACHE moves it) so repeated runs do not reinstall.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import zipapp_support as zs

PACKAGE = os.environ.get("ASK_USER_RICH_TEST_CLAUDE_CODE", "@anthropic-ai/claude-code")
INSTALL_TIMEOUT = 600
CLI_TIMEOUT = 90
MAX_AGE = 24 * 3600


def _install_claude(prefix):
    npm = shutil.which("npm")
    tmp = "%s.%d.tmp" % (prefix, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.run(
        [npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save",
         "--loglevel=error", PACKAGE],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=INSTALL_TIMEOUT)
    assert proc.returncode == 0, "npm install %s failed:\n%s" % (PACKAGE, proc.stdout)
    shutil.rmtree(prefix, ignore_errors=True)
    os.replace(tmp, prefix)


@pytest.fixture(scope="module")
def claude():
    if not shutil.which("npm"):
        pytest.skip("npm is not installed")
    prefix = os.environ.get("ASK_USER_RICH_TEST_NPM_CACHE") or os.path.join(
        tempfile.gettempdir(), "ask-user-rich-tests-npm", PACKAGE.replace("/", "_"))
    binary = os.path.join(prefix, "node_modules", ".bin", "claude")
    fresh = os.path.exists(binary) and time.time() - os.path.getmtime(prefix) < MAX_AGE
    if not fresh:
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        _install_claude(prefix)
    return binary


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


def _claude(claude, args, env, cwd):
    return subprocess.run([claude] + args, env=env, cwd=str(cwd), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=CLI_TIMEOUT)


def _register_and_get(claude, tmp_path, entry):
    env = _claude_env(tmp_path)
    added = _claude(claude, ["mcp", "add-json", "--scope", "user", "ask-user-rich",
                             json.dumps(entry)], env, tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    got = _claude(claude, ["mcp", "get", "ask-user-rich"], env, tmp_path)
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
