"""The form keeps the server's limits, read from /api/s: lowered in the server, they are lowered
in the page (no number of the form's own), in the counts and refusals and in the words that name
them, in the page's language and number formatting."""
import os
import re

import pytest

from playwright.sync_api import expect

import askrich
from formkit import FSI, PDI, choice, isolated

SPEC = {"title": "Bug report", "questions": [choice("where", "Where does it break?", ["login", "search"])]}

PICK = """(input, files) => {
  const data = new DataTransfer();
  for (const [name, size] of files) data.items.add(new File([new Uint8Array(size)], name, {type: "text/plain"}));
  input.files = data.files;
  input.dispatchEvent(new Event("change", {bubbles: true}));
}"""


def test_the_form_counts_down_and_refuses_files_by_the_limits_the_server_sends(form, monkeypatch):
    monkeypatch.setattr(askrich, "FREE_TEXT_MAX", 300)
    monkeypatch.setattr(askrich, "ATTACHMENT_MAX_BYTES", 1000)
    monkeypatch.setattr(askrich, "ATTACHMENTS_MAX_COUNT", 2)
    f = form(SPEC)
    note = f.section("where").locator(".note-text")
    note.fill("n" * 290)
    assert note.evaluate("el => el.maxLength") == 300
    expect(f.section("where").locator(".text-left")).to_have_text("10 characters left")
    block = f.section("where").locator(".attach")
    block.locator(".attach-input").evaluate(PICK, [["big.log", 1001], ["one.log", 1000], ["two.log", 5],
                                                   ["three.log", 5]])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["one.log", "two.log"])
    problems = block.locator(".attach-problem")
    expect(problems.locator("span")).to_have_text([
        isolated("big.log") + " is not attached: a file may be at most " + isolated("1,000\u00a0B") + ".",
        isolated("three.log") + " is not attached: an interview may have at most 2 files.",
    ])
    # Refused in the page, before any upload: the server stored the two it was sent.
    assert len(os.listdir(os.path.join(f.rt.config.log_dir, "attachments", f.interview.id))) == 2


# The words about the limits take the server's numbers, written the language's way ("1,5" in
# Russian) and with the plural the count needs ("3 файлов" after "не больше", "1 file").
WORDS = {
    "en": ("Or paste or drop files here. Up to {size} each, {count} per interview.",
           ["{big} is not attached: a file may be at most {size}.",
            "{b} is not attached: an interview's files may total at most {total}.",
            "{e} is not attached: an interview may have at most {count} files."]),
    "ru": ("Файлы можно также вставить или перетащить сюда: до {size} на файл, не больше {count} файлов на опрос.",
           ["Файл {big} не прикреплён: размер одного файла — не больше {size}.",
            "Файл {b} не прикреплён: файлы опроса вместе могут занимать не больше {total}.",
            "Файл {e} не прикреплён: к опросу можно прикрепить не больше {count} файлов."]),
}
LOWERED = {"en": ("1.5\u00a0KB", "2.5\u00a0KB"), "ru": ("1,5\u00a0КБ", "2,5\u00a0КБ")}


@pytest.mark.parametrize("tag", sorted(WORDS))
def test_the_hint_and_the_refusals_name_the_lowered_limits_in_the_language(form, monkeypatch, tag):
    monkeypatch.setattr(askrich, "ATTACHMENT_MAX_BYTES", 1536)
    monkeypatch.setattr(askrich, "ATTACHMENTS_MAX_COUNT", 3)
    monkeypatch.setattr(askrich, "ATTACHMENTS_MAX_TOTAL_BYTES", 2560)
    f = form(dict(SPEC, language=tag))
    size, total = LOWERED[tag]
    names = {n: isolated(n + ".log") for n in ("big", "b", "e")}
    hint, refusals = WORDS[tag]
    block = f.section("where").locator(".attach")
    expect(block.locator(".attach-hint")).to_have_text(hint.format(size=isolated(size), count=3))
    # Too big; kept; too much in all (1500 + 1500 > 2560); kept; kept; the fourth file.
    block.locator(".attach-input").evaluate(PICK, [["big.log", 1537], ["a.log", 1500], ["b.log", 1500],
                                                   ["c.log", 500], ["d.log", 5], ["e.log", 5]])
    expect(block.locator(".attach-item .attach-name")).to_have_text(["a.log", "c.log", "d.log"])
    expect(block.locator(".attach-problem span")).to_have_text(
        [r.format(size=isolated(size), total=isolated(total), count=3, **names) for r in refusals])


def test_one_file_allowed_is_named_in_the_singular(form, monkeypatch):
    monkeypatch.setattr(askrich, "ATTACHMENTS_MAX_COUNT", 1)
    f = form(dict(SPEC, language="ru"))
    block = f.section("where").locator(".attach")
    expect(block.locator(".attach-hint")).to_have_text(
        "Файлы можно также вставить или перетащить сюда: до " + isolated("10\u00a0МБ") + " на файл, не больше 1 файла на опрос.")
    block.locator(".attach-input").evaluate(PICK, [["a.log", 5], ["b.log", 5]])
    expect(block.locator(".attach-problem span")).to_have_text(
        "Файл " + isolated("b.log") + " не прикреплён: к опросу можно прикрепить не больше 1 файла.")


# At the server's own limits the words read as they did when they held the numbers themselves
# (the isolates around the sizes are invisible): 20 is Arabic's "many" (ملفًا).
AS_EVER = {
    "en": "Or paste or drop files here. Up to 10\u00a0MB each, 20 per interview.",
    "ar": "أو الصق الملفات أو أفلتها هنا. حتى 10\u00a0ميغابايت لكل ملف، و20 ملفًا لكل مقابلة.",
}


@pytest.mark.parametrize("tag", sorted(AS_EVER))
def test_with_the_default_limits_the_hint_reads_as_it_always_has(form, tag):
    hint = form(dict(SPEC, language=tag)).section("where").locator(".attach .attach-hint")
    expect(hint).to_have_text(re.compile(".+"))
    shown = hint.text_content()
    assert shown.replace(FSI, "").replace(PDI, "") == AS_EVER[tag]
    assert shown.count(FSI) == 1
