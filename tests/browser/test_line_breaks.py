"""Where the form's lines break: in Japanese and Chinese no line starts with a small kana or a
closing mark, and a Chinese heading breaks between words; in every language a count stays on
the line of its label ("未回答：1", "Sans réponse : 1") and a size with its unit ("10 MB"), on
every screen, dialog and page, at a phone's 360 px and at 1280 px.

The lines are read from the layout itself: every character's box (Range.getClientRects) tells
which line it is on, so the check holds whatever the markup and the browser's rules are."""
from __future__ import annotations

import re

import pytest

from formkit import PHONE
from helpers.support import form_strings, submit
from test_inbox_page import inbox_page, inbox_rt  # noqa: F401  (fixtures)
from test_languages import LANGUAGES

WIDE = {"width": 1280, "height": 860}
CJK = ["ja", "zh-CN", "zh-TW"]

SMALL_KANA = "ぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶㇰㇱㇲㇳㇴㇵㇶㇷㇸㇹㇺㇻㇼㇽㇾㇿーｧｨｩｪｫｬｭｮｯｰ"
# Closing marks: ideographic, fullwidth, halfwidth and their ASCII forms.
CLOSING = "、。，．：；？！）」』】〕〉》〗〙〛〞〟”’｡｣､,.:;?!)]}»"

# Every character the page shows, by the line it is on. A line is the run of characters of one
# block (the nearest box that is not inline) whose boxes sit at the same height; a box laid out
# inline as a whole (a key cap, a button) counts as a character of its parent's line too, so
# that the text after it is not taken for a line start. Returns one entry per block:
# {text, lines: [line index of each character, -1 for a space], where: a short name of the
# block}; a box laid out as a whole is the character U+FFFC. Given a selector, only the text
# under that element is read. Isolates and word joiners are invisible and on no line.
LINES = r"""(root) => {
  const isolate = /[\u2060\u2066-\u2069]/;
  const blocks = new Map();
  const style = (el) => getComputedStyle(el);
  const blockOf = (node) => {
    for (let el = node.parentElement; el; el = el.parentElement) {
      const d = style(el).display;
      if (d !== 'inline' && d !== 'contents') return el;
    }
    return document.body;
  };
  const entry = (block) => {
    let e = blocks.get(block);
    if (!e) {
      e = {text: '', lines: [], where: block.tagName.toLowerCase() + (block.id ? '#' + block.id : '') +
        (block.className && typeof block.className === 'string' ? '.' + block.className.trim().split(/\s+/).join('.') : ''),
        line: -1, last: null};
      blocks.set(block, e);
    }
    return e;
  };
  // Puts a box on its block's current line, or starts the next line when it sits lower down.
  const place = (e, r) => {
    if (!e.last || (r.top + r.bottom) / 2 > e.last.bottom) e.line++;
    e.last = r;
    return e.line;
  };
  const hidden = (el) => !el || el.closest('template, dialog:not([open]), .sr-only, [hidden]');
  const top = (root && document.querySelector(root)) || document.body;
  const walker = document.createTreeWalker(top, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.currentNode; node; node = walker.nextNode()) {
    if (node.nodeType === Node.ELEMENT_NODE) {
      if (node === document.body || node === top || hidden(node)) continue;
      const d = style(node).display;
      if (d.startsWith('inline-') || (d === 'inline' && /^(IMG|INPUT|TEXTAREA|SELECT|BUTTON)$/.test(node.tagName))) {
        const r = node.getBoundingClientRect();
        if (r.width && r.height) {
          const e = entry(blockOf(node));
          e.text += '\ufffc';
          e.lines.push(place(e, r));
        }
      }
      continue;
    }
    if (hidden(node.parentElement)) continue;
    const text = node.data;
    const e = entry(blockOf(node));
    for (let i = 0; i < text.length;) {
      const ch = String.fromCodePoint(text.codePointAt(i));
      range.setStart(node, i);
      range.setEnd(node, i + ch.length);
      i += ch.length;
      if (isolate.test(ch)) continue;
      const r = [...range.getClientRects()].find((b) => b.width > 0 || b.height > 0);
      if (!r || /\s/.test(ch) && ch !== '\u00a0' && ch !== '\u202f') {
        // A collapsed or breakable space is on no line of its own; it still separates words.
        if (r || /\s/.test(ch)) { e.text += ' '; e.lines.push(-1); }
        continue;
      }
      e.text += ch === '\u202f' ? '\u00a0' : ch;
      e.lines.push(place(e, r));
    }
  }
  return [...blocks.values()].filter((e) => e.lines.some((l) => l >= 0))
    .map(({text, lines, where}) => ({text, lines, where}));
}"""


