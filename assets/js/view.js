// Rendering: builds every screen once from <template>s, then syncs controls from the state so
// focus and caret survive every change. Text goes in through textContent; markdown only
// through marked + DOMPurify (md()). It reads the state and never changes it, nor tells the
// server anything: the controllers (main.js, submit.js) do, then ask it to show the result.
import { Marked } from "/assets/vendor/marked.esm.js";
import DOMPurify from "/assets/vendor/purify.es.mjs";
import {
  state, answerOf, statusOf, screens, questionById, missingTexts, hasRecommendation, labelOf,
  EAGER_SCREENS,
} from "./state.js";
import { buildRank, syncRank } from "./rank.js";
import { t, tPlain, isolate, list as joinList } from "./i18n.js";
import { mountAttachments } from "./attach.js";
import { $, clone, setText, setCounts, setPhrases, whenIdle, announce } from "./dom.js";
import { buildReview, renderReview, reviewFromTop, syncReview, statusText } from "./review.js";

// ---- markdown ----
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});
// Raw HTML in markdown is shown as text, except a few attribute-free formatting tags. Besides
// safety (DOMPurify still cleans everything), this keeps on*= attributes away from the HTML
// parser: Chromium reports a CSP violation for them even in an inert document.
const SIMPLE_TAG = /^<\/?(br|hr|b|i|em|strong|code|kbd|sub|sup|u|s|del|ins|mark|small|details|summary|p)\s*\/?>$/i;
const escapeTag = (tag) => tag.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const markdown = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html(token) {
      return String(token.text).replace(/<[^>]*>?/g, (tag) => (SIMPLE_TAG.test(tag) ? tag : escapeTag(tag)));
    },
  },
});

export function md(text) {
  const html = markdown.parse(String(text ?? ""));
  const frag = DOMPurify.sanitize(html, { RETURN_DOM_FRAGMENT: true, FORBID_TAGS: ["style", "form"], FORBID_ATTR: ["style"] });
  // The page may load images only from itself (CSP): show any other image as a link to it
  // instead of letting the browser refuse it.
  for (const img of frag.querySelectorAll("img")) {
    const src = img.getAttribute("src") || "";
    if (src.startsWith("data:image/") || src.startsWith("/assets/")) continue;
    const link = document.createElement("a");
    link.href = src;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    link.textContent = img.getAttribute("alt") || t("md.image");
    img.replaceWith(link);
  }
  return frag;
}

function fillMd(el, text) {
  el.replaceChildren();
  if (text) { el.append(md(text)); el.hidden = false; } else el.hidden = true;
}

// ---- per-question DOM registry ----
export const qviews = new Map(); // qid -> {el, ...refs}
let uid = 0;

export function qNumber(q) {
  return state.spec.questions.indexOf(q) + 1;
}

// The intro and review sections, kept by buildScreens(): a selector such as "#main > .review"
// is matched by walking the page up to the review, through every question screen built so far
// (about 0.4 ms each time with 1,000 questions, and a step asked several times).
const fixedScreens = { intro: null, review: null };

export function screenEl(key) {
  if (key === "intro" || key === "review") {
    const el = fixedScreens[key];
    return el && el.isConnected ? el : null;
  }
  if (key && key.startsWith("q:")) {
    const q = questionById(key.slice(2));
    return q ? ensureBuilt(q).el : null;
  }
  return null;
}

// Question screens of a long interview are built when first needed. A 1,000-question interview
// with 20 options each took seconds to build up front (mostly markdown through DOMPurify), and
// the budget is interactive within 1.5 s. An interview of up to EAGER_SCREENS questions is
// built whole at once, as before; in a longer one only the screen shown is built, and every
// other question starts as an empty placeholder section with the same data-screen/data-qid
// (navigation, the rail and show-all scroll tracking only read those) that ensureBuilt() swaps
// for the real screen.

const placeholders = new Map(); // qid -> the placeholder section standing in for its screen

// In the stepper, the sections that showScreen() left shown, current or sliding: every other
// section is hidden and plain, so a step only looks at these and at the new screen. Reading
// 1,000 sections' hidden flags and class lists took 1-2 ms of every step (the budget: a screen
// change within 50 ms). null when not known (screens were added, or show-all shows them all):
// the next showScreen() then looks at every section.
let shownScreens = null;

function placeholder(q) {
  const el = document.createElement("section");
  el.className = "screen question";
  el.dataset.screen = `q:${q.id}`;
  el.dataset.qid = q.id;
  el.hidden = true;
  placeholders.set(q.id, el);
  return el;
}

