// The review screen: every question's answer in one list, the counts, the general notes and the
// submit row. The list of a long interview is virtualized (below).
import { state, answerOf, statusOf, counts, missingTexts, hasRecommendation, labelOf, EAGER_SCREENS } from "./state.js";
import { t, isolate, list as joinList } from "./i18n.js";
import { $, clone, setText, setCounts, setPhrases, whenIdle } from "./dom.js";
import { mountAttachments } from "./attach.js";

export const statusText = (s) => t(`status.${s}`);

// The review section of the screens built last, kept by buildReview().
let reviewEl = null;
const reviewScreen = () => (reviewEl && reviewEl.isConnected ? reviewEl : null);

// A new review section for a new set of screens: rows, window and measures start over.
export function buildReview() {
  reviewRows.clear();
  Object.assign(rv, { virtual: false, ids: "", start: 0, end: 0, pitch: [] });
  const review = clone("tpl-review");
  mountAttachments($(".general", review), "");
  reviewEl = review;
  return review;
}

export function answerText(q) {
  const a = answerOf(q);
  const s = statusOf(q);
  if (s === "deferred") return t("answer.deferred");
  if (s === "needs-info") return t("answer.needsInfo");
  if (s === "open") return t("answer.open");
  // Each label (and the text typed for it) is isolated like a value t() inserts: in a right-to-
  // left page a ranked order of Latin labels then reads from the right, first to last.
  if (q.kind === "rank") return a.order.map((id) => isolate(labelOf(q, id))).join(" > ");
  const parts = a.selected.map((id) => {
    const t = (a.optionTexts[id] || "").trim();
    return t ? `${isolate(labelOf(q, id))} [${isolate(t)}]` : isolate(labelOf(q, id));
  });
  if (a.otherOn && a.other.trim()) {
    const text = t("quote", { text: a.other.trim() });
    parts.push(q.options.length ? t("answer.other", { text }) : text);
  }
  return joinList(parts);
}

// Review rows are kept and updated in place (text written only when it changed), not rebuilt
// at every sync: a 1,000-question review otherwise rebuilt 1,000 rows each time.
const reviewRows = new Map(); // qid -> {li, num, header, answer, note, chip}

// The review list of a long interview (more than EAGER_SCREENS questions) is virtualized: only
// the rows near the viewport are in the DOM, and the list's padding stands in for the rest, so
// the page keeps its full height and scroll bar. With all 1,000 rows in the DOM, End -> review
// took about 100-260 ms (the budget is 50 ms): script, style and layout for 1,000 rows
// and the content-visibility checks of the ones kept unrendered; now it costs about what a
// step to the next question does.
// An interview of up to EAGER_SCREENS questions keeps every row, exactly as before.
// Screen readers still hear "item n of N" (aria-posinset/aria-setsize), a row that has the
// focus is never dropped, and Tab / Shift+Tab walk into rows not rendered yet (see below).
const ROW_OVERSCAN = 8; // rows rendered beyond each edge of the viewport
const rv = {
  virtual: false,
  ids: "",          // the question ids the list was laid out for
  start: 0,         // rows [start, end) are in the DOM
  end: 0,
  pitch: [],        // measured distance from row i's top to row i+1's top (0: not measured)
  guess: 74,        // pitch of a row not measured yet (a row of two lines); measured soon
  guessed: false,
  queued: false,
};

const virtualReview = () => state.spec.questions.length > EAGER_SCREENS;

function reviewRow(q) {
  let row = reviewRows.get(q.id);
  if (!row) {
    const li = clone("tpl-review-row");
    $(".review-jump", li).dataset.goto = `q:${q.id}`;
    li.dataset.qid = q.id;
    row = {
      li, num: $(".review-num", li), header: $(".review-header", li), answer: $(".review-answer", li),
      note: $(".review-note", li), chip: $(".review-status", li),
    };
    reviewRows.set(q.id, row);
  }
  return row;
}

