"""A real interactive Claude Code 2.1.328 session (marked `sessions` and `browser`) with the
ask-user-rich plugin installed from the marketplace that `build_zipapp.py --plugin` writes, and
its AskUserQuestion hook turned on as the README says. The scripted model (tests/helpers/scripted_model.py)
asks with Claude Code's built-in AskUserQuestion: the hook opens the form, Chromium answers it,
and the model's next request holds the tool's own result with those answers and the note. Then,
in the same session, the hook is turned off and the model asks again: Claude Code's own dialog
appears in the terminal, and no form opens. tests/README.md ("Claude Code's own questions") says
what this proves."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from helpers import clients_support as cs  # noqa: E402
from helpers import zipapp_support as zs  # noqa: E402
from helpers.scripted_model import ScriptedModel, Text, ToolUse  # noqa: E402
from helpers.sessions_support import (API_KEY, COLUMNS, ENTER, ROWS, Terminal, chromium_page,  # noqa: E402
                              end_logged_servers, require_chromium, seed_home)
from helpers.sessions_support import INTERACTIVE_WAIT as WAIT  # noqa: E402
from helpers.support import ASK_USER_QUESTION, ASKED_DB, ASKED_LANGS, RecordingOpener  # noqa: E402

pytestmark = [pytest.mark.sessions, pytest.mark.browser]

DB, LANGS, QUESTIONS = ASKED_DB, ASKED_LANGS, ASK_USER_QUESTION
NOTE = "Ops knows MySQL better."
PLUGIN_ID = "ask-user-rich@ask-user-rich"


def _tool_result(request):
    """The AskUserQuestion tool_result this request brings after the model's last turn, or None."""
    messages = request.body.get("messages") or []
    last_turn = max([i for i, m in enumerate(messages) if m.get("role") == "assistant"], default=-1)
    for message in messages[last_turn + 1:]:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                return block
    return None


def policy(model, request):
    """Ask with AskUserQuestion at each prompt of the person; thank once its result arrived."""
    body = request.body if isinstance(request.body, dict) else {}
    if not body.get("tools"):  # a side request (a title, a summary): not the agent's turn
        return Text("Questions")
    if _tool_result(request) is not None:
        return Text("Thanks, noted.")
    assert "AskUserQuestion" in [tool.get("name") for tool in body["tools"]]
    return ToolUse("AskUserQuestion", QUESTIONS)


def _installed_plugin(tmp_path, env, work):
    """The marketplace built from a frozen copy of the checkout, added and installed as the
    README says; the path of the plugin's askrich.pyz there."""
    tree = zs.copy_tree(str(tmp_path / "tree"))
    build_env = dict(os.environ)
    build_env.pop("SOURCE_DATE_EPOCH", None)
    zs.build_ok(None, root=tree, env=build_env, args=["--plugin"])
    marketplace = os.path.join(tree, "dist", "ask-user-rich-marketplace")
    for args in (["plugin", "marketplace", "add", marketplace], ["plugin", "install", PLUGIN_ID]):
        done = cs.run("claude", args, env, work)
        assert done.returncode == 0, done.stdout + done.stderr
    return os.path.join(marketplace, "ask-user-rich", "askrich.pyz")


