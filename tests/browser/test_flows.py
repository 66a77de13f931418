"""The form's flows against the real server: submit and confirm, review, textInput, drafts, live
follow-ups, the 409 race, show-all, and what the page says when things end or break."""
import json
import threading

import pytest
from playwright.sync_api import expect

from formkit import WAIT, answer_of, askrich, choice, isolated, wait_for_result


def many_questions(n=8):
    return {
        "title": "Long round",
        "questions": [
            choice(f"q{i}", f"Question number {i}", ["a", "b", "c"],
                   body="Some context.\n\n" + "More lines of context.\n\n" * 4, recommended="a")
            for i in range(1, n + 1)
        ],
    }


def test_full_round_reaches_the_server_as_answered(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight")
    f.option("db", "my").click()
    f.section("db").locator(".note-text").fill("We know it.")
    f.press("Escape", "ArrowRight")
    f.press("c")  # keep the rank order
    f.press("ArrowRight")
    f.option("feat", "search").click()
    f.option("feat", "auth").click()
    f.press("ArrowRight")
    f.option("src", "up").click()
    f.section("src").locator(".opt-text-input").fill("  https://example.com/x  ")
    f.press("Escape", "ArrowRight")
    f.section("free").locator("textarea.other-text").fill("Nothing really")
    f.press("Escape", "End")
    f.page.locator("#general-notes").fill("Thanks")
    f.page.locator("#btn-submit").click()
    expect(f.page.locator("section.end h2")).to_have_text("Answers sent")
    result = wait_for_result(f.rt, f.interview.id, timeout=WAIT)
    assert result["counts"] == {"answered": 5, "deferred": 0, "needsInfo": 0, "unanswered": 0}
    assert answer_of(result, "db")["selected"] == ["my"]
    assert answer_of(result, "db")["notes"] == "We know it."
    assert answer_of(result, "db")["followedRecommendation"] is False
    assert answer_of(result, "order")["ranked"] == ["speed", "cost", "looks", "docs"]
    assert answer_of(result, "feat")["selected"] == ["auth", "search"]  # option order, not click order
    assert answer_of(result, "src")["optionTexts"] == {"up": "https://example.com/x"}
    assert answer_of(result, "free")["other"] == "Nothing really"
    assert result["generalNotes"] == "Thanks"
    # The draft is gone once the answers are sent.
    assert f.page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('askrich:draft'))") == []


def test_first_submit_with_open_questions_asks_for_confirmation(form, rich_spec):
    f = form(rich_spec)
    f.press("End")
    f.page.locator("#btn-submit").click()
    confirm = f.page.locator(".review .confirm")
    expect(confirm).to_contain_text("5 questions are still open")
    assert wait_for_result(f.rt, f.interview.id, timeout=0.3) is None
    f.page.locator("#btn-submit").click()
    f.page.wait_for_selector("section.end")
    result = wait_for_result(f.rt, f.interview.id, timeout=WAIT)
    assert result["counts"]["unanswered"] == 5