def line_starts(blocks):
    """(where, the line's first character, the line) for every line but a block's first."""
    found = []
    for b in blocks:
        seen = set()
        for i, line in enumerate(b["lines"]):
            if line < 0 or line in seen:
                continue
            seen.add(line)
            if line == 0:
                continue
            text = "".join(c for c, l in zip(b["text"], b["lines"]) if l == line)
            found.append((b["where"], b["text"][i], text))
    return found


def bad_starts(blocks):
    return [(where, text) for where, ch, text in line_starts(blocks) if ch in SMALL_KANA + CLOSING]


# The agent's headings: the title, a question's header (on its screen and in the review) and an
# inbox row's title.
HEADING = re.compile(r"^(h1#title|h2\.q-header|h2#[\w-]+\.q-header|span\.review-header|a\.inbox-link)")


def split_words(page, blocks, tag):
    """(where, word) for every word of a Chinese heading cut over two lines, by the words
    Intl.Segmenter finds (a word too long for any line may be cut)."""
    headings = [b for b in blocks if HEADING.match(b["where"])]
    words = page.evaluate("""([texts, tag]) => {
        const seg = new Intl.Segmenter(tag, {granularity: 'word'});
        return texts.map((text) => [...seg.segment(text)].filter((s) => s.isWordLike)
            .map((s) => [s.index, s.segment.length]));
    }""", [[b["text"] for b in headings], tag])
    cut = []
    for b, found in zip(headings, words):
        for at, n in found:
            lines = {l for l in b["lines"][at:at + n] if l >= 0}
            if len(lines) > 1 and n <= 4:
                cut.append((b["where"], b["text"][at:at + n]))
    return cut


# -- what must stay on one line --------------------------------------------------------------

SPACE = "[ \u00a0\u202f]"
UNITS = ["MiB", "Mio", "МиБ", "ميبيبايت", "B", "KB", "MB", "o", "Ko", "Mo", "Б", "КБ", "МБ", "بايت",
         "كيلوبايت", "ميغابايت"]


def pattern_of(template):
    """A regular expression for a filled-in template: each {placeholder} one number or word."""
    out = ""
    for piece in re.split(r"(\{\w+\})", template):
        if re.fullmatch(r"\{\w+\}", piece):
            out += r"[\d.,]+"
        else:
            out += "".join(SPACE if c in " \u00a0\u202f" else re.escape(c) for c in piece)
    return out


def kept_together(tag):
    """The patterns that must never be split over two lines in a language: each label of the
    review's and the end screen's counts with its number, the position "3 / 12", a size with its
    unit, and a key hint such as "(A)" with the word before it."""
    table = form_strings(tag)
    found = []
    for key in ("review.counts", "end.counts"):
        for part in re.split(r"\s*[·・]\s*", table[key]):
            if pattern_of(part.strip()) not in found:
                found.append(pattern_of(part.strip()))
    for key in ("where.question", "q.number", "inbox.answered"):
        found.append(pattern_of(table[key]))
    found.append(r"\d+%s?(?:%s)(?![A-Za-zА-я])" % (SPACE, "|".join(sorted(map(re.escape, UNITS), key=len, reverse=True))))
    found.append(r"\S%s?\([A-Z]\)" % SPACE)
    return found


