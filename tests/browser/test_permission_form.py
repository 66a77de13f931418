"""The page of a permission ask (`askrich.py hook permission-request`, tests/README.md "Permission
asks"): what the agent wants to do, shown exactly (a command in a code block, an edit as a diff,
a URL) with the choices in the person's language, at 360 px, light and dark, left to right and
right to left; a click on a choice is the answer; the page of an ask answered in the terminal
first says so; and the inbox's row says what the agent wants to run."""

from __future__ import annotations

import askrich
import pytest
from formkit import PHONE
from playwright.sync_api import expect
from test_inbox_page import inbox_page, inbox_rt  # noqa: F401  (fixtures)

FOLDER = "/home/dev/shop"
SUGGESTIONS = [{"type": "addDirectories", "directories": [FOLDER], "destination": "session"},
               {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
ASKS = {
    "command": ("Bash", {"command": "npm test -- --reporter=dot && git push origin HEAD:refs/heads/" + "x" * 60,
                         "description": "Run the tests, then push"}),
    "edit": ("Edit", {"file_path": FOLDER + "/src/cart.py", "old_string": "total = 0\nfor item in cart:",
                      "new_string": "total = Decimal(0)\nfor item in cart:"}),
    "url": ("WebFetch", {"url": "https://docs.example.com/api/v2/orders?expand=items", "prompt": "List the fields"}),
}
# What each language calls the ask's header and its choices (assets/i18n/<tag>.json).
WORDS = {
    "en": {"command": "wants to run a command", "edit": "wants to edit a file", "url": "wants to fetch a web page",
           "options": ["Allow once", "Allow, and allow this folder", "Allow, and accept edits for this session",
                       "Deny"]},
    "ar": {"command": "تشغيل أمر", "edit": "تعديل ملف", "url": "جلب صفحة ويب",
           "options": ["السماح مرة واحدة", "السماح، والسماح بهذا المجلد", "السماح، وقبول التعديلات طوال هذه الجلسة",
                       "الرفض"]},
}
SHOWN = {"command": "npm test -- --reporter=dot", "edit": "+total = Decimal(0)", "url": "https://docs.example.com/api/v2/orders"}


def permission_ask(what):
    """(ask_user_rich arguments, internal options) of the hook's ask for ASKS[what]."""
    tool, tool_input = ASKS[what]
    payload = {"hook_event_name": "PermissionRequest", "tool_name": tool, "tool_input": tool_input, "cwd": FOLDER,
               "transcript_path": "/tmp/none.jsonl", "permission_suggestions": SUGGESTIONS}
    return askrich.permission_interview(askrich.PermissionRequest(payload))


def ask(form, what, locale, color_scheme="light"):
    arguments, internal = permission_ask(what)
    return form(arguments, internal=internal, agent="Claude Code", viewport=PHONE, locale=locale,
                color_scheme=color_scheme)


@pytest.mark.parametrize("what", sorted(ASKS))
@pytest.mark.parametrize("tag, locale, scheme", [("en", "en-US", "light"), ("ar", "ar-EG", "dark")])
def test_the_ask_shows_exactly_what_will_happen_in_the_persons_language_on_a_phone(form, shot, what, tag, locale,
                                                                                    scheme):
    f = ask(form, what, locale, scheme)
    page, words = f.page, WORDS[tag]
    assert page.evaluate("[document.documentElement.lang, document.documentElement.dir]") == [
        tag, "rtl" if tag == "ar" else "ltr"]
    question = f.section("permission")
    expect(question).to_be_visible()
    expect(question.locator(".q-header")).to_contain_text(words[what])
    expect(question.locator(".q-header")).to_contain_text("Claude Code")
    # Exactly what will happen, as code (left to right even in an Arabic page), and the folder.
    code = question.locator("pre code", has_text=SHOWN[what])
    expect(code).to_have_count(1)
    assert code.evaluate("el => getComputedStyle(el).direction") == "ltr"
    expect(question.locator("pre code").last).to_have_text(FOLDER)
    labels = question.locator("li.opt .opt-label").all_inner_texts()
    assert [label.replace("\u2068", "").replace("\u2069", "") for label in labels] == words["options"]
    # Nothing wider than the phone (a long line scrolls inside its own code block).
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, "permission-%s-%s-%s-phone" % (what, tag, scheme))


def test_a_click_on_allow_once_and_a_submit_is_the_answer(form):
    f = ask(form, "command", "en-US")
    f.option("permission", "allow").click()
    result = f.submit_and_collect()
    [row] = result["answers"]
    assert row["selected"] == ["allow"]
    assert askrich.permission_choice(f.interview.options["permission"], result) == {"behavior": "allow"}


@pytest.mark.parametrize("locale, heading", [("en-US", "Answered in the terminal"), ("ar-EG", "تمت الإجابة في الطرفية")])
def test_an_ask_answered_in_the_terminal_first_says_so(form, locale, heading):
    f = ask(form, "command", locale)
    f.rt.hub.settle_without_form(f.interview, {"permission": askrich.unanswered()}, askrich.CANCELLED, "terminal",
                                 answered_there=True)
    expect(f.page.locator("section.end h2")).to_have_text(heading)
    expect(f.page.locator("section.end")).to_contain_text("Claude Code")


@pytest.mark.parametrize("locale, wants", [("en-US", "wants to run npm test"), ("ar-EG", "يريد تشغيل npm test")])
def test_the_inbox_row_says_what_the_agent_wants_to_run_in_the_pages_language(inbox_page, inbox_rt, locale, wants):
    page = inbox_page(locale=locale, viewport=PHONE)
    arguments, internal = permission_ask("command")
    inbox_rt.open_interview(arguments, internal, agent="Claude Code")
    row = page.locator("#inbox-list > li", has_text="npm test")
    expect(row).to_have_count(1)
    said = row.locator(".inbox-link").text_content()
    assert said.replace("\u2068", "").replace("\u2069", "").startswith(wants), said  # the command isolated
    expect(row.locator(".inbox-progress")).to_be_hidden()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
