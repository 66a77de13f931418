"""Rank questions: mouse drag, keyboard pick-up/move/drop/cancel, Shift+arrows, digits, C/R/X,
and the rule that nothing is recorded until the user orders something."""
import re

from playwright.sync_api import expect

from formkit import answer_of, isolated


def rank_spec():
    return {
        "title": "Rank",
        "questions": [
            {"id": "goals", "kind": "rank", "header": "Rank the goals", "options": [
                {"id": "a", "label": "Alpha"}, {"id": "b", "label": "Bravo"},
                {"id": "c", "label": "Charlie"}, {"id": "d", "label": "Delta"}],
             "recommended": ["d", "c", "b", "a"]},
        ],
    }


def row(f, opt):
    return f.section("goals").locator(f'.rank-row[data-opt="{opt}"]')


def drag(f, opt, to_opt, below=False):
    page = f.page
    src = row(f, opt).bounding_box()
    dst = row(f, to_opt).bounding_box()
    page.mouse.move(src["x"] + src["width"] / 2, src["y"] + src["height"] / 2)
    page.mouse.down()
    target_y = dst["y"] + (dst["height"] * 0.8 if below else dst["height"] * 0.2)
    page.mouse.move(src["x"] + src["width"] / 2, target_y, steps=12)
    return target_y


def test_mouse_drag_reorders_and_the_other_rows_slide_aside(form):
    f = form(rank_spec())
    drag(f, "a", "c", below=True)
    # Mid-drag: the rows passed over have moved aside to make room.
    shifted = f.section("goals").locator(".rank-row.shifted").evaluate_all("rs => rs.map(r => r.dataset.opt)")
    assert shifted == ["b", "c"]
    f.page.mouse.up()
    assert f.rank_order("goals") == ["b", "c", "a", "d"]
    assert f.status("goals") == "answered"
    drag(f, "d", "b")
    f.page.mouse.up()
    assert f.rank_order("goals") == ["d", "b", "c", "a"]
    result = f.submit_and_collect()
    a = answer_of(result, "goals")
    assert a["status"] == "answered"
    assert a["ranked"] == ["d", "b", "c", "a"]
    assert a["rankedLabels"] == ["Delta", "Bravo", "Charlie", "Alpha"]


def test_a_drag_that_ends_where_it_began_records_nothing(form):
    f = form(rank_spec())
    box = row(f, "b").bounding_box()
    f.page.mouse.move(box["x"] + 40, box["y"] + box["height"] / 2)
    f.page.mouse.down()
    f.page.mouse.move(box["x"] + 40, box["y"] + box["height"] / 2 + 8, steps=3)
    f.page.mouse.up()
    assert f.rank_order("goals") == ["a", "b", "c", "d"]
    assert f.status("goals") == "open"
    result = f.submit_and_collect()
    assert answer_of(result, "goals")["status"] == "unanswered"
    assert answer_of(result, "goals")["ranked"] is None


def test_keyboard_pick_up_move_and_drop(form):
    f = form(rank_spec())
    f.press("ArrowDown")  # focus the first row
    assert f.focused("el => el.dataset.opt") == "a"
    f.press("Space", "ArrowDown", "ArrowDown")
    assert f.rank_order("goals") == ["b", "c", "a", "d"]
    assert f.status("goals") == "open"  # still held: nothing recorded yet
    # Announcements made within one frame are read as one, and a loaded machine may deliver the
    # pick-up and both arrows in one: whatever was coalesced, the last one is the row's new place.
    alpha = re.escape(isolated("Alpha"))
    expect(f.page.locator("#announcer")).to_have_text(re.compile(r"^(.+\. )?%s: position 3 of 4\.$" % alpha))
    f.press("Space")
    assert f.status("goals") == "answered"
    assert f.focused("el => el.dataset.opt") == "a"
    f.press("ArrowUp")  # not held: moves focus only
    assert f.focused("el => el.dataset.opt") == "c"
    f.press("Space", "ArrowUp", "Enter")  # Enter drops too
    assert f.rank_order("goals") == ["c", "b", "a", "d"]
    result = f.submit_and_collect()
    assert answer_of(result, "goals")["ranked"] == ["c", "b", "a", "d"]