export function ensureBuilt(q) {
  const refs = qviews.get(q.id);
  if (refs) return refs;
  const old = placeholders.get(q.id);
  placeholders.delete(q.id);
  const el = buildQuestion(q);
  if (old && old.isConnected) {
    el.hidden = old.hidden;
    el.classList.toggle("current", old.classList.contains("current"));
    old.replaceWith(el);
    if (shownScreens && shownScreens.delete(old)) shownScreens.add(el);
  }
  syncQuestion(q);
  return qviews.get(q.id);
}

function buildAll() {
  for (const q of state.spec.questions) ensureBuilt(q);
}

// While the page is idle, builds the screens next to the one shown, so that stepping to them
// does not wait for their markdown.

function buildNeighboursWhenIdle() {
  if (!placeholders.size) return;
  whenIdle(() => {
    const list = screens();
    const i = list.indexOf(state.screen);
    for (const key of [list[i + 1], list[i - 1]]) {
      const q = key && key.startsWith("q:") ? questionById(key.slice(2)) : null;
      if (q && placeholders.has(q.id)) ensureBuilt(q);
    }
  });
}

function summaryOfRecommendation(q) {
  if (q.kind === "rank") return q.recommended.map((id) => isolate(labelOf(q, id))).join(" > ");
  return joinList(q.recommended.map((id) => isolate(labelOf(q, id))));
}

// Interview words quoted the language's way, as a list: “a”, “b” / 「a」、「b」.
export function quotedList(words) {
  return joinList(words.map((w) => t("quote", { text: w })));
}

