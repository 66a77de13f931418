"""The form in the user's language: every language's chrome with no English left and nothing
cut off at 360 px, right to left for Arabic, axe in ja and ar, how the language is chosen; the
agent's own name; skipping the interview; unseen follow-ups in the tab title."""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from formkit import PHONE, WJ, answer_of, follow_up, isolated, wait_for_result
from helpers.support import WAIT, form_strings
from test_screens import clipped, serious_violations

LANGUAGES = ["en", "ja", "zh-CN", "zh-TW", "ko", "es", "fr", "de", "pt-BR", "ru", "ar"]
WORD = re.compile(r"[A-Za-z]{3,}")


def words(table, keys_too):
    """The Latin-letter words of a language's strings, without {placeholders}; with or without
    the `keys` (key names such as Enter are the same in every language)."""
    found = set()
    for value in table.values():
        for text in value.values() if isinstance(value, dict) else [value]:
            text = re.sub(r"\{\w+\}", " ", text)
            if not keys_too:
                text = re.sub(r"`[^`]*`", " ", text)
            found.update(w.lower() for w in WORD.findall(text))
    return found


def english_in(tag, text):
    """The words of `text` that only English's strings use, not the language's own: English left
    in the chrome."""
    english = words(form_strings("en"), keys_too=False) - words(form_strings(tag), keys_too=True)
    return {w for w in WORD.findall(text) if w.lower() in english}


# An interview whose own words have no Latin letters, so every English word on the page is the
# form's. Every screen kind, a required option text, a recommendation and a dependsOn link.
NEUTRAL = {
    "title": "Ωμέγα 42",
    "intro": "Δέλτα **ε**",
    "questions": [
        {"id": "q1", "header": "Άλφα;", "body": "β γ", "options": [
            {"id": "a", "label": "Α1", "description": "ζ", "textInput": {"required": True}},
            {"id": "b", "label": "Β2"}], "recommended": "b", "rationale": "η θ"},
        {"id": "r", "kind": "rank", "header": "Ρο;", "dependsOn": ["q1"], "options": [
            {"id": "x", "label": "Χι"}, {"id": "y", "label": "Ψι"}, {"id": "z", "label": "Ζήτα"}],
         "recommended": ["y", "x", "z"]},
        {"id": "m", "header": "Μι;", "multiSelect": True, "options": [
            {"id": "c", "label": "Γ3"}, {"id": "d", "label": "Δ4"}], "recommended": ["c"]},
        {"id": "f", "header": "Φι;", "options": []},
    ],
}

CHROME_TEXT = """(() => {
  const out = [document.body.innerText];
  for (const el of document.querySelectorAll('[aria-label], [title], [placeholder], [aria-valuetext]')) {
    if (el.closest('template') || !el.getClientRects().length) continue;
    for (const a of ['aria-label', 'title', 'placeholder', 'aria-valuetext']) {
      if (el.hasAttribute(a)) out.push(el.getAttribute(a));
    }
  }
  out.push(document.getElementById('announcer').textContent);
  return out.join('\\n');
})()"""


def spec_in(tag, **extra):
    return json.loads(json.dumps(dict(NEUTRAL, language=tag, **extra)))


class Tour:
    """Walks one page through every screen, dialog and message, keeping what the page said."""

    def __init__(self, f):
        self.f = f
        self.seen = []
        self.overflow = []

    def look(self, where):
        page = self.f.page
        self.f.settle()
        self.seen.append((where, page.evaluate(CHROME_TEXT)))
        box = clipped(page)
        if box["scrollWidth"] > box["vw"] or box["out"]:
            self.overflow.append((where, box))

    def next(self):
        self.f.page.locator("#btn-next").click()

    def run(self):
        f, page = self.f, self.f.page
        self.look("intro")
        self.next()
        f.option("q1", "a").check()
        self.look("question with a required text")
        self.next()
        f.section("r").locator(".rank-keep").click()
        self.look("rank")
        self.next()
        self.look("multi-select")
        self.next()
        self.look("free text")
        self.next()
        page.locator("#btn-submit").click()
        self.look("review, a text missing")
        page.locator(".review .submit-problem button").click()
        f.option("q1", "b").check()
        f.press("End")
        page.locator("#btn-accept-all").click()
        page.locator("#btn-submit").click()
        self.look("review, asking to confirm")
        page.locator("#btn-help").click()
        self.look("the ? table")
        page.locator("#help-close").click()
        page.locator("#btn-theme").click()
        self.look("theme changed")
        page.locator("#btn-view").click()
        self.look("show all")
        page.locator("#btn-view").click()
        f.rt.append_questions(f.interview.id, [{"id": "late", "header": "Λάμδα;", "options": [
            {"id": "y", "label": "Ναι"}, {"id": "n", "label": "Όχι"}]}], note="Ξι")
        page.wait_for_selector('#notices [data-id="follow-ups"]')
        self.look("follow-up notice")
        page.locator('#notices [data-id="follow-ups"] .btn:not(.notice-close)').click()
        self.look("follow-up question")
        page.locator("#btn-skip-bar").click()
        self.look("skip dialog")
        page.locator("#skip-confirm").click()
        page.wait_for_selector("section.end")
        self.look("skipped")


