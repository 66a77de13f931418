"""The form's modules keep to their jobs (tests/README.md, "The form's modules"): view.js only
renders, the end of an interview is submit.js's, the text limit's countdown textlimit.js's, the
server's limits come from the server alone, and the inbox page uses dom.js's helpers. Read as
text: no browser needed (the browser tests prove the behaviour those modules share)."""

from __future__ import annotations

import re
from pathlib import Path

import askrich

JS = Path(askrich.__file__).resolve().parent / "assets" / "js"


def source(name: str) -> str:
    """A module's code without its comments, so that a comment naming a rule does not break it."""
    text = (JS / name).read_text(encoding="utf-8")
    return re.sub(r"(?m)^\s*//.*$|(?<=[;,{}()\s])//[^\n\"'`]*$", "", text)


def defined(text: str) -> set:
    """The names a module declares at its top level (functions, consts, lets)."""
    return set(re.findall(r"(?m)^(?:export\s+)?(?:async\s+)?(?:function\*?|const|let)\s+([A-Za-z_$][\w$]*)", text))


def exported(text: str) -> set:
    return set(re.findall(r"(?m)^export\s+(?:async\s+)?(?:function\*?|const|let)\s+([A-Za-z_$][\w$]*)", text))


def imported_from(text: str, module: str) -> set:
    names = set()
    for clause in re.findall(r'(?m)^import\s+\{([^}]+)\}\s+from\s+"\./%s";' % re.escape(module), text):
        names.update(item.split(" as ")[-1].strip() for item in clause.split(",") if item.strip())
    return names


# An assignment to the state or to one of its fields (`state.screen = `, `state.answers[id] = `,
# `state.n++`), or a call that changes one of its sets or maps (`state.newIds.delete(id)`).
STATE_WRITE = re.compile(
    r"\bstate(?:\.[\w$]+|\[[^\]]+\])+\s*(?:[-+*/|&]?=(?!=)|\+\+|--)"
    r"|\bstate(?:\.[\w$]+|\[[^\]]+\])+\.(?:add|delete|clear|set|push|pop|splice|shift|unshift)\("
    r"|Object\.assign\(\s*state\b"
)


def test_the_pattern_finds_what_it_is_for():
    for write in ('state.screen = key;', 'state.answers[q.id] = blankAnswer(q);', 'state.newIds.delete(qid)',
                  'state.phase="open"', 'state.count++', 'Object.assign(state, x)', 'state.attachments[k].push(f)'):
        assert STATE_WRITE.search(write), write
    for read in ('if (state.screen === "review")', 'state.newIds.has(q.id)', 'x = state.spec.questions',
                 'state.showAll !== hide', 'a.mode = "answer"'):
        assert not STATE_WRITE.search(read), read


def answer_writes(text: str) -> list:
    """Writes to an answer reached through answerOf(): `answerOf(q).mode = `, or through a name
    bound to it (`const a = answerOf(q); a.order.splice(...)`)."""
    names = set(re.findall(r"\b(?:const|let)\s+([A-Za-z_$][\w$]*)\s*=\s*answerOf\(", text))
    targets = [r"answerOf\([^)]*\)"] + [r"\b%s" % re.escape(name) for name in names]
    pattern = re.compile(r"(?:%s)(?:\.[\w$]+|\[[^\]]+\])+(?:\s*(?:[-+*/|&]?=(?!=)|\+\+|--)"
                         r"|\.(?:add|delete|clear|set|push|pop|splice|shift|unshift)\()" % "|".join(targets))
    return [m.group(0) for m in pattern.finditer(text)]


def test_state_js_alone_writes_the_forms_state_and_the_answers():
    # One owner: every other module changes the state through state.js's functions.
    writes = {name.name: [m.group(0) for m in STATE_WRITE.finditer(source(name.name))] + answer_writes(source(name.name))
              for name in JS.glob("*.js") if name.name != "state.js"}
    assert {name: found for name, found in writes.items() if found} == {}
    assert STATE_WRITE.search(source("state.js")) and answer_writes(source("state.js"))


def test_the_answer_pattern_finds_a_write_through_answer_of():
    assert answer_writes("const a = answerOf(q);\na.mode = m;") == ["a.mode ="]
    assert answer_writes("answerOf(q).notes = t;") == ["answerOf(q).notes ="]
    assert answer_writes("const a = answerOf(q);\na.order.splice(0, 1);") == ["a.order.splice("]
    assert answer_writes("const a = answerOf(q);\nif (a.mode === m) go(a.order.indexOf(id));") == []