export function buildQuestion(q) {
  const n = ++uid;
  const el = clone("tpl-question");
  el.dataset.screen = `q:${q.id}`;
  el.dataset.qid = q.id;
  el.id = `q${n}`;
  const h = $(".q-header", el);
  h.id = `q${n}-h`;
  setPhrases(h, q.header);
  el.setAttribute("aria-labelledby", h.id);
  $(".q-kind", el).textContent = t(q.kind === "rank" ? "kind.rank"
    : q.options.length === 0 ? "kind.free" : q.multiSelect ? "kind.multi" : "kind.single");
  fillMd($(".q-body", el), q.body);
  // The agent's note travels with the questions it was appended with, so it is seen even when
  // the page was opened after the append.
  if (state.note && state.note.text && q.version > 1 && q.version === state.note.version) {
    $(".q-agent-note-head", el).textContent = t("q.agentNote");
    fillMd($(".q-agent-note-text", el), state.note.text);
    $(".q-agent-note", el).hidden = false;
  }

  if (q.dependsOn.length) {
    const p = $(".q-builds", el);
    p.append(t("q.buildsOn")); // its own space, or none after a full-width colon
    q.dependsOn.forEach((id, i) => {
      if (i) p.append(t("list.sep"));
      const b = document.createElement("button");
      b.type = "button";
      b.className = "link builds-link";
      b.dataset.goto = `q:${id}`;
      const dep = questionById(id);
      b.textContent = dep ? `#${qNumber(dep)}` : id;
      if (dep) b.title = dep.header;
      p.append(b);
    });
    p.hidden = false;
  }

  if (hasRecommendation(q)) {
    $(".rec", el).hidden = false;
    $(".rec-what", el).textContent = summaryOfRecommendation(q);
    fillMd($(".rec-why", el), q.rationale);
  }

  const refs = { el, n, options: new Map(), otherInput: null, otherText: null };
  if (q.kind === "rank") {
    const box = $(".rank", el);
    box.hidden = false;
    buildRank(q, box, n);
  } else {
    const type = q.multiSelect ? "checkbox" : "radio";
    const fs = $(".options", el);
    const list = $(".opt-list", el);
    $("legend", fs).textContent = q.header;
    q.options.forEach((o, i) => {
      const li = clone("tpl-option");
      li.dataset.opt = o.id;
      const input = $(".opt-input", li);
      input.type = type;
      input.name = `q${n}-opt`;
      input.value = o.id;
      input.id = `q${n}-o${i}`;
      $(".opt-num", li).textContent = i < 9 ? String(i + 1) : "";
      $(".opt-label", li).textContent = o.label;
      $(".opt-rec", li).hidden = !q.recommended.includes(o.id);
      fillMd($(".opt-desc", li), o.description);
      fillMd($(".opt-preview", li), o.preview);
      if (o.preview) li.classList.add("has-preview");
      let textInput = null;
      if (o.textInput) {
        const wrap = $(".opt-text", li);
        textInput = $(".opt-text-input", li);
        textInput.id = `q${n}-o${i}-text`;
        textInput.dataset.opt = o.id;
        const lab = $(".opt-text-label", li);
        lab.htmlFor = textInput.id;
        lab.textContent = t(o.textInput.required ? "opt.textRequired" : "opt.text",
          { label: o.label, what: o.textInput.placeholder || t("opt.details") });
        if (o.textInput.placeholder) textInput.placeholder = o.textInput.placeholder;
        if (o.textInput.required) textInput.setAttribute("aria-required", "true");
        refs.textWrap = refs.textWrap || new Map();
        refs.textWrap.set(o.id, wrap);
      } else $(".opt-text", li).remove();
      refs.options.set(o.id, { li, input, textInput });
      list.append(li);
    });
    if (q.options.length) fs.hidden = false;
    if (q.allowOther || q.options.length === 0) {
      const other = $(".other", el);
      other.hidden = false;
      let field = $(".other-text", other);
      if (q.options.length === 0) {
        const ta = document.createElement("textarea");
        ta.className = "other-text";
        ta.rows = 3;
        field.replaceWith(ta);
        field = ta;
        $(".other-label", other).textContent = t("other.yourAnswer");
      } else {
        // Other is a choice in the option list; its text field follows the list.
        const li = document.createElement("li");
        li.className = "opt opt-other";
        const lab = document.createElement("label");
        lab.className = "opt-row";
        const input = document.createElement("input");
        input.type = type;
        input.className = "opt-input";
        input.name = `q${n}-opt`;
        input.value = "__other";
        input.id = `q${n}-other-pick`;
        const key = document.createElement("span");
        key.className = "opt-num";
        key.setAttribute("aria-hidden", "true");
        key.textContent = "O";
        const main = document.createElement("span");
        main.className = "opt-main";
        const l = document.createElement("span");
        l.className = "opt-label";
        l.textContent = t("other.option");
        main.append(l);
        lab.append(input, key, main);
        li.append(lab);
        list.append(li);
        refs.otherInput = input;
        $(".other-label", other).textContent = t("other.label");
        field.placeholder = t("other.placeholder");
      }
      field.id = `q${n}-other`;
      $(".other-label", other).htmlFor = field.id;
      refs.otherText = field;
    }
  }

  const mode = $(".mode", el);
  for (const r of mode.querySelectorAll("input")) r.name = `q${n}-mode`;
  const note = $(".note-text", el);
  note.id = `q${n}-note`;
  $(".note-label", el).htmlFor = note.id;
  mountAttachments($(".note", el), q.id);
  qviews.set(q.id, refs);
  return el;
}

export function syncQuestion(q) {
  const refs = qviews.get(q.id);
  if (!refs) return;
  const a = answerOf(q);
  const el = refs.el;
  $(".q-num", el).textContent = t("q.number", { n: qNumber(q), total: state.spec.questions.length });
  $(".q-new", el).hidden = !state.newIds.has(q.id);
  el.dataset.status = statusOf(q);
  el.classList.toggle("set-aside", a.mode !== "answer");
  for (const r of $(".mode", el).querySelectorAll("input")) r.checked = r.value === a.mode;
  const note = $(".note-text", el);
  if (note.value !== a.notes) note.value = a.notes;

  if (q.kind === "rank") {
    syncRank(q);
  } else {
    let active = null;
    for (const [id, o] of refs.options) {
      const on = a.selected.includes(id);
      o.input.checked = on;
      o.li.classList.toggle("picked", on);
      if (o.textInput) {
        refs.textWrap.get(id).hidden = !on;
        const t = a.optionTexts[id] || "";
        if (o.textInput.value !== t) o.textInput.value = t;
      }
      if (on && !active) active = o.input;
    }
    if (refs.otherInput) {
      refs.otherInput.checked = a.otherOn;
      refs.otherInput.closest("li").classList.toggle("picked", a.otherOn);
      if (a.otherOn && !active) active = refs.otherInput;
    }
    if (refs.otherText && refs.otherText.value !== a.other) refs.otherText.value = a.other;
    // The option list is one Tab stop: the picked option, else the focused one, else the first.
    const inputs = optionInputs(q);
    const focused = inputs.find((i) => i === document.activeElement);
    const stop = focused || active || inputs[0];
    for (const i of inputs) i.tabIndex = i === stop ? 0 : -1;
  }
  const missing = missingTexts(q);
  const prob = $(".q-problem", el);
  if (missing.length && el.classList.contains("tried")) {
    prob.textContent = t("q.fillIn", { names: quotedList(missing.map((o) => o.label)) });
    prob.hidden = false;
  } else prob.hidden = true;
  for (const [id, o] of refs.options) {
    if (o.textInput) o.textInput.setAttribute("aria-invalid", String(missing.some((m) => m.id === id) && el.classList.contains("tried")));
  }
}

