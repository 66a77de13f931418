"""Direction isolation: every value the form inserts into its own words (an agent name, a label,
a file name, a question header), in every language, is a bidi isolate (U+2068 … U+2069), so a
Latin name in Arabic text keeps apart from the count beside it; numbers stay bare; and nothing
that leaves the page's text (the tab title, a notification, an aria-* attribute, the answers sent
back) carries the isolate characters."""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from formkit import FSI, PDI, WJ, follow_up, isolated
from helpers.support import form_strings

LANGUAGES = ["en", "ja", "zh-CN", "zh-TW", "ko", "es", "fr", "de", "pt-BR", "ru", "ar"]
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def spec(language, **kw):
    return {"title": "Plan", "language": language, "questions": [
        {"id": "q1", "header": "Database", "options": [
            {"id": "pg", "label": "Postgres"},
            {"id": "my", "label": "MySQL"}]},
        {"id": "r", "kind": "rank", "header": "Goals", "options": [
            {"id": "a", "label": "Speed"}, {"id": "b", "label": "Cost"}], "recommended": ["a", "b"]},
        {"id": "free", "header": "Anything else?", "options": []},
    ], **kw}


# Runs the page's own i18n.js over every key of every language: each placeholder filled once with
# a text (which must come out isolated, and only isolated) and once with a number and a figure
# (which must come out bare); tPlain() never isolates.
EVERY_KEY = """async ({tags, tables}) => {
  const m = await import('/assets/js/i18n.js');
  const wrong = [];
  const fill = (names, value) => Object.fromEntries(names.map((p) => [p, value(p)]));
  for (const tag of tags) {
    await m.setLanguage(tag);
    for (const agent of ['Claude Code', null]) {
      m.setAgent(agent);
      const fallback = m.tPlain('agent.fallback');
      for (const [key, value] of Object.entries(tables[tag])) {
        const variants = typeof value === 'string' ? [[value, undefined]]
          : Object.keys(value).map((cat) => [value[cat], {zero: 0, one: 1, two: 2, few: 3, many: 11, other: 7}[cat]]);
        for (const [template, count] of variants) {
          const names = [...new Set([...template.matchAll(/\\{(\\w+)\\}/g)].map((x) => x[1]))];
          if (!names.length) continue;
          const texts = fill(names.filter((p) => p !== 'agent'), (p) => `Zq_${p}_`);
          if (count !== undefined) texts.count = count;
          const said = m.t(key, texts);
          for (const p of names) {
            if (p === 'count' && count !== undefined) continue;
            const v = p === 'agent' ? (agent || null) : `Zq_${p}_`;
            if (v === null) {
              // The common noun, capitalized or not, inside the isolate.
              if (!new RegExp('\\u2068(' + fallback + '|' + fallback[0].toLocaleUpperCase(tag) + fallback.slice(1) + ')\\u2069').test(said))
                wrong.push([tag, key, p, 'fallback not isolated', said]);
              continue;
            }
            const bare = said.split(v).length - 1, wrapped = said.split('\\u2068' + v + '\\u2069').length - 1;
            if (!wrapped || bare !== wrapped) wrong.push([tag, key, p, 'not isolated', said]);
          }
          if (/\\{\\w+\\}/.test(said)) wrong.push([tag, key, '', 'placeholder left', said]);
          const numbers = m.t(key, fill(names.filter((p) => p !== 'agent'), () => 4321));
          const figures = m.t(key, fill(names.filter((p) => p !== 'agent'), () => m.figure(4321)));
          const plain = m.tPlain(key, texts);
          const outside = (s) => s.replace(/\\u2068[^\\u2068\\u2069]*\\u2069/g, '');
          if (names.some((p) => p !== 'agent') && !outside(numbers).includes('4321'))
            wrong.push([tag, key, '', 'number isolated', numbers]);
          if (names.some((p) => p !== 'agent') && !outside(figures).includes(m.figure(4321).toString()))
            wrong.push([tag, key, '', 'figure isolated', figures]);
          if (/[\\u2068\\u2069]/.test(plain)) wrong.push([tag, key, '', 'tPlain isolates', plain]);
        }
      }
    }
  }
  return wrong;
}"""


def test_every_placeholder_of_every_language_is_filled_isolated_unless_a_number(form):
    f = form(spec("en"))
    tables = {tag: form_strings(tag) for tag in LANGUAGES}
    found = f.page.evaluate(EVERY_KEY, {"tags": LANGUAGES, "tables": tables})
    assert found == []
    # The check is not vacuous: every language has keys with texts and with counts.
    for tag in LANGUAGES:
        assert any("{agent}" in json.dumps(v, ensure_ascii=False) for v in tables[tag].values()), tag
        assert any(isinstance(v, dict) and "{count}" in json.dumps(v, ensure_ascii=False)
                   for v in tables[tag].values()), tag


