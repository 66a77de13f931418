// Rendering: builds every screen once from <template>s, then syncs controls from the state so
// focus and caret survive every change. Text goes in through textContent; markdown only
// through marked + DOMPurify (md()).
import { Marked } from "/assets/vendor/marked.esm.js";
import DOMPurify from "/assets/vendor/purify.es.mjs";
import {
  state, answerOf, statusOf, STATUS_TEXT, counts, screens, questionById, missingTexts,
  hasRecommendation,
} from "./state.js";
import { buildRank, syncRank } from "./rank.js";

const $ = (sel, root = document) => root.querySelector(sel);
const clone = (id) => document.getElementById(id).content.firstElementChild.cloneNode(true);

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
    const a = document.createElement("a");
    a.href = src;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    a.textContent = img.getAttribute("alt") || "image";
    img.replaceWith(a);
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

export function screenEl(key) {
  if (key === "intro") return $("#main > .intro");
  if (key === "review") return $("#main > .review");
  if (key && key.startsWith("q:")) return qviews.get(key.slice(2))?.el || null;
  return null;
}

function summaryOfRecommendation(q) {
  if (q.kind === "rank") return q.recommended.map((id) => labelOf(q, id)).join(" > ");
  return q.recommended.map((id) => labelOf(q, id)).join(", ");
}

export function labelOf(q, id) {
  return q.options.find((o) => o.id === id)?.label ?? id;
}