export function optionInputs(q) {
  const refs = qviews.get(q.id);
  if (!refs) return [];
  const list = [...refs.options.values()].map((o) => o.input);
  if (refs.otherInput) list.push(refs.otherInput);
  return list;
}

// ---- rail and progress ----
// What each chip last showed (status, new, current), so that a step compares values for 1,000
// chips instead of reading and writing their DOM (the budget: a screen change within 50 ms).
let railChips = new Map(); // qid -> {b, sr, s, isNew, current}
let railIds = "";

export function syncRail() {
  const rail = $("#rail");
  const wanted = state.spec.questions.map((q) => q.id).join("\n");
  if (wanted !== railIds || rail.childElementCount !== state.spec.questions.length + 1) {
    railIds = wanted;
    railChips = new Map();
    rail.replaceChildren();
    state.spec.questions.forEach((q, i) => {
      const li = document.createElement("li");
      li.dataset.qid = q.id;
      const b = document.createElement("button");
      b.type = "button";
      b.className = "chip rail-chip";
      b.dataset.goto = `q:${q.id}`;
      b.title = q.header;
      const num = document.createElement("span");
      num.textContent = String(i + 1);
      const sr = document.createElement("span");
      sr.className = "sr-only";
      const dot = document.createElement("span");
      dot.className = "dot";
      dot.setAttribute("aria-hidden", "true");
      b.append(num, sr, dot);
      li.append(b);
      rail.append(li);
      railChips.set(q.id, { b, sr, s: null, isNew: null, current: null });
    });
    const li = document.createElement("li");
    li.dataset.review = "1";
    const b = document.createElement("button");
    b.type = "button";
    b.className = "chip rail-chip rail-review";
    b.dataset.goto = "review";
    b.textContent = t("where.review");
    li.append(b);
    rail.append(li);
  }
  // Compared by id, and the open questions counted on the way: a "q:<id>" string per chip and a
  // second pass through counts() were a good part of this loop's cost.
  const cur = state.screen && state.screen.startsWith("q:") ? state.screen.slice(2) : null;
  let open = 0;
  for (const q of state.spec.questions) {
    const chip = railChips.get(q.id);
    const s = statusOf(q);
    if (s === "open") open++;
    const isNew = state.newIds.has(q.id);
    const current = q.id === cur;
    if (chip.s === s && chip.isNew === isNew && chip.current === current) continue;
    chip.s = s;
    chip.isNew = isNew;
    chip.current = current;
    chip.b.dataset.status = s;
    chip.b.classList.toggle("is-new", isNew);
    if (current) chip.b.setAttribute("aria-current", "step"); else chip.b.removeAttribute("aria-current");
    chip.sr.textContent = t(isNew ? "rail.chipNew" : "rail.chip", { header: q.header.slice(0, 60), status: statusText(s) });
  }
  const rb = rail.querySelector(".rail-review");
  if (state.screen === "review") rb.setAttribute("aria-current", "step"); else rb.removeAttribute("aria-current");
  const total = state.spec.questions.length;
  const done = total - open;
  const bar = $("#progress");
  bar.setAttribute("aria-valuemax", String(total));
  bar.setAttribute("aria-valuenow", String(done));
  bar.setAttribute("aria-valuetext", tPlain("progress.value", { done, total }));
  bar.style.setProperty("--done", String(total ? done / total : 0));
  // Not now: measuring the rail here forced a layout in the middle of every step, and the frame
  // then laid the page out a second time. Nor in the frame that shows the new screen: after a
  // jump (End, Home, a review row) that frame also painted the rail scrolled far, and the next
  // one laid out the chips scrolled into view (content-visibility) with the whole rail, all
  // before the key's answer was done. Just after that frame instead (a task queued from it): the
  // layout is up to date then, so measuring costs nothing, and the rail follows in the next
  // frame. Once, however many syncs asked for it.
  if (!chipQueued) {
    chipQueued = true;
    afterNextFrame(() => { chipQueued = false; keepChipInView(4); });
  }
}
let chipQueued = false;