def test_a_latin_agent_name_and_the_count_lie_apart_in_arabic(form):
    f = form(spec("ar"), agent="Claude Code")
    follow_up(f, 3)
    p = f.page.locator('#notices [data-id="follow-ups"] > p')
    expect(p).to_contain_text("Claude Code")
    # In a right-to-left line the isolated name is one left-to-right island: the count that
    # follows it in reading order lies to its left, apart. Fused ("Claude Code 3" as one
    # left-to-right run), the count would sit at the right end of the name.
    boxes = p.evaluate("""(p) => {
      const node = [...p.childNodes].find((n) => n.nodeType === 3 && n.data.includes('Claude Code'));
      const box = (from, length) => {
        const r = document.createRange();
        r.setStart(node, from);
        r.setEnd(node, from + length);
        return [...r.getClientRects()].map((b) => [b.left, b.right, b.top]);
      };
      const name = node.data.indexOf('Claude Code');
      return {name: box(name, 'Claude Code'.length), count: box(node.data.indexOf('3', name), 1),
              verb: box(0, node.data.indexOf(' '))};
    }""")
    assert len(boxes["name"]) == 1 and len(boxes["count"]) == 1, boxes
    (name_left, name_right, name_top), = boxes["name"]
    (count_left, count_right, count_top), = boxes["count"]
    (verb_left, _, _), = boxes["verb"]
    assert count_top == name_top  # one line
    assert count_right < name_left  # to the left of the name, with the space between
    assert name_right < verb_left  # and the name follows the verb, right to left
    # Because the name is isolated, and only the name: the count is bare.
    want = form_strings("ar")["followups.added"]["few"].replace("{agent}", isolated("Claude Code")).replace("{count}", "3")
    expect(p).to_have_text(want)


def test_a_ranked_order_of_latin_labels_reads_from_the_right_in_arabic(form):
    f = form(spec("ar"))
    f.press("End", "a")  # the review, and every recommendation taken
    answer = f.page.locator('.review-row[data-qid="r"] .review-answer')
    expect(answer).to_contain_text("Cost")
    # Each label an island of its own in the right-to-left line: the first one ranked is the
    # rightmost. Not isolated, "Speed > Cost" would be one left-to-right run, Speed at its left.
    left = answer.evaluate("""(el) => {
      const node = el.firstChild;
      const box = (word) => {
        const r = document.createRange();
        r.setStart(node, node.data.indexOf(word));
        r.setEnd(node, node.data.indexOf(word) + word.length);
        return r.getBoundingClientRect().left;
      };
      return {speed: box('Speed'), cost: box('Cost')};
    }""")
    assert left["speed"] > left["cost"], left
    expect(answer).to_have_text(isolated("Speed") + " > " + isolated("Cost"))


# Where the text of `el` lies: the boxes of `words` in it, and the edges of its content box.
WHERE = """(el, words) => {
  const text = el.textContent, node = [...el.childNodes].find((n) => n.nodeType === 3);
  const at = {};
  for (const w of words) {
    const r = document.createRange();
    r.setStart(node, text.lastIndexOf(w));
    r.setEnd(node, text.lastIndexOf(w) + w.length);
    const b = r.getBoundingClientRect();
    at[w] = [b.left, b.right];
  }
  const all = document.createRange();
  all.selectNodeContents(el);
  const box = el.getBoundingClientRect(), style = getComputedStyle(el);
  at.text = [all.getBoundingClientRect().left, all.getBoundingClientRect().right];
  at.content = [box.left + parseFloat(style.paddingLeft), box.right - parseFloat(style.paddingRight)];
  return at;
}"""


def test_an_english_header_on_an_arabic_page_keeps_its_question_mark_at_its_end(form):
    f = form(spec("ar"))
    f.page.locator("#rail button[data-goto='q:free']").click()
    f.settle()
    for el in (f.section("free").locator(".q-header"), None):
        if el is None:
            f.press("End")
            el = f.page.locator('.review-row[data-qid="free"] .review-header')
        at = el.evaluate(WHERE, ["Anything", "else", "?"])
        # Left to right inside the header: "Anything else?", the mark after the last word...
        assert at["Anything"][1] < at["else"][0] and at["else"][1] - 0.5 <= at["?"][0], at
        # ...and the header still on the page's side, the right.
        assert at["text"][0] > (at["content"][0] + at["content"][1]) / 2, at


