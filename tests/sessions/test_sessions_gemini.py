"""A real Gemini CLI session (marked `sessions`): `gemini -p` runs its agent loop against a
scripted model on loopback that speaks the Gemini API (`GOOGLE_GEMINI_BASE_URL` and a dummy
`GEMINI_API_KEY`), offline, in a throwaway HOME. The model's call reaches our server, opens the
form through a recording opener, the test submits through the form's HTTP API, and the model's
next request holds the answers."""

from __future__ import annotations

import json
import os
import re

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers.scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from helpers.sessions_support import (ARGS, BIG_ANSWERS, BIG_ARGS, NOTE, PROMPT, StdioTap, assert_answers,  # noqa: E402
                              assert_big_answers, assert_served_as_sent, json_lines, round_trip)
from helpers.support import RecordingOpener  # noqa: E402

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


def gemini_policy(args):
    """Call ask_user_rich with `args` once it is declared; say done once its response came back."""
    def policy(model, request):
        if _responses(request):
            return Text("Thanks, noted.")
        if TOOL in _declarations(request):
            return ToolUse(TOOL, args)
        return Text("I found no ask_user_rich tool.")

    return policy


def _settings(env, opener, tap, timeout_ms=14400000):
    """The throwaway ~/.gemini/settings.json: an API key's auth, our server (through the tap)
    trusted (a -p session cannot ask for confirmation) with the README's timeout, and the
    recording opener."""
    server_env = {"ASK_USER_RICH_LOG_DIR": env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1",
                  "ASK_USER_RICH_OPEN_CMD": opener.command, "ASK_USER_RICH_INBOX_PORT": "0",
                  "ASK_USER_RICH_PROGRESS_MS": "500"}
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": {"ask-user-rich": {"command": tap.argv[0], "args": tap.argv[1:], "timeout": timeout_ms,
                                         "trust": True, "env": server_env}},
    }
    folder = os.path.join(env["HOME"], ".gemini")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "settings.json"), "w", encoding="utf-8") as f:
        json.dump(settings, f)
    return folder