function fillRow(q, i, row) {
  const s = statusOf(q);
  if (row.li.dataset.status !== s) row.li.dataset.status = s;
  setText(row.num, `${i + 1}.`);
  setPhrases(row.header, q.header);
  setText(row.answer, answerText(q));
  const notes = answerOf(q).notes.trim();
  setText(row.note, notes ? t("review.note", { text: notes }) : "");
  if (row.note.hidden !== !notes) row.note.hidden = !notes;
  setText(row.chip, statusText(s));
  if (row.chip.dataset.status !== s) row.chip.dataset.status = s;
  row.li.classList.toggle("blocked", missingTexts(q).length > 0);
}

export function syncReview() {
  const el = reviewScreen();
  if (!el) return;
  // Only while it can be seen (go("review") and show-all sync it on arrival): the rows of
  // 1,000 questions at every answer cost more than a frame.
  if (!state.showAll && state.screen !== "review") return;
  renderReview(el);
}

export function renderReview(el) {
  const list = $(".review-list", el);
  const questions = state.spec.questions;
  if (virtualReview()) renderWindow(list);
  else {
    const order = [...list.children];
    if (order.length !== questions.length || questions.some((q, i) => order[i] !== reviewRows.get(q.id)?.li)) {
      const frag = document.createDocumentFragment();
      for (const q of questions) frag.append(reviewRow(q).li);
      list.replaceChildren(frag);
    }
    questions.forEach((q, i) => fillRow(q, i, reviewRow(q)));
  }
  const c = counts();
  setCounts($(".review-counts", el), t("review.counts", c));
  const gn = $("#general-notes");
  if (gn.value !== state.generalNotes) gn.value = state.generalNotes;
  const rest = questions.filter((q) => statusOf(q) === "open" && hasRecommendation(q)).length;
  $("#btn-accept-all", el).disabled = rest === 0;
  if (!state.confirmArmed) $(".confirm", el).hidden = true;
}

// Puts rows [start, end) (widened to keep a focused row) in the list, filled from the state,
// and pads the list for the rows left out. Rows that stay are not moved, so focus survives.
function renderWindow(list, start = rv.start, end = rv.end) {
  const questions = state.spec.questions;
  const n = questions.length;
  const ids = questions.map((q) => q.id).join("\n");
  if (!rv.virtual || ids !== rv.ids) {
    // First render, or the questions changed (an append): start over from the top rows.
    const first = !rv.virtual;
    rv.virtual = true;
    rv.ids = ids;
    rv.pitch = questions.map((_, i) => rv.pitch[i] || 0);
    if (first) { start = 0; end = Math.min(n, initialRows()); }
    list.classList.add("virtual");
    list.replaceChildren();
    rv.start = rv.end = 0;
  }
  const f = focusedRow(list);
  if (f >= 0) { start = Math.min(start, f); end = Math.max(end, f + 1); }
  start = Math.max(0, Math.min(start, n));
  end = Math.max(start, Math.min(end, n));
  const keepFrom = Math.max(start, rv.start);
  const keepTo = Math.min(end, rv.end);
  if (keepFrom >= keepTo) list.replaceChildren();
  else {
    // Drop the rows that left the window at either end; the ones kept stay where they are.
    for (let i = rv.start; i < keepFrom; i++) reviewRow(questions[i]).li.remove();
    for (let i = keepTo; i < rv.end; i++) reviewRow(questions[i]).li.remove();
  }
  const [from, to] = keepFrom >= keepTo ? [end, end] : [keepFrom, keepTo];
  const before = document.createDocumentFragment();
  const after = document.createDocumentFragment();
  for (let i = start; i < end; i++) {
    const row = reviewRow(questions[i]);
    fillRow(questions[i], i, row);
    row.li.setAttribute("aria-posinset", String(i + 1));
    row.li.setAttribute("aria-setsize", String(n));
    if (i < from) before.append(row.li);
    else if (i >= to) after.append(row.li);
  }
  list.prepend(before);
  list.append(after);
  rv.start = start;
  rv.end = end;
  let above = 0;
  let below = 0;
  for (let i = 0; i < start; i++) above += rv.pitch[i] || rv.guess;
  for (let i = end; i < n; i++) below += rv.pitch[i] || rv.guess;
  list.style.setProperty("--rows-above", `${above}px`);
  list.style.setProperty("--rows-below", `${below}px`);
}