function afterNextFrame(fn) {
  requestAnimationFrame(() => setTimeout(fn, 0));
}

// `passes`: once we scrolled, look again in each of the next few frames. Chips scrolled into
// view for the first time are drawn at their real width instead of their placeholder size
// (content-visibility) only a frame or two later, which moved a far target (the Review chip
// after End on a long interview) back out of view. Only after a scroll of ours, so that it
// never fights the user's for longer than those frames.
function keepChipInView(passes, scrolled = false) {
  const rail = $("#rail");
  const cur = rail.querySelector("[aria-current]");
  if (!cur || rail.scrollWidth <= rail.clientWidth) return;
  const r = cur.getBoundingClientRect();
  const rr = rail.getBoundingClientRect();
  const before = rail.scrollLeft;
  if (r.left < rr.left + 8) rail.scrollLeft -= rr.left + 8 - r.left;
  else if (r.right > rr.right - 8) rail.scrollLeft += r.right - rr.right + 8;
  if (passes > 1 && (scrolled || rail.scrollLeft !== before)) afterNextFrame(() => keepChipInView(passes - 1, true));
}

// ---- screens ----
export function buildScreens() {
  const main = $("#main");
  main.replaceChildren();
  qviews.clear();
  placeholders.clear();
  shownScreens = null;
  if (state.spec.intro) {
    const intro = clone("tpl-intro");
    setPhrases($(".q-header", intro), state.spec.title);
    fillMd($(".intro-body", intro), state.spec.intro);
    main.append(intro);
    fixedScreens.intro = intro;
  }
  const eager = state.showAll || state.spec.questions.length <= EAGER_SCREENS;
  for (const q of state.spec.questions) {
    main.append(eager || state.screen === `q:${q.id}` ? buildQuestion(q) : placeholder(q));
  }
  const review = buildReview();
  main.append(review);
  fixedScreens.review = review;
  // A long interview's review rows are made while the page is idle, before the user gets there.
  if (!eager) whenIdle(() => { if (review.isConnected) renderReview(review); });
}

// Adds screens for questions that arrived after the first render, before the review screen.
export function addQuestionScreens(ids) {
  const review = screenEl("review");
  for (const id of ids) review.before(buildQuestion(questionById(id)));
  shownScreens = null;
}

// The tab's title, led by the number of follow-up questions not seen yet ("(2) Title · …"),
// so that a user in another tab sees that the agent asked more.
export function syncTitle() {
  const unseen = state.newIds.size;
  const title = state.spec ? `${state.spec.title} · Ask User Rich` : "Ask User Rich";
  const want = unseen ? `(${unseen}) ${title}` : title;
  if (document.title !== want) document.title = want;
}

export function syncAll() {
  syncTitle();
  setPhrases($("#title"), state.spec.title);
  for (const q of state.spec.questions) syncQuestion(q);
  syncRail();
  syncReview();
  syncNav();
}

export function syncNav() {
  const list = screens();
  const i = list.indexOf(state.screen);
  $("#btn-back").disabled = i <= 0;
  const next = $("#btn-next");
  if (state.screen === "review") {
    setText($(".label", next), t("nav.submit"));
    next.dataset.role = "submit";
  } else {
    setText($(".label", next), t(list[i + 1] === "review" ? "nav.review" : "nav.next"));
    delete next.dataset.role;
  }
  $(".arrow", next).hidden = state.screen === "review";
  const where = $("#where");
  if (state.screen === "intro") where.textContent = t("where.intro");
  else if (state.screen === "review") where.textContent = t("where.review");
  else {
    const q = questionById(state.screen.slice(2));
    where.textContent = q ? t("where.question", { n: qNumber(q), total: state.spec.questions.length }) : "";
  }
  const btn = $("#btn-view");
  btn.setAttribute("aria-pressed", String(state.showAll));
  btn.textContent = t(state.showAll ? "view.oneByOne" : "view.showAll");
}

