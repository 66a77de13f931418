"""Permission asks in a real interactive Codex 0.169 session (marked `sessions`): its TUI in a
pseudo-terminal, asking for approvals (`-a on-request`, `-s read-only`), against the scripted
model (tests/helpers/scripted_model.py), with our hook as its PermissionRequest hook in
`~/.codex/hooks.json` (tests/README.md, "Permission asks"). The model asks to run a command
outside the sandbox; the approval reaches the hook, which opens the form: allowed there, the
command runs; at the next prompt, denied with a note, it does not, and the model hears why.
Codex shows its own approval only once the hook ended without a decision: at the third prompt
nobody answers the form, the hook gives up before its `--timeout` (the form says the question
went back to the terminal), and then Codex asks in its terminal. `codex exec` never asks (its
approval policy is always `never`), so only the TUI can show this."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers.scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from helpers.sessions_support import ENTER, Terminal, end_logged_servers  # noqa: E402
from helpers.sessions_support import INTERACTIVE_WAIT as WAIT  # noqa: E402
from helpers.support import MODULE, EventsReader, RecordingOpener, api_url, http_request, submit  # noqa: E402

pytestmark = pytest.mark.sessions
NOTE = "Not in this folder."
HOOK_TIMEOUT = 12  # the hook's --timeout: it gives up a quarter earlier, 9 s after it started


def _outputs(request):
    return [item for item in request.body.get("input") or [] if item.get("type") == "function_call_output"]


def policy(model, request):
    """Per prompt, ask to run `touch step-<n>.txt` outside the sandbox; say done once its output came."""
    body = request.body if isinstance(request.body, dict) else {}
    if not body.get("tools"):
        return Text("Steps")
    prompts = [item for item in body.get("input") or [] if item.get("type") == "message" and item.get("role") == "user"
               and "Step" in json.dumps(item.get("content"))]
    step, done = len(prompts), len(_outputs(request))
    if done >= step:
        return Text("Done with step %d." % step)
    return ToolUse("exec_command", {"cmd": "touch step-%d.txt" % step, "sandbox_permissions": "require_escalated",
                                    "justification": "Write step %d" % step}, call_id="call_step_%d" % step)


def _home(env, model, work, opener):
    """The throwaway ~/.codex: the scripted model, the folder trusted, hooks on, and our hook for
    every PermissionRequest (turned on as the README says)."""
    folder = os.path.join(env["HOME"], ".codex")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.toml"), "w", encoding="utf-8") as f:
        f.write("\n".join([
            'model = "%s"' % model.model_name, 'model_provider = "scripted"',
            "[features]", "hooks = true",
            "[projects.%s]" % json.dumps(str(work)), 'trust_level = "trusted"',
            "[model_providers.scripted]", 'name = "Scripted model"', "base_url = %s" % json.dumps(model.url + "/v1"),
            'wire_api = "responses"', 'env_key = "SCRIPTED_API_KEY"']) + "\n")
    settings = {"ASK_USER_RICH_LOG_DIR": env["ASK_USER_RICH_LOG_DIR"], "ASK_USER_RICH_OPEN": "1",
                "ASK_USER_RICH_OPEN_CMD": opener.command}
    command = "env %s %s %s hook permission-request --timeout %d" % (
        " ".join("%s=%s" % (name, shlex.quote(value)) for name, value in settings.items()),
        shlex.quote(sys.executable), shlex.quote(MODULE), HOOK_TIMEOUT)
    with open(os.path.join(folder, "hooks.json"), "w", encoding="utf-8") as f:
        json.dump({"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]}}, f)
    done = subprocess.run([sys.executable, MODULE, "hook", "permission-request", "--enable"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr


def test_codexs_approvals_reach_the_hook_and_its_decision_takes_effect(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = cs.offline_env(tmp_path)
    env.update({"SCRIPTED_API_KEY": "sk-scripted-test", "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost", "TERM": "xterm-256color"})
    with ScriptedModel(policy) as model, RecordingOpener(tmp_path) as opener:
        _home(env, model, work, opener)
        terminal = Terminal([cs.cli("codex"), "-a", "on-request", "-s", "read-only", "--dangerously-bypass-hook-trust",
                             "Step 1"], env, work)
        alive = lambda: terminal.process.poll() is None  # noqa: E731
        try:
            url = opener.wait(1, timeout=WAIT, alive=alive)
            served = http_request(api_url(url)).json()
            assert submit(url, {"permission": {"selected": ["allow"]}}).status == 200
            allowed = model.wait_for(lambda r: len(_outputs(r)) == 1, WAIT, "step 1's output")
            terminal.wait_for_text("Done with step 1.", what="the first answer")
            terminal.type("Step 2")
            terminal.wait_for_text("Step 2", what="the second prompt")
            terminal.type(ENTER)
            url = opener.wait(2, timeout=WAIT, alive=alive)
            assert submit(url, {"permission": {"selected": ["deny"], "notes": NOTE}}).status == 200
            denied = model.wait_for(lambda r: len(_outputs(r)) == 2, WAIT, "step 2's output")
            screen = terminal.wait_for_text("Done with step 2.", what="the second answer")
            terminal.type("Step 3")
            terminal.wait_for_text("Step 3", what="the third prompt")
            terminal.type(ENTER)
            url = opener.wait(3, timeout=WAIT, alive=alive)
            running = terminal.wait_for_text("Running hook", what="Codex waiting on the hook")
            events = EventsReader(api_url(url, "events"), "state")
            try:
                gave_up = events.wait_for(lambda s: s["state"] != "pending", HOOK_TIMEOUT + WAIT, "the hook giving up")
            finally:
                events.close()
            dialog = terminal.wait_for_text("Would you like to run the following command?", what="Codex's own approval")
        except AssertionError as failure:
            raise AssertionError("%s\n--- the screen:\n%s\n--- server.log:\n%s" % (
                failure, terminal.text(), cs.server_log(env)[-3000:])) from None
        finally:
            terminal.close()
            end_logged_servers(cs.server_log(env), MODULE)
    first, second = (item.get("output") for item in _outputs(denied))
    print("codex 0.169.0 approvals through the hook: allowed -> %r; denied -> %r" % (first[-120:], second[-200:]))
    # Codex's approval as the hook got it: Codex named, a command, and no "always" (it refuses them).
    assert served["spec"]["title"] == "Codex wants to run a command", served["spec"]
    assert "touch step-1.txt" in served["spec"]["questions"][0]["body"]
    assert [o["id"] for o in served["permission"]["options"]] == ["allow", "deny"]
    assert _outputs(allowed) and (work / "step-1.txt").exists()
    # Denied: not run, and the model's output says why.
    assert not (work / "step-2.txt").exists() and NOTE in second, second
    assert "Step 2" in screen
    # Nobody answered the form: the hook gave up, saying so, and only then did Codex ask itself.
    assert "Would you like to run" not in running and gave_up.get("handedBack") is True, gave_up
    assert "touch step-3.txt" in dialog and not (work / "step-3.txt").exists()