// Enough rows to fill a viewport from the top of the list, before anything is measured. The
// rows beyond (ROW_OVERSCAN each way) come in once the page is idle (reviewFromTop()): on arrival
// they would only add to the layout of the frame that shows the review.
function initialRows() {
  return Math.ceil(window.innerHeight / rv.guess);
}

function focusedRow(list) {
  const li = document.activeElement && document.activeElement.closest && document.activeElement.closest(".review-row");
  if (!li || li.parentNode !== list) return -1;
  return state.spec.questions.findIndex((q) => q.id === li.dataset.qid);
}

// Arriving at the review screen in the stepper, the page is scrolled to the top: the first
// rows are set up now, in the same frame, without measuring anything.
export function reviewFromTop() {
  if (!virtualReview()) return;
  renderWindow($(".review-list", reviewScreen()), 0, initialRows());
  // Measured, and the rows around the viewport added, when idle, so that the arrival forces no
  // extra layout.
  whenIdle(queueReviewWindow);
}

// Once per frame after a scroll or a resize: measures the rows shown, then renders the rows
// the viewport now needs.
function queueReviewWindow() {
  if (!rv.virtual || rv.queued) return;
  if (!state.showAll && state.screen !== "review") return;
  rv.queued = true;
  requestAnimationFrame(() => {
    rv.queued = false;
    const el = reviewScreen();
    if (!el || el.hidden || !rv.virtual) return;
    const list = $(".review-list", el);
    const rows = list.children;
    const top = list.getBoundingClientRect().top;
    let prev = null;
    let measured = 0;
    let sum = 0;
    for (let k = 0; k < rows.length; k++) {
      const y = rows[k].getBoundingClientRect().top;
      if (prev !== null) {
        rv.pitch[rv.start + k - 1] = y - prev;
        measured++;
        sum += y - prev;
      }
      prev = y;
    }
    // The unmeasured rows are assumed to be like the first ones measured (once, so that
    // the padding above the rows shown does not change under the reader later).
    if (!rv.guessed && measured >= 4) { rv.guess = sum / measured; rv.guessed = true; }
    // Where the viewport is, in px from the list's top, and which rows cover it.
    const from = -top;
    const to = window.innerHeight - top;
    const n = state.spec.questions.length;
    let y = 0;
    let first = n;
    let last = n;
    for (let i = 0; i < n; i++) {
      const h = rv.pitch[i] || rv.guess;
      if (first === n && y + h > from) first = i;
      if (y > to) { last = i; break; }
      y += h;
    }
    if (first === n) first = Math.max(0, n - 1); // the list is above the viewport
    last = Math.max(last, first + 1);
    // Rows rendered ahead are kept while they still cover the viewport with a little to
    // spare, so that a slow scroll re-renders every few rows, not at every frame.
    const covered = rv.start <= Math.max(0, first - 2) && rv.end >= Math.min(n, last + 2)
      && rv.end - rv.start <= last - first + 4 * ROW_OVERSCAN;
    if (!covered) renderWindow(list, first - ROW_OVERSCAN, last + ROW_OVERSCAN);
  });
}

window.addEventListener("scroll", queueReviewWindow, { passive: true });
window.addEventListener("resize", queueReviewWindow);
// Keyboard: Tab into a row at the window's edge brings its neighbours in, so the next Tab
// finds the next row rather than leaving the list; Shift+Tab from the general notes goes to
// the last question's row, as it does with every row in the DOM.
document.addEventListener("focusin", (e) => {
  if (!rv.virtual || !e.target.closest) return;
  const li = e.target.closest(".review-row");
  if (!li) return;
  const i = state.spec.questions.findIndex((q) => q.id === li.dataset.qid);
  if (i < 0) return;
  if (i - rv.start < 2 || rv.end - i <= 2) {
    renderWindow(li.parentNode, Math.min(rv.start, i - ROW_OVERSCAN), Math.max(rv.end, i + ROW_OVERSCAN + 1));
  }
});
document.addEventListener("keydown", (e) => {
  if (!rv.virtual || e.key !== "Tab" || !e.shiftKey || e.target.id !== "general-notes") return;
  const n = state.spec.questions.length;
  if (rv.end < n) renderWindow($(".review-list", reviewScreen()), n - 1 - ROW_OVERSCAN, n);
}, true);