def _switch(pyz, env, flag):
    done = subprocess.run(["python3", pyz, "hook", "ask-user-question", flag], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _answer_in_chromium(url):
    """The person: MySQL with a note, then Python, Rust and an Other text; submit."""
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(url)
        page.wait_for_selector("body.ready")
        db = page.locator('section.question[data-qid="Database"]')
        if not db.is_visible():  # a welcome screen first
            page.keyboard.press("ArrowRight")
        # The question text as the header, the preview in a monospace box as the built-in shows it.
        expect(db.locator(".q-header")).to_have_text(DB.replace("\n", " "))
        preview = db.locator('li.opt[data-opt="o1"] .opt-preview pre')
        expect(preview).to_contain_text("| orders |")
        assert preview.evaluate("el => getComputedStyle(el).whiteSpace") in ("pre", "pre-wrap")
        db.locator('li.opt[data-opt="o2"] input.opt-input').click()
        db.locator(".note-text").fill(NOTE)
        page.keyboard.press("Escape")
        page.locator("#btn-next").click()
        langs = page.locator('section.question[data-qid="Langs"]')
        expect(langs).to_be_visible()
        for option in ("o1", "o3"):
            langs.locator('li.opt[data-opt="%s"] input.opt-input' % option).click()
        langs.locator("li.opt-other input.opt-input").click()
        langs.locator("input.other-text").fill("Zig")
        page.keyboard.press("Escape")
        page.keyboard.press("End")
        page.locator("#btn-submit").click()
        expect(page.locator("section.end h2")).to_have_text("Answers sent")
        # The agent's name, from the hook (within the isolates every inserted name gets).
        expect(page.locator("section.end")).to_contain_text("\u2068Claude Code\u2069 has your answers now")


def test_claude_codes_own_questions_are_answered_in_the_form_while_the_hook_is_on(tmp_path):
    require_chromium()
    work = tmp_path / "work"
    work.mkdir()
    opener = RecordingOpener(tmp_path)
    with ScriptedModel(policy) as model:
        env = cs.offline_env(tmp_path)
        env.update({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": API_KEY,
                    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                    "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS),
                    "ASK_USER_RICH_OPEN": "1", "ASK_USER_RICH_OPEN_CMD": opener.command})
        seed_home(env, work)
        pyz = _installed_plugin(tmp_path, env, work)
        assert "now open in ask-user-rich's form" in _switch(pyz, env, "--enable")
        terminal = Terminal([cs.cli("claude")], env, work)
        alive = lambda: terminal.process.poll() is None  # noqa: E731
        try:
            terminal.wait_for_text("❯", what="the prompt")
            terminal.type("Ask me.")
            terminal.wait_for_text("Ask me.", what="the typed prompt")
            terminal.type(ENTER)
            # The hook opens the form; the terminal shows only that a hook runs.
            url = opener.wait(timeout=WAIT, alive=alive)
            terminal.wait_for_shown("the hook running", lambda flat: "running PreToolUse hook" in flat)
            _answer_in_chromium(url)
            after = model.wait_for(lambda r: _tool_result(r) is not None, WAIT, "the AskUserQuestion result")
            shown = terminal.wait_for_text("Thanks, noted.", what="the model's reply to the answers")
            asked_here = [flat for flat in terminal.frames if "Enter to select" in flat]

            # Off again, in the same session: the next question is Claude Code's own dialog.
            assert "asked in its terminal again" in _switch(pyz, env, "--disable")
            terminal.type("Ask me again.")
            terminal.wait_for_text("Ask me again.", what="the second prompt")
            terminal.type(ENTER)
            dialog = terminal.wait_for("Claude Code's own question dialog", lambda flat: "Enter to select" in flat)
        except AssertionError as failure:
            raise AssertionError("%s\n--- the screen:\n%s\n--- server.log:\n%s" % (
                failure, terminal.text(), cs.server_log(env)[-3000:])) from None
        finally:
            terminal.close()
            end_logged_servers(cs.server_log(env), "askrich.pyz")
            opener.close()
    result = _tool_result(after)
    print("claude-code 2.1.328 AskUserQuestion through the hook; the model got: %s" % result["content"][:300])
    # The model got the tool's own result: the labels (several joined by ", ", the Other text as
    # an answer) and the note, keyed by the question texts, quotes and newline included.
    assert result.get("is_error") is not True, result
    assert result["content"].startswith('The user answered: "%s"="MySQL" notes: %s, "%s"="Python, Rust, Zig".'
                                        % (DB, NOTE, LANGS)), result
    # Claude Code took the hook's answers as the person's: no dialog, its own summary line.
    assert not asked_here, asked_here[:1]
    assert "Answered Claude's questions" in shown and "→ MySQL" in shown, shown
    # With the hook off: the built-in dialog, with the model's own question, and no form.
    assert "Database" in dialog and "Postgres (Recommended)" in dialog, dialog
    assert opener.urls == [url]
