"""The front door in Chromium (tests/README.md, "The front door"): a form of one process, open
through the door while two other processes hold the door's port beside its owner; one of those
two, the first holder included, is killed with -9 twenty times over (each time replaced) while
the person answers, and nothing the page sends through the door fails: every process of ours
that showed a door URL holds the port, so there is no gap to fail in."""
from __future__ import annotations

import os

import pytest

from formkit import CHROMIUM, DESKTOP, WATCH_CSP  # noqa: E402
from helpers.inbox_support import Agent, free_port  # noqa: E402
from helpers.support import WAIT  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="stops and kills processes by signal")


# Every notice the page ever shows, kept even after it goes away.
NOTICES_SEEN = """
window.__notices = [];
new MutationObserver(() => {
  for (const n of document.querySelectorAll('#notices [data-id]')) {
    if (!window.__notices.includes(n.dataset.id)) window.__notices.push(n.dataset.id);
  }
}).observe(document, { childList: true, subtree: true });
"""


def test_holders_killed_twenty_times_while_the_page_answers_through_the_door_and_nothing_fails(browser, tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    holders = [Agent(logs, port, "claude-code", tmp_path / "one", "Held here")]
    owner = None
    context = browser.new_context(viewport=DESKTOP)
    try:
        holders[0].server.log.wait_for("inbox-holding")
        holders.append(Agent(logs, port, "gemini-cli", tmp_path / "three", "Held too"))
        owner = Agent(logs, port, "codex", tmp_path / "two", "Through the door", questions=2)
        assert owner.url.startswith("http://localhost:%d/s/" % port)
        context.add_init_script(WATCH_CSP)
        context.add_init_script(NOTICES_SEEN)
        context.set_default_timeout(WAIT * 1000)
        page = context.new_page()
        page.goto(owner.url)
        page.wait_for_selector("body.ready")
        choice = 'section.question[data-qid="q1"] li.opt[data-opt="%s"] input.opt-input'
        for round_ in range(20):
            victim = round_ % 2  # the first holder first
            holders[victim].kill()
            # At once: the page answers (a draft, a /progress post through the door).
            page.locator(choice % ("b" if round_ % 2 else "a")).check()
            holders[victim] = Agent(logs, port, "agent-%d" % round_, tmp_path / ("r%d" % round_), "Round %d" % round_)
        page.wait_for_function("() => localStorage.length > 0")  # the draft is kept
        page.locator('#rail li[data-qid="q2"] button').click()
        page.locator('section.question[data-qid="q2"] li.opt[data-opt="a"] input.opt-input').check()
        holders[0].kill()  # once more, right before the submit
        page.keyboard.press("Escape")
        page.keyboard.press("End")
        page.locator("#btn-submit").click()
        page.wait_for_selector("section.end")
        assert page.evaluate("window.__notices") == []  # never "gone", never "impostor"
        result = owner.server.tool("await_user_answers", {"sessionId": owner.session})
        answers = {row["id"]: row["selected"] for row in result["result"]["structuredContent"]["answers"]}
        assert answers == {"q1": ["b"], "q2": ["a"]}
        assert page.evaluate("window.__csp") == []
    finally:
        context.close()
        if owner is not None:
            owner.close()
        for holder in holders:
            holder.close()