@pytest.mark.parametrize("tag", LANGUAGES)
def test_every_language_says_everything_in_its_own_words_and_fits_a_phone(form, tag, shot):
    f = form(spec_in(tag), viewport=PHONE)
    assert f.page.evaluate("[document.documentElement.lang, document.documentElement.dir]") == [
        tag, "rtl" if tag == "ar" else "ltr"]
    tour = Tour(f)
    tour.run()
    shot(f.page, f"i18n-{tag}-skipped-phone")
    assert tour.overflow == []
    if tag != "en":
        left = [(where, sorted(english_in(tag, text))) for where, text in tour.seen]
        assert [item for item in left if item[1]] == []
    result = wait_for_result(f.rt, f.interview.id, timeout=WAIT)
    assert result["status"] == "declined"


def test_the_english_check_finds_english_left_in_the_chrome(form):
    """The check above is not vacuous: a page in German with one English string is caught."""
    f = form(spec_in("de"))
    assert english_in("de", f.page.evaluate(CHROME_TEXT)) == set()
    f.page.evaluate("document.querySelector('#btn-back span:last-child').textContent = 'Previous screen'")
    assert english_in("de", f.page.evaluate(CHROME_TEXT)) == {"Previous", "screen"}


@pytest.mark.parametrize("tag, locale", [("ja", "ja-JP"), ("ar", "ar-EG"), ("ru", "ru-RU")])
def test_the_end_pages_and_the_server_gone_notice_are_in_the_language(form, tag, locale):
    f = form(spec_in(tag), goto=False, locale=locale)
    f.expect_errors = True  # the browser logs the refused and failed requests itself
    said = {}
    # Expired: the page cannot read the interview's language, so the browser's is used.
    f.pretend_state("expired")
    f.page.goto(f.url)
    f.page.wait_for_selector("section.end")
    said["expired"] = f.page.evaluate(CHROME_TEXT)
    f.pretend_state("cancelled")
    f.page.reload()
    f.page.wait_for_selector("section.end")
    said["cancelled"] = f.page.evaluate(CHROME_TEXT)
    f.page.unroute("**/api/s/*")
    f.reload()
    f.rt.close()
    expect(f.page.locator('#notices [data-id="gone"]')).to_be_visible()
    said["server gone"] = f.page.evaluate(CHROME_TEXT)
    assert f.page.evaluate("document.documentElement.lang") == tag
    assert {where: english_in(tag, text) for where, text in said.items()} == {where: set() for where in said}


def test_arabic_runs_right_to_left_with_the_same_stylesheet(form):
    f = form(spec_in("ar"))
    page = f.page
    assert page.evaluate("document.documentElement.dir") == "rtl"
    assert page.evaluate("document.styleSheets.length") == 1
    page.locator("#btn-next").click()
    f.settle()
    back = page.locator("#btn-back").bounding_box()
    nxt = page.locator("#btn-next").bounding_box()
    assert nxt["x"] < back["x"], "the way forward is to the left"
    # The recommendation's bar and an option's number sit on the right, where lines start.
    rec = page.locator("section.current .rec")
    assert rec.evaluate("el => getComputedStyle(el).borderRightWidth") == "4px"
    assert rec.evaluate("el => getComputedStyle(el).borderLeftWidth") == "0px"
    row = page.locator("section.current li.opt").first.bounding_box()
    num = page.locator("section.current li.opt .opt-num").first.bounding_box()
    assert num["x"] > row["x"] + row["width"] / 2
    # The forward arrow points left, and the left arrow key goes forward.
    arrow = page.locator("#btn-next .arrow")
    assert "matrix(-1" in arrow.evaluate("el => getComputedStyle(el).transform")
    f.press("ArrowLeft")
    expect(page.locator("section.current")).to_have_attribute("data-qid", "r")
    f.press("ArrowRight")
    expect(page.locator("section.current")).to_have_attribute("data-qid", "q1")