def split_groups(blocks, tag):
    """(where, the text) of every group that must stay on one line but does not."""
    split = []
    for pattern in kept_together(tag):
        for b in blocks:
            for m in re.finditer(pattern, b["text"]):
                lines = {l for l in b["lines"][m.start():m.end()] if l >= 0}
                if len(lines) > 1:
                    split.append((b["where"], m.group()))
    return split


# -- the interviews: long texts in each language, on every kind of screen ----------------------

TEXTS = {
    "ja": {
        "title": "同期サービスのストレージとキーボードショートカットの設計レビュー",
        "intro": "このインタビューでは、同期サービスのデータベース、キャッシュ、バックアップ、"
                 "キーボードショートカットについて、いくつかのことを決めます。",
        "q1": "同期サービスのジョブ状態を保存するデータベースとして、プラットフォームチームがすでに運用しているものを使いますか？",
        "q1body": "ジョブのテーブルには行ロックが必要で、バックアップとリストアの手順もチェックしておく必要があります。"
                  "ファイル1つのデータベースなら、サーバーは不要ですが、レプリケーションはできません。",
        "a": "ポストグレスキューエル（すでに運用中のクラスター）",
        "adesc": "プラットフォームチームがすでに運用しており、バックアップもチェック済みです。",
        "b": "ファイル1つのデータベース",
        "why": "すでに運用実績があり、ジョブのテーブルには行ロックが必要だからです。ショートカットもそのまま使えます。",
        "r": "リリースまでにやることを、重要なものから順に並べてください（ドラッグかキーボードショートカットで）",
        "x": "キャッシュのウォームアップ", "y": "ジョブのリトライとバックオフ", "z": "ステータスページのデザイン",
        "m": "最初のリリースに含める機能はどれですか？すべてチェックしてください",
        "c": "自動リトライ（エクスポネンシャルバックオフ付き）", "d": "シーエスブイエクスポート",
        "f": "ほかに知っておくべきこと（ショップのチェックアウトやキャッシュのこと）はありますか？",
        "late": "フォローアップ：キャッシュのウォームアップは、デプロイのたびにやりますか？",
        "yes": "はい", "no": "いいえ", "note": "キャッシュのことで、もう1つだけチェックさせてください。",
    },
    "zh-CN": {
        "title": "同步服务的存储与键盘快捷键设计评审",
        "intro": "这份问卷会就同步服务的数据库、缓存、备份和键盘快捷键做几个决定。",
        "q1": "同步服务应当使用哪种数据库来保存任务状态？是否沿用平台团队已经在运行的那一套？",
        "q1body": "任务表需要行级锁，备份和恢复流程也需要检查。“单文件数据库”不需要服务器，但无法做复制。",
        "a": "PostgreSQL（已在运行的集群）", "adesc": "平台团队已经在运行它，备份也已检查过。",
        "b": "单文件数据库",
        "why": "它已经在生产环境中运行，而且任务表需要行级锁。快捷键也可以照原样使用。",
        "r": "请按重要程度给发布前要做的事情排序（可以拖动，也可以用键盘快捷键）",
        "x": "缓存预热", "y": "任务重试与退避", "z": "状态页设计",
        "m": "第一个版本应当包含哪些功能？请勾选所有适用的选项",
        "c": "自动重试（带指数退避）", "d": "CSV 导出",
        "f": "还有什么我们应该知道的吗（比如结账流程或缓存）？",
        "late": "追加问题：每次部署时都要做缓存预热吗？",
        "yes": "是", "no": "否", "note": "关于缓存，还想再确认一件事。",
    },
    "zh-TW": {
        "title": "同步服務的儲存與鍵盤快速鍵設計審查",
        "intro": "這份問卷會就同步服務的資料庫、快取、備份和鍵盤快速鍵做幾個決定。",
        "q1": "同步服務應該使用哪一種資料庫來保存工作狀態？是否沿用平台團隊已經在執行的那一套？",
        "q1body": "工作表需要列級鎖定，備份與還原流程也需要檢查。「單一檔案資料庫」不需要伺服器，但無法做複寫。",
        "a": "PostgreSQL（已在執行的叢集）", "adesc": "平台團隊已經在執行它，備份也已檢查過。",
        "b": "單一檔案資料庫",
        "why": "它已經在正式環境中執行，而且工作表需要列級鎖定。快速鍵也可以照原樣使用。",
        "r": "請依重要程度排列發布前要做的事情（可以拖曳，也可以用鍵盤快速鍵）",
        "x": "快取預熱", "y": "工作重試與退避", "z": "狀態頁設計",
        "m": "第一個版本應該包含哪些功能？請勾選所有適用的選項",
        "c": "自動重試（含指數退避）", "d": "CSV 匯出",
        "f": "還有什麼我們應該知道的嗎（例如結帳流程或快取）？",
        "late": "追加問題：每次部署時都要做快取預熱嗎？",
        "yes": "是", "no": "否", "note": "關於快取，還想再確認一件事。",
    },
    # Korean breaks between words (keep-all): a run of Japanese in a Korean form is one word to
    # it, cut anywhere when it does not fit; a Korean agent writes Korean.
    "ko": {
        "title": "동기화 서비스의 저장소와 키보드 단축키 설계 검토",
        "intro": "이 인터뷰에서는 동기화 서비스의 데이터베이스, 캐시, 백업, 키보드 단축키에 대해 몇 가지를 정합니다.",
        "q1": "동기화 서비스의 작업 상태를 저장할 데이터베이스로 플랫폼 팀이 이미 운영 중인 것을 사용할까요?",
        "q1body": "작업 테이블에는 행 잠금이 필요하고, 백업과 복원 절차도 확인해야 합니다. "
                  "파일 하나짜리 데이터베이스라면 서버가 필요 없지만 복제는 할 수 없습니다.",
        "a": "PostgreSQL(이미 운영 중인 클러스터)",
        "adesc": "플랫폼 팀이 이미 운영하고 있으며, 백업도 확인했습니다.",
        "b": "파일 하나짜리 데이터베이스",
        "why": "이미 운영 경험이 있고, 작업 테이블에는 행 잠금이 필요하기 때문입니다. 단축키도 그대로 쓸 수 있습니다.",
        "r": "출시 전까지 할 일을 중요한 것부터 순서대로 정렬하세요(끌어서 옮기거나 키보드 단축키로)",
        "x": "캐시 예열", "y": "작업 재시도와 백오프", "z": "상태 페이지 디자인",
        "m": "첫 번째 출시에 넣을 기능은 무엇인가요? 해당하는 것을 모두 선택하세요",
        "c": "자동 재시도(지수 백오프 포함)", "d": "CSV 내보내기",
        "f": "그 밖에 알아야 할 것(결제 흐름이나 캐시 등)이 있나요?",
        "late": "추가 질문: 배포할 때마다 캐시를 예열할까요?",
        "yes": "예", "no": "아니요", "note": "캐시에 대해 한 가지만 더 확인하겠습니다.",
    },
}