def test_escape_cancels_a_move_and_restores_the_order(form):
    f = form(rank_spec())
    f.press("ArrowDown", "ArrowDown")  # focus b
    f.press("Space", "ArrowDown", "ArrowDown")
    assert f.rank_order("goals") == ["a", "c", "d", "b"]
    f.press("Escape")
    assert f.rank_order("goals") == ["a", "b", "c", "d"]
    assert f.status("goals") == "open"
    assert f.focused("el => el.dataset.opt") == "b"


def test_shift_arrows_move_directly_and_digits_send_to_a_position(form):
    f = form(rank_spec())
    f.press("ArrowDown")
    f.press("Shift+ArrowDown")
    assert f.rank_order("goals") == ["b", "a", "c", "d"]
    assert f.status("goals") == "answered"
    f.press("4")  # a to the last position
    assert f.rank_order("goals") == ["b", "c", "d", "a"]
    f.press("Shift+ArrowUp")
    assert f.rank_order("goals") == ["b", "c", "a", "d"]
    result = f.submit_and_collect()
    assert answer_of(result, "goals")["ranked"] == ["b", "c", "a", "d"]


def test_c_keeps_the_order_shown(form):
    f = form(rank_spec())
    assert f.status("goals") == "open"
    f.press("c")
    assert f.status("goals") == "answered"
    result = f.submit_and_collect()
    a = answer_of(result, "goals")
    assert a["ranked"] == ["a", "b", "c", "d"]
    assert a["followedRecommendation"] is False


def test_r_applies_the_recommended_order_and_x_resets(form):
    f = form(rank_spec())
    f.press("r")
    assert f.rank_order("goals") == ["d", "c", "b", "a"]
    assert f.status("goals") == "answered"
    f.press("x")
    assert f.rank_order("goals") == ["a", "b", "c", "d"]
    assert f.status("goals") == "open"
    f.press("r")
    result = f.submit_and_collect()
    a = answer_of(result, "goals")
    assert a["ranked"] == ["d", "c", "b", "a"]
    assert a["followedRecommendation"] is True


def test_moves_are_announced_and_rows_carry_their_position(form):
    f = form(rank_spec())
    f.press("ArrowDown", "Shift+ArrowDown")
    expect(f.page.locator("#announcer")).to_have_text(isolated("Alpha") + ": position 2 of 4.")
    assert row(f, "a").get_attribute("aria-label") == "Alpha, position 2 of 4"
    assert f.section("goals").locator("[role=listbox]").count() == 1
    assert f.section("goals").locator("[role=option]").count() == 4


def test_move_buttons_reorder_the_selected_row(form):
    f = form(rank_spec())
    row(f, "c").click()
    f.section("goals").locator(".rank-move-up").click()
    assert f.rank_order("goals") == ["a", "c", "b", "d"]
    f.section("goals").locator(".rank-move-up").click()
    assert f.rank_order("goals") == ["c", "a", "b", "d"]
    assert f.status("goals") == "answered"


def touch_drag(f, start, end, steps=10):
    cdp = f.context.new_cdp_session(f.page)
    (x0, y0), (x1, y1) = start, end
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x0, "y": y0}]})
    for i in range(1, steps + 1):
        point = {"x": x0 + (x1 - x0) * i / steps, "y": y0 + (y1 - y0) * i / steps}
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [point]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def test_on_a_phone_the_grip_drags_a_row(form):
    from formkit import PHONE

    f = form(rank_spec(), viewport=PHONE, has_touch=True)
    # A swipe on the row itself scrolls the page and moves nothing.
    label = row(f, "b").locator(".rank-label").bounding_box()
    touch_drag(f, (label["x"] + 5, label["y"] + 5), (label["x"] + 5, label["y"] + 120))
    assert f.rank_order("goals") == ["a", "b", "c", "d"]
    assert f.status("goals") == "open"
    grip = row(f, "a").locator(".rank-grip").bounding_box()
    target = row(f, "c").bounding_box()
    touch_drag(f, (grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2),
               (grip["x"] + grip["width"] / 2, target["y"] + target["height"] * 0.8))
    expect(f.page.locator('section.current .rank-list')).to_have_class("rank-list committed")
    assert f.rank_order("goals") == ["b", "c", "a", "d"]