def test_review_lists_answers_and_notes_and_a_row_jumps_back(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight", "1", "n")
    f.page.keyboard.type("A note here")
    f.press("Escape", "ArrowRight", "d", "End")
    rows = f.page.locator(".review-row")
    assert rows.count() == 5
    expect(rows.nth(0)).to_contain_text("Postgres")
    expect(rows.nth(0)).to_contain_text("Note: " + isolated("A note here"))
    expect(rows.nth(1)).to_contain_text("Deferred")
    expect(rows.nth(2)).to_contain_text("Not answered yet")
    rows.nth(2).locator("button").click()
    assert f.screen == "q:feat"


def test_builds_on_link_jumps_to_the_earlier_question(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight", "ArrowRight")
    link = f.section("order").locator(".builds-link")
    expect(link).to_have_text("#1")
    link.click()
    assert f.screen == "q:db"


def test_required_text_input_blocks_the_submit_with_a_clear_message(form, rich_spec):
    f = form(rich_spec)
    f.press("End", "a")  # accept recommendations
    f.page.locator("#rail button[data-goto='q:src']").click()
    f.option("src", "up").click()
    field = f.section("src").locator(".opt-text-input")
    expect(field).to_be_visible()
    f.press("End")
    f.page.locator("#btn-submit").click()
    problem = f.page.locator(".review .submit-problem")
    expect(problem).to_contain_text("needs the text for " + isolated('"%s"' % isolated("Upgrade")))
    assert wait_for_result(f.rt, f.interview.id, timeout=0.3) is None
    problem.locator("button").click()
    assert f.screen == "q:src"
    expect(f.section("src").locator(".q-problem")).to_be_visible()
    # The text survives unpicking and picking again.
    field.fill("https://example.com/src")
    f.option("src", "keep").click()
    expect(field).to_be_hidden()
    f.option("src", "up").click()
    expect(field).to_have_value("https://example.com/src")
    result = f.submit_and_collect()
    assert answer_of(result, "src")["optionTexts"] == {"up": "https://example.com/src"}


def test_draft_survives_a_reload(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight", "2", "n")
    f.page.keyboard.type("draft note")
    f.press("Escape", "ArrowRight", "ArrowDown", "Shift+ArrowDown", "ArrowRight", "3", "i")
    f.page.keyboard.type("why?")
    f.press("Escape")
    f.reload()
    assert f.screen == "q:feat"
    assert f.status("db") == "answered" and f.status("order") == "answered"
    assert f.status("feat") == "needs-info"
    assert f.option("db", "my").is_checked()
    assert f.section("db").locator(".note-text").input_value() == "draft note"
    assert f.rank_order("order") == ["cost", "speed", "looks", "docs"]
    result = f.submit_and_collect()
    assert answer_of(result, "db")["selected"] == ["my"]
    assert answer_of(result, "db")["notes"] == "draft note"
    assert answer_of(result, "order")["ranked"] == ["cost", "speed", "looks", "docs"]
    assert answer_of(result, "feat")["status"] == "needs-info"
    assert answer_of(result, "feat")["notes"] == "why?"


def test_blocked_local_storage_never_breaks_the_page(form, rich_spec):
    f = form(rich_spec, block_storage=True)
    f.press("ArrowRight", "1")
    btn = f.page.locator("#btn-theme")
    for want in ("light", "dark", "auto"):
        btn.click()
        expect(btn).to_have_text(f"Theme: {want}")
    f.press("v")
    assert f.page.locator("section.question:visible").count() == 5
    result = f.submit_and_collect()
    assert answer_of(result, "db")["selected"] == ["pg"]


def test_a_live_append_is_pushed_to_the_open_page(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight", "1")
    f.page.wait_for_selector("body[data-live]", state="attached")  # the event stream is open
    polls = []
    f.page.on("request", lambda request: polls.append(request.url) if request.url.endswith("/state") else None)
    f.rt.append_questions(f.interview.id, [choice("late", "A follow-up question", ["y", "n"])],
                          note="I forgot **this** one.")
    f.page.wait_for_selector('#rail li[data-qid="late"] .is-new')
    # Pushed by the event stream, not found by a poll of /state: however busy the machine, so no
    # clock here. How soon it shows is a benchmark's row (tests/bench/README.md: append -> shown).
    assert polls == []
    expect(f.page.locator("#notices")).to_contain_text("I forgot this one.")
    assert f.screen == "q:db"  # the user is not pulled away
    assert f.option("db", "pg").is_checked()  # answers kept
    f.press("g")
    assert f.screen == "q:late"
    expect(f.page.locator('#rail li[data-qid="late"] .is-new')).to_have_count(0)
    expect(f.page.locator('#notices [data-id="follow-ups"]')).to_have_count(0)  # all seen now
    f.press("2")
    result = f.submit_and_collect()
    assert answer_of(result, "late")["selected"] == ["n"]
    assert answer_of(result, "db")["selected"] == ["pg"]


def test_a_submit_racing_an_append_gets_409_and_shows_the_new_questions(form, rich_spec):
    f = form(rich_spec)
    f.press("End", "a")
    raced = []

    def append_first(route):
        # The agent appends while the submit is on its way: the server must refuse it.
        if not raced:
            raced.append(f.rt.append_questions(
                f.interview.id, [choice("race", "Raced in", ["p", "q"])], note="Just one more"))
        route.continue_()

    f.allow("status of 409")  # the refused submit, logged by the browser itself
    f.page.route("**/submit", append_first)
    f.page.locator("#btn-submit").click()
    if f.page.locator(".review .confirm").is_visible():
        f.page.locator("#btn-submit").click()
    f.page.wait_for_selector('section.question[data-qid="race"]:visible')
    assert f.screen == "q:race"
    expect(f.page.locator("#notices")).to_contain_text("Look at the new questions")
    assert wait_for_result(f.rt, f.interview.id, timeout=0.3) is None
    f.press("1")
    result = f.submit_and_collect()
    assert answer_of(result, "race")["selected"] == ["p"]
    assert answer_of(result, "db")["selected"] == ["pg"]


def test_show_all_rail_tracks_the_scroll_and_scrolls_on_click(form):
    f = form(many_questions(8), reduced_motion="reduce")  # instant scrolls: nothing to wait for
    f.press("v")
    assert f.page.locator("section.question:visible").count() == 8
    current = lambda: f.page.locator("#rail [aria-current]").get_attribute("data-goto")  # noqa: E731
    assert current() == "q:q1"
    f.page.evaluate("document.querySelector('section[data-qid=q5]').scrollIntoView({block: 'start'})")
    f.scroll_settled()
    f.page.mouse.wheel(0, 40)
    expect(f.page.locator("#rail [aria-current]")).to_have_attribute("data-goto", "q:q5")
    y = f.page.evaluate("scrollY")
    f.page.locator("#rail button[data-goto='q:q2']").click()
    expect(f.page.locator("#rail [aria-current]")).to_have_attribute("data-goto", "q:q2")
    assert f.page.evaluate("scrollY") < y
    top = f.page.evaluate("document.querySelector('section[data-qid=q2]').getBoundingClientRect().top")
    bar = f.page.evaluate("document.querySelector('#bar').getBoundingClientRect().bottom")
    assert bar <= top <= bar + 40
    assert f.page.locator("section.question:visible").count() == 8  # still show-all


def test_mouse_clicks_on_options_never_scroll_the_page(form):
    f = form(many_questions(3))
    f.press("v")
    f.page.evaluate("window.scrollTo(0, 300)")
    f.scroll_settled()
    y = f.page.evaluate("scrollY")
    # Click where an option is on screen now (a locator click would scroll it into view first).
    box = f.page.evaluate("""(() => {
        const bar = document.querySelector('#bar').getBoundingClientRect().bottom;
        const nav = document.querySelector('#nav').getBoundingClientRect().top;
        // The lowest one on screen: outside the middle half, where keyboard focus would scroll.
        let found = null;
        for (const el of document.querySelectorAll('li.opt[data-opt] label.opt-row')) {
            const r = el.getBoundingClientRect();
            if (r.top > bar + 10 && r.bottom < nav - 10) found = {x: r.left + 30, y: r.top + r.height / 2, opt: el.closest('li').dataset.opt, q: el.closest('section').dataset.qid};
        }
        return found;
    })()""")
    f.page.mouse.click(box["x"], box["y"])
    expect(f.option(box["q"], box["opt"])).to_be_checked()
    f.settle()
    f.scroll_settled(frames=10)
    assert f.page.evaluate("scrollY") == y


def test_keyboard_focus_stays_in_the_middle_half(form):
    f = form(many_questions(6), viewport={"width": 900, "height": 600}, reduced_motion="reduce")
    f.press("v")
    for _ in range(4):
        f.press("ArrowRight")
    f.press("ArrowDown")
    box = f.page.evaluate("""(() => {
        const r = document.activeElement.closest('.opt').getBoundingClientRect();
        const top = document.querySelector('#bar').getBoundingClientRect().bottom;
        const bottom = document.querySelector('#nav').getBoundingClientRect().top;
        return {mid: (r.top + r.bottom) / 2, lo: top + (bottom - top) / 4, hi: bottom - (bottom - top) / 4};
    })()""")
    assert box["lo"] <= box["mid"] <= box["hi"], box


def test_the_page_says_when_the_agent_stopped_waiting(form, rich_spec):
    f = form(rich_spec)
    # The agent gives up once the page has shown it waiting (its client cancels the call), not
    # at a time of its own, which a busy machine could reach before the page saw the wait.
    call = askrich.Cancellation()
    waiter = threading.Thread(target=wait_for_result, args=(f.rt, f.interview.id, WAIT, call))
    waiter.start()
    f.page.wait_for_selector('body[data-live="waiting"]', state="attached")
    call.cancel()
    waiter.join()
    expect(f.page.locator("#notices")).to_contain_text(isolated("The agent") + " stopped waiting")
    f.press("ArrowRight", "1")
    result = f.submit_and_collect()
    assert answer_of(result, "db")["selected"] == ["pg"]


def test_done_screen_says_whether_a_call_was_waiting(form, rich_spec):
    f = form(rich_spec)
    result = f.waiting_call()
    f.press("End", "a", "Enter", "Enter")
    expect(f.page.locator("section.end")).to_contain_text(isolated("The agent") + " has your answers now")
    assert result()["status"] == "submitted"


def test_a_second_tab_sees_the_interview_already_submitted(form, rich_spec, browser):
    f = form(rich_spec)
    f.press("End", "a")
    other = browser.new_context()
    try:
        page2 = other.new_page()
        page2.goto(f.url)
        page2.wait_for_selector("body.ready")
        f.page.locator("#btn-submit").click()
        f.page.locator("#btn-submit").click()  # confirm: two questions are open
        f.page.wait_for_selector("section.end")
        # The open second tab learns it through the event stream, a fresh one on load.
        expect(page2.locator("section.end h2")).to_have_text("Already submitted")
        page3 = other.new_page()
        page3.goto(f.url)
        expect(page3.locator("section.end h2")).to_have_text("Already submitted")
    finally:
        other.close()


def test_expired_and_cancelled_interviews_say_so(form, rich_spec):
    f = form(rich_spec, goto=False)
    f.expect_errors = True  # the browser logs the 404 itself
    f.pretend_state("expired")
    f.page.goto(f.url)
    expect(f.page.locator("section.end h2")).to_have_text("This interview is no longer available")
    # No interview ever loaded, so the header no longer says one is loading.
    expect(f.page.locator("#title")).to_have_text("Ask User Rich")
    f.pretend_state("cancelled")
    f.page.reload()
    expect(f.page.locator("section.end h2")).to_have_text("This interview was canceled")
    expect(f.page.locator("#title")).to_have_text(rich_spec["title"])


def test_server_gone_keeps_the_draft_and_says_so(form, rich_spec):
    f = form(rich_spec)
    f.expect_errors = True  # failed requests are logged by the browser
    f.press("ArrowRight", "3", "End")
    f.rt.close()
    expect(f.page.locator("#notices")).to_contain_text("cannot be reached")
    f.page.locator("#btn-submit").click()
    if f.page.locator(".review .confirm").is_visible():
        f.page.locator("#btn-submit").click()
    expect(f.page.locator(".review .submit-problem")).to_contain_text("were not sent")
    draft = f.page.evaluate("JSON.parse(localStorage.getItem('askrich:draft:%s'))" % f.interview.id)
    assert draft["answers"]["db"]["selected"] == ["lite"]
    # The draft is named by the interview id: the token, a live bearer, is not kept in storage.
    stored = f.page.evaluate("JSON.stringify(Object.entries(localStorage))")
    assert f.interview.token not in stored


def test_free_text_question_answers_with_its_text(form):
    f = form({"title": "Free", "questions": [{"id": "free", "header": "Say something", "options": []}]})
    assert f.status("free") == "open"
    f.press("o")
    f.page.keyboard.type("Hello there")
    assert f.status("free") == "answered"
    result = f.submit_and_collect()
    assert answer_of(result, "free")["other"] == "Hello there"


def test_the_form_reports_its_answer_counts_to_the_server(form, rich_spec, log):
    f = form(rich_spec)
    f.press("ArrowRight", "1", "ArrowRight", "c")
    line = log.wait_for("form-progress", "answered=2 ")  # the page debounces its reports
    assert "interview=%s answered=2 deferred=0 needsInfo=0 open=3" % f.interview.id in line


def test_theme_button_cycles_auto_light_dark(form, rich_spec):
    f = form(rich_spec, color_scheme="dark")
    bg = lambda: f.page.evaluate("getComputedStyle(document.body).backgroundColor")  # noqa: E731
    auto_dark = bg()
    btn = f.page.locator("#btn-theme")
    expect(btn).to_have_text("Theme: auto")
    btn.click()
    expect(btn).to_have_text("Theme: light")
    light = bg()
    assert light != auto_dark
    btn.click()
    expect(btn).to_have_text("Theme: dark")
    assert bg() == auto_dark
    f.reload()
    expect(btn).to_have_text("Theme: dark")


def test_reduced_motion_skips_the_slide(form, rich_spec):
    moving = form(rich_spec)
    moving.press("ArrowRight")
    assert moving.page.evaluate("document.querySelector('#main > .current').getAnimations().length") > 0
    still = form(rich_spec, reduced_motion="reduce")
    still.press("ArrowRight")
    assert still.page.evaluate("document.querySelector('#main > .current').getAnimations().length") == 0
    assert still.page.evaluate("getComputedStyle(document.querySelector('#main > .current')).animationName") == "none"


def test_a_tall_option_focused_from_the_keyboard_is_pinned_near_the_top(form):
    tall = "```\n" + "\n".join(f"line {i}" for i in range(60)) + "\n```"
    f = form({"title": "Tall", "questions": [choice("t", "Pick", [
        {"id": "a", "label": "Short"}, {"id": "b", "label": "Tall", "preview": tall}, {"id": "c", "label": "After"}])]},
        viewport={"width": 700, "height": 600}, reduced_motion="reduce")
    rect = "document.querySelector('li.opt[data-opt=b]').getBoundingClientRect().top - document.querySelector('#bar').getBoundingClientRect().bottom"
    assert f.page.evaluate(rect) > 100
    f.press("ArrowDown", "ArrowDown")
    assert f.focused("el => el.value") == "b"
    assert 0 <= f.page.evaluate(rect) <= 30


def test_screens_slide_in_from_the_direction_of_travel(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight")
    assert f.page.evaluate("document.querySelector('#main > .current').getAnimations()[0]?.animationName") == "slide-next"
    f.settle()
    f.press("ArrowLeft")
    assert f.page.evaluate("document.querySelector('#main > .current').getAnimations()[0]?.animationName") == "slide-prev"


def test_follow_ups_added_while_the_page_was_closed_are_marked_new(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight", "1")
    f.page.goto("about:blank")
    f.rt.append_questions(f.interview.id, [choice("while", "Asked while away", ["a", "b"])], note="Sorry, one more")
    f.goto()
    expect(f.page.locator('#rail li[data-qid="while"] .is-new')).to_have_count(1)
    expect(f.page.locator("#notices")).to_contain_text("Sorry, one more")
    assert f.option("db", "pg").is_checked()
    f.press("g")
    assert f.screen == "q:while"


def test_a_422_shows_the_servers_error_and_the_interview_stays_open(form, rich_spec):
    f = form(rich_spec)
    f.allow("status of 422")
    refused = []

    def refuse_once(route):
        if refused:
            route.continue_()
            return
        refused.append(1)
        route.fulfill(status=422, content_type="application/json",
                      body='{"error": "question \\"db\\": unknown option id \\"mongo\\""}')

    f.page.route("**/submit", refuse_once)
    f.press("End", "a")
    f.page.locator("#btn-submit").click()
    f.page.locator("#btn-submit").click()  # confirm: two questions are open
    expect(f.page.locator(".review .submit-problem")).to_contain_text('unknown option id "mongo"')
    assert f.screen == "review"
    result = f.submit_and_collect()
    assert answer_of(result, "db")["selected"] == ["pg"]


ONE_QUESTION = {"title": "One", "questions": [choice("db", "Which database?", ["pg", "my"])]}
NOT_SAVED = ("The answers could not be saved on this computer (%s). Nothing is lost: they are still "
             "in this form. Send them again once there is room." % isolated("No space left on device"))


@pytest.mark.parametrize("status, body, settled, said", [
    (409, {"code": "not-pending"}, "declined", ("end", "This interview was skipped")),
    (409, {"code": "not-pending"}, "cancelled", ("end", "This interview was canceled")),
    (410, {"code": "not-found"}, None, ("end", "This interview is no longer available")),
    (500, {"code": "not-saved", "reason": "No space left on device"}, None, ("problem", NOT_SAVED)),
    (400, {"code": "stale-version", "version": 1}, None, ("notice", "race")),
])
def test_a_refused_submit_is_read_by_its_code_not_by_the_servers_text_or_status(form, status, body, settled, said):
    f = form(ONE_QUESTION)
    # The server's English may be reworded and a status may change; the code is what the form reads.
    reply = dict(body, error="reworded, in no language the form knows")
    f.page.route("**/submit", lambda route: route.fulfill(
        status=status, content_type="application/json", body=json.dumps(reply)))
    if settled:
        f.page.route("**/api/s/*/state", lambda route: route.fulfill(
            status=200, content_type="application/json",
            body=json.dumps({"state": settled, "waiting": False, "version": 1})))
    f.allow(str(status))
    f.option("db", "pg").click()
    f.press("Escape", "End")
    f.page.locator("#btn-submit").click()
    where, text = said
    if where == "end":
        expect(f.page.locator("section.end h2")).to_have_text(text)
    elif where == "problem":
        expect(f.page.locator(".review .submit-problem p")).to_have_text(text)
    else:
        expect(f.page.locator('#notices [data-id="%s"]' % text)).to_be_visible()
    assert f.interview.state == "pending"  # only the page was told otherwise


def test_a_page_whose_interview_the_server_no_longer_knows_reads_the_code(form, rich_spec):
    f = form(rich_spec, goto=False)
    f.allow("410")
    f.page.route("**/api/s/*", lambda route: route.fulfill(
        status=410, content_type="application/json",
        body=json.dumps({"error": "reworded, in no language the form knows", "code": "not-found"})))
    f.page.goto(f.url)
    expect(f.page.locator("section.end h2")).to_have_text("This interview is no longer available")


def test_a_live_line_the_server_no_longer_knows_reads_the_code(form, rich_spec):
    f = form(rich_spec, goto=False)
    f.allow("410")
    f.allow("500")
    # The stream fails at once, so the page asks /state, which answers with a status of its own
    # and the code the server gives an interview it does not know.
    f.page.route("**/api/s/*/events", lambda route: route.fulfill(status=500, body=""))
    f.page.route("**/api/s/*/state", lambda route: route.fulfill(
        status=410, content_type="application/json",
        body=json.dumps({"error": "reworded, in no language the form knows", "code": "not-found"})))
    f.page.goto(f.url)
    expect(f.page.locator("section.end h2")).to_have_text("This interview is no longer available")


def test_the_agents_note_is_shown_with_its_follow_up_questions(form, rich_spec):
    f = form(rich_spec)
    f.rt.append_questions(f.interview.id, [choice("n1", "Follow-up", ["a", "b"])], note="Because of **your** answer")
    f.page.wait_for_selector('#rail li[data-qid="n1"]')
    f.press("g")
    expect(f.section("n1").locator(".q-agent-note")).to_contain_text("Because of your answer")
    expect(f.section("db").locator(".q-agent-note")).to_be_hidden()
    # A page opened after the append shows it with the question too.
    f.page.evaluate("localStorage.clear()")
    f.reload()
    f.page.locator("#rail button[data-goto='q:n1']").click()
    expect(f.section("n1").locator(".q-agent-note")).to_contain_text("Because of your answer")


def test_a_server_restart_shows_the_interview_as_expired_and_keeps_the_draft(form, rich_spec, tmp_path):
    import askrich
    from urllib.parse import urlsplit

    f = form(rich_spec)
    f.expect_errors = True  # the browser logs the refused connections and the 404
    f.press("ArrowRight", "2")
    port = urlsplit(f.url).port
    f.rt.close()
    restarted = askrich.Runtime(askrich.Config(log_dir=str(tmp_path / "logs2"), open_browser=False, port=port))
    try:
        restarted.open_interview({"title": "Another", "questions": [choice("z", "Z", ["a"])]})
        expect(f.page.locator("section.end h2")).to_have_text("This interview is no longer available", timeout=10000)
        expect(f.page.locator("section.end")).to_contain_text("draft is still kept")
        draft = f.page.evaluate("JSON.parse(localStorage.getItem(Object.keys(localStorage).find(k => k.startsWith('askrich:draft'))))")
        assert draft["answers"]["db"]["selected"] == ["my"]
    finally:
        restarted.close()