def spec_for(tag):
    """An interview written in the language (for ja, zh-CN, zh-TW and ko; the others get the
    Japanese one, whose own text is then foreign but whose chrome is the language's, and whose
    Japanese must break by Japanese rules all the same)."""
    w = TEXTS.get(tag, TEXTS["ja"])
    return {
        "title": w["title"], "intro": w["intro"], "language": tag,
        "questions": [
            {"id": "q1", "header": w["q1"], "body": w["q1body"], "options": [
                {"id": "a", "label": w["a"], "description": w["adesc"], "textInput": {"required": True}},
                {"id": "b", "label": w["b"]}], "recommended": "b", "rationale": w["why"]},
            {"id": "r", "kind": "rank", "header": w["r"], "dependsOn": ["q1"], "options": [
                {"id": "x", "label": w["x"]}, {"id": "y", "label": w["y"]}, {"id": "z", "label": w["z"]}],
             "recommended": ["y", "x", "z"]},
            {"id": "m", "header": w["m"], "multiSelect": True, "options": [
                {"id": "c", "label": w["c"]}, {"id": "d", "label": w["d"]}], "recommended": ["c"]},
            {"id": "f", "header": w["f"], "options": []},
        ],
    }


# Made in the page: 10 MiB through Playwright's wire would take longer than the test.
ATTACH_TWO = """(input) => {
  const data = new DataTransfer();
  data.items.add(new File([new Uint8Array(10 * 1024 * 1024 + 1)], "huge.log", {type: "text/plain"}));
  data.items.add(new File([new Uint8Array(1536)], "small.log", {type: "text/plain"}));
  input.files = data.files;
  input.dispatchEvent(new Event("change", {bubbles: true}));
}"""


