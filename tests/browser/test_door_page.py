"""The front door in Chromium (tests/README.md, "The front door"): a form of one process, open
through the port another process holds, half answered when that holder dies; the next process
takes the port, the page reconnects, and the person sends without retyping anything."""
from __future__ import annotations

import os
import signal

import pytest
from playwright.sync_api import expect

from formkit import CHROMIUM, DESKTOP, WATCH_CSP  # noqa: E402
from helpers.inbox_support import Agent, free_port  # noqa: E402
from helpers.support import WAIT  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="stops and kills processes by signal")


def test_the_holder_killed_mid_answer_and_the_submit_lands_through_its_successor(browser, tmp_path):
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

        # The owner is stopped, so nobody can take the port at once: the gap is certain.
        os.kill(owner.pid, signal.SIGSTOP)
        holder.kill()
        page.locator('#rail li[data-qid="q2"] button').click()
        page.locator('section.question[data-qid="q2"] li.opt[data-opt="a"] input.opt-input').check()
        page.keyboard.press("Escape")
        page.keyboard.press("End")
        page.locator("#btn-submit").click()
        problem = page.locator(".review .submit-problem")
        expect(problem).to_be_visible()
        again = problem.locator(".send-again")
        expect(again).to_be_visible()
        expect(page.locator('#notices [data-id="gone"]')).to_be_visible()

        # The owner goes on: within 5 s it takes the port, the page's stream comes back
        # through it, and the same answers go with one press.
        os.kill(owner.pid, signal.SIGCONT)
        owner.server.log.wait_for("inbox-holding", timeout=5.0 + WAIT)
        expect(page.locator('#notices [data-id="gone"]')).to_have_count(0)
        again.click()
        page.wait_for_selector("section.end")
        result = owner.server.tool("await_user_answers", {"sessionId": owner.session})
        answers = {row["id"]: row["selected"] for row in result["result"]["structuredContent"]["answers"]}
        assert answers == {"q1": ["b"], "q2": ["a"]}
        assert page.evaluate("window.__csp") == []
    finally:
        context.close()
        if owner is not None:
            os.kill(owner.pid, signal.SIGCONT)
            owner.close()
        holder.close()
