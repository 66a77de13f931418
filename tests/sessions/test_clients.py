"""The server registered with each client the way the README says, checked by that client's own
pinned CLI (tests/helpers/clients_support.py), offline, each test with a throwaway HOME:

- the Claude Code plugin that `build_zipapp.py --plugin` writes: reproducible, accepted by
  `claude plugin validate`, installed from the unzipped release archive, and then connected,
  running the plugin's own copy of the `.pyz`;
- Gemini CLI's `gemini mcp add -s user`, then `gemini mcp list` in a trusted folder;
- Codex's `codex mcp add` plus the `tool_timeout_sec` a wait on a person needs.

Each command these tests run is also looked up in the README, so the two cannot drift apart.
"""

import hashlib
import json
import os
import re
import shutil
import sys
import zipfile

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers import zipapp_support as zs  # noqa: E402

MARKETPLACE = "ask-user-rich-marketplace"
PLUGIN_ID = "ask-user-rich@ask-user-rich"
# How the README writes the archive's path in every registration.
README_PYZ = "/abs/path/askrich.pyz"
TOOL_TIMEOUT_MS = 14400000
# What one session pays for the skill before it is used, as `claude plugin details` estimates
# it: the skill's name and description. Its body is paid only when the skill fires.
SKILL_ALWAYS_ON_BUDGET = 80
SKILL_ON_INVOKE_BUDGET = 400