// Shows the current screen, state.screen (stepper), or marks it (show all). dir: 1 forward, -1
// back, 0 none.
export function showScreen(dir) {
  const key = state.screen;
  document.body.classList.toggle("show-all", state.showAll);
  if (state.showAll) buildAll();
  const el = screenEl(key);
  const wasHidden = !el || el.hidden;
  const main = $("#main");
  // Only the screens whose state changes are written: with 1,000 screens, rewriting every
  // hidden flag and class list invalidated the style of the whole page at each step.
  const own = el && el.parentNode === main ? [el] : [];
  const look = state.showAll || !shownScreens ? main.children : new Set([...shownScreens, ...own]);
  for (const sec of look) {
    const isCur = sec.dataset.screen === key;
    const hide = !state.showAll && !isCur;
    if (sec.hidden !== hide) sec.hidden = hide;
    if (sec.classList.contains("current") !== isCur) sec.classList.toggle("current", isCur);
    if (sec.classList.contains("slide-next") || sec.classList.contains("slide-prev")) sec.classList.remove("slide-next", "slide-prev");
  }
  if (state.showAll) syncReview();
  // The page is scrolled to the top on arrival: the review's first rows, not the ones last seen.
  else if (key === "review" && wasHidden) reviewFromTop();
  if (el && !state.showAll && dir) {
    // Restart the animation even when the same class was there a moment ago. A screen that was
    // hidden starts its animation anyway, so only then is a layout forced (it cost a layout of
    // the whole 1,000-question page at every step).
    if (!wasHidden) void el.offsetWidth;
    el.classList.add(dir > 0 ? "slide-next" : "slide-prev");
  }
  shownScreens = state.showAll ? null : new Set(own);
  syncRail();
  syncNav();
  if (key.startsWith("q:")) { const q = questionById(key.slice(2)); if (q) syncQuestion(q); }
  buildNeighboursWhenIdle();
  return el;
}

// `counts`: the text is a row of counts, kept label by label on one line.
export function endScreen(heading, text, more, { counts = false } = {}) {
  const main = $("#main");
  main.replaceChildren();
  shownScreens = null;
  const el = clone("tpl-end");
  setPhrases($(".q-header", el), heading);
  if (counts) setCounts($(".end-text", el), text);
  else $(".end-text", el).textContent = text;
  $(".end-more", el).textContent = more || "";
  main.append(el);
  document.body.classList.add("ended");
  document.body.classList.remove("show-all");
  return el;
}

// ---- notices ----
// A notice is shown in #notices and read out through the live region: `say` (the text by
// default) is what a screen reader hears.
export function notice(kind, text, { markdown = null, action = null, id = null, say = text } = {}) {
  const box = $("#notices");
  if (id) box.querySelector(`[data-id="${id}"]`)?.remove();
  const n = document.createElement("div");
  n.className = `notice notice-${kind}`;
  if (id) n.dataset.id = id;
  const p = document.createElement("p");
  p.textContent = text;
  n.append(p);
  if (markdown) {
    const d = document.createElement("div");
    d.className = "md";
    d.append(md(markdown));
    n.append(d);
  }
  const row = document.createElement("div");
  row.className = "notice-actions";
  if (action) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "btn";
    b.textContent = action.label;
    b.addEventListener("click", action.run);
    row.append(b);
  }
  const x = document.createElement("button");
  x.type = "button";
  x.className = "btn notice-close";
  x.textContent = t("notice.dismiss");
  x.addEventListener("click", () => n.remove());
  row.append(x);
  n.append(row);
  box.append(n);
  announce(say);
  return n;
}

export function clearNotice(id) {
  $("#notices").querySelector(`[data-id="${id}"]`)?.remove();
}

// ---- scrolling that follows the keyboard ----
export function reducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

// Keeps el in the middle half of the space between the header and the footer; pins a tall
// element near the top.
export function keepInView(el) {
  if (!el || !el.getBoundingClientRect) return;
  const top = $("#bar").getBoundingClientRect().bottom;
  const nav = $("#nav");
  const bottom = nav.hidden ? window.innerHeight : Math.min(window.innerHeight, nav.getBoundingClientRect().top);
  const space = bottom - top;
  if (space <= 0) return;
  const r = el.getBoundingClientRect();
  let delta = 0;
  if (r.height > space / 2) {
    const want = top + 12;
    if (Math.abs(r.top - want) > 4) delta = r.top - want;
  } else {
    const lo = top + space / 4;
    const hi = bottom - space / 4;
    if (r.top < lo || r.bottom > hi) delta = (r.top + r.height / 2) - (top + space / 2);
  }
  if (Math.abs(delta) >= 1) window.scrollBy({ top: delta, behavior: reducedMotion() ? "auto" : "smooth" });
}