@pytest.mark.parametrize("tag", ["ja", "ar"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violations_in_japanese_and_arabic(form, tag, scheme):
    f = form(spec_in(tag), color_scheme=scheme)
    page = f.page
    found = {}
    for where, keys in [("intro", []), ("question", ["next"]), ("rank", ["next"]),
                        ("review", ["end"]), ("help", ["help"]), ("skip", ["skip"])]:
        for key in keys:
            if key == "next":
                page.locator("#btn-next").click()
            elif key == "end":
                f.press("End")
            elif key == "help":
                page.locator("#btn-help").click()
            elif key == "skip":
                page.locator("#help-close").click()
                page.locator("#btn-skip").click()
        f.settle()
        found[where] = serious_violations(page)
    assert found == {where: [] for where in found}


@pytest.mark.parametrize("locale, lang", [("de-DE", "de"), ("pt-PT", "pt-BR"), ("zh-HK", "zh-TW"),
                                          ("sv-SE", "en")])
def test_without_a_language_the_browser_language_is_used(form, locale, lang):
    f = form(dict(NEUTRAL), locale=locale)
    assert f.page.evaluate("document.documentElement.lang") == lang
    if lang != "en":
        assert f.page.locator("#btn-next").inner_text() != "Next →"


@pytest.mark.parametrize("asked, locale, lang", [
    ("pt", None, "pt-BR"), ("zh-Hant", None, "zh-TW"), ("zh-SG", None, "zh-CN"), ("ZH-cn", None, "zh-CN"),
    ("ja-JP", None, "ja"), ("es-419", None, "es"), ("AR", None, "ar"), ("fr-CA", "de-DE", "fr"),
    ("tlh", None, "en"), ("tlh", "ko-KR", "ko"), ("x-klingon", "ru-RU", "ru"),
])
def test_the_call_language_is_matched_best_and_an_unknown_one_falls_back(form, asked, locale, lang):
    f = form(spec_in(asked), locale=locale)
    assert f.page.evaluate("document.documentElement.lang") == lang
    assert f.page.locator("#help-rows tr").count() > 10


def test_language_matching_covers_scripts_regions_and_the_browser_list(form):
    f = form(spec_in("en"))
    got = f.page.evaluate("""(async () => {
        const m = await import('/assets/js/i18n.js');
        const tags = ['zh', 'zh-Hans', 'zh-Hans-CN', 'zh-SG', 'zh-Hant', 'zh-Hant-HK', 'zh-MO', 'zh-TW',
                      'pt', 'pt-PT', 'pt-br', 'de-AT', 'en-GB', 'ko-KR', 'ru-UA', 'nl', '', 'e'];
        return {one: Object.fromEntries(tags.map((t) => [t, m.matchLanguage(t)])),
                list: m.chooseLanguage(null, ['nl-NL', 'fr-BE', 'de']),
                none: m.chooseLanguage('nl', ['sv', 'da'])};
    })()""")
    assert got["one"] == {
        "zh": "zh-CN", "zh-Hans": "zh-CN", "zh-Hans-CN": "zh-CN", "zh-SG": "zh-CN", "zh-Hant": "zh-TW",
        "zh-Hant-HK": "zh-TW", "zh-MO": "zh-TW", "zh-TW": "zh-TW", "pt": "pt-BR", "pt-PT": "pt-BR",
        "pt-br": "pt-BR", "de-AT": "de", "en-GB": "en", "ko-KR": "ko", "ru-UA": "ru", "nl": None, "": None,
        "e": None,
    }
    assert got["list"] == "fr" and got["none"] == "en"


def test_a_missing_string_falls_back_to_english_and_never_breaks_the_page(form):
    f = form(spec_in("de"), goto=False)
    f.context.route("**/assets/i18n/de.json", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps({"nav.next": "Weiter"})))
    f.goto()
    assert f.page.locator("#btn-next").inner_text() == "Weiter →"
    assert f.page.locator("#btn-back").inner_text() == "← Back"
    assert f.page.evaluate("document.documentElement.lang") == "de"


# -- the agent's name --------------------------------------------------------------------------


def test_follow_up_notices_name_the_agent_the_client_gave(form, rich_spec):
    f = form(rich_spec, agent="Gemini CLI")
    follow_up(f)
    notices = f.page.locator("#notices")
    expect(notices).to_contain_text(isolated("Gemini CLI") + " added 1 follow-up question.")
    f.press("g")
    expect(f.section("late0").locator(".q-agent-note-head")).to_have_text(
        isolated("Gemini CLI") + " added this note to the follow-up questions:")
    assert "Claude" not in f.page.evaluate(CHROME_TEXT)
    f.press("?")
    expect(f.page.locator("#help")).to_contain_text("Go to the follow-up questions %s just added" % isolated("Gemini CLI"))


@pytest.mark.parametrize("tag, said", [
    ("en", isolated("The agent") + " added 2 follow-up questions."),
    ("de", isolated("Der Agent") + " hat 2 Folgefragen hinzugefügt."),
    ("ja", isolated("エージェント") + WJ + "から追加の質問が2問届きました。"),
    ("ar", "أضاف %s سؤالَي متابعة." % isolated("الوكيل")),
])
def test_a_client_without_a_name_is_called_the_agent_in_the_language(form, tag, said):
    f = form(dict(NEUTRAL, language=tag))
    follow_up(f, 2)
    expect(f.page.locator('#notices [data-id="follow-ups"] > p')).to_have_text(said)
    assert "Claude" not in f.page.evaluate(CHROME_TEXT)


# -- attention ---------------------------------------------------------------------------------


def test_unseen_follow_ups_lead_the_tab_title_until_shown(form, rich_spec):
    f = form(rich_spec)
    plain = f.page.title()
    assert plain == "Planning round · Ask User Rich"
    follow_up(f, 2)
    expect(f.page).to_have_title(f"(2) {plain}")
    f.press("g")
    expect(f.page).to_have_title(f"(1) {plain}")
    f.press("ArrowRight")
    expect(f.page).to_have_title(plain)
    f.reload()
    assert f.page.title() == plain


# -- skipping the interview --------------------------------------------------------------------


def test_skipping_sends_the_reason_keeps_the_answers_and_the_waiting_call_gets_declined(form, rich_spec):
    f = form(rich_spec)
    waiting = f.waiting_call()
    f.press("ArrowRight", "1", "ArrowRight", "ArrowRight", "ArrowRight", "1")  # src: "Upgrade", text left empty
    f.press("End")
    f.page.locator("#general-notes").fill("We use Postgres already.")
    f.page.locator("#btn-skip").click()
    dialog = f.page.locator("#skip")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(isolated("The agent") + " will be told that you chose not to answer for now.")
    f.page.locator("#skip-cancel").click()
    expect(dialog).to_be_hidden()
    assert f.screen == "review" and f.rt.hub.get(f.interview.id).state == "pending"
    f.page.locator("#btn-skip").click()
    f.page.locator("#skip-reason").fill("  Ask me after the release.  ")
    f.page.locator("#skip-confirm").click()
    expect(f.page.locator("section.end h2")).to_have_text("Interview skipped")
    result = waiting()
    assert (result["status"], result["via"]) == ("declined", "browser")
    assert result["generalNotes"] == "We use Postgres already.\n\nAsk me after the release."
    assert answer_of(result, "db")["selected"] == ["pg"]
    # A pick whose required text was still empty is left out rather than blocking the skip.
    assert answer_of(result, "src")["status"] == "unanswered"
    assert result["summary"].startswith('"Planning round" declined via browser: 1 answered, 0 deferred,')
    assert f.page.evaluate(f"localStorage.getItem('askrich:draft:{f.interview.id}')") is None


def test_the_header_offers_the_skip_on_phones_only(form, rich_spec):
    f = form(rich_spec)
    expect(f.page.locator("#btn-skip-bar")).to_be_hidden()
    phone = form(rich_spec, viewport=PHONE)
    expect(phone.page.locator("#btn-skip-bar")).to_be_visible()
    phone.page.locator("#btn-skip-bar").click()
    phone.page.locator("#skip-confirm").click()
    expect(phone.page.locator("section.end h2")).to_have_text("Interview skipped")
    assert wait_for_result(phone.rt, phone.interview.id, timeout=WAIT)["generalNotes"] is None
    expect(phone.page.locator("#btn-skip-bar")).to_be_hidden()


def test_a_second_tab_sees_the_interview_skipped(form, rich_spec):
    f = form(rich_spec)
    other = f.context.new_page()
    other.goto(f.url)
    other.wait_for_selector("body.ready")
    f.press("End")
    f.page.locator("#btn-skip").click()
    f.page.locator("#skip-confirm").click()
    expect(other.locator("section.end h2")).to_have_text("This interview was skipped")


def test_the_browser_plural_rules_need_exactly_the_categories_the_files_have(form):
    from form.test_i18n import PLURAL_CATEGORIES

    f = form(spec_in("en"))
    found = f.page.evaluate("""(tags) => Object.fromEntries(tags.map((t) =>
        [t, new Intl.PluralRules(t).resolvedOptions().pluralCategories]))""", LANGUAGES)
    assert {tag: set(cats) for tag, cats in found.items()} == PLURAL_CATEGORIES


# -- the footer ----------------------------------------------------------

@pytest.mark.parametrize("tag", LANGUAGES)
def test_the_footer_position_indicator_comes_from_the_language_file(form, tag):
    f = form(dict(NEUTRAL, language=tag), viewport=PHONE)
    f.page.locator("#btn-next").click()
    f.settle()
    want = form_strings(tag)["where.question"].replace("{n}", "1").replace("{total}", "4")
    expect(f.page.locator("#where")).to_have_text(want)
    # It is one unbreakable group: the number, the word or slash and the total never part.
    assert " " not in want.replace("\u00a0", "")


# -- the phone header ------------------------------------------------------

TOOL_ROWS = """() => {
  const tops = [...document.querySelectorAll('#bar .tools .tool')]
    .filter((el) => el.offsetParent !== null)
    .map((el) => Math.round(el.getBoundingClientRect().top));
  return new Set(tops).size;
}"""


HEADER_HEIGHT = "() => Math.round(document.querySelector('#bar .bar-top').getBoundingClientRect().height)"


def header_heights(f) -> list:
    """The header's height at each of the two views."""
    heights = []
    for _ in range(2):
        heights.append(f.page.evaluate(HEADER_HEIGHT))
        f.page.locator("#btn-view").click()
    return heights


@pytest.mark.parametrize("tag", ["de", "fr", "ru"])
def test_the_phone_header_is_as_tall_as_in_english(form, tag):
    # The title and the tools take the rows they take in English (113 px): a longer word for a
    # tool, as in these three, must not push Skip (or any tool) onto a row of its own (141 px).
    english = header_heights(form(spec_in("en"), viewport=PHONE))
    assert header_heights(form(spec_in(tag), viewport=PHONE)) == english, tag


@pytest.mark.parametrize("tag", LANGUAGES)
def test_the_phone_header_keeps_its_tools_on_one_row_in_every_state(form, tag):
    # The header is the title and one row of tools: with a long word for a theme or a view the
    # Skip button used to drop to a row of its own, taking a fifth of a phone's screen.
    f = form(spec_in(tag), viewport=PHONE)
    expect(f.page.locator("#btn-skip-bar")).to_be_visible()
    for view in range(2):
        for theme in range(3):
            assert f.page.evaluate(TOOL_ROWS) == 1, (tag, view, theme)
            f.page.locator("#btn-theme").click()
        f.page.locator("#btn-view").click()
    # The symbol stands in for the words on screen only: the button is still named by them.
    name = f.page.locator("#btn-theme").evaluate("(el) => el.textContent")
    assert name == form_strings(tag)["theme.auto"]