def test_the_tab_title_the_aria_texts_and_the_answers_sent_carry_no_isolates(form):
    f = form(spec("ar"), agent="Claude Code")
    follow_up(f, 2)
    # In the page's text the name is isolated...
    expect(f.page.locator('#notices [data-id="follow-ups"] > p')).to_contain_text(isolated("Claude Code"))
    # ...but not in the tab's title, nor in what is read out from attributes.
    expect(f.page).to_have_title("(2) Plan · Ask User Rich")
    f.press("1", "n")  # no intro: the first question is the first screen
    f.page.keyboard.type("Version 16")
    f.press("Escape", "ArrowLeft", "ArrowDown", "Shift+ArrowDown")  # right to left: the left arrow goes on
    expect(f.page.locator("#announcer")).to_have_text(
        form_strings("ar")["rank.moved"].replace("{label}", isolated("Speed")).replace("{pos}", "2").replace("{total}", "2"))
    row = f.section("r").locator('.rank-row[data-opt="a"]')
    assert row.get_attribute("aria-label") == form_strings("ar")["rank.rowLabel"].replace(
        "{label}", "Speed").replace("{pos}", "2").replace("{total}", "2")
    attributes = f.page.evaluate("""() => [...document.querySelectorAll('*')].flatMap((el) =>
        [...el.attributes].filter((a) => a.name.startsWith('aria-')).map((a) => a.value))""")
    assert [a for a in attributes if FSI in a or PDI in a] == []
    f.press("Escape", "End")
    f.page.locator("#general-notes").fill("Claude Code 3")
    result = f.submit_and_collect()
    sent = json.dumps(result, ensure_ascii=False)
    assert FSI not in sent and PDI not in sent
    q1 = next(a for a in result["answers"] if a["id"] == "q1")
    assert (q1["selected"], q1["notes"]) == (["pg"], "Version 16")
    assert result["generalNotes"] == "Claude Code 3"


# The boxes of `parts` in the text of `el` (each found after the one before), or in the
# text `probe` instead when it is given, put into a paragraph atop the page (as a title shows it).
BOXES = """(el, [parts, probe]) => {
  if (probe !== null) {
    const p = document.createElement('p');
    p.textContent = probe;
    document.querySelector('#main').prepend(p);
    el = p;
  }
  const node = [...el.childNodes].find((n) => n.nodeType === 3);
  const out = [];
  let from = 0;
  for (const part of parts) {
    const at = node.data.indexOf(part, from);
    const r = document.createRange();
    r.setStart(node, at);
    r.setEnd(node, at + part.length);
    const b = r.getBoundingClientRect();
    out.push([b.left, b.right, b.top]);
    from = at + part.length;
  }
  return out;
}"""


def test_a_file_type_and_a_key_in_arabic_read_in_their_own_order(form):
    f = form(spec("ar"))
    # The button offering a long paste as a file: ".txt" at the left end of the right-to-left
    # line, after the words, read left to right (not "txt.").
    f.page.locator("#rail button[data-goto='q:free']").click()
    f.section("free").locator("textarea").first.focus()
    f.page.evaluate("""(text) => {
      const data = new DataTransfer();
      data.setData("text/plain", text);
      document.activeElement.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true}));
    }""", "سطر\n" * 6000)
    button = f.section("free").locator(".text-offer-attach")
    expect(button).to_be_visible()
    words, dot, txt = button.evaluate(BOXES, [["كملف", ".", "txt"], None])
    assert dot[2] == txt[2] == words[2], (words, dot, txt)  # one line
    assert dot[1] <= txt[0] + 0.5 and txt[1] <= words[0], (words, dot, txt)
    # The move buttons' titles: "Shift+↑" reads left to right inside the brackets.
    title = f.section("r").locator(".rank-move-up").get_attribute("title")
    opening, shift, arrow, closing = f.section("r").locator(".rank-move-up").evaluate(
        BOXES, [["(", "Shift", "↑", ")"], title])
    assert shift[1] <= arrow[0] + 0.5, (shift, arrow)
    # and the brackets stay around it, the right-to-left way: "(" at its right.
    assert closing[1] <= shift[0] + 0.5 and arrow[1] <= opening[0] + 0.5, (opening, shift, arrow, closing)


def test_a_name_is_spaced_from_chinese_and_joined_to_a_korean_particle(form):
    """t() sets a space between Han text and an inserted value whose edge is Latin or a digit,
    and none beside a Chinese value; a letter written onto the closing isolate gets a word joiner
    (a number stays bare and gets neither)."""
    f = form(spec("en"))
    said = f.page.evaluate("""async () => {
      const m = await import('/assets/js/i18n.js');
      const out = {};
      await m.setLanguage('zh-CN');
      out.latin = m.t('attach.uploading', {name: 'notes.txt'});
      out.han = m.t('attach.uploading', {name: '报告.txt'});
      out.plain = m.tPlain('attach.removeLabel', {name: 'notes.txt'});
      await m.setLanguage('ko');
      out.particle = m.t('end.delivered');
      out.count = m.t('followups.added', {count: 2});
      return out;
    }""")
    assert said["latin"] == "正在上传 " + isolated("notes.txt") + "…"
    assert said["han"] == "正在上传" + isolated("报告.txt") + "…"
    assert said["plain"] == "移除 notes.txt"
    assert said["particle"].startswith("답변이 " + isolated("에이전트") + WJ + "에 전달")
    assert "질문 2개" in said["count"]  # a number: no isolate, no joiner
