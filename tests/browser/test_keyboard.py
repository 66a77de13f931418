"""Every row of the keyboard table (the README's keyboard table), proven on the answers the server
receives where a row changes an answer."""
from formkit import FSI, PDI, ROOT, WAIT, answer_of, choice, isolated, wait_for_result


def spec_basic():
    return {
        "title": "Keys",
        "questions": [
            choice("one", "Pick one", ["a", "b", "c"], recommended="b"),
            choice("many", "Pick many", ["x", "y", "z"], multiSelect=True, recommended=["x", "z"]),
            {"id": "rank", "kind": "rank", "header": "Order them",
             "options": [{"id": "p", "label": "P"}, {"id": "q", "label": "Q"}, {"id": "r", "label": "R"}],
             "recommended": ["r", "q", "p"]},
            choice("last", "Last one", ["m", "n"]),
        ],
    }


def test_arrows_and_h_l_move_between_screens(form, rich_spec):
    f = form(rich_spec)
    assert f.screen == "intro"
    f.press("ArrowRight")
    assert f.screen == "q:db"
    f.press("l")
    assert f.screen == "q:order"
    f.press("ArrowLeft")
    assert f.screen == "q:db"
    f.press("h")
    assert f.screen == "intro"
    f.press("ArrowLeft")  # nothing before the first screen
    assert f.screen == "intro"


def test_home_and_end_go_to_first_and_review(form, rich_spec):
    f = form(rich_spec)
    f.press("ArrowRight", "ArrowRight")
    f.press("End")
    assert f.screen == "review"
    f.press("Home")
    assert f.screen == "intro"


def test_enter_picks_the_focused_option_when_nothing_is_picked_then_moves_on(form):
    f = form(spec_basic())
    f.press("ArrowDown")  # into the option list: first option
    f.press("ArrowDown")  # second option, only focused
    assert f.focused("el => el.value") == "b"
    assert not f.option("one", "b").is_checked()
    f.press("Enter")
    assert f.screen == "q:many"
    assert f.option("one", "b").is_checked()
    # With something already picked, Enter only moves on.
    f.press("ArrowLeft")
    f.press("ArrowDown", "ArrowDown")  # focus c while b stays picked
    assert f.focused("el => el.value") == "c"
    f.press("Enter")
    assert f.screen == "q:many"
    result = f.submit_and_collect()
    assert answer_of(result, "one")["selected"] == ["b"]


def test_enter_on_review_submits(form):
    f = form(spec_basic())
    f.press("1")
    f.press("End")
    f.press("Enter")  # open questions: the first submit asks
    assert f.page.locator(".review .confirm").is_visible()
    f.press("Enter")
    f.page.wait_for_selector("section.end")
    result = wait_for_result(f.rt, f.interview.id, timeout=WAIT)
    assert answer_of(result, "one")["selected"] == ["a"]
    assert answer_of(result, "many")["status"] == "unanswered"


def test_ctrl_enter_moves_on_and_submits_while_typing(form):
    f = form(spec_basic())
    f.press("n")
    f.page.keyboard.type("typed note")
    f.press("Control+Enter")
    assert f.screen == "q:many"
    f.press("End")
    f.page.locator("#general-notes").click()
    f.page.keyboard.type("overall")
    f.press("Control+Enter")  # asks first: questions are open
    assert f.page.locator(".review .confirm").is_visible()
    f.page.locator("#general-notes").focus()
    f.press("Meta+Enter")
    f.page.wait_for_selector("section.end")
    result = wait_for_result(f.rt, f.interview.id, timeout=WAIT)
    assert answer_of(result, "one")["notes"] == "typed note"
    assert result["generalNotes"] == "overall"


def test_up_down_k_j_move_between_options_as_one_tab_stop(form):
    f = form(spec_basic())
    f.press("j")
    assert f.focused("el => el.value") == "a"
    f.press("j", "ArrowDown")
    assert f.focused("el => el.value") == "c"
    f.press("k")
    assert f.focused("el => el.value") == "b"
    f.press("ArrowUp")
    assert f.focused("el => el.value") == "a"
    # Moving focus picks nothing.
    assert f.page.locator("section.current .opt-input:checked").count() == 0
    # One Tab stop: Tab leaves the option list at once (to Other's text field).
    f.press("Tab")
    assert f.focused("el => el.className") == "other-text"
    f.press("Shift+Tab")
    assert f.focused("el => el.value") == "a"


def test_space_picks_and_unpicks_the_focused_option(form):
    f = form(spec_basic())
    f.press("ArrowDown", "ArrowDown", "Space")
    assert f.option("one", "b").is_checked()
    f.press("Space")
    assert not f.option("one", "b").is_checked()
    f.press("Space")
    f.press("ArrowRight")
    f.press("ArrowDown", "Space", "ArrowDown", "ArrowDown", "Space")
    assert f.option("many", "x").is_checked() and f.option("many", "z").is_checked()
    f.press("ArrowUp", "ArrowUp", "Space")  # unpick x
    result = f.submit_and_collect()
    assert answer_of(result, "one")["selected"] == ["b"]
    assert answer_of(result, "many")["selected"] == ["z"]


