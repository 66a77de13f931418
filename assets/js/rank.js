// Rank questions: the WAI-ARIA rearrangeable listbox. Rows move by mouse drag (the other rows
// slide aside), by keyboard (pick up / move / drop / cancel, Shift+arrows, digits) and by the
// visible Move buttons. Nothing counts as an answer until the user moves a row or keeps the order.
import {
  state, answerOf, takeRecommendation, clearAnswer, labelOf, moveOption, keepRankOrder, markRanked, restoreOrder,
} from "./state.js";
import { t, tPlain, keyName } from "./i18n.js";
import { clone } from "./dom.js";

const views = new Map(); // qid -> {list, rows: Map(optId -> li), status, q}
let held = null;         // {qid, id, before: [ids]} while a row is picked up from the keyboard
let changed = () => {};
let say = () => {};

export function onRankChange(fn) { changed = fn; }
export function onRankAnnounce(fn) { say = fn; }

export function buildRank(q, box, n) {
  const help = document.createElement("p");
  help.className = "hint rank-help";
  help.id = `q${n}-rank-help`;
  help.textContent = t("rank.help");
  const list = document.createElement("ol");
  list.className = "rank-list";
  list.setAttribute("role", "listbox");
  list.setAttribute("aria-labelledby", `q${n}-h`);
  list.setAttribute("aria-describedby", help.id);
  const rows = new Map();
  q.options.forEach((o, i) => {
    const li = clone("tpl-rank-row");
    li.dataset.opt = o.id;
    li.id = `q${n}-r${i}`;
    li.querySelector(".rank-label").textContent = o.label;
    const desc = li.querySelector(".rank-desc");
    if (o.description) {
      desc.textContent = plain(o.description);
      desc.hidden = false;
    }
    if (q.recommended.length) {
      const pos = q.recommended.indexOf(o.id);
      if (pos >= 0) li.title = t("rank.recommendedPosition", { pos: pos + 1 });
    }
    rows.set(o.id, li);
    list.append(li);
  });
  const actions = document.createElement("div");
  actions.className = "rank-actions";
  const mk = (cls, text, title) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = `btn small ${cls}`;
    b.textContent = text;
    if (title) b.title = title;
    actions.append(b);
    return b;
  };
  // The keys are a value of their own, isolated: right to left, "Shift+↑" keeps its order.
  mk("rank-move-up", t("rank.moveUp"), t("rank.moveUpTitle", { keys: `${keyName("Shift")}+↑` }));
  mk("rank-move-down", t("rank.moveDown"), t("rank.moveDownTitle", { keys: `${keyName("Shift")}+↓` }));
  mk("rank-keep", t("rank.keep"));
  if (q.recommended.length) mk("rank-rec", t("rank.recommendedOrder"));
  mk("rank-reset", t("rank.reset"));
  const status = document.createElement("p");
  status.className = "rank-state";
  box.append(help, list, actions, status);
  views.set(q.id, { q, list, rows, status, active: q.options[0].id });

  list.addEventListener("pointerdown", (e) => startDrag(e, q));
  list.addEventListener("focusin", (e) => {
    const li = e.target.closest(".rank-row");
    if (li) { views.get(q.id).active = li.dataset.opt; markActive(q); }
  });
  actions.addEventListener("click", (e) => {
    const b = e.target.closest("button");
    if (!b) return;
    const v = views.get(q.id);
    if (b.classList.contains("rank-move-up")) moveBy(q, v.active, -1, true);
    else if (b.classList.contains("rank-move-down")) moveBy(q, v.active, 1, true);
    else if (b.classList.contains("rank-keep")) keepOrder(q);
    else if (b.classList.contains("rank-rec")) { takeRecommendation(q); say(t("rank.applied")); changed(q); }
    else if (b.classList.contains("rank-reset")) resetOrder(q);
  });
}