class Lines:
    """Walks one page through every screen, dialog and message, reading where its lines break."""

    def __init__(self, f, tag):
        self.f = f
        self.tag = tag
        self.starts = []
        self.split = []
        self.words = []
        self.looked = 0

    def look(self, where):
        self.f.settle()
        blocks = self.f.page.evaluate(LINES)
        self.looked += 1
        self.starts += [(where,) + s for s in bad_starts(blocks)]
        if self.tag.startswith("zh"):
            self.words += [(where,) + s for s in split_words(self.f.page, blocks, self.tag)]
        self.split += [(where,) + s for s in split_groups(blocks, self.tag)]

    def run(self, end="submit"):
        f, page = self.f, self.f.page
        w = TEXTS.get(self.tag, TEXTS["ja"])
        self.look("intro")
        page.locator("#btn-next").click()
        f.option("q1", "a").check()
        self.look("question with a required text")
        page.locator("#btn-next").click()
        self.look("rank")
        f.section("r").locator(".rank-keep").click()
        page.locator("#btn-next").click()
        self.look("multi-select")
        page.locator("#btn-next").click()
        # A file attached (its size and unit) and one refused for its size, under the note.
        f.section("f").locator(".attach-input").evaluate(ATTACH_TWO)
        page.wait_for_selector('section[data-qid="f"] .attach-item:not(.pending) .attach-size')
        page.wait_for_selector('section[data-qid="f"] .attach-problem:not([hidden])')
        self.look("free text, a file attached and one refused")
        page.locator("#btn-next").click()
        page.locator("#btn-submit").click()
        self.look("review, a text missing")
        page.locator(".review .submit-problem button").click()
        f.option("q1", "b").check()
        f.press("End")
        page.locator("#btn-submit").click()
        self.look("review, asking to confirm")
        page.locator("#btn-help").click()
        self.look("the ? table")
        page.locator("#help-close").click()
        page.locator("#btn-view").click()
        self.look("show all")
        page.locator("#btn-view").click()
        f.rt.append_questions(f.interview.id, [{"id": "late", "header": w["late"], "options": [
            {"id": "y", "label": w["yes"]}, {"id": "n", "label": w["no"]}]}], note=w["note"])
        page.wait_for_selector('#notices [data-id="follow-ups"]')
        self.look("follow-up notice")
        page.locator('#notices [data-id="follow-ups"] .btn:not(.notice-close)').click()
        self.look("follow-up question")
        f.option("late", "y").check()
        f.press("End")
        page.locator("#btn-skip").click()
        self.look("skip dialog")
        if end == "skip":
            page.locator("#skip-confirm").click()
            page.wait_for_selector("section.end")
            self.look("skipped")
            return
        page.locator("#skip-cancel").click()
        f.submit_and_collect()
        self.look("sent")


