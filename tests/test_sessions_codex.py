"""A real Codex session (marked `sessions`): `codex exec` runs its agent loop against a scripted
model on loopback that speaks the OpenAI Responses API (a custom model provider in a throwaway
`~/.codex/config.toml`), offline. The model's call reaches our server, opens the form through a
recording opener, the test submits through the form's HTTP API, and the model's next request
holds the answers."""

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
from sessions_support import (ANSWERS, ARGS, PROMPT, SESSION_TIMEOUT, assert_answers,  # noqa: E402
                              assert_served_as_sent, ended)
from support import MODULE, RecordingOpener, api_url, http_request, submit  # noqa: E402

pytestmark = pytest.mark.sessions
# Codex offers each MCP server's tools to the model as one Responses `namespace` tool named after
# the server, and routes a call by namespace plus the tool's own name.
NAMESPACE = "mcp__ask_user_rich"
TOOL = "ask_user_rich"


def _namespace(request):
    for tool in request.body.get("tools") or []:
        if tool.get("type") == "namespace" and tool.get("name") == NAMESPACE:
            return tool
    return None


def _outputs(request, call_id):
    return [item for item in request.body.get("input") or []
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id]


def codex_policy(model, request):
    """Call ask_user_rich once it is offered; say done once its output came back."""
    if any(item.get("type") == "function_call_output" for item in request.body.get("input") or []):
        return Text("Thanks, noted.")
    if _namespace(request):
        return ToolUse(TOOL, ARGS, call_id="call_ask_1", namespace=NAMESPACE)
    return Text("I found no ask_user_rich tool.")


def _config(model, env, opener):
    """The throwaway ~/.codex/config.toml: the scripted model as the provider, our server with the
    tool timeout the README asks for, and the recording opener."""
    server_env = {"ASK_USER_RICH_LOG_DIR": env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1",
                  "ASK_USER_RICH_OPEN_CMD": opener.command, "ASK_USER_RICH_INBOX_PORT": "0",
                  "ASK_USER_RICH_PROGRESS_MS": "500"}
    lines = [
        'model = "%s"' % model.model_name,
        'model_provider = "scripted"',
        "[model_providers.scripted]",
        'name = "Scripted model"',
        "base_url = %s" % json.dumps(model.url + "/v1"),
        'wire_api = "responses"',
        'env_key = "SCRIPTED_API_KEY"',
        "[mcp_servers.ask-user-rich]",
        "command = %s" % json.dumps(sys.executable),
        "args = [%s]" % json.dumps(MODULE),
        "tool_timeout_sec = 14400",
        "[mcp_servers.ask-user-rich.env]",
    ] + ["%s = %s" % (name, json.dumps(value)) for name, value in server_env.items()]
    folder = os.path.join(env["HOME"], ".codex")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.toml"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _events(out):
    events = []
    for line in out.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


def test_codex_exec_round_trip(tmp_path):
    codex = cs.cli("codex")
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    with ScriptedModel(codex_policy) as model, RecordingOpener(tmp_path) as opener:
        _config(model, env, opener)
        process = subprocess.Popen(
            [codex, "exec", "--skip-git-repo-check", "--ephemeral", "--json", PROMPT],
            env=env, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, universal_newlines=True)
        try:
            call = model.wait_for(lambda r: isinstance(r.answer, ToolUse), SESSION_TIMEOUT,
                                  "the call to ask_user_rich")
            url = opener.wait(timeout=SESSION_TIMEOUT, alive=lambda: process.poll() is None)
            spec = http_request(api_url(url)).json()["spec"]
            submitted = time.monotonic()
            reply = submit(url, ANSWERS)
            assert reply.status == 200, reply.body
            after = model.wait_for(lambda r: _outputs(r, "call_ask_1"), SESSION_TIMEOUT,
                                   "the answers in the model's next request")
            latency = after.arrived - submitted
            out, err = process.communicate(timeout=SESSION_TIMEOUT)
        except AssertionError as failure:
            raise AssertionError("%s\n--- codex output:\n%s\n--- server log:\n%s"
                                 % (failure, ended(process)[-3000:], cs.server_log(env)[-3000:]))
        finally:
            ended(process)
    print("codex 0.169.0 exec: submit to model request %.3f s" % latency)
    assert process.returncode == 0, err[-2000:]
    # The tool was offered to the model, under the server's namespace, with its input schema.
    offered = {tool["name"]: tool for tool in _namespace(call)["tools"]}
    assert TOOL in offered and "questions" in offered[TOOL]["parameters"]["properties"], sorted(offered)
    assert_served_as_sent(spec)
    log = cs.server_log(env)
    assert 'title="Pick a database"' in log and "era=legacy" in log, log
    # The model's next request holds the answers, the note included, as the structured result.
    output = _outputs(after, "call_ask_1")[0]["output"]
    received = output if isinstance(output, str) else json.dumps(output)
    print("codex 0.169.0: the model received %s" % received)
    # Codex hands the model the structured result as compact JSON after its own two-line header.
    header, _, payload = received.partition("\nOutput:\n")
    assert header.startswith("Wall time: ") and header.endswith(" seconds"), received[:200]
    result = json.loads(payload)
    assert_answers(result)
    # What the person sees in the session's output: the call, in progress, then completed.
    items = [e["item"] for e in _events(out) if e.get("item", {}).get("type") == "mcp_tool_call"]
    assert [i["status"] for i in items] == ["in_progress", "completed"], items
    assert items[0]["arguments"] == ARGS and items[0]["server"] == "ask-user-rich"