def test_digits_pick_options_by_number(form):
    f = form(spec_basic())
    f.press("3")
    assert f.option("one", "c").is_checked()
    f.press("1")  # single choice: replaces
    assert f.option("one", "a").is_checked() and not f.option("one", "c").is_checked()
    f.press("9")  # no ninth option: nothing happens
    assert f.option("one", "a").is_checked()
    f.press("ArrowRight", "2", "3")
    result = f.submit_and_collect()
    assert answer_of(result, "one")["selected"] == ["a"]
    assert answer_of(result, "many")["selected"] == ["y", "z"]


def test_o_selects_other_and_focuses_its_field(form):
    f = form(spec_basic())
    f.press("2", "o")
    assert f.focused("el => el.className") == "other-text"
    assert f.focused("el => el.value") == ""  # the "o" itself was not typed
    assert not f.option("one", "b").is_checked()  # single choice: Other replaces the pick
    f.page.keyboard.type("Something else")
    result = f.submit_and_collect()
    a = answer_of(result, "one")
    assert a["other"] == "Something else" and a["selected"] == []


def test_r_takes_the_recommendation(form):
    f = form(spec_basic())
    f.press("r", "ArrowRight", "r")
    result = f.submit_and_collect()
    assert answer_of(result, "one")["selected"] == ["b"]
    assert answer_of(result, "one")["followedRecommendation"] is True
    assert answer_of(result, "many")["selected"] == ["x", "z"]


def test_n_focuses_the_note(form):
    f = form(spec_basic())
    f.press("n")
    assert f.focused("el => el.classList.contains('note-text')")
    f.page.keyboard.type("my note")
    f.press("Escape", "ArrowRight")
    result = f.submit_and_collect()
    assert answer_of(result, "one")["notes"] == "my note"


def test_d_and_i_toggle_defer_and_need_more_info(form):
    f = form(spec_basic())
    f.press("1", "d")
    assert f.status("one") == "deferred"
    f.press("d")
    assert f.status("one") == "answered"
    f.press("d", "ArrowRight", "i")
    assert f.status("many") == "needs-info"
    assert f.focused("el => el.classList.contains('note-text')")  # I also focuses the note
    f.page.keyboard.type("Which budget?")
    result = f.submit_and_collect()
    assert answer_of(result, "one")["status"] == "deferred"
    assert answer_of(result, "one")["selected"] == []
    assert answer_of(result, "many")["status"] == "needs-info"
    assert answer_of(result, "many")["notes"] == "Which budget?"


def test_x_and_backspace_clear_the_answer(form):
    f = form(spec_basic())
    f.press("2", "x")
    assert f.status("one") == "open"
    f.press("ArrowRight", "1", "2", "Backspace")
    assert f.status("many") == "open"
    f.press("ArrowLeft", "3")
    result = f.submit_and_collect()
    assert answer_of(result, "one")["selected"] == ["c"]
    assert answer_of(result, "many")["status"] == "unanswered"


def test_a_on_review_accepts_every_open_recommendation_rank_included(form):
    f = form(spec_basic())
    f.press("1", "ArrowRight", "d")  # answered differently, and deferred: both stay
    f.press("a")  # not on the review screen: nothing
    assert f.status("rank") == "open"
    f.press("End", "a")
    for qid in ("one", "many", "rank"):
        assert f.status(qid) in ("answered", "deferred")
    result = f.submit_and_collect()
    assert answer_of(result, "one")["selected"] == ["a"]
    assert answer_of(result, "many")["status"] == "deferred"
    assert answer_of(result, "rank")["ranked"] == ["r", "q", "p"]
    assert answer_of(result, "last")["status"] == "unanswered"  # no recommendation


def test_v_toggles_show_all_and_is_remembered(form):
    f = form(spec_basic())
    f.press("v")
    assert f.page.locator("section.question:visible").count() == 4
    assert f.page.locator("#btn-view").get_attribute("aria-pressed") == "true"
    f.reload()
    assert f.page.locator("section.question:visible").count() == 4
    f.press("v")
    assert f.page.locator("section.question:visible").count() == 1
    f.reload()
    assert f.page.locator("section.question:visible").count() == 1


def test_g_goes_to_the_follow_ups(form):
    f = form(spec_basic())
    f.press("g")  # none yet: stays
    assert f.screen == "q:one"
    f.rt.append_questions(f.interview.id, [choice("extra", "A follow-up", ["u", "v"])], note="One more")
    f.page.wait_for_selector('#rail li[data-qid="extra"]')
    f.press("g")
    assert f.screen == "q:extra"


