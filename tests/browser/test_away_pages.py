"""The away policy and the history in Chromium (CONTRACT.md §20): an answer given in the form and
the tab closed is kept while the policy takes the rest; the inbox row says when the policy acts;
the inbox's Answered view in English and Arabic at 360 px, searched, and one entry opened
read-only."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from formkit import PHONE, WATCH_CSP, Form, askrich  # noqa: E402
from helpers.inbox_support import free_port, read_key  # noqa: E402
from helpers.support import WAIT, form_strings, submit, wait_for_interview, wait_for_result, watched_runtime  # noqa: E402

SPEC = {"title": "Release plan", "questions": [
    {"id": "db", "header": "Which database?", "options": [{"id": "pg", "label": "Postgres"},
                                                          {"id": "my", "label": "MySQL"}], "recommended": "pg"},
    {"id": "ship", "header": "Ship on Friday?", "options": [{"id": "yes", "label": "Yes"},
                                                            {"id": "no", "label": "No"}], "recommended": "no"},
    {"id": "prod", "header": "Touch production?", "options": [{"id": "yes", "label": "Yes"},
                                                              {"id": "no", "label": "No"}],
     "recommended": "no", "needsPerson": True},
]}


def runtime(tmp_path, **settings):
    return watched_runtime(tmp_path / "logs", **settings)


def new_page(browser, **options):
    context = browser.new_context(**options)
    context.add_init_script(WATCH_CSP)
    context.set_default_timeout(WAIT * 1000)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and page.errors.append(m.text))
    return context, page


def test_an_answer_given_in_the_form_survives_the_closed_tab_and_the_policy_takes_the_rest(browser, tmp_path):
    rt = runtime(tmp_path, away="recommended", away_after=0.1)
    try:
        interview = rt.open_interview(SPEC, agent="Claude Code")
        context, page = new_page(browser)
        form = Form(rt, interview, context, page).goto()
        form.option("db", "my").check()
        wait_for_interview(interview, lambda i: "db" in i.given_answers(), what="the answer reported")
        context.close()  # the person goes away
        result = wait_for_result(rt, interview.id, timeout=WAIT)
    finally:
        rt.close()
    rows = {row["id"]: row for row in result["answers"]}
    assert rows["db"]["selected"] == ["my"] and (rows["db"]["by"], rows["db"]["via"]) == ("person", "browser")
    assert rows["ship"]["selected"] == ["no"] and rows["ship"]["by"] == "away-policy"
    assert rows["prod"]["status"] == "unanswered"
    assert result["away"]["decided"] == ["ship"]


def next_millisecond() -> None:
    """Until the archive's clock (milliseconds in a file's name) has moved on: two settles in
    the same millisecond would list in the order of their random ids, not of their times."""
    start = askrich.iso_utc(time.time())
    while askrich.iso_utc(time.time()) == start:
        pass


def settle_three(rt):
    """A person's submit, one the away policy took, and a permission decision, in the archive."""
    mine = rt.open_interview(dict(SPEC, title="Chosen by me"), agent="Claude Code")
    submit(rt.form_url(mine), {"db": {"selected": ["my"], "notes": "We know it"}, "ship": {"selected": ["yes"]}})
    next_millisecond()
    spec, options = askrich.validate_interview(dict(SPEC, title="Taken while away"))
    away = rt.hub.create(spec, options, agent="Codex", away=("recommended", 30))
    rt.hub.settle_by_policy(away)
    next_millisecond()
    record = {"interviewId": "0123456789ab", "title": "Claude Code wants to run a command", "status": "submitted",
              "submittedAt": askrich.iso_utc(time.time()), "via": "browser", "counts": {}, "answers": [],
              "agent": "Claude Code", "project": "/work/shop", "kind": "permission",
              "permission": {"tool": "Bash", "input": {"command": "make deploy"}, "decision": "deny",
                             "suggestion": None, "reason": None, "where": "browser",
                             "answeredAt": askrich.iso_utc(time.time())}}
    rt.archive.save(record)


@pytest.mark.parametrize("locale,tag", [("en-US", "en"), ("ar", "ar")])
def test_the_answered_view_lists_searches_and_opens_what_was_decided_at_360_px(browser, tmp_path, locale, tag):
    w = form_strings(tag)
    rt = runtime(tmp_path, inbox_port=free_port(), away="recommended", away_after=30)
    try:
        settle_three(rt)
        waiting = rt.open_interview(dict(SPEC, title="Still waiting"), agent="Gemini CLI")
        rt.watch.wait_for("inbox-holding")
        context, page = new_page(browser, locale=locale, viewport=PHONE)
        page.goto("http://localhost:%d/inbox/%s" % (rt.config.inbox_port, read_key(rt.config.log_dir)))
        page.wait_for_selector("body.ready")
        # The waiting row says when the policy will take the recommendations.
        away = page.locator('li[data-interview="%s"] .inbox-away' % waiting.id)
        away.wait_for()
        assert away.text_content().startswith(w["inbox.awayRecommended"].split("{time}")[0].strip()[:8])

        page.locator("#view-answered").click()
        page.wait_for_function("() => document.querySelectorAll('#history-list > li').length === 3")
        titles = page.locator("#history-list .history-open").all_text_contents()
        assert titles == ["Claude Code wants to run a command", "Taken while away", "Chosen by me"]
        outcomes = page.locator("#history-list .history-outcome").all_text_contents()
        assert outcomes == [w["inbox.outcome.deny"], w["inbox.outcome.submitted"], w["inbox.outcome.submitted"]]
        assert page.locator("#history-list .history-by").all_text_contents() == [
            w["inbox.byPerson"], w["inbox.byPolicy"], w["inbox.byPerson"]]
        assert cut_off(page) == []

        page.locator("#history-search").fill("know")  # a note of one answer
        page.wait_for_function("() => document.querySelectorAll('#history-list > li').length === 1")
        page.locator("#history-list .history-open").click()
        entry = page.locator("#history-entry")
        entry.wait_for()
        assert entry.locator(".history-title").text_content() == "Chosen by me"
        assert entry.locator('dd[data-id="db"]').text_content().startswith("MySQL")
        assert entry.locator("input, textarea").count() == 0  # read-only
        assert cut_off(page) == []
        page.locator("#history-back").click()
        page.locator("#history-search").fill("")
        page.wait_for_function("() => document.querySelectorAll('#history-list > li').length === 3")
        page.locator('li[data-interview] .history-open', has_text="Taken while away").click()
        expect(entry.locator(".history-title")).to_have_text("Taken while away")
        expect(entry.locator(".history-policy")).to_have_count(2)  # db and ship, not the needsPerson one
        assert entry.locator(".history-policy").first.text_content() == w["inbox.takenByPolicy"]

        page.locator("#view-waiting").click()
        assert page.locator("#waiting-view").is_visible() and not page.locator("#answered-view").is_visible()
        assert page.errors == [] and page.evaluate("window.__csp") == []
        context.close()
    finally:
        rt.close()


def cut_off(page) -> list:
    return page.evaluate("""(() => {
        const vw = document.documentElement.clientWidth, out = [];
        for (const el of document.querySelectorAll('body *')) {
            if (el.closest('template, .sr-only')) continue;
            const r = el.getBoundingClientRect();
            if (r.width && (r.right > vw + 0.5 || r.left < -0.5)) out.push(el.className || el.tagName);
        }
        if (document.documentElement.scrollWidth > vw) out.push('page scrolls sideways');
        return out;
    })()""")