@pytest.mark.parametrize("viewport", [PHONE, WIDE], ids=["360px", "1280px"])
@pytest.mark.parametrize("tag", CJK)
def test_no_line_starts_with_a_small_kana_or_a_closing_mark(form, tag, viewport, shot):
    f = form(spec_for(tag), viewport=viewport, agent="Claude Code")
    lines = Lines(f, tag)
    lines.run()
    shot(f.page, f"lines-{tag}-{viewport['width']}px-sent")
    assert lines.starts == [], "\n".join(map(repr, lines.starts))
    assert lines.split == [], "\n".join(map(repr, lines.split))
    # A Chinese heading breaks between its words, not inside one ("是/否").
    assert lines.words == [], "\n".join(map(repr, lines.words))


@pytest.mark.parametrize("tag", LANGUAGES)
def test_no_count_or_size_is_split_from_its_label_on_a_phone(form, tag):
    # The interview is the Japanese one (for zh and ko their own): Japanese written by the
    # agent breaks by the same rules whatever language the form speaks.
    f = form(spec_for(tag), viewport=PHONE)
    lines = Lines(f, tag)
    lines.run()
    assert lines.split == [], "\n".join(map(repr, lines.split))
    assert lines.starts == [], "\n".join(map(repr, lines.starts))


# Paragraphs put atop the page, each {style, text} and any of id, className, lang.
PROBES = """(probes) => document.querySelector('#main').prepend(...probes.map(({style, text, ...props}) => {
  const p = document.createElement('p');
  Object.assign(p, props);
  p.style.cssText = style;
  p.textContent = text;
  return p;
}))"""


def test_the_line_reader_finds_a_bad_break_when_there_is_one(form):
    """The checks above are not vacuous: a block that has to break before a small kana, and a
    count pushed onto the line after its label, are both found."""
    f = form(spec_for("ja"), viewport=PHONE)
    page = f.page
    page.evaluate(PROBES, [
        {"id": "kana", "style": "width: 2em; line-break: anywhere; font-size: 16px", "text": "ショートカット"},
        {"id": "count", "style": "width: 2.5em; line-break: anywhere; font-size: 16px", "text": "未回答：1"}])
    blocks = page.evaluate(LINES)
    kana = [text for where, text in bad_starts(blocks) if where == "p#kana"]
    assert kana and all(text[0] in SMALL_KANA for text in kana), kana
    assert ("p#count", "未回答：1") in split_groups(blocks, "ja")


@pytest.mark.parametrize("tag", CJK)
def test_the_pages_that_end_an_interview_and_the_server_gone_notice_break_right(form, tag):
    f = form(spec_for(tag), goto=False, viewport=PHONE)
    f.expect_errors = True  # the browser logs the refused and failed requests itself
    starts, split = [], []

    def look(where):
        blocks = f.page.evaluate(LINES)
        starts.extend((where,) + s for s in bad_starts(blocks))
        split.extend((where,) + s for s in split_groups(blocks, tag))

    for state in ("expired", "cancelled", "submitted"):
        f.pretend_state(state)
        f.page.goto(f.url)
        f.page.wait_for_selector("section.end")
        look(state)
    f.page.unroute("**/api/s/*")
    f.reload()
    f.rt.close()
    f.page.wait_for_selector('#notices [data-id="gone"]')
    look("server gone")
    assert starts == [], "\n".join(map(repr, starts))
    assert split == [], "\n".join(map(repr, split))


# Every language on a phone; Japanese and Chinese on a wide screen too.
INBOX_CASES = [(tag, PHONE) for tag in LANGUAGES] + [(tag, WIDE) for tag in CJK]


@pytest.mark.parametrize("tag, viewport", INBOX_CASES,
                         ids=["%s-%dpx" % (tag, v["width"]) for tag, v in INBOX_CASES])
