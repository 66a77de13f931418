"""The form in eleven languages, the agent's own name, and skipping the whole interview
(tests/README.md, "The form's languages"), without a browser."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import askrich
from helpers.support import api_url, choice, form_strings, http_request, interview, submit, wait_for_result

ASSETS = Path(askrich.__file__).resolve().parent / "assets"
I18N = ASSETS / "i18n"

# The cardinal plural categories CLDR gives each language: the ones Intl.PluralRules can pick.
PLURAL_CATEGORIES = {
    "en": {"one", "other"},
    "ja": {"other"},
    "zh-CN": {"other"},
    "zh-TW": {"other"},
    "ko": {"other"},
    "es": {"one", "many", "other"},
    "fr": {"one", "many", "other"},
    "de": {"one", "other"},
    "pt-BR": {"one", "many", "other"},
    "ru": {"one", "few", "many", "other"},
    "ar": {"zero", "one", "two", "few", "many", "other"},
}
PLACEHOLDER = re.compile(r"\{(\w+)\}")
KEY_IN_TEXT = re.compile(r"`([^`]+)`")
SHORTCUT = re.compile(r"\(([A-Z?])\)")


def variants(value) -> list:
    return list(value.values()) if isinstance(value, dict) else [value]


ENGLISH = form_strings("en")
TRANSLATED = [tag for tag in askrich.FORM_LANGUAGES if tag != "en"]


# -- the translation files ---------------------------------------------------------------------


def test_there_is_one_file_per_language_and_every_one_is_served():
    assert sorted(p.stem for p in I18N.glob("*.json")) == sorted(askrich.FORM_LANGUAGES)
    assert set(PLURAL_CATEGORIES) == set(askrich.FORM_LANGUAGES)
    for tag in askrich.FORM_LANGUAGES:
        assert "i18n/%s.json" % tag in askrich.ASSET_FILES


def test_the_form_chooses_among_the_same_languages_the_server_serves():
    source = (ASSETS / "js" / "i18n.js").read_text(encoding="utf-8")
    listed = re.search(r"export const LANGUAGES = \[([^\]]*)\]", source).group(1)
    assert tuple(re.findall(r'"([^"]+)"', listed)) == askrich.FORM_LANGUAGES


@pytest.mark.parametrize("tag", TRANSLATED)
def test_every_language_has_every_english_key_and_no_stray_one(tag):
    theirs = form_strings(tag)
    assert sorted(set(ENGLISH) - set(theirs)) == [], "missing"
    assert sorted(set(theirs) - set(ENGLISH)) == [], "stray"


@pytest.mark.parametrize("tag", TRANSLATED)
def test_every_string_keeps_the_english_placeholders(tag):
    wrong = []
    for key, english in ENGLISH.items():
        want = set(PLACEHOLDER.findall(" ".join(variants(english))))
        value = form_strings(tag)[key]
        # A plural form may leave the number out ("one question" may be written as a word,
        # Arabic's dual never shows it); "other" is the general form and says everything.
        general = value["other"] if isinstance(value, dict) else value
        if set(PLACEHOLDER.findall(general)) != want:
            wrong.append((key, general))
        for text in variants(value):
            if not set(PLACEHOLDER.findall(text)) <= want:
                wrong.append((key, text))
    assert wrong == []


@pytest.mark.parametrize("tag", list(askrich.FORM_LANGUAGES))
def test_plural_strings_have_exactly_the_categories_the_language_needs(tag):
    wrong = []
    for key, english in ENGLISH.items():
        value = form_strings(tag)[key]
        if isinstance(english, dict) != isinstance(value, dict):
            wrong.append((key, "plural in one language and not the other"))
        elif isinstance(value, dict) and set(value) != PLURAL_CATEGORIES[tag]:
            wrong.append((key, sorted(value)))
    assert wrong == []
    assert any(isinstance(v, dict) for v in ENGLISH.values())


@pytest.mark.parametrize("tag", TRANSLATED)
def test_shortcut_keys_stay_the_same_in_every_language(tag):
    wrong = []
    for key, english in ENGLISH.items():
        for theirs in variants(form_strings(tag)[key]):
            en = " ".join(variants(english))
            if tag == "ar":
                # Right to left, the way forward is the left arrow key (keys.js swaps them).
                en, theirs = en.replace("←", "→"), theirs.replace("←", "→")
            if sorted(KEY_IN_TEXT.findall(theirs)) != sorted(KEY_IN_TEXT.findall(en)):
                wrong.append((key, "keys", theirs))
            if sorted(SHORTCUT.findall(theirs)) != sorted(SHORTCUT.findall(en)):
                wrong.append((key, "shortcut", theirs))
    assert wrong == []


# Keys named in words: between backticks by their English name, the same in every file (the key
# pressed does not change), shown as the language's own name, key.<English name>.
NAMED_KEYS = sorted(key[len("key."):] for key in ENGLISH if key.startswith("key."))


def test_every_named_key_is_a_key_the_strings_show():
    shown = {k for value in ENGLISH.values() for text in variants(value) for k in KEY_IN_TEXT.findall(text)}
    assert set(NAMED_KEYS) <= shown
    assert {"Space", "Shift", "Esc", "Enter", "Ctrl", "Home", "End", "Backspace"} <= set(NAMED_KEYS)


@pytest.mark.parametrize("tag", list(askrich.FORM_LANGUAGES))
def test_a_key_has_one_name_in_each_language(tag):
    """Running text names a key as the key table shows it: "Leertaste" in German, never "Space"
    beside it; Esc is never "Escape"."""
    table = form_strings(tag)
    wrong = []
    for name in NAMED_KEYS:
        own = table["key." + name]
        others = ({name, "Escape"} if name == "Esc" else {name}) - {own}
        for key, value in table.items():
            for text in variants(value) if not key.startswith("key.") else []:
                plain = KEY_IN_TEXT.sub(" ", text)
                wrong += [(key, word, own) for word in others if re.search(r"(?<!\w)%s(?!\w)" % word, plain)]
    assert wrong == []


def test_french_punctuation_never_starts_a_line():
    # Before ? ! ; : and inside guillemets French sets a space that must not break.
    plain = [
        (key, text)
        for key, value in form_strings("fr").items()
        for text in variants(value)
        if re.search(r" [?!;:»]|« ", text)
    ]
    assert plain == []


def test_every_word_key_the_form_uses_exists_in_english():
    used = set()
    # i18n.js defines t() and only names keys in its comments.
    for path in [p for p in (ASSETS / "js").glob("*.js") if p.name != "i18n.js"] + [ASSETS / "form.html"]:
        text = path.read_text(encoding="utf-8")
        used.update(re.findall(r"\bt\(\"([\w.-]+)\"", text))
        used.update(re.findall(r"data-i18n(?:-[\w-]+)?=\"([\w.-]+)\"", text))
    assert len(used) > 100
    assert sorted(used - set(ENGLISH)) == []


def test_no_product_is_named_in_the_form_itself():
    named = [
        str(path.relative_to(ASSETS))
        for path in ASSETS.rglob("*")
        if path.suffix in (".js", ".html", ".css", ".json") and "vendor" not in path.parts
        and "Claude" in path.read_text(encoding="utf-8")
    ]
    assert named == []


# -- language on ask_user_rich -----------------------------------------------------------------


def test_language_is_kept_in_the_spec_and_defaults_to_null():
    spec, _ = askrich.validate_interview(interview(language="pt-BR"))
    assert spec["language"] == "pt-BR"
    spec, _ = askrich.validate_interview(interview())
    assert spec["language"] is None


@pytest.mark.parametrize("tag", ["ja", "zh-Hant-TW", "tlh", "x-klingon", "sr-Latn-RS", "EN-us"])
def test_a_well_formed_tag_is_accepted_even_without_a_translation(tag):
    spec, _ = askrich.validate_interview(interview(language=tag))
    assert spec["language"] == tag


@pytest.mark.parametrize("value, fix", [
    ("", 'e.g. "ja" or "pt-BR"'),
    ("  ", 'e.g. "ja" or "pt-BR"'),
    ("Japanese please", 'e.g. "ja" or "pt-BR"'),
    ("日本語", 'e.g. "ja" or "pt-BR"'),
    ("pt_BR", 'use "pt-BR"'),
    (5, 'e.g. "ja" or "pt-BR"'),
    (["ja"], 'e.g. "ja" or "pt-BR"'),
])
def test_a_language_that_is_not_a_tag_is_a_problem_line_with_the_fix(value, fix):
    with pytest.raises(askrich.InvalidInterview) as caught:
        askrich.validate_interview(interview(language=value))
    lines = str(caught.value).splitlines()
    assert lines[0] == "Invalid interview:"
    assert len(lines) == 2 and lines[1].startswith('- language: "language" must be a BCP 47 language tag (')
    assert fix in lines[1] and askrich.describe(value) in lines[1]


def test_the_tool_schema_and_the_instructions_tell_the_model_about_language():
    tool = next(t for t in askrich.TOOLS if t["name"] == "ask_user_rich")
    prop = tool["inputSchema"]["properties"]["language"]
    assert prop["type"] == "string" and "form's own words" in prop["description"]
    # Said in the instructions and in the description: a client may show the model only one.
    assert "Set language to the language the user writes in" in askrich.LANGUAGE_TEXT
    assert askrich.LANGUAGE_TEXT in askrich.SERVER_INSTRUCTIONS and askrich.LANGUAGE_TEXT in tool["description"]
    assert 'status "declined"' in askrich.AFTER_TEXT and "do not proceed as if they agreed" in askrich.AFTER_TEXT
    assert askrich.AFTER_TEXT in tool["description"] and askrich.AFTER_TEXT in askrich.SERVER_INSTRUCTIONS


# -- the agent's name --------------------------------------------------------------------------


@pytest.mark.parametrize("client_info, name", [
    ({"name": "claude-code", "title": "Claude Code", "version": "2.1"}, "Claude Code"),
    ({"name": "claude-code"}, "Claude Code"),
    ({"name": "gemini-cli-mcp-client"}, "Gemini CLI"),
    ({"name": "codex_cli"}, "Codex CLI"),
    ({"name": "Visual Studio Code"}, "Visual Studio Code"),
    ({"name": "x", "title": "  My   Agent  "}, "My Agent"),
    ({"name": "cursor", "title": ""}, "Cursor"),
    ({"name": "mcp-client"}, None),
    ({"name": "", "title": "   "}, None),
    ({"name": 7}, None),
    ({}, None),
    (None, None),
    ("claude-code", None),
])
def test_the_agent_is_named_from_client_info(client_info, name):
    assert askrich.agent_name(client_info) == name


def test_a_long_or_odd_client_name_is_cut_and_cleaned():
    name = askrich.agent_name({"title": "Agent\u0000\u202e" + "x" * 100})
    assert len(name) == askrich.AGENT_NAME_MAX and name.endswith("…")
    assert name.startswith("Agentx") and name.isprintable()


def test_the_form_api_names_the_agent_the_client_gave(server):
    server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "gemini-cli-mcp-client", "version": "1"}})
    server.notify("notifications/initialized")
    reply = server.tool("ask_user_rich", interview(delivery="link", language="ja"))
    url = reply["result"]["structuredContent"]["url"]
    data = http_request(api_url(url)).json()
    assert data["agent"] == "Gemini CLI"
    assert data["spec"]["language"] == "ja"


def test_the_form_api_has_no_agent_when_the_client_gave_no_name(runtime):
    opened = runtime.open_interview(interview())
    assert http_request(api_url(runtime.form_url(opened))).json()["agent"] is None


# -- skipping the whole interview --------------------------------------------------------------


@pytest.fixture
def two_questions(runtime):
    return runtime.open_interview(interview(choice("db", "pg", "my"), choice("ui", "web", "tui"),
                                            title="Storage plan"))


def test_a_declined_submit_keeps_the_answers_and_settles_as_declined_via_browser(runtime, two_questions):
    response = submit(runtime.form_url(two_questions), {"db": {"status": "answer", "selected": ["pg"]}},
                      declined=True, generalNotes="Not now, ask me tomorrow.")
    assert response.status == 200 and response.json()["ok"] is True
    result = wait_for_result(runtime, two_questions.id, timeout=5)
    assert result["status"] == "declined" and result["via"] == "browser"
    assert result["generalNotes"] == "Not now, ask me tomorrow."
    assert result["answers"][0]["selected"] == ["pg"] and result["answers"][0]["status"] == "answered"
    assert result["answers"][1]["status"] == "unanswered"
    first = result["summary"].splitlines()[0]
    assert first == '"Storage plan" declined via browser: 1 answered, 0 deferred, 0 need more info, 1 unanswered.'
    assert 'General notes: "Not now, ask me tomorrow."' in result["summary"]
    assert http_request(api_url(runtime.form_url(two_questions), "state")).json()["state"] == "declined"
    assert http_request(api_url(runtime.form_url(two_questions))).json()["state"] == "declined"


def test_a_declined_interview_takes_no_second_submit(runtime, two_questions):
    assert submit(runtime.form_url(two_questions), {}, declined=True).status == 200
    again = submit(runtime.form_url(two_questions), {})
    assert again.status == 409 and again.json() == {"error": "interview already declined", "code": "not-pending"}


def test_declined_false_is_an_ordinary_submit(runtime, two_questions):
    assert submit(runtime.form_url(two_questions), {}, declined=False).status == 200
    assert wait_for_result(runtime, two_questions.id, timeout=5)["status"] == "submitted"


@pytest.mark.parametrize("value", ["yes", 1, None, {}])
def test_declined_that_is_not_a_boolean_is_refused_and_the_interview_stays_open(runtime, two_questions, value):
    response = submit(runtime.form_url(two_questions), {}, declined=value)
    assert response.status == 422
    assert response.json()["error"].startswith("declined must be true or false, not ")
    assert http_request(api_url(runtime.form_url(two_questions), "state")).json()["state"] == "pending"


def test_a_declined_submit_still_checks_the_answers(runtime, two_questions):
    response = submit(runtime.form_url(two_questions), {"db": {"status": "answer", "selected": ["mongo"]}}, declined=True)
    assert response.status == 422 and 'unknown option id "mongo"' in response.json()["error"]
    assert http_request(api_url(runtime.form_url(two_questions), "state")).json()["state"] == "pending"


def waiting(url, deadline_seconds=10.0):
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if http_request(api_url(url, "state")).json()["waiting"]:
            return True
    return False


def test_the_waiting_call_returns_declined_via_browser(server):
    server.initialize()
    url = server.tool("ask_user_rich", interview(choice("db", "pg", "my"), title="Plan", delivery="link"))[
        "result"]["structuredContent"]["url"]
    session_id = http_request(api_url(url)).json()["id"]
    request = server.request("tools/call", {"name": "await_user_answers", "arguments": {"sessionId": session_id}})
    assert waiting(url), "await_user_answers never started waiting"
    assert submit(url, {"db": {"status": "answer", "selected": ["my"]}}, declined=True,
                  generalNotes="Busy").status == 200
    reply = server.response(request)
    structured = reply["result"]["structuredContent"]
    assert (structured["status"], structured["via"]) == ("declined", "browser")
    assert structured["answers"][0]["selected"] == ["my"] and structured["generalNotes"] == "Busy"
    assert reply["result"]["content"][0]["text"].startswith('"Plan" declined via browser: 1 answered')


def test_korean_particles_after_the_agent_do_not_depend_on_its_last_sound():
    """{agent} is a name the form does not know in advance (or 에이전트): a particle whose form
    depends on the last syllable (이/가, 은/는, 을/를, 과/와, 으로/로, or a raw 이(가)) would be wrong
    for half the names, so only the invariant ones (의, 에서, 에게, 도, 만, …) may follow it."""
    changing = re.compile(r"\{agent\}(?:\(?(?:이|가|은|는|을|를|과|와|으로|로|이랑|랑)(?![가-힣])|\()")
    found = [(key, text) for key, value in form_strings("ko").items() for text in variants(value)
             if changing.search(text)]
    assert found == []
    # The check is not vacuous.
    assert changing.search("{agent}이(가) 추가") and changing.search("{agent}가 추가")
    assert not changing.search("{agent}에서 추가") and not changing.search("{agent}의 메모")


def test_every_language_has_its_footer_position_indicator():
    for tag in askrich.FORM_LANGUAGES:
        value = form_strings(tag)["where.question"]
        assert set(PLACEHOLDER.findall(value)) == {"n", "total"}, tag
        assert " " not in value, "%s: the indicator must not break across lines" % tag


# -- direction isolation -------------------------------------------------------------------------

ISOLATES = re.compile("[\u2066-\u2069]")
# Where a string leaves the page's laid-out text: read out (aria-*), drawn by other code (the
# tab's title, a system notification). Filled there with isolates, it would show them as boxes.
NOT_LAID_OUT = re.compile(
    r"""setAttribute\(\s*["']aria-[\w-]+["']\s*,\s*t\(|document\.title\s*=[^;]*\bt\(|"""
    r"""new Notification\(\s*t\(|\bbody:\s*t\(|"""
    # Laid-out text copied into an attribute brings its isolates along.
    r"""setAttribute\(\s*["']aria-[\w-]+["']\s*,\s*[\w.]+\.textContent\)""")


def test_no_language_file_writes_isolates_itself():
    """t() puts U+2068 … U+2069 around every inserted value; a translation that wrote its own
    would nest them or leave one unclosed."""
    for tag in askrich.FORM_LANGUAGES:
        assert [key for key, value in form_strings(tag).items()
                if any(ISOLATES.search(text) for text in variants(value))] == [], tag


def test_text_that_is_not_laid_out_in_the_page_is_filled_without_isolates():
    found = []
    for path in sorted((ASSETS / "js").glob("*.js")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if NOT_LAID_OUT.search(line):
                found.append("%s:%d: %s" % (path.name, number, line.strip()))
    assert found == [], "use tPlain() there:\n" + "\n".join(found)
    # The check is not vacuous.
    assert NOT_LAID_OUT.search('bar.setAttribute("aria-label", t("attach.progressLabel", { name }));')
    assert NOT_LAID_OUT.search('document.title = count ? `(${count}) ${t("inbox.title")}` : x;')
    assert NOT_LAID_OUT.search('body: t("inbox.notification", { agent })')
    assert not NOT_LAID_OUT.search('bar.setAttribute("aria-label", tPlain("attach.progressLabel"));')
    assert NOT_LAID_OUT.search('box.setAttribute("aria-label", p.textContent);')


# -- where lines may break -----------------------------------------------------------------------

# A plain space where a line must not break: between a number (or {size}) and its unit, before a
# key hint such as "(A)", inside "3 of 12", before an ellipsis, and in French before : ; ? ! »
# and after «. The browser test (tests/browser/test_line_breaks.py) sees a break only where the
# layout happens to put one; this sees every string.
BREAKABLE = [
    ("a size and its unit", re.compile(
        r"(?:\d|\{size\}) (?:MiB|Mio|МиБ|ميبيبايت|KB|MB|B|Ko|Mo|o|КБ|МБ|Б|بايت|كيلوبايت|ميغابايت)(?![A-Za-zА-я])")),
    ("a word and its key hint", re.compile(r"\S \((?:[A-Z0-9?])\)")),
    ("a position and its total", re.compile(r"\{\w+\} \S{1,3} \{total\}")),
    ("an ellipsis", re.compile(r" …")),
]
FRENCH = [("French punctuation", re.compile(r" [:;?!»]|« "))]
# Read out or drawn outside the page (aria-label, a tooltip): not laid out in lines.
UNBROKEN = {"rank.rowLabel", "rank.moved", "rank.dropped", "rank.picked", "rank.cancelled", "rank.stays",
            "progress.value", "view.showAllTitle", "help.buttonTitle"}


def test_no_string_has_a_breakable_space_where_a_line_must_not_break():
    found = []
    for tag in askrich.FORM_LANGUAGES:
        for key, value in form_strings(tag).items():
            if key in UNBROKEN:
                continue
            for what, pattern in BREAKABLE + (FRENCH if tag == "fr" else []):
                for text in variants(value):
                    for m in pattern.finditer(text):
                        found.append("%s %s: %s in %r" % (tag, key, what, m.group()))
    assert found == [], "use U+00A0 (or U+202F in French before ; ? !):\n" + "\n".join(found)
    assert BREAKABLE[0][1].search("1ファイル10 MiBまで") and not BREAKABLE[0][1].search("10\u00a0MiB")
