"""A real Codex session (marked `sessions`): `codex exec` runs its agent loop against a scripted
model on loopback that speaks the OpenAI Responses API (a custom model provider in a throwaway
`~/.codex/config.toml`), offline. The model's call reaches our server, opens the form through a
recording opener, the test submits through the form's HTTP API, and the model's next request
holds the answers."""

from __future__ import annotations

import json
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import clients_support as cs  # noqa: E402
from scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from sessions_support import (ARGS, PROMPT, StdioTap, assert_answers, assert_served_as_sent,  # noqa: E402
                              round_trip)
from support import RecordingOpener  # noqa: E402

pytestmark = pytest.mark.sessions
# Codex offers each MCP server's tools to the model as one Responses `namespace` tool named after
# the server, and routes a call by namespace plus the tool's own name.
NAMESPACE = "mcp__ask_user_rich"
TOOL = "ask_user_rich"
CALL_ID = "call_ask_1"


def _namespace(request):
    for tool in request.body.get("tools") or []:
        if tool.get("type") == "namespace" and tool.get("name") == NAMESPACE:
            return tool
    return None


def _outputs(request):
    return [item for item in request.body.get("input") or []
            if item.get("type") == "function_call_output" and item.get("call_id") == CALL_ID]


def codex_policy(model, request):
    """Call ask_user_rich once it is offered; say done once its output came back."""
    if any(item.get("type") == "function_call_output" for item in request.body.get("input") or []):
        return Text("Thanks, noted.")
    if _namespace(request):
        return ToolUse(TOOL, ARGS, call_id=CALL_ID, namespace=NAMESPACE)
    return Text("I found no ask_user_rich tool.")


def _config(model, env, opener, tap):
    """The throwaway ~/.codex/config.toml: the scripted model as the provider, our server (through
    the tap) with the tool timeout the README asks for, and the recording opener."""
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
        "command = %s" % json.dumps(tap.argv[0]),
        "args = %s" % json.dumps(tap.argv[1:]),
        "tool_timeout_sec = 14400",
        "[mcp_servers.ask-user-rich.env]",
    ] + ["%s = %s" % (name, json.dumps(value)) for name, value in server_env.items()]
    folder = os.path.join(env["HOME"], ".codex")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.toml"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def test_codex_exec_round_trip(tmp_path):
    codex = cs.cli("codex")
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    with ScriptedModel(codex_policy) as model, RecordingOpener(tmp_path) as opener, StdioTap(tmp_path) as tap:
        _config(model, env, opener, tap)
        session = round_trip("codex", [codex, "exec", "--skip-git-repo-check", "--ephemeral", PROMPT],
                             env, tmp_path, model, opener, tap, _outputs)
    print("codex 0.169.0 exec: submit to model request %.3f s" % session.latency)
    assert session.returncode == 0, session.err[-2000:]
    # The era: Codex opens with `initialize` at 2025-06-18 and declares no tasks; it asks for
    # progress (a progressToken), and the notifications reach it.
    hello = tap.messages(">")[0]
    progress = [m["params"]["message"] for m in tap.messages("<") if m.get("method") == "notifications/progress"]
    print("codex 0.169.0: %s %s, capabilities %s; tools/call _meta %s; progress sent %s; shown in output: %s" % (
        hello["method"], hello["params"].get("protocolVersion"), json.dumps(hello["params"].get("capabilities")),
        json.dumps(session.request["params"].get("_meta")), progress,
        [line for line in (session.out + session.err).splitlines() if "Waiting for answers" in line]))
    assert hello["method"] == "initialize" and "era=legacy" in session.log, hello
    assert "tasks" not in json.dumps(hello["params"].get("capabilities")) and session.progress, hello
    # The tool was offered to the model, under the server's namespace, with its input schema.
    offered = {tool["name"]: tool for tool in _namespace(session.call)["tools"]}
    assert TOOL in offered and "questions" in offered[TOOL]["parameters"]["properties"], sorted(offered)
    # The call's arguments arrived intact at the server, and the form serves what they describe.
    assert session.request["params"]["name"] == TOOL and session.request["params"]["arguments"] == ARGS
    assert_served_as_sent(session.spec)
    # The model's next request holds the answers, the note included: Codex hands it the
    # structuredContent as compact JSON (the text blocks dropped) after its own two-line header.
    received = _outputs(session.after)[0]["output"]
    print("codex 0.169.0: the model received %s" % received)
    header, _, payload = received.partition("\nOutput:\n")
    assert header.startswith("Wall time: ") and header.endswith(" seconds"), received[:200]
    assert json.loads(payload) == session.result["structuredContent"]
    assert_answers(json.loads(payload))
    # What the person sees (codex exec's transcript, on stderr): the call starting, then
    # completed, and nothing between them: the progress notifications (the first one carrying the
    # form link) are not shown.
    transcript = session.err.splitlines()
    started = transcript.index("mcp: ask-user-rich/ask_user_rich started")
    assert transcript[started + 1] == "mcp: ask-user-rich/ask_user_rich (completed)", transcript[started:]
    assert "Waiting for answers" not in session.err + session.out
    assert session.out.strip() == "Thanks, noted."