def _session(tmp_path, args, answers, policy=None, timeout_ms=14400000, answered=None, before_submit=None,
             find_url=None):
    gemini = cs.cli("gemini")
    env = cs.offline_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedModel(policy or gemini_policy(args)) as model, RecordingOpener(tmp_path) as opener, \
            StdioTap(tmp_path) as tap:
        folder = _settings(env, opener, tap, timeout_ms)
        # Gemini CLI starts MCP servers only in a folder the user trusts.
        with open(os.path.join(folder, "trustedFolders.json"), "w", encoding="utf-8") as f:
            json.dump({str(project): "TRUST_FOLDER"}, f)
        env.update({"GEMINI_API_KEY": "scripted-test-key", "GOOGLE_GEMINI_BASE_URL": model.url,
                    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        session = round_trip("gemini", [gemini, "-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
                             env, project, model, opener, tap, answered or _responses, answers,
                             (lambda: before_submit(model, tap)) if before_submit else None,
                             (lambda: find_url(tap)) if find_url else None)
    session.tap = tap
    session.model = model
    return session


def test_gemini_cli_300_question_interview_reaches_the_model_whole(tmp_path):
    session = _session(tmp_path, BIG_ARGS, BIG_ANSWERS)
    assert session.returncode == 0, (session.out + session.err)[-2000:]
    sent = session.result
    output = _responses(session.after)[0]["response"]["output"]
    blocks = re.findall(r"<untrusted_context>\n(.*?)\n</untrusted_context>", output, re.S)
    print("gemini-cli 0.61.0, 300 questions: the server sent text blocks of %s characters (compact: %s), "
          "the model received %d characters; submit to model request %.3f s"
          % ([len(b["text"]) for b in sent["content"]], sent["structuredContent"].get("compact"), len(output),
             session.latency))
    assert blocks == [block["text"] for block in sent["content"]]
    result = json.loads(blocks[1])
    assert_big_answers(result)
    assert result["archivePath"] == sent["structuredContent"]["archivePath"]


def test_gemini_cli_prompt_mode_round_trip(tmp_path):
    session = _session(tmp_path, ARGS, None)
    tap = session.tap
    print("gemini-cli 0.61.0 -p: submit to model request %.3f s" % session.latency)
    assert session.returncode == 0, (session.out + session.err)[-2000:]
    hello = tap.messages(">")[0]
    progress = [m["params"]["message"] for m in tap.messages("<") if m.get("method") == "notifications/progress"]
    print("gemini-cli 0.61.0: %s %s, capabilities %s; tools/call _meta %s; progress sent %s; shown in output: %s" % (
        hello["method"], hello["params"].get("protocolVersion"), json.dumps(hello["params"].get("capabilities")),
        json.dumps(session.request["params"].get("_meta")), progress,
        [line for line in (session.out + session.err).splitlines() if "Waiting for answers" in line]))
    # The era: Gemini CLI opens with `initialize` at 2025-06-18 and declares no tasks; it asks for
    # progress (a progressToken), and the notifications reach it.
    assert hello["method"] == "initialize" and "era=legacy" in session.log, hello
    assert "tasks" not in json.dumps(hello["params"].get("capabilities")) and session.progress, hello
    # The tool was declared to the model with its input schema.
    declared = _declarations(session.call)[TOOL]
    assert "questions" in declared["parametersJsonSchema"]["properties"], declared
    # The call's arguments arrived intact at the server, and the form serves what they describe.
    assert session.request["params"]["name"] == "ask_user_rich" and session.request["params"]["arguments"] == ARGS
    assert_served_as_sent(session.spec)
    # The model's next request holds the answers, the note included.
    response = _responses(session.after)[0]
    assert response["name"] == TOOL, response
    print("gemini-cli 0.61.0: the model received %s" % json.dumps(response["response"], ensure_ascii=False))
    # Gemini CLI hands the model the result's text blocks (not its structuredContent), each
    # wrapped as untrusted context: the summary, then the answers as JSON.
    blocks = re.findall(r"<untrusted_context>\n(.*?)\n</untrusted_context>", response["response"]["output"], re.S)
    assert blocks == [block["text"] for block in session.result["content"]], blocks
    assert_answers(json.loads(blocks[1]))
    # What the person sees in the session's output: the call with its arguments, then its result,
    # and no progress (the first notification's form link included).
    events = json_lines(session.out)
    uses = [e for e in events if e.get("type") == "tool_use"]
    results = [e for e in events if e.get("type") == "tool_result"]
    assert len(uses) == 1 and uses[0]["tool_name"] == TOOL and uses[0]["parameters"] == ARGS, uses
    assert len(results) == 1 and results[0]["status"] == "success", results
    assert "Waiting for answers" not in session.out + session.err


AWAIT = "mcp_ask-user-rich_await_user_answers"


def link_policy(model, request):
    """delivery "link", then await_user_answers with the sessionId it returned, and once more
    after Gemini CLI cut that wait at the server's timeout; done once the answers came."""
    responses = _responses(request)
    if not responses:
        return ToolUse(TOOL, dict(ARGS, delivery="link"))
    session_id = re.search(r'sessionId "([^"]+)"', json.dumps(responses[0]["response"]).replace('\\"', '"')).group(1)
    if len(responses) < 3:
        return ToolUse(AWAIT, {"sessionId": session_id})
    return Text("Thanks, noted.")


def test_gemini_cli_link_then_await_survives_the_timeout(tmp_path):
    """Gemini CLI cuts a call at the server entry's `timeout` (2 s here; the README sets 4 hours):
    the form stays open and the next await_user_answers on the same sessionId gets the answers."""
    def second_await(model, tap):
        model.wait_for(lambda r: len(_responses(r)) == 2, 60, "the cut wait in the model's request")
        tap.wait_message(">", lambda m: m.get("method") == "tools/call" and m["params"]["name"] == "await_user_answers"
                         and len([c for c in tap.messages(">") if c.get("method") == "tools/call"]) == 3,
                         60, "the second await_user_answers")

    def link(tap):
        first = tap.wait_message(">", lambda m: m.get("method") == "tools/call", 60, "the call")
        return tap.wait_message("<", lambda m: m.get("id") == first["id"], 60, "the link")["result"]["structuredContent"]["url"]

    session = _session(tmp_path, ARGS, None, link_policy, 2000, lambda r: NOTE in r.text, second_await, link)
    assert session.returncode == 0, (session.out + session.err)[-2000:]
    cut = _responses(session.model.wait_for(lambda r: len(_responses(r)) == 2, 1))[1]
    calls = [m for m in session.tap.messages(">") if m.get("method") == "tools/call"]
    cancels = [m["params"] for m in session.tap.messages(">") if m.get("method") == "notifications/cancelled"]
    print("gemini-cli 0.61.0: the cut wait gave the model %s; then sent %s; submit to model request %.3f s"
          % (json.dumps(cut["response"])[:600], cancels, session.latency))
    assert [c["params"]["name"] for c in calls] == ["ask_user_rich", "await_user_answers", "await_user_answers"]
    assert "MCP error -32001: Request timed out" in cut["response"]["error"] and "Ops knows" not in json.dumps(cut)
    assert [c["requestId"] for c in cancels] == [calls[1]["id"]], cancels
    final = _responses(session.after)[2]["response"]["output"]
    blocks = re.findall(r"<untrusted_context>\n(.*?)\n</untrusted_context>", final, re.S)
    assert_answers(json.loads(blocks[1]))


@pytest.mark.parametrize("flags,declared", [((), False), (("--approval-mode", "yolo"), True)])
def test_gemini_cli_prompt_mode_offers_an_untrusted_server_only_in_yolo_mode(tmp_path, flags, declared):
    """Without `"trust": true` on the entry (what `gemini mcp add` writes), a `-p` session, which
    cannot ask for a confirmation, leaves the server's tools out of the model's declarations
    altogether; `--approval-mode yolo` (or `--yolo`) puts them back."""
    cs.cli("gemini")  # skips, or fails under tests/run.sh, before anything starts
    env = cs.offline_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedModel(lambda model, request: Text("Nothing to ask.")) as model, RecordingOpener(tmp_path) as opener, \
            StdioTap(tmp_path) as tap:
        folder = _settings(env, opener, tap)
        with open(os.path.join(folder, "settings.json"), encoding="utf-8") as f:
            settings = json.load(f)
        del settings["mcpServers"]["ask-user-rich"]["trust"]
        with open(os.path.join(folder, "settings.json"), "w", encoding="utf-8") as f:
            json.dump(settings, f)
        with open(os.path.join(folder, "trustedFolders.json"), "w", encoding="utf-8") as f:
            json.dump({str(project): "TRUST_FOLDER"}, f)
        env.update({"GEMINI_API_KEY": "scripted-test-key", "GOOGLE_GEMINI_BASE_URL": model.url,
                    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
        done = cs.run("gemini", ["-p", PROMPT, "-m", MODEL] + list(flags), env, project)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    names = sorted(_declarations(model.turns[0]))
    assert (TOOL in names) is declared, names
    # The server was started and listed its tools all the same: the CLI chose to leave them out.
    assert any(m.get("method") == "tools/list" for m in tap.messages(">"))