export function buildQuestion(q) {
  const n = ++uid;
  const el = clone("tpl-question");
  el.dataset.screen = `q:${q.id}`;
  el.dataset.qid = q.id;
  el.id = `q${n}`;
  const h = $(".q-header", el);
  h.id = `q${n}-h`;
  h.textContent = q.header;
  el.setAttribute("aria-labelledby", h.id);
  $(".q-kind", el).textContent = q.kind === "rank" ? "Rank every option"
    : q.options.length === 0 ? "Free text" : q.multiSelect ? "Pick any" : "Pick one";
  fillMd($(".q-body", el), q.body);

  if (q.dependsOn.length) {
    const p = $(".q-builds", el);
    p.append("Builds on ");
    q.dependsOn.forEach((id, i) => {
      if (i) p.append(", ");
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
        lab.textContent = `${o.label}: ${o.textInput.placeholder || "details"}${o.textInput.required ? " (required)" : ""}`;
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
        $(".other-label", other).textContent = "Your answer";
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
        l.textContent = "Other";
        main.append(l);
        lab.append(input, key, main);
        li.append(lab);
        list.append(li);
        refs.otherInput = input;
        $(".other-label", other).textContent = "Other, in your words";
        field.placeholder = "Type your own answer";
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
  qviews.set(q.id, refs);
  return el;
}

export function syncQuestion(q) {
  const refs = qviews.get(q.id);
  if (!refs) return;
  const a = answerOf(q);
  const el = refs.el;
  $(".q-num", el).textContent = `Question ${qNumber(q)} of ${state.spec.questions.length}`;
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
    prob.textContent = `Fill in the text for ${missing.map((o) => `"${o.label}"`).join(", ")} before submitting.`;
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
export function syncRail() {
  const rail = $("#rail");
  const wanted = state.spec.questions.map((q) => q.id);
  const have = [...rail.querySelectorAll("li[data-qid]")].map((li) => li.dataset.qid);
  if (wanted.join("\n") !== have.join("\n")) {
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
    });
    const li = document.createElement("li");
    li.dataset.review = "1";
    const b = document.createElement("button");
    b.type = "button";
    b.className = "chip rail-chip rail-review";
    b.dataset.goto = "review";
    b.textContent = "Review";
    li.append(b);
    rail.append(li);
  }
  for (const li of rail.querySelectorAll("li[data-qid]")) {
    const q = questionById(li.dataset.qid);
    const b = li.firstElementChild;
    const s = statusOf(q);
    b.dataset.status = s;
    b.classList.toggle("is-new", state.newIds.has(q.id));
    const current = state.screen === `q:${q.id}`;
    if (current) b.setAttribute("aria-current", "step"); else b.removeAttribute("aria-current");
    b.querySelector(".sr-only").textContent = `: ${q.header.slice(0, 60)}, ${STATUS_TEXT[s]}${state.newIds.has(q.id) ? ", new" : ""}`;
  }
  const rb = rail.querySelector(".rail-review");
  if (state.screen === "review") rb.setAttribute("aria-current", "step"); else rb.removeAttribute("aria-current");
  const c = counts();
  const total = state.spec.questions.length;
  const done = total - c.open;
  const bar = $("#progress");
  bar.setAttribute("aria-valuemax", String(total));
  bar.setAttribute("aria-valuenow", String(done));
  bar.setAttribute("aria-valuetext", `${done} of ${total} resolved`);
  bar.style.setProperty("--done", String(total ? done / total : 0));
  keepChipInView();
}

function keepChipInView() {
  const rail = $("#rail");
  const cur = rail.querySelector("[aria-current]");
  if (!cur || rail.scrollWidth <= rail.clientWidth) return;
  const r = cur.getBoundingClientRect();
  const rr = rail.getBoundingClientRect();
  if (r.left < rr.left + 8) rail.scrollLeft -= rr.left + 8 - r.left;
  else if (r.right > rr.right - 8) rail.scrollLeft += r.right - rr.right + 8;
}

// ---- review ----
export function answerText(q) {
  const a = answerOf(q);
  const s = statusOf(q);
  if (s === "deferred") return "Deferred";
  if (s === "needs-info") return "Needs more info";
  if (s === "open") return "Not answered yet";
  if (q.kind === "rank") return a.order.map((id) => labelOf(q, id)).join(" > ");
  const parts = a.selected.map((id) => {
    const t = (a.optionTexts[id] || "").trim();
    return t ? `${labelOf(q, id)} [${t}]` : labelOf(q, id);
  });
  if (a.otherOn && a.other.trim()) parts.push(q.options.length ? `Other: "${a.other.trim()}"` : `"${a.other.trim()}"`);
  return parts.join(", ");
}

export function syncReview() {
  const el = screenEl("review");
  if (!el) return;
  const list = $(".review-list", el);
  list.replaceChildren();
  for (const q of state.spec.questions) {
    const li = clone("tpl-review-row");
    const b = $(".review-jump", li);
    b.dataset.goto = `q:${q.id}`;
    const s = statusOf(q);
    li.dataset.status = s;
    li.dataset.qid = q.id;
    $(".review-num", li).textContent = `${qNumber(q)}.`;
    $(".review-header", li).textContent = q.header;
    $(".review-answer", li).textContent = answerText(q);
    const a = answerOf(q);
    if (a.notes.trim()) {
      const n = $(".review-note", li);
      n.textContent = `Note: ${a.notes.trim()}`;
      n.hidden = false;
    }
    const chip = $(".review-status", li);
    chip.textContent = STATUS_TEXT[s];
    chip.dataset.status = s;
    if (missingTexts(q).length) li.classList.add("blocked");
    list.append(li);
  }
  const c = counts();
  $(".review-counts", el).textContent =
    `${c.answered} answered, ${c.deferred} deferred, ${c.needsInfo} need more info, ${c.open} open.`;
  const gn = $("#general-notes");
  if (gn.value !== state.generalNotes) gn.value = state.generalNotes;
  const rest = state.spec.questions.filter((q) => statusOf(q) === "open" && hasRecommendation(q)).length;
  $("#btn-accept-all", el).disabled = rest === 0;
  if (!state.confirmArmed) $(".confirm", el).hidden = true;
}

// ---- screens ----
export function buildScreens() {
  const main = $("#main");
  main.replaceChildren();
  qviews.clear();
  if (state.spec.intro) {
    const intro = clone("tpl-intro");
    $(".q-header", intro).textContent = state.spec.title;
    fillMd($(".intro-body", intro), state.spec.intro);
    main.append(intro);
  }
  for (const q of state.spec.questions) main.append(buildQuestion(q));
  main.append(clone("tpl-review"));
}

// Adds screens for questions that arrived after the first render, before the review screen.
export function addQuestionScreens(ids) {
  const review = screenEl("review");
  for (const id of ids) review.before(buildQuestion(questionById(id)));
}

export function syncAll() {
  document.title = state.spec ? `${state.spec.title} · Ask User Rich` : "Ask User Rich";
  $("#title").textContent = state.spec.title;
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
    next.textContent = "Submit";
    next.dataset.role = "submit";
  } else {
    next.textContent = list[i + 1] === "review" ? "Review →" : "Next →";
    delete next.dataset.role;
  }
  const where = $("#where");
  if (state.screen === "intro") where.textContent = "Introduction";
  else if (state.screen === "review") where.textContent = "Review";
  else {
    const q = questionById(state.screen.slice(2));
    where.textContent = q ? `${qNumber(q)} / ${state.spec.questions.length}` : "";
  }
  const btn = $("#btn-view");
  btn.setAttribute("aria-pressed", String(state.showAll));
  btn.textContent = state.showAll ? "One by one" : "Show all";
}

// Shows one screen (stepper) or marks the current one (show all). dir: 1 forward, -1 back, 0 none.
export function showScreen(key, dir) {
  state.screen = key;
  document.body.classList.toggle("show-all", state.showAll);
  const main = $("#main");
  for (const sec of main.children) {
    const isCur = sec.dataset.screen === key;
    sec.hidden = !state.showAll && !isCur;
    sec.classList.toggle("current", isCur);
    sec.classList.remove("slide-next", "slide-prev");
  }
  const el = screenEl(key);
  if (el && !state.showAll && dir) {
    // Restart the animation even when the same class was there a moment ago.
    void el.offsetWidth;
    el.classList.add(dir > 0 ? "slide-next" : "slide-prev");
  }
  if (key.startsWith("q:")) state.newIds.delete(key.slice(2));
  syncRail();
  syncNav();
  if (key.startsWith("q:")) { const q = questionById(key.slice(2)); if (q) syncQuestion(q); }
  return el;
}

export function endScreen(heading, text, more) {
  const main = $("#main");
  main.replaceChildren();
  const el = clone("tpl-end");
  $(".q-header", el).textContent = heading;
  $(".end-text", el).textContent = text;
  $(".end-more", el).textContent = more || "";
  main.append(el);
  document.body.classList.add("ended");
  document.body.classList.remove("show-all");
  return el;
}

// ---- notices ----
export function notice(kind, text, { markdown = null, action = null, id = null } = {}) {
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
  x.textContent = "Dismiss";
  x.addEventListener("click", () => n.remove());
  row.append(x);
  n.append(row);
  box.append(n);
  return n;
}

export function clearNotice(id) {
  $("#notices").querySelector(`[data-id="${id}"]`)?.remove();
}

export function announce(text) {
  const el = $("#announcer");
  el.textContent = "";
  // A fresh text node makes screen readers announce repeated messages too.
  requestAnimationFrame(() => { el.textContent = text; });
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

export function applyTheme(theme) {
  const root = document.documentElement;
  if (theme === "light" || theme === "dark") root.dataset.theme = theme;
  else delete root.dataset.theme;
  $("#btn-theme").textContent = `Theme: ${theme === "light" || theme === "dark" ? theme : "auto"}`;
}
