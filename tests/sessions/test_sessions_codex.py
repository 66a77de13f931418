"""A real Codex session (marked `sessions`): `codex exec` runs its agent loop against a scripted
model on loopback that speaks the OpenAI Responses API (a custom model provider in a throwaway
`~/.codex/config.toml`), offline. The model's call reaches our server, opens the form through a
recording opener, the test submits through the form's HTTP API, and the model's next request
holds the answers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers.scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from helpers.sessions_support import (ANSWERS, ARGS, BIG_ANSWERS, BIG_ARGS, BIG_COUNT, NOTE, PROMPT, SESSION_TIMEOUT,  # noqa: E402
                              StdioTap, assert_answers, assert_big_answers, assert_served_as_sent, ended,
                              round_trip)
from helpers.support import RecordingOpener, api_url, http_request, submit  # noqa: E402

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


def _outputs(request, call_id=CALL_ID):
    return [item for item in request.body.get("input") or []
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id]


def _payload(output):
    """The tool result in a function_call_output: Codex puts `Wall time: … seconds` and
    `Output:` lines before it."""
    header, _, payload = output.partition("\nOutput:\n")
    assert header.startswith("Wall time: ") and header.endswith(" seconds"), output[:300]
    return payload


def codex_policy(args):
    """Call ask_user_rich with `args` once it is offered; say done once its output came back."""
    def policy(model, request):
        if any(item.get("type") == "function_call_output" for item in request.body.get("input") or []):
            return Text("Thanks, noted.")
        if _namespace(request):
            return ToolUse(TOOL, args, call_id=CALL_ID, namespace=NAMESPACE)
        return Text("I found no ask_user_rich tool.")

    return policy


def _config(model, env, opener, tap, tool_timeout=14400, extra=()):
    """The throwaway ~/.codex/config.toml: the scripted model as the provider, our server (through
    the tap) with the tool timeout the README asks for, and the recording opener."""
    server_env = {"ASK_USER_RICH_LOG_DIR": env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1",
                  "ASK_USER_RICH_OPEN_CMD": opener.command, "ASK_USER_RICH_INBOX_PORT": "0",
                  "ASK_USER_RICH_PROGRESS_MS": "500"}
    lines = [
        'model = "%s"' % model.model_name,
        'model_provider = "scripted"',
    ] + list(extra) + [
        "[model_providers.scripted]",
        'name = "Scripted model"',
        "base_url = %s" % json.dumps(model.url + "/v1"),
        'wire_api = "responses"',
        'env_key = "SCRIPTED_API_KEY"',
        "[mcp_servers.ask-user-rich]",
        "command = %s" % json.dumps(tap.argv[0]),
        "args = %s" % json.dumps(tap.argv[1:]),
        "tool_timeout_sec = %s" % tool_timeout,
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
    with ScriptedModel(codex_policy(ARGS)) as model, RecordingOpener(tmp_path) as opener, StdioTap(tmp_path) as tap:
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
    payload = _payload(received)
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


@pytest.mark.parametrize("limit", [None, 40000])
def test_codex_300_question_interview_reaches_the_model_with_its_output_limit_raised(tmp_path, limit):
    """A 300-question result, compact, is about 77,000 characters. Codex cuts the middle out of a
    tool output above its `tool_output_token_limit` (a default of about 12,000 characters here:
    the head of the summary and the last rows, `…N tokens truncated…` between, the archive path
    lost); with `tool_output_token_limit = 40000` in config.toml every answer and note arrives."""
    codex = cs.cli("codex")
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    extra = () if limit is None else ("tool_output_token_limit = %d" % limit,)
    with ScriptedModel(codex_policy(BIG_ARGS)) as model, RecordingOpener(tmp_path) as opener, \
            StdioTap(tmp_path) as tap:
        _config(model, env, opener, tap, extra=extra)
        session = round_trip("codex", [codex, "exec", "--skip-git-repo-check", "--ephemeral", PROMPT],
                             env, tmp_path, model, opener, tap, _outputs, BIG_ANSWERS)
    assert session.returncode == 0, session.err[-2000:]
    sent = session.result["structuredContent"]
    received = _outputs(session.after)[0]["output"]
    rows = len(re.findall(r'\{"id":"t\d{3}"', received))
    print("codex 0.169.0, 300 questions, tool_output_token_limit %s: the server sent %d characters "
          "(compact: %s), the model received %d with %d rows; submit to model request %.3f s"
          % (limit, len(json.dumps(sent, separators=(",", ":"))), sent.get("compact"), len(received), rows,
             session.latency))
    assert sent.get("compact") is True
    if limit is None:
        assert re.search(r"…\d+ tokens truncated…", received) and rows < BIG_COUNT, received[:300]
    else:
        result = json.loads(_payload(received))
        assert_big_answers(result)
        assert result["archivePath"] == sent["archivePath"]


def link_policy(model, request):
    """delivery "link", then await_user_answers with the sessionId it returned, and once more
    with the same id after Codex cut that wait at its tool timeout; done once answers came."""
    outputs = [item for item in request.body.get("input") or [] if item.get("type") == "function_call_output"]
    if not outputs:
        return ToolUse(TOOL, dict(ARGS, delivery="link"), call_id=CALL_ID, namespace=NAMESPACE)
    last = outputs[-1]
    if last["call_id"] == CALL_ID:
        session_id = json.loads(_payload(last["output"]))["sessionId"]
        return ToolUse("await_user_answers", {"sessionId": session_id}, call_id="call_await_1", namespace=NAMESPACE)
    if last["call_id"] == "call_await_1":
        session_id = json.loads(_payload(outputs[0]["output"]))["sessionId"]
        return ToolUse("await_user_answers", {"sessionId": session_id}, call_id="call_await_2", namespace=NAMESPACE)
    return Text("Thanks, noted.")


def test_codex_link_then_await_survives_the_tool_timeout(tmp_path):
    """The Codex flow the README gives for long interviews: delivery "link" returns at once with
    the link, await_user_answers waits; when Codex cuts that wait at tool_timeout_sec (2 s here;
    300 s unless configured), the form stays open and the next await_user_answers gets the answers."""
    codex = cs.cli("codex")
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    with ScriptedModel(link_policy) as model, RecordingOpener(tmp_path) as opener, StdioTap(tmp_path) as tap:
        _config(model, env, opener, tap, tool_timeout=2)
        process = subprocess.Popen([codex, "exec", "--skip-git-repo-check", "--ephemeral", PROMPT], env=env,
                                   cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, universal_newlines=True)
        try:
            linked = model.wait_for(_outputs, SESSION_TIMEOUT, "the link in the model's request")
            awaiting = json.loads(_payload(_outputs(linked)[0]["output"]))
            cut = model.wait_for(lambda r: _outputs(r, "call_await_1"), SESSION_TIMEOUT, "the cut wait")
            second = tap.wait_message(">", lambda m: m.get("method") == "tools/call"
                                      and m["params"]["name"] == "await_user_answers"
                                      and m["params"]["_meta"].get("callId") == "call_await_2",
                                      SESSION_TIMEOUT, "the second await_user_answers")
            state = http_request(api_url(awaiting["url"], "state")).json()
            submitted = time.monotonic()
            reply = submit(awaiting["url"], ANSWERS)
            assert reply.status == 200, reply.body
            after = model.wait_for(lambda r: _outputs(r, "call_await_2"), SESSION_TIMEOUT,
                                   "the answers in the model's next request")
            latency = after.arrived - submitted
            out, err = process.communicate(timeout=SESSION_TIMEOUT)
        except AssertionError as failure:
            raise AssertionError("%s\n--- codex output:\n%s\n--- server log:\n%s"
                                 % (failure, ended(process)[-3000:], cs.server_log(env)[-3000:]))
        finally:
            ended(process)
    print("codex 0.169.0 exec, link then await: submit to model request %.3f s" % latency)
    assert process.returncode == 0, err[-2000:]
    # The link came back at once, and nothing was opened.
    assert awaiting["status"] == "awaiting" and awaiting["url"].startswith("http://localhost:"), awaiting
    assert opener.urls == []
    # Codex cut the first wait at its timeout: what the model got, and what the server was told.
    cut_output = _outputs(cut, "call_await_1")[0]["output"]
    first = tap.wait_message(">", lambda m: m.get("method") == "tools/call"
                             and m["params"]["_meta"].get("callId") == "call_await_1")
    cancels = [m["params"] for m in tap.messages(">") if m.get("method") == "notifications/cancelled"]
    print("codex 0.169.0: the cut wait gave the model %r; then sent %s" % (cut_output, cancels))
    texts = " ".join(part["text"] for part in cut_output)
    assert "timed out awaiting tools/call after 2s" in texts and "Ops knows" not in texts, cut_output
    assert [c["requestId"] for c in cancels] == [first["id"]], cancels
    # The form outlived the cut: still pending when the second wait began.
    assert state["state"] == "pending", state
    # The second wait, on the same sessionId, got every answer.
    assert second["params"]["arguments"] == {"sessionId": awaiting["sessionId"]}
    assert_answers(json.loads(_payload(_outputs(after, "call_await_2")[0]["output"])))
    # The person's transcript shows the cut as a failed call, then the second wait completing.
    transcript = [line for line in err.splitlines() if line.startswith("mcp: ")]
    assert transcript == ["mcp: ask-user-rich/ask_user_rich started", "mcp: ask-user-rich/ask_user_rich (completed)",
                          "mcp: ask-user-rich/await_user_answers started", "mcp: ask-user-rich/await_user_answers (failed)",
                          "mcp: ask-user-rich/await_user_answers started",
                          "mcp: ask-user-rich/await_user_answers (completed)"], transcript
    assert awaiting["url"] not in err + out  # the link reaches the person only through the model


# Codex's own current model: with it Codex runs in "code mode", which a made-up model name does not
# get. MCP tools are deferred (named in a developer message, not in `tools`), and the model calls
# them from JavaScript it hands to the `exec` custom tool (`await tools.mcp__<server>__<tool>(…)`);
# a script still running after its `yield_time_ms` (30 s unless the script asks otherwise)
# yields "Script running with cell ID …" and the model resumes it with `wait`.
CODE_MODE_MODEL = "gpt-6.1-sol"
SCRIPT = '// @exec: {"yield_time_ms": 1000}\nconst r = await tools.mcp__ask_user_rich__ask_user_rich(%s);\ntext(r.structuredContent);\n'


def _code_outputs(request):
    return [item for item in request.body.get("input") or []
            if item.get("type") in ("custom_tool_call_output", "function_call_output")]


def _output_text(item):
    output = item["output"]
    return output if isinstance(output, str) else "".join(part.get("text", "") for part in output)


def _yield_output(request):
    return [o for o in _code_outputs(request) if "Script running with cell ID" in _output_text(o)]


def code_mode_policy(model, request, args=ARGS, budget=None):
    outputs = _code_outputs(request)
    if not outputs:
        return ToolUse("exec", SCRIPT % json.dumps(args), call_id="call_exec_1", namespace="functions", custom=True)
    last = _output_text(outputs[-1])
    running = re.search(r"Script running with cell ID (\S+)", last)
    if running:
        wait = {"cell_id": running.group(1), "yield_time_ms": 30000}
        if budget:
            wait["max_tokens"] = budget
        return ToolUse("wait", wait,
                       call_id="call_wait_%d" % len(outputs), namespace="functions")
    return Text("Thanks, noted.")


def test_codex_code_mode_calls_the_tool_from_a_script_that_outlives_its_yield(tmp_path):
    codex = cs.cli("codex")
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    with ScriptedModel(code_mode_policy, model_name=CODE_MODE_MODEL) as model, RecordingOpener(tmp_path) as opener, \
            StdioTap(tmp_path) as tap:
        _config(model, env, opener, tap)
        yielded = lambda: model.wait_for(_yield_output, SESSION_TIMEOUT, "the script yielding")  # noqa: E731
        session = round_trip("codex", [codex, "exec", "--skip-git-repo-check", "--ephemeral", PROMPT],
                             env, tmp_path, model, opener, tap, lambda r: NOTE in r.text, before_submit=yielded)
    print("codex 0.169.0 exec, code mode (%s): submit to model request %.3f s" % (CODE_MODE_MODEL, session.latency))
    assert session.returncode == 0, session.err[-2000:]
    first = model.turns[0]
    # The tool is deferred: not among the model's tools, only named in a developer message, and
    # reachable through `exec`.
    assert not [t for t in first.body.get("tools") or [] if t.get("name") == NAMESPACE]
    developer = "".join(part.get("text", "") for item in first.body["input"] if item.get("role") == "developer"
                        for part in item.get("content") or [])
    assert "Deferred tool namespaces:\n- mcp__ask_user_rich: ask-user-rich puts a" in developer
    extra = [tool for item in first.body["input"] if item.get("type") == "additional_tools" for tool in item["tools"]]
    assert "exec" in [t.get("name") for group in extra for t in group.get("tools") or []], extra
    # The call's arguments arrived intact at the server.
    assert session.request["params"]["name"] == TOOL and session.request["params"]["arguments"] == ARGS
    assert_served_as_sent(session.spec)
    # The script yielded while the person answered; `wait` got the rest: what the script wrote.
    final = _output_text(_code_outputs(session.after)[-1])
    print("codex 0.169.0 code mode: the model received %r; tools/call _meta keys %s; the yield said %r; transcript %s"
          % (final[:200], sorted(session.request["params"].get("_meta") or {}), _output_text(_code_outputs(
              model.wait_for(_yield_output, 1))[-1])[:200],
             [line for line in session.err.splitlines() if line.startswith(("mcp", "exec", "wait"))]))
    assert final.startswith("Script completed"), final[:300]
    result = json.loads(final[final.index("{"):])
    assert result == session.result["structuredContent"]
    assert_answers(result)


@pytest.mark.parametrize("budget", [None, 40000])
def test_codex_code_mode_300_question_interview_needs_a_bigger_wait_budget(tmp_path, budget):
    """In code mode the cut is `wait`'s own output budget (10,000 tokens unless the model asks
    for more with `max_tokens`; tool_output_token_limit does not lift it): 40,149 of the result's
    characters reach the model, `…N tokens truncated…` in the middle; `max_tokens: 40000` lets
    every answer and note through."""
    codex = cs.cli("codex")
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    policy = lambda model, request: code_mode_policy(model, request, BIG_ARGS, budget)  # noqa: E731
    with ScriptedModel(policy, model_name=CODE_MODE_MODEL) as model, RecordingOpener(tmp_path) as opener, \
            StdioTap(tmp_path) as tap:
        _config(model, env, opener, tap, extra=("tool_output_token_limit = 40000",))
        yielded = lambda: model.wait_for(_yield_output, SESSION_TIMEOUT, "the script yielding")  # noqa: E731
        session = round_trip("codex", [codex, "exec", "--skip-git-repo-check", "--ephemeral", PROMPT],
                             env, tmp_path, model, opener, tap, lambda r: "Script completed" in r.text,
                             BIG_ANSWERS, yielded)
    assert session.returncode == 0, session.err[-2000:]
    final = _output_text(_code_outputs(session.after)[-1])
    rows = len(re.findall(r'\{"id":"t\d{3}"', final))
    print("codex 0.169.0 code mode, 300 questions, wait max_tokens %s: the model received %d characters with "
          "%d rows" % (budget, len(final), rows))
    if budget is None:
        assert re.search(r"…\d+ tokens truncated…", final) and rows < BIG_COUNT, final[:300]
    else:
        result = json.loads(final[final.index("{"):])
        assert result == session.result["structuredContent"]
        assert_big_answers(result)


class _FailingOpener:
    """An opener that cannot open anything, as on a machine without a desktop."""

    command = shutil.which("false") or "/bin/false"


def headless_policy(model, request):
    """Call ask_user_rich; on the awaiting result, await_user_answers with its sessionId."""
    outputs = [item for item in request.body.get("input") or [] if item.get("type") == "function_call_output"]
    if not outputs:
        return ToolUse(TOOL, ARGS, call_id=CALL_ID, namespace=NAMESPACE)
    if outputs[-1]["call_id"] == CALL_ID:
        session_id = json.loads(_payload(outputs[-1]["output"]))["sessionId"]
        return ToolUse("await_user_answers", {"sessionId": session_id}, call_id="call_await_1", namespace=NAMESPACE)
    return Text("Thanks, noted.")


def test_codex_exec_declines_the_url_elicitation_so_the_model_gets_the_link(tmp_path):
    """No opener works: the server asks Codex to open the link (Codex declared URL elicitation);
    `codex exec` declines at once, so the model gets the link and the sessionId, and
    await_user_answers gets the answers."""
    codex = cs.cli("codex")
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})

    def link():
        call = tap.wait_message(">", lambda m: m.get("method") == "tools/call", SESSION_TIMEOUT, "the call")
        reply = tap.wait_message("<", lambda m: m.get("id") == call["id"], SESSION_TIMEOUT, "the awaiting result")
        return reply["result"]["structuredContent"]["url"]

    with ScriptedModel(headless_policy) as model, StdioTap(tmp_path) as tap:
        _config(model, env, _FailingOpener(), tap)
        session = round_trip("codex", [codex, "exec", "--skip-git-repo-check", "--ephemeral", PROMPT],
                             env, tmp_path, model, None, tap, lambda r: _outputs(r, "call_await_1"), find_url=link)
    print("codex 0.169.0 exec, no opener: submit to model request %.3f s" % session.latency)
    assert session.returncode == 0, session.err[-2000:]
    asked = [m for m in tap.messages("<") if m.get("method") == "elicitation/create"]
    answered = [m for m in tap.messages(">") if asked and m.get("id") == asked[0]["id"]]
    assert len(asked) == 1 and asked[0]["params"]["mode"] == "url", asked
    assert answered[0]["result"] == {"action": "decline"}, answered
    awaiting = json.loads(_payload(_outputs(session.after)[0]["output"]))
    assert awaiting["status"] == "awaiting" and awaiting["url"] == asked[0]["params"]["url"], awaiting
    assert "declined" in awaiting["reason"], awaiting["reason"]
    assert_answers(json.loads(_payload(_outputs(session.after, "call_await_1")[0]["output"])))
