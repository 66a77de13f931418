"""The front door in Chromium (tests/README.md, "The front door"): a form of one process, open
through the door, half answered when the process that first held the door is killed; every
process of ours that handed out a door URL holds the port too, so the page goes on through the
door with no gap, and the person sends without retyping anything or seeing an error."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from formkit import CHROMIUM, DESKTOP, WATCH_CSP  # noqa: E402
from inbox_support import Agent, free_port  # noqa: E402
from support import WAIT  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="stops and kills processes by signal")


def test_the_first_holder_killed_mid_answer_and_the_submit_lands_through_the_door_with_no_gap(browser, tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    holder = Agent(logs, port, "claude-code", tmp_path / "one", "Held here")
    owner = None
    context = browser.new_context(viewport=DESKTOP)
    try:
        holder.server.log.wait_for("inbox-holding")
        owner = Agent(logs, port, "codex", tmp_path / "two", "Through the door", questions=2)
        assert owner.url.startswith("http://localhost:%d/s/" % port)
        context.add_init_script(WATCH_CSP)
        context.set_default_timeout(WAIT * 1000)
        page = context.new_page()
        page.goto(owner.url)
        page.wait_for_selector("body.ready")
        page.locator('section.question[data-qid="q1"] li.opt[data-opt="b"] input.opt-input').check()
        page.wait_for_function("() => localStorage.length > 0")  # the draft is kept

        # The first holder dies; the owner holds the door too: nothing is lost in between.
        holder.kill()
        page.locator('#rail li[data-qid="q2"] button').click()
        page.locator('section.question[data-qid="q2"] li.opt[data-opt="a"] input.opt-input').check()
        page.keyboard.press("Escape")
        page.keyboard.press("End")
        page.locator("#btn-submit").click()
        page.wait_for_selector("section.end")
        expect(page.locator('#notices [data-id="gone"]')).to_have_count(0)
        result = owner.server.tool("await_user_answers", {"sessionId": owner.session})
        answers = {row["id"]: row["selected"] for row in result["result"]["structuredContent"]["answers"]}
        assert answers == {"q1": ["b"], "q2": ["a"]}
        assert page.evaluate("window.__csp") == []
    finally:
        context.close()
        if owner is not None:
            owner.close()
        holder.close()