def test_the_view_renders_the_state_and_never_changes_it_nor_tells_the_server():
    view = source("view.js")
    assert [m.group(0) for m in STATE_WRITE.finditer(view)] == []
    # The progress the inbox shows goes to the server from the controllers, never from a render.
    assert "reportProgress" not in view and "/progress" not in view
    assert not imported_from(view, "live.js") and not imported_from(view, "transport.js")
    # It shows the screen the controller chose, and is not told which one apart from the state.
    assert re.search(r"export function showScreen\(dir\)", view)


def test_the_submit_and_the_skip_are_submit_js_s_and_main_js_only_wires_them():
    main, submit = source("main.js"), source("submit.js")
    flow = {"submit", "send", "done", "refused", "openSkip", "skipInterview", "sendSkip", "uploadsFinished",
            "submitProblem", "submitStatus", "finished", "expired", "settledState"}
    assert flow <= defined(submit)
    assert not flow & defined(main), flow & defined(main)
    assert '"/submit"' in submit and '"/submit"' not in main
    assert "payload(" not in main and "missingTexts(" not in main
    assert {"bindSubmit", "submit", "openSkip", "skipInterview"} <= imported_from(main, "submit.js")
    # submit.js reaches the navigation through what main.js hands it: no import of main.js (the
    # app document inlines the modules and allows no cycle).
    assert "./main.js" not in submit


def test_the_text_limit_countdown_is_textlimit_js_s_and_the_limits_are_only_the_server_s():
    attach, limit = source("attach.js"), source("textlimit.js")
    for piece in ("text-left", "countDown", "longPaste", "COUNTDOWN_FROM", "freeText"):
        assert piece not in attach, piece
        assert piece in limit, piece
    # The limits come from /api/s alone (state.limits): no module keeps a copy of one.
    assert "state.limits.freeText" in limit and "state.limits[name]" in attach
    copies = re.compile(r"\b(?:%d|%d|%d)\b|\b(?:10|50)\s*\*\s*1024\s*\*\s*1024\b" % (
        askrich.FREE_TEXT_MAX, askrich.ATTACHMENT_MAX_BYTES, askrich.ATTACHMENTS_MAX_TOTAL_BYTES))
    for name in sorted(JS.glob("*.js")):
        assert not copies.search(source(name.name)), name.name


def test_the_inbox_page_uses_dom_js_s_helpers_instead_of_copies():
    dom, inbox = source("dom.js"), source("inbox.js")
    helpers = exported(dom)
    assert {"$", "clone", "announce", "applyTheme"} <= helpers
    assert not helpers & defined(inbox), helpers & defined(inbox)
    assert {"$", "clone", "announce", "applyTheme"} <= imported_from(inbox, "dom.js")
    # Nor a template cloned or the live region written by hand.
    assert ".content.firstElementChild" not in inbox and "#announcer" not in inbox
    # The form's modules neither.
    for name in sorted(JS.glob("*.js")):
        if name.name != "dom.js":
            assert not helpers & defined(source(name.name)), name.name


def test_every_module_is_served_and_reached_by_a_page():
    modules = {"js/" + path.name for path in JS.glob("*.js")}
    assert modules <= set(askrich.ASSET_FILES)
    # The inbox page's own, and those it loads once asked for (the Answered view).
    loaded = {"js/" + name for name in re.findall(r'\bimport\("\./([\w.]+\.js)"\)', source("inbox.js"))}
    assert loaded == {"js/history.js"}
    reached = {name for name, _ in askrich.app_module_order(askrich.read_asset)} | {"js/inbox.js"} | loaded
    assert modules <= reached, modules - reached


def test_the_dark_palette_is_written_once():
    # Each colour custom property is declared as the light value and once with light-dark(): the
    # OS's dark scheme and the Theme button's dark share one palette.
    css = (JS.parent / "form.css").read_text(encoding="utf-8")
    declared = re.findall(r"(--[\w-]+):\s*([^;]+);", css)
    dark = {name: value for name, value in declared if "light-dark(" in value}
    assert len(dark) >= 15
    assert {name: n for name in dark if (n := sum(1 for other, _ in declared if other == name)) != 2} == {}
    assert css.count("prefers-color-scheme: dark") == 1