def test_the_inbox_breaks_its_lines_right(inbox_page, inbox_rt, tag, viewport):
    page = inbox_page(locale=tag, viewport=viewport)
    w = TEXTS.get(tag, TEXTS["ja"])
    long = inbox_rt.open_interview(dict(spec_for(tag), title=w["title"] + "：" + w["r"]),
                                   agent="Claude Code")
    inbox_rt.open_interview(dict(spec_for(tag), title=w["q1"]), agent=None)
    inbox_rt.append_questions(long.id, [{"id": "late", "header": w["late"]}])
    page.wait_for_selector('li[data-interview="%s"] .inbox-badge:not([hidden])' % long.id)
    assert page.evaluate("document.documentElement.lang") == tag
    blocks = page.evaluate(LINES)
    starts = bad_starts(blocks)
    assert starts == [], "\n".join(map(repr, starts))
    split = split_groups(blocks, tag)
    assert split == [], "\n".join(map(repr, split))
    words = split_words(page, blocks, tag) if tag.startswith("zh") else []
    assert words == [], "\n".join(map(repr, words))
    submit(inbox_rt.form_url(long), {})


# -- names and particles, the end page's last lines, この and タブ ----------------------------
# Read on the real screens at every width from a small phone up, where the review saw them break
# (Korean at 310-330 px, Japanese at 360 and 1280 px): the viewport narrows one step at a time
# and the lines are read again at each width.

SWEEP = list(range(300, 481, 2)) + [600, 800, 1024, 1280]
HANGUL = re.compile(r"[\uac00-\ud7a3]")


def across_widths(page, root, check):
    """check(blocks) at every width of SWEEP, on the text under `root`: (width, …) per finding."""
    found = []
    for width in SWEEP:
        page.set_viewport_size({"width": width, "height": 860})
        found += [(width,) + tuple(x) for x in check(page.evaluate(LINES, root))]
    page.set_viewport_size(PHONE)
    return found


def parted_particles(name):
    """Finds a line that starts with the particle written onto `name` ("…에이전트⏎에")."""
    def check(blocks):
        found = []
        for b in blocks:
            for m in re.finditer(re.escape(name), b["text"]):
                at = m.end()
                if at < len(b["text"]) and HANGUL.match(b["text"][at]) and b["lines"][at] != b["lines"][at - 1]:
                    found.append((b["where"], b["text"]))
        return found
    return check


def lone_last_characters(blocks):
    """A paragraph of the end page whose last line holds one Han character (and its marks)."""
    found = []
    for b in blocks:
        if not b["where"].startswith("p.end-"):
            continue
        last = max(b["lines"])
        if last == 0:
            continue
        text = "".join(c for c, l in zip(b["text"], b["lines"]) if l == last)
        if len(re.findall(r"\w", text)) < 2:
            found.append((b["where"], text))
    return found


def parted(first, second):
    """Finds `first` at a line's end and what follows it, matching the pattern `second`, on the
    next line."""
    def check(blocks):
        found = []
        for b in blocks:
            for m in re.finditer(re.escape(first) + "(?=%s)" % second, b["text"]):
                if b["lines"][m.end() - 1] != b["lines"][m.end()]:
                    found.append((b["where"], b["text"]))
        return found
    return check