// Descriptions are markdown; in a row they are shown as one plain line.
function plain(text) {
  return String(text).replace(/[`*_#>[\]]/g, "").replace(/\s+/g, " ").trim();
}

function markActive(q) {
  const v = views.get(q.id);
  for (const [id, li] of v.rows) {
    const on = id === v.active;
    li.tabIndex = on ? 0 : -1;
    li.setAttribute("aria-selected", String(on));
  }
}

export function syncRank(q) {
  const v = views.get(q.id);
  if (!v) return;
  const a = answerOf(q);
  const hadFocus = v.list.contains(document.activeElement) ? document.activeElement : null;
  const current = [...v.list.children].map((li) => li.dataset.opt);
  if (current.join("\n") !== a.order.join("\n")) {
    for (const id of a.order) v.list.append(v.rows.get(id));
  }
  const n = a.order.length;
  a.order.forEach((id, i) => {
    const li = v.rows.get(id);
    li.querySelector(".rank-pos").textContent = String(i + 1);
    li.setAttribute("aria-label", tPlain("rank.rowLabel", { label: li.querySelector(".rank-label").textContent, pos: i + 1, total: n }));
    li.classList.toggle("held", !!held && held.qid === q.id && held.id === id);
  });
  markActive(q);
  if (hadFocus && document.activeElement !== hadFocus) hadFocus.focus({ preventScroll: true });
  v.list.classList.toggle("committed", a.ranked);
  v.status.textContent = a.ranked ? t("rank.recorded") : t("rank.notYet");
}

function moveTo(q, id, pos, commit) {
  const a = answerOf(q);
  const from = a.order.indexOf(id);
  const to = Math.max(0, Math.min(a.order.length - 1, pos));
  if (from < 0) return false;
  moveOption(q, id, to, commit);
  changed(q);
  say(t("rank.moved", { label: labelOf(q, id), pos: to + 1, total: a.order.length }));
  return true;
}

function moveBy(q, id, delta, commit) {
  const a = answerOf(q);
  return moveTo(q, id, a.order.indexOf(id) + delta, commit);
}

export function keepOrder(q) {
  keepRankOrder(q);
  say(t("rank.kept"));
  changed(q);
}

export function resetOrder(q) {
  if (held && held.qid === q.id) held = null;
  clearAnswer(q);
  say(t("rank.wasReset"));
  changed(q);
}

export function cancelHold() {
  if (!held) return;
  const q = state.spec.questions.find((x) => x.id === held.qid);
  restoreOrder(q, held.before);
  const a = answerOf(q);
  const id = held.id;
  held = null;
  say(t("rank.cancelled", { label: labelOf(q, id), pos: a.order.indexOf(id) + 1 }));
  changed(q);
}

function focusRow(q, id) {
  const v = views.get(q.id);
  v.active = id;
  markActive(q);
  v.rows.get(id).focus();
}

// Keyboard on a focused row. Returns true when the key was handled.
export function rankKey(e, q) {
  const row = e.target.closest && e.target.closest(".rank-row");
  if (!row) return false;
  const a = answerOf(q);
  const id = row.dataset.opt;
  const isHeld = held && held.qid === q.id && held.id === id;
  const key = e.key;
  const up = key === "ArrowUp" || (!e.shiftKey && (key === "k" || key === "K"));
  const down = key === "ArrowDown" || (!e.shiftKey && (key === "j" || key === "J"));
  if (key === " " || (key === "Enter" && isHeld)) {
    if (isHeld) {
      held = null;
      markRanked(q);
      say(t("rank.dropped", { label: labelOf(q, id), pos: a.order.indexOf(id) + 1, total: a.order.length }));
      changed(q);
    } else if (key === " ") {
      held = { qid: q.id, id, before: a.order.slice() };
      say(t("rank.picked", { label: labelOf(q, id), pos: a.order.indexOf(id) + 1, total: a.order.length }));
      changed(q);
    }
    return true;
  }
  if (key === "Escape" && held && held.qid === q.id) { cancelHold(); row.focus(); return true; }
  if ((up || down) && (e.shiftKey || isHeld)) {
    moveBy(q, id, up ? -1 : 1, !isHeld);
    return true;
  }
  if (up || down) {
    const i = a.order.indexOf(id) + (up ? -1 : 1);
    if (i >= 0 && i < a.order.length) focusRow(q, a.order[i]);
    return true;
  }
  if (/^[1-9]$/.test(key) && !e.shiftKey) {
    if (isHeld) held = null;
    moveTo(q, id, Number(key) - 1, true);
    return true;
  }
  return false;
}

export function focusRank(q) {
  const v = views.get(q.id);
  if (v) focusRow(q, v.active);
}

export function isHolding() { return !!held; }

// ---- mouse / touch drag ----
function startDrag(e, q) {
  const row = e.target.closest(".rank-row");
  if (!row || e.button !== 0) return;
  // On touch screens only the grip drags, so the page can still be scrolled by the rows.
  if (e.pointerType === "touch" && !e.target.closest(".rank-grip")) return;
  const v = views.get(q.id);
  const rows = [...v.list.children];
  const from = rows.indexOf(row);
  const rects = rows.map((r) => r.getBoundingClientRect());
  const startY = e.clientY;
  const gap = rects.length > 1 ? rects[1].top - rects[0].bottom : 0;
  const step = rects[from].height + gap;
  let to = from;
  let dragging = false;
  if (e.pointerType !== "touch") e.preventDefault(); // no text selection while dragging
  row.focus({ preventScroll: true });
  v.active = row.dataset.opt;
  markActive(q);

  const move = (ev) => {
    const dy = ev.clientY - startY;
    if (!dragging) {
      if (Math.abs(dy) < 4) return;
      dragging = true;
      row.setPointerCapture?.(e.pointerId);
      v.list.classList.add("dragging-list");
      row.classList.add("dragging");
    }
    row.style.setProperty("--dy", `${dy}px`);
    const centre = rects[from].top + rects[from].height / 2 + dy;
    to = from;
    for (let i = 0; i < rects.length; i++) {
      const mid = rects[i].top + rects[i].height / 2;
      if (i < from && centre < mid) { to = i; break; }
      if (i > from && centre > mid) to = i;
    }
    rows.forEach((r, i) => {
      if (r === row) return;
      let shift = 0;
      if (from < to && i > from && i <= to) shift = -step;
      if (from > to && i >= to && i < from) shift = step;
      r.style.setProperty("--shift", `${shift}px`);
      r.classList.toggle("shifted", shift !== 0);
    });
  };
  const end = (ev) => {
    window.removeEventListener("pointermove", move);
    window.removeEventListener("pointerup", end);
    window.removeEventListener("pointercancel", end);
    v.list.classList.remove("dragging-list");
    for (const r of rows) {
      r.classList.remove("dragging", "shifted");
      r.style.removeProperty("--dy");
      r.style.removeProperty("--shift");
    }
    if (dragging && ev.type === "pointerup") {
      if (to !== from) moveTo(q, row.dataset.opt, to, true);
      else say(t("rank.stays", { label: labelOf(q, row.dataset.opt), pos: from + 1 }));
    }
  };
  window.addEventListener("pointermove", move);
  window.addEventListener("pointerup", end);
  window.addEventListener("pointercancel", end);
}

export function applyRecommended(q) {
  if (held && held.qid === q.id) held = null;
  if (takeRecommendation(q)) { say(t("rank.applied")); changed(q); return true; }
  return false;
}
