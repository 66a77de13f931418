"""Interviews over 50 questions take the form's large-interview paths (question screens built on
first need, a review list that keeps only the rows near the viewport in the DOM). The user must
not notice: every row is reachable, jumps back, and every answer reaches the server."""

from __future__ import annotations

from formkit import answer_of, choice

COUNT = 120


def long_spec():
    return {
        "title": "A long interview",
        "questions": [
            choice("q%03d" % i, "Question number %d?" % i, ["yes", "no"], recommended="yes")
            for i in range(COUNT)
        ],
    }


def test_the_review_of_a_long_interview_reaches_every_row_and_jumps_back(form):
    f = form(long_spec())
    f.press("End")
    f.settle()
    assert f.screen == "review"
    rows = f.page.locator("#main > .review .review-row")
    # Only a window of rows is in the DOM, yet each announces its place in the whole list.
    assert 0 < rows.count() < COUNT
    assert rows.first.get_attribute("aria-setsize") == str(COUNT)
    # Scrolling to the bottom brings the last question's row in, and a click jumps to it.
    f.page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    last = f.page.locator('#main > .review .review-jump[data-goto="q:q%03d"]' % (COUNT - 1))
    last.wait_for(state="attached")
    last.click()
    f.settle()
    assert f.screen == "q:q%03d" % (COUNT - 1)
    f.check_clean()


def test_accepting_every_recommendation_on_a_long_review_reaches_the_server(form):
    f = form(long_spec())
    f.press("2")  # q000, the first screen: the user picks "no" themselves
    f.press("End")
    f.settle()
    f.press("a")  # accept every recommendation still unanswered
    result = f.submit_and_collect()
    assert result["counts"]["answered"] == COUNT
    assert answer_of(result, "q000")["selected"] == ["no"]
    assert answer_of(result, "q%03d" % (COUNT - 1))["selected"] == ["yes"]
    assert all(answer_of(result, "q%03d" % i)["followedRecommendation"] for i in range(1, COUNT))
    f.check_clean()


def test_the_rail_shows_the_current_chip_after_a_jump_across_a_long_interview(form):
    """Chips out of view are not drawn (content-visibility), so the rail's scroll to a far chip
    lands on placeholder widths; the chip must still end up in view once they are drawn."""
    f = form(long_spec())
    f.page.set_viewport_size({"width": 700, "height": 700})
    in_view = """() => {
        const rail = document.querySelector('#rail').getBoundingClientRect();
        const chip = document.querySelector('#rail [aria-current]').getBoundingClientRect();
        return chip.left >= rail.left && chip.right <= rail.right;
    }"""
    for key, current in (("End", "review"), ("Home", "q:q000"), ("End", "review")):
        f.press(key)
        f.settle()
        f.page.wait_for_function(in_view)
        assert f.page.evaluate("document.querySelector('#rail [aria-current]').dataset.goto") == current
    f.check_clean()