def _readme():
    with open(os.path.join(zs.ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def _build_plugin(tree):
    env = dict(os.environ)
    env.pop("SOURCE_DATE_EPOCH", None)
    proc = zs.build_ok(None, root=tree, env=env, args=["--plugin"])
    dist = os.path.join(tree, "dist")
    return os.path.join(dist, MARKETPLACE), proc.stdout


def _folder_contents(folder):
    """{relative path: (mode, bytes)} for every file under `folder`."""
    found = {}
    for parent, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            with open(path, "rb") as f:
                found[rel] = (os.stat(path).st_mode & 0o777, f.read())
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The marketplace folder built from a frozen copy of the checkout, and its .zip's path."""
    tree = zs.copy_tree(str(tmp_path_factory.mktemp("plugin-tree")))
    folder, _ = _build_plugin(tree)
    return folder


def _unzipped(built, tmp_path):
    """The release archive unpacked into a fresh folder, as a user would; returns the folder."""
    target = tmp_path / "download"
    with zipfile.ZipFile(built + ".zip") as archive:
        archive.extractall(str(target))
    return str(target / MARKETPLACE)


def _python3_recorder(tmp_path):
    """A `python3` first on PATH that notes its arguments, then runs the real one: the proof of
    which file a client started."""
    real = shutil.which("python3") or sys.executable
    folder = tmp_path / "recorder"
    folder.mkdir()
    notes = tmp_path / "python3-arguments.txt"
    script = folder / "python3"
    script.write_text('#!/bin/sh\nprintf "%%s\\n" "$*" >> "%s"\nexec "%s" "$@"\n' % (notes, real))
    script.chmod(0o755)
    return str(folder), notes


def _ok(proc):
    assert proc.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout + proc.stderr


def _install_plugin(marketplace, env, cwd):
    _ok(cs.run("claude", ["plugin", "marketplace", "add", marketplace], env, cwd))
    _ok(cs.run("claude", ["plugin", "install", PLUGIN_ID], env, cwd))


# The build -------------------------------------------------------------------------------------

def test_the_plugin_holds_the_manifests_the_server_entry_the_archive_one_skill_and_the_hook(built):
    files = _folder_contents(built)
    assert sorted(files) == [
        ".claude-plugin/marketplace.json",
        "ask-user-rich/.claude-plugin/plugin.json",
        "ask-user-rich/.mcp.json",
        "ask-user-rich/askrich.pyz",
        "ask-user-rich/hooks/hooks.json",
        "ask-user-rich/skills/ask-user-rich/SKILL.md",
    ]
    # The AskUserQuestion hook and the permission hook (every tool's asks), each told Claude
    # Code's limit for it so that it gives up first.
    hooks = json.loads(files["ask-user-rich/hooks/hooks.json"][1])
    assert hooks == {"hooks": {
        "PreToolUse": [{"matcher": "AskUserQuestion", "hooks": [{
            "type": "command", "timeout": 3600,
            "command": 'python3 "${CLAUDE_PLUGIN_ROOT}/askrich.pyz" hook ask-user-question --timeout 3600'}]}],
        "PermissionRequest": [{"matcher": "*", "hooks": [{
            "type": "command", "timeout": 3600,
            "command": 'python3 "${CLAUDE_PLUGIN_ROOT}/askrich.pyz" hook permission-request --timeout 3600'}]}]}}
    marketplace = json.loads(files[".claude-plugin/marketplace.json"][1])
    assert [p["name"] for p in marketplace["plugins"]] == ["ask-user-rich"]
    assert marketplace["plugins"][0]["source"] == "./ask-user-rich"
    plugin = json.loads(files["ask-user-rich/.claude-plugin/plugin.json"][1])
    assert set(plugin) == {"name", "version", "description", "author", "license", "homepage"}
    version = zs.run([sys.executable, os.path.join(zs.ROOT, "askrich.py"), "--version"],
                     zs.ROOT, zs.child_env(os.path.dirname(built))).stdout.split()[-1]
    assert plugin["name"] == "ask-user-rich" and plugin["version"] == version
    assert plugin["license"] == "MIT" and plugin["homepage"].startswith("https://")
    servers = json.loads(files["ask-user-rich/.mcp.json"][1])
    assert servers == {"mcpServers": {"ask-user-rich": {
        "type": "stdio", "command": "python3", "args": ["${CLAUDE_PLUGIN_ROOT}/askrich.pyz"],
        "timeout": TOOL_TIMEOUT_MS}}}
    with open(os.path.join(os.path.dirname(built), "askrich.pyz"), "rb") as f:
        assert files["ask-user-rich/askrich.pyz"][1] == f.read()
    skill = files["ask-user-rich/skills/ask-user-rich/SKILL.md"][1].decode("utf-8")
    assert skill.startswith("---\nname: ask-user-rich\ndescription: ")
    for rule in ("ask_user_rich", "recommended", "rationale", "`language`", "deferred",
                 "append_questions", "await_user_answers"):
        assert rule in skill, rule


def test_the_zip_holds_the_marketplace_folder_under_its_own_name(built):
    with zipfile.ZipFile(built + ".zip") as archive:
        inside = {i.filename: archive.read(i) for i in archive.infolist()}
        stamps = {i.date_time for i in archive.infolist()}
    assert {name: data for name, (_mode, data) in _folder_contents(built).items()} == {
        name[len(MARKETPLACE) + 1:]: data for name, data in inside.items()}
    assert all(name.startswith(MARKETPLACE + "/") for name in inside)
    assert stamps == {(1980, 1, 1, 0, 0, 0)}


def test_the_plugin_build_is_byte_for_byte_reproducible(built, tmp_path):
    again, printed = _build_plugin(zs.copy_tree(str(tmp_path / "tree")))
    assert _folder_contents(again) == _folder_contents(built)
    with open(built + ".zip", "rb") as first, open(again + ".zip", "rb") as second:
        data = first.read()
        assert second.read() == data
    assert "plugin zip sha256: %s" % hashlib.sha256(data).hexdigest() in printed


# Claude Code -----------------------------------------------------------------------------------

def test_claude_code_validates_the_marketplace_and_the_plugin_without_a_warning(built, tmp_path):
    env = cs.offline_env(tmp_path)
    out = _ok(cs.run("claude", ["plugin", "validate", built], env, tmp_path))
    assert "✔ Validation passed" in out and "warning" not in out, out
    out = _ok(cs.run("claude", ["plugin", "validate", os.path.join(built, "ask-user-rich")], env, tmp_path))
    assert "✔ Validation passed" in out, out
    assert "mcpServers: ask-user-rich stdio python3" in out and "skills: ask-user-rich:ask-user-rich" in out, out
    assert "hooks: PreToolUse AskUserQuestion command" in out, out


def test_claude_code_installs_the_plugin_and_connects_to_the_plugins_own_archive(built, tmp_path):
    marketplace = _unzipped(built, tmp_path)
    recorder, notes = _python3_recorder(tmp_path)
    env = cs.offline_env(tmp_path, extra_path=[recorder])
    project = tmp_path / "project"
    project.mkdir()
    _install_plugin(marketplace, env, project)
    out = _ok(cs.run("claude", ["mcp", "list"], env, project))
    line = [l for l in out.splitlines() if l.startswith("plugin:ask-user-rich:ask-user-rich:")]
    assert line and line[0].endswith("✔ Connected"), out
    # The server that answered is the plugin's copy: started from the unpacked marketplace (or
    # Claude Code's copy of it under ~/.claude/plugins), byte for byte the archive that was built.
    started = [l.split() for l in notes.read_text().splitlines()]
    assert started and all(len(args) == 1 and args[0].endswith("/askrich.pyz") for args in started), started
    roots = (marketplace + "/ask-user-rich/", os.path.join(env["HOME"], ".claude", "plugins") + "/")
    for (path,) in started:
        assert path.startswith(roots), path
        with open(path, "rb") as mine, open(os.path.join(built, "ask-user-rich", "askrich.pyz"), "rb") as theirs:
            assert mine.read() == theirs.read()
    assert re.search(r" start version=\S+ ", cs.server_log(env)), cs.server_log(env)


def test_claude_code_estimates_the_skill_costs_each_session_little_before_it_is_used(built, tmp_path, record_property):
    env = cs.offline_env(tmp_path)
    _install_plugin(_unzipped(built, tmp_path), env, tmp_path)
    out = _ok(cs.run("claude", ["plugin", "details", PLUGIN_ID], env, tmp_path))
    assert re.search(r"Skills \(1\)\s+ask-user-rich\n", out) and re.search(r"MCP servers \(1\)\s+ask-user-rich\b", out), out
    always = re.search(r"Always-on:\s+~(\d+) tok", out)
    row = re.search(r"^\s*ask-user-rich\s+~(\d+)\s+~(\d+)\s*$", out, re.M)
    assert always and row, out
    record_property("skill_always_on_tokens", int(always.group(1)))
    record_property("skill_on_invoke_tokens", int(row.group(2)))
    assert int(always.group(1)) <= SKILL_ALWAYS_ON_BUDGET, out
    assert int(row.group(2)) <= SKILL_ON_INVOKE_BUDGET, out


def test_the_readme_installs_the_plugin_with_the_commands_tested_here():
    readme = _readme()
    assert "python3 build_zipapp.py --plugin" in readme
    assert "claude plugin marketplace add " in readme and "claude plugin install %s" % PLUGIN_ID in readme
    assert "/plugin install %s" % PLUGIN_ID in readme
    assert MARKETPLACE + ".zip" in readme


# Gemini CLI ------------------------------------------------------------------------------------

def _gemini_add(pyz):
    return ["mcp", "add", "-s", "user", "--trust", "--timeout", str(TOOL_TIMEOUT_MS), "ask-user-rich",
            "python3", pyz]


def test_gemini_cli_shows_the_server_added_with_mcp_add_as_connected(tmp_path, tmp_path_factory):
    pyz = zs.lone_copy(zs.shared_pyz(tmp_path_factory), str(tmp_path / "bin"))
    env = cs.offline_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    _ok(cs.run("gemini", _gemini_add(pyz), env, project))
    with open(os.path.join(env["HOME"], ".gemini", "settings.json"), encoding="utf-8") as f:
        entry = json.load(f)["mcpServers"]["ask-user-rich"]
    assert entry["command"] == "python3" and entry["args"] == [pyz], entry
    assert entry["timeout"] == TOOL_TIMEOUT_MS, entry
    assert entry["trust"] is True, entry  # without it, `gemini -p` never offers the tools to its model
    # Gemini CLI shows servers as Disabled in a folder the user has not trusted.
    with open(os.path.join(env["HOME"], ".gemini", "trustedFolders.json"), "w") as f:
        json.dump({str(project): "TRUST_FOLDER"}, f)
    out = cs.run("gemini", ["mcp", "list"], env, project)
    text = out.stdout + out.stderr
    line = [l for l in text.splitlines() if "ask-user-rich" in l]
    assert line and line[0].rstrip().endswith("- Connected") and "✓" in line[0], text
    assert " initialize " in cs.server_log(env)
    assert " ".join(["gemini"] + _gemini_add(README_PYZ)) in _readme()


# Codex -----------------------------------------------------------------------------------------

CODEX_ENTRY = """\
[mcp_servers.ask-user-rich]
command = "python3"
args = ["%s"]
"""
CODEX_TIMEOUT = "tool_timeout_sec = 14400\n"


def test_codex_lists_the_server_added_with_mcp_add_as_enabled_with_its_tool_timeout(tmp_path, tmp_path_factory):
    pyz = zs.lone_copy(zs.shared_pyz(tmp_path_factory), str(tmp_path / "bin"))
    env = cs.offline_env(tmp_path)
    added = ["mcp", "add", "ask-user-rich", "--", "python3", pyz]
    _ok(cs.run("codex", added, env, tmp_path))
    config = os.path.join(env["HOME"], ".codex", "config.toml")
    with open(config, encoding="utf-8") as f:
        assert f.read() == CODEX_ENTRY % pyz
    # What the README asks for next: the timeout line in the entry `codex mcp add` just wrote,
    # the only table of a fresh config.
    with open(config, "a", encoding="utf-8") as f:
        f.write(CODEX_TIMEOUT)
    listed = _ok(cs.run("codex", ["mcp", "list"], env, tmp_path))
    row = [l.split() for l in listed.splitlines() if l.startswith("ask-user-rich ")]
    assert row and row[0][:3] == ["ask-user-rich", "python3", pyz] and "enabled" in row[0], listed
    shown = cs.run("codex", ["mcp", "get", "ask-user-rich", "--json"], env, tmp_path)
    _ok(shown)
    got = json.loads(shown.stdout)
    assert got["enabled"] is True and got["tool_timeout_sec"] == 14400, got
    readme = _readme()
    assert " ".join(["codex"] + added[:-1] + [README_PYZ]) in readme
    assert (CODEX_ENTRY % README_PYZ) + CODEX_TIMEOUT in readme