def end_pages(form, tag, agent):
    """Every end page with a sentence about the agent: each answer's way of ending (sent while
    the agent waits and while it does not; skipped after the skip dialog), yielded as (where,
    form) with the page on it; the skip dialog itself is yielded open as "skip dialog"."""
    spec = {"title": "同步", "language": tag, "questions": [
        {"id": "q", "header": "問", "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}]}
    f = form(spec, viewport=PHONE, agent=agent)
    result = f.waiting_call()
    f.submit_and_collect()
    result()
    yield "sent, the agent waiting", f
    f = form(spec, viewport=PHONE, agent=agent)
    f.submit_and_collect()
    yield "sent, the agent not waiting", f
    f = form(spec, viewport=PHONE, agent=agent)
    f.press("End")
    f.page.locator("#btn-skip").click()
    yield "skip dialog", f
    f.page.locator("#skip-confirm").click()
    f.page.wait_for_selector("section.end")
    yield "skipped", f


@pytest.mark.parametrize("agent", [None, "Claude Code"], ids=["the-agent", "named"])
def test_a_korean_name_keeps_its_particle_on_its_line(form, agent):
    name = agent or form_strings("ko")["agent.fallback"]
    parted_at = []
    for where, f in end_pages(form, "ko", agent):
        root = "#skip" if where == "skip dialog" else "section.end"
        parted_at += [(where,) + x for x in across_widths(f.page, root, parted_particles(name))]
    assert parted_at == [], "\n".join(map(repr, parted_at))


def test_a_chinese_end_page_never_ends_a_paragraph_on_one_character(form):
    lone = []
    for agent in (None, "Claude Code"):
        for where, f in end_pages(form, "zh-CN", agent):
            if where != "skip dialog":
                lone += [(agent, where) + x for x in across_widths(f.page, "section.end", lone_last_characters)]
    assert lone == [], "\n".join(map(repr, lone))


KATAKANA = "[\u30a0-\u30ff]"


def test_japanese_keeps_kono_and_the_word_after_it_on_one_line(form):
    """この and the katakana word it points at (タブ, インタビュー, ブラウザー) on one line, on
    every end page."""
    apart = []
    for where, f in end_pages(form, "ja", "Claude Code"):
        if where != "skip dialog":
            apart += [(where,) + x for x in across_widths(f.page, "section.end", parted("この", KATAKANA))]
    f.expect_errors = True  # the browser logs the 404 of an expired interview itself
    for state in ("expired", "cancelled", "declined"):
        f.pretend_state(state)
        f.page.goto(f.url)
        f.page.wait_for_selector("section.end")
        apart += [(state,) + x for x in across_widths(f.page, "section.end", parted("この", KATAKANA))]
    assert apart == [], "\n".join(map(repr, apart))


def test_the_sweep_finds_a_parted_particle_and_a_lone_last_character(form):
    """The three checks above are not vacuous: without the word joiner a Korean particle parts
    from the isolated name before it, and without text-wrap: pretty a Chinese paragraph ends on
    one character, at some width."""
    f = form(spec_for("ko"), viewport=PHONE)
    f.page.evaluate(PROBES, [
        {"className": "end-text", "style": "font-size: 16px; word-break: keep-all; text-wrap: wrap",
         "text": "답변이 \u2068에이전트\u2069에 전달되었습니다"},
        {"className": "end-more", "lang": "zh-CN", "style": "font-size: 16px; text-wrap: wrap",
         "text": "你可以关闭此标签页了。"}])
    particles, lone = [], []
    for quarter in range(16, 48):
        f.page.evaluate("(w) => document.querySelectorAll('#main > p').forEach((p) => { p.style.width = w; })",
                        "%gem" % (quarter / 4))
        blocks = f.page.evaluate(LINES, "#main")
        particles += parted_particles("에이전트")(blocks)
        lone += lone_last_characters(blocks)
    assert ("p.end-text", "답변이 에이전트에 전달되었습니다") in particles
    assert ("p.end-more", "了。") in lone
    assert parted("この", KATAKANA)([{"text": "このタブ", "lines": [0, 0, 1, 1], "where": "p"}])


def test_a_korean_particle_written_onto_a_key_stays_on_its_line(form):
    """The ? table's "`Space`로 집고 … `Enter`로 놓기": a key cap is one box, and the browser
    would break between it and its particle as readily as before a closing mark."""
    f = form(spec_for("ko"), viewport=PHONE)
    f.page.locator("#btn-help").click()
    key_then_particle = parted("\ufffc", HANGUL.pattern)
    apart = []
    for width in range(300, 481, 5):  # a key ends a line every few pixels of width
        f.page.set_viewport_size({"width": width, "height": 860})
        apart += [(width,) + tuple(x) for x in key_then_particle(f.page.evaluate(LINES, "#help"))]
    assert apart == [], "\n".join(map(repr, apart))
    # The check is not vacuous: the table has keys with particles, and it finds a parted one.
    assert "\ufffc로" in "".join(b["text"] for b in f.page.evaluate(LINES, "#help"))
    assert key_then_particle([{"text": "\ufffc로 집고", "lines": [0, 1, -1, 1, 1], "where": "td"}])