def test_esc_leaves_a_text_field_so_shortcuts_work_again(form):
    f = form(spec_basic())
    f.press("n")
    f.page.keyboard.type("d")  # typed, not a shortcut
    assert f.status("one") == "open"
    assert f.page.locator("section.current .note-text").input_value() == "d"
    f.press("Escape")
    assert not f.focused("el => el.classList.contains('note-text')")
    f.press("d")
    assert f.status("one") == "deferred"


def test_tab_runs_options_other_mode_note_attach_then_back_next(form):
    f = form(spec_basic())
    f.press("ArrowRight")  # second question, so Back is enabled
    f.press("ArrowDown")
    assert f.focused("el => el.value") == "x"
    order = []
    for _ in range(6):
        f.press("Tab")
        order.append(f.focused("el => el.id.startsWith('btn') ? el.id : el.closest('.mode') ? 'mode:' + el.value : el.className"))
    assert order[0] == "other-text"
    assert order[1] == "mode:answer"
    assert order[2] == "note-text"
    assert "attach-button" in order[3].split()
    assert order[4] == "btn-back" and order[5] == "btn-next"


def test_question_mark_opens_the_keyboard_table(form):
    f = form(spec_basic())
    f.press("?")
    dialog = f.page.locator("#help")
    assert dialog.is_visible()
    assert dialog.locator("tbody tr").count() >= 21
    assert "Keep the order as shown" in dialog.inner_text()
    f.press("d")  # shortcuts are off while the dialog is open
    f.press("Escape")
    assert not dialog.is_visible()
    assert f.status("one") == "open"


def test_ime_composition_never_triggers_shortcuts(form):
    f = form(spec_basic())
    f.press("ArrowDown")  # focus an option: single keys are live here
    fire = """([key, composing, ctrl]) => document.activeElement.dispatchEvent(new KeyboardEvent('keydown',
        {key, isComposing: composing, ctrlKey: ctrl, bubbles: true, cancelable: true}))"""
    f.page.evaluate(fire, ["d", True, False])
    f.page.evaluate(fire, ["2", True, False])
    assert f.status("one") == "open"
    f.page.evaluate(fire, ["d", False, False])  # the same key outside composition does act
    assert f.status("one") == "deferred"
    # In a text field, Esc and Ctrl+Enter that end a composition stay with the IME.
    f.press("n")
    f.page.evaluate(fire, ["Escape", True, False])
    assert f.focused("el => el.classList.contains('note-text')")
    f.page.evaluate(fire, ["Enter", True, True])
    assert f.screen == "q:one"
    # A real composition through Chromium's IME path types text and leaves every shortcut alone.
    cdp = f.context.new_cdp_session(f.page)
    cdp.send("Input.imeSetComposition", {"text": "にほ", "selectionStart": 2, "selectionEnd": 2})
    cdp.send("Input.insertText", {"text": "日本"})
    assert f.page.locator("section.current .note-text").input_value() == "日本"
    assert f.screen == "q:one"


def test_the_question_mark_table_is_the_readme_table(form):
    """The '?' dialog and the README's keyboard table say the same thing."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("| Keys | Action |"):]
    rows = []
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            break
        keys, action = [c.strip().replace("`", "") for c in line.strip("|").split(" | ", 1)]
        rows.append([keys, action])
    f = form(spec_basic())
    f.press("?")
    shown = f.page.locator("#help tbody tr").evaluate_all(
        "trs => trs.map(tr => [tr.cells[0].textContent.trim(), tr.cells[1].textContent.trim()])")
    # The dialog isolates the agent's name it inserts; the README, plain Markdown, cannot show
    # the invisible isolates, and what is compared is the words a reader sees in both.
    assert any(isolated("the agent") in action for _, action in shown)
    assert [[keys, action.replace(FSI, "").replace(PDI, "")] for keys, action in shown] == rows


def test_keys_are_shown_by_the_language_s_own_names_and_still_work(form):
    """German and French name their keys in the '?' table and every hint; the keys themselves
    stay the same."""
    names = {"de": ["Leertaste", "Umschalt", "Esc", "Strg", "Pos1", "Ende", "Rücktaste", "Enter"],
             "fr": ["Espace", "Maj", "Échap", "Ctrl", "Début", "Fin", "Retour arrière", "Entrée"]}
    for tag, shown in names.items():
        f = form(dict(spec_basic(), language=tag))
        f.press("?")
        keys = f.page.locator("#help tbody kbd").all_text_contents()
        assert set(shown) <= set(keys) and not {"Space", "Shift", "Home", "Backspace"} & set(keys), keys
        f.press("Escape", "End")
        assert "Space" not in f.page.locator(".review .hint").inner_text()
        f.press("Home", "ArrowDown", "ArrowDown", "Space")  # the keys pressed are the same
        assert f.option("one", "b").is_checked()
        title = f.section("rank").locator(".rank-move-up").get_attribute("title")
        assert isolated(shown[1] + "+↑") in title, title
