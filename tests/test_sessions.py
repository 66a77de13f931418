"""Real agent sessions (marked `sessions`: `bash tests/run.sh -k sessions`): a pinned client CLI
runs its agent loop against a scripted model on loopback (tests/scripted_model.py), offline, in
a throwaway HOME, and the model's call reaches our server, opens the form through a recording
opener, and the answers submitted there reach the model's next request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import clients_support as cs  # noqa: E402
from scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from support import MODULE, submit  # noqa: E402

pytestmark = pytest.mark.sessions
TOOL = "mcp__ask-user-rich__ask_user_rich"
ARGS = {"title": "Pick a database", "questions": [
    {"id": "db", "header": "Which database?", "options": [
        {"id": "pg", "label": "Postgres"}, {"id": "my", "label": "MySQL"}], "recommended": "pg",
     "rationale": "We run it already."}]}
SESSION_TIMEOUT = 60


def _tool_results(body):
    messages = body.get("messages") or []
    if not messages or messages[-1]["role"] != "user" or not isinstance(messages[-1]["content"], list):
        return []
    return [block for block in messages[-1]["content"] if block.get("type") == "tool_result"]


def claude_policy(model, request):
    """Search the deferred tools by words only our hint has, call ask_user_rich, then end."""
    names = [tool.get("name") for tool in request.body.get("tools", [])]
    if any('\\"status\\":\\"submitted\\"' in json.dumps(result) for result in _tool_results(request.body)):
        return Text("Thanks, noted.")
    if TOOL in names:
        return ToolUse(TOOL, ARGS)
    return ToolUse("ToolSearch", {"query": "clarify preferences approval", "max_results": 5})


def _opener(tmp_path):
    """ASK_USER_RICH_OPEN_CMD: a script that records the URL it is asked to open."""
    record = tmp_path / "opened.txt"
    script = tmp_path / "opener.sh"
    script.write_text("#!/bin/sh\nprintf '%%s\\n' \"$1\" >> '%s'\n" % record)
    script.chmod(0o755)
    return str(script), record


def test_claude_code_print_mode_round_trip(tmp_path):
    claude = cs.cli("claude")
    opener, record = _opener(tmp_path)
    env = cs.offline_env(tmp_path)
    with ScriptedModel(claude_policy) as model:
        env.update({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-scripted-test",
                    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        config = {"mcpServers": {"ask-user-rich": {"type": "stdio", "command": sys.executable, "args": [MODULE],
                  "env": {"ASK_USER_RICH_LOG_DIR": env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1", "ASK_USER_RICH_OPEN_CMD": opener,
                          "ASK_USER_RICH_PROGRESS_MS": "500"}}}}
        process = subprocess.Popen(
            [claude, "-p", "Ask me which database to use.", "--mcp-config", json.dumps(config),
             "--strict-mcp-config", "--allowedTools", TOOL, "--output-format", "stream-json", "--verbose"],
            env=env, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, universal_newlines=True)
        try:
            call = model.wait_for(lambda r: isinstance(r.answer, ToolUse) and r.answer.name == TOOL,
                                  SESSION_TIMEOUT, "the call to ask_user_rich")
            search = model.turns[model.turns.index(call) - 0]
            deadline = time.monotonic() + SESSION_TIMEOUT
            while not (record.exists() and record.read_text().strip()):
                assert time.monotonic() < deadline and process.poll() is None, "the form never opened"
                time.sleep(0.05)
            url = record.read_text().split()[0]
            submitted = time.monotonic()
            reply = submit(url, {"db": {"selected": ["my"], "notes": "Ops knows MySQL better."}})
            assert reply.status == 200, reply.body
            after = model.wait_for(lambda r: "Ops knows MySQL better." in r.text, SESSION_TIMEOUT,
                                   "the answers in the model's next request")
            latency = after.arrived - submitted
            out, err = process.communicate(timeout=SESSION_TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    print("claude-code 2.1.328 -p: submit to model request %.3f s" % latency)
    assert process.returncode == 0, err[-2000:]
    # The tool was found by the hint: the search result named it.
    assert any('"tool_reference", "tool_name": "%s"' % TOOL in r.text for r in model.turns), search.path
    # The call's arguments arrived intact at our server (its own log) and the result holds them.
    results = [block for block in _tool_results(after.body)]
    content = json.dumps(results)
    assert '\\"selected\\":[\\"my\\"]' in content and "Ops knows MySQL better." in content
    assert "Which database?" in content and "archivePath" in content
    assert "Pick a database" in cs.server_log(env)
