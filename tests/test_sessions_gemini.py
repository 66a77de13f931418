"""A real Gemini CLI session (marked `sessions`): `gemini -p` runs its agent loop against a
scripted model on loopback that speaks the Gemini API (`GOOGLE_GEMINI_BASE_URL` and a dummy
`GEMINI_API_KEY`), offline, in a throwaway HOME. The model's call reaches our server, opens the
form through a recording opener, the test submits through the form's HTTP API, and the model's
next request holds the answers."""

from __future__ import annotations

import json
import os
import re
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
# Gemini CLI names an MCP tool `mcp_<server>_<tool>` in the model's function declarations.
TOOL = "mcp_ask-user-rich_ask_user_rich"
# A model by name: with the default ("auto") the CLI first asks a router model to classify the
# prompt, a JSON exchange that is no part of what we test.
MODEL = "gemini-2.5-pro"


def _declarations(request):
    return {declaration.get("name"): declaration for tool in request.body.get("tools") or []
            for declaration in tool.get("functionDeclarations") or []}


def _responses(request):
    return [part["functionResponse"] for content in request.body.get("contents") or []
            for part in content.get("parts") or [] if "functionResponse" in part]


def gemini_policy(model, request):
    """Call ask_user_rich once it is declared; say done once its response came back."""
    if _responses(request):
        return Text("Thanks, noted.")
    if TOOL in _declarations(request):
        return ToolUse(TOOL, ARGS)
    return Text("I found no ask_user_rich tool.")


def _settings(env, opener):
    """The throwaway ~/.gemini/settings.json: an API key's auth, our server trusted (a -p session
    cannot ask for confirmation) with the README's timeout, and the recording opener."""
    server_env = {"ASK_USER_RICH_LOG_DIR": env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1",
                  "ASK_USER_RICH_OPEN_CMD": opener.command, "ASK_USER_RICH_INBOX_PORT": "0",
                  "ASK_USER_RICH_PROGRESS_MS": "500"}
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": {"ask-user-rich": {"command": sys.executable, "args": [MODULE], "timeout": 14400000,
                                         "trust": True, "env": server_env}},
    }
    folder = os.path.join(env["HOME"], ".gemini")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "settings.json"), "w", encoding="utf-8") as f:
        json.dump(settings, f)
    return folder


def _events(out):
    events = []
    for line in out.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


def test_gemini_cli_prompt_mode_round_trip(tmp_path):
    gemini = cs.cli("gemini")
    env = cs.offline_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedModel(gemini_policy) as model, RecordingOpener(tmp_path) as opener:
        folder = _settings(env, opener)
        # Gemini CLI starts MCP servers only in a folder the user trusts.
        with open(os.path.join(folder, "trustedFolders.json"), "w", encoding="utf-8") as f:
            json.dump({str(project): "TRUST_FOLDER"}, f)
        env.update({"GEMINI_API_KEY": "scripted-test-key", "GOOGLE_GEMINI_BASE_URL": model.url,
                    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        process = subprocess.Popen(
            [gemini, "-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
            env=env, cwd=str(project), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, universal_newlines=True)
        try:
            call = model.wait_for(lambda r: isinstance(r.answer, ToolUse), SESSION_TIMEOUT,
                                  "the call to ask_user_rich")
            url = opener.wait(timeout=SESSION_TIMEOUT, alive=lambda: process.poll() is None)
            spec = http_request(api_url(url)).json()["spec"]
            submitted = time.monotonic()
            reply = submit(url, ANSWERS)
            assert reply.status == 200, reply.body
            after = model.wait_for(_responses, SESSION_TIMEOUT, "the answers in the model's next request")
            latency = after.arrived - submitted
            out, err = process.communicate(timeout=SESSION_TIMEOUT)
        except AssertionError as failure:
            raise AssertionError("%s\n--- gemini output:\n%s\n--- server log:\n%s"
                                 % (failure, ended(process)[-3000:], cs.server_log(env)[-3000:]))
        finally:
            ended(process)
    print("gemini-cli 0.61.0 -p: submit to model request %.3f s" % latency)
    assert process.returncode == 0, (out + err)[-2000:]
    # The tool was declared to the model with its input schema.
    declared = _declarations(call)[TOOL]
    assert "questions" in declared["parametersJsonSchema"]["properties"], declared
    assert_served_as_sent(spec)
    log = cs.server_log(env)
    assert 'title="Pick a database"' in log and "era=legacy" in log, log
    # The model's next request holds the answers, the note included.
    response = _responses(after)[0]
    assert response["name"] == TOOL, response
    received = json.dumps(response["response"], ensure_ascii=False)
    print("gemini-cli 0.61.0: the model received %s" % received)
    # Gemini CLI hands the model the result's text blocks (not its structuredContent), each
    # wrapped as untrusted context: the summary, then the answers as JSON.
    blocks = re.findall(r"<untrusted_context>\n(.*?)\n</untrusted_context>", response["response"]["output"], re.S)
    assert len(blocks) == 2 and blocks[0].startswith('"Pick a database" submitted'), blocks
    assert_answers(json.loads(blocks[1]))
    # What the person sees in the session's output: the call with its arguments, then its result.
    events = _events(out)
    uses = [e for e in events if e.get("type") == "tool_use"]
    results = [e for e in events if e.get("type") == "tool_result"]
    assert len(uses) == 1 and uses[0]["tool_name"] == TOOL and uses[0]["parameters"] == ARGS, uses
    assert len(results) == 1 and results[0]["status"] == "success", results
