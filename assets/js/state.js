// The form's state: the interview spec, the user's answers, and everything derived from them.
// Pure data and small functions; nothing here touches the DOM.

export const token = (location.pathname.match(/^\/s\/([^/]+)/) || [])[1] || "";
export const api = (suffix = "") => `/api/s/${token}${suffix}`;

export const state = {
  interviewId: "",       // names the draft: the token, a live bearer, stays out of storage
  spec: null,            // {title, intro, questions: [...]}
  version: 1,
  note: null,            // {version, text} | null
  limits: null,          // the server's (/api/s): freeText, attachmentBytes, attachments, attachmentsBytes
  phase: "loading",      // loading | open | waiting (for uploads, to submit) | submitting | done | submitted | cancelled | expired | error
  answers: {},           // qid -> answer (see blankAnswer)
  generalNotes: "",
  attachments: {},       // "" (general notes) or qid -> [{id, name, mimeType, bytes}] uploaded
  screen: null,          // "intro" | "q:<id>" | "review"
  showAll: false,
  newIds: new Set(),     // follow-up questions the user has not visited yet
  waiting: false,
  everWaited: false,
  confirmArmed: false,   // the first submit with open questions only asks
};

// ---------------------------------------------------------------- the form's other fields
// Every write to `state` happens in this module: the others call these.

export function setPhase(phase) { state.phase = phase; }
export function setScreen(key) { state.screen = key; }
export function setGeneralNotes(text) { state.generalNotes = text; }
export function armConfirm(armed) { state.confirmArmed = armed; }

// The interview as /api/s names it, before its spec is merged: the draft's name and the limits.
export function begin(interviewId, limits) {
  state.interviewId = interviewId;
  state.limits = limits;
}

export function setShowAll(on) {
  state.showAll = on;
  return on;
}

// The server's word on whether a call is waiting; true when one stopped waiting after one had.
export function setWaiting(waiting) {
  const stopped = !waiting && state.everWaited && state.waiting;
  if (waiting) state.everWaited = true;
  state.waiting = waiting;
  return stopped;
}

// The files uploaded to a question ("" for the general notes), in the order they came.
export function filesOf(key) {
  return state.attachments[key] || [];
}

export function addFile(key, file) {
  (state.attachments[key] || (state.attachments[key] = [])).push(file);
}

// The file's place in its list before it was removed.
export function dropFile(key, file) {
  const list = filesOf(key);
  const at = list.indexOf(file);
  list.splice(at, 1);
  return at;
}

// ---------------------------------------------------------------- what the user changes
export function setMode(q, mode) { answerOf(q).mode = mode; }

// "defer" or "needs-info" on, or back to an answer when it was on already.
export function toggleMode(q, mode) {
  const a = answerOf(q);
  a.mode = a.mode === mode ? "answer" : mode;
}

// Typing in Other turns it on; a question without options is answered by its text alone.
export function setOtherText(q, text) {
  const a = answerOf(q);
  a.other = text;
  if (q.options.length && text.trim() && !a.otherOn) setOther(q, true);
  if (q.options.length === 0) a.mode = "answer";
}

export function setOptionText(q, optId, text) { answerOf(q).optionTexts[optId] = text; }
export function setNotes(q, text) { answerOf(q).notes = text; }

// A rank row moved to `to` (an index in range); `ranked`: the order counts as given.
export function moveOption(q, id, to, ranked) {
  const a = answerOf(q);
  const from = a.order.indexOf(id);
  if (from !== to) {
    a.order.splice(from, 1);
    a.order.splice(to, 0, id);
  }
  a.mode = "answer";
  if (ranked) a.ranked = true;
}

export function keepRankOrder(q) {
  const a = answerOf(q);
  a.mode = "answer";
  a.ranked = true;
}

export function markRanked(q) { answerOf(q).ranked = true; }
export function restoreOrder(q, order) { answerOf(q).order = order; }

// A follow-up shown at last: true when it was new.
export function markSeen(qid) { return state.newIds.delete(qid); }

export function blankAnswer(q) {
  return {
    mode: "answer",               // answer | defer | needs-info
    selected: [],
    optionTexts: {},
    other: "",
    otherOn: q.options.length === 0, // a free-text question's field is always its answer
    order: q.options.map((o) => o.id), // the rank order shown
    ranked: false,                // rank: committed by a move or "Keep this order"
    notes: "",
  };
}

// An interview of more than this many questions is long: its question screens are built when
// first needed and its review list is virtualized (view.js, review.js).
export const EAGER_SCREENS = 50;

// An index rebuilt whenever the question list changes (mergeSpec swaps in a new array): with
// 1,000 questions, a scan per lookup made the rail's update at every step quadratic.
let byId = new Map();
let indexed = null;
export function questionById(id) {
  const list = state.spec.questions;
  if (indexed !== list || byId.size !== list.length) {
    byId = new Map(list.map((q) => [q.id, q]));
    indexed = list;
  }
  return byId.get(id);
}

// An option's label, or its id when the option is gone.
export function labelOf(q, id) {
  return q.options.find((o) => o.id === id)?.label ?? id;
}

export function answerOf(q) {
  if (!state.answers[q.id]) state.answers[q.id] = blankAnswer(q);
  return state.answers[q.id];
}

export function isAnswered(q) {
  const a = answerOf(q);
  if (q.kind === "rank") return a.ranked;
  return a.selected.length > 0 || (a.otherOn && a.other.trim() !== "");
}

// "answered" | "deferred" | "needs-info" | "open"
export function statusOf(q) {
  const a = answerOf(q);
  if (a.mode === "defer") return "deferred";
  if (a.mode === "needs-info") return "needs-info";
  return isAnswered(q) ? "answered" : "open";
}

export function counts() {
  const c = { answered: 0, deferred: 0, needsInfo: 0, open: 0 };
  for (const q of state.spec.questions) {
    const s = statusOf(q);
    if (s === "answered") c.answered++;
    else if (s === "deferred") c.deferred++;
    else if (s === "needs-info") c.needsInfo++;
    else c.open++;
  }
  return c;
}

export function screens() {
  const list = [];
  if (state.spec.intro) list.push("intro");
  for (const q of state.spec.questions) list.push(`q:${q.id}`);
  list.push("review");
  return list;
}

export function hasRecommendation(q) {
  return q.recommended.length > 0;
}

// Picks the recommendation: the recommended set, or the recommended order for rank.
export function takeRecommendation(q) {
  const a = answerOf(q);
  if (!hasRecommendation(q)) return false;
  a.mode = "answer";
  if (q.kind === "rank") {
    a.order = q.recommended.slice();
    a.ranked = true;
  } else {
    a.selected = q.recommended.slice();
    if (q.options.length) a.otherOn = false;
  }
  return true;
}

export function clearAnswer(q) {
  const a = answerOf(q);
  a.mode = "answer";
  a.selected = [];
  if (q.options.length) a.otherOn = false;
  else a.other = "";
  if (q.kind === "rank") {
    a.order = q.options.map((o) => o.id);
    a.ranked = false;
  }
}

export function toggleOption(q, optId, force) {
  const a = answerOf(q);
  const on = a.selected.includes(optId);
  const want = force === undefined ? !on : force;
  a.mode = "answer";
  if (q.multiSelect) {
    a.selected = want ? q.options.map((o) => o.id).filter((id) => id === optId || a.selected.includes(id))
                      : a.selected.filter((id) => id !== optId);
  } else {
    a.selected = want ? [optId] : [];
    if (want) a.otherOn = false;
  }
}

export function setOther(q, on) {
  const a = answerOf(q);
  a.mode = "answer";
  a.otherOn = on;
  if (on && !q.multiSelect) a.selected = [];
}

// Options picked whose required text is empty: they block the submit.
export function missingTexts(q) {
  const a = answerOf(q);
  if (a.mode !== "answer" || q.kind === "rank") return [];
  return q.options.filter((o) => o.textInput && o.textInput.required && a.selected.includes(o.id)
    && !(a.optionTexts[o.id] || "").trim());
}

export function payloadAnswer(q) {
  const a = answerOf(q);
  const out = { status: a.mode, notes: a.notes };
  if (a.mode !== "answer") return out;
  if (q.kind === "rank") {
    out.selected = [];
    if (a.ranked) out.ranked = a.order.slice();
    return out;
  }
  out.selected = a.selected.slice();
  const texts = {};
  for (const id of a.selected) {
    const t = (a.optionTexts[id] || "").trim();
    const o = q.options.find((x) => x.id === id);
    if (o && o.textInput && t) texts[id] = t;
  }
  out.optionTexts = texts;
  if (a.otherOn && a.other.trim()) out.other = a.other;
  return out;
}

export function payload() {
  const answers = {};
  for (const q of state.spec.questions) answers[q.id] = payloadAnswer(q);
  const attachments = {};
  for (const [key, files] of Object.entries(state.attachments)) {
    if (files.length && (key === "" || questionById(key))) attachments[key] = files.map((f) => f.id);
  }
  return { answers, generalNotes: state.generalNotes, specVersion: state.version, attachments };
}

// Merges a fresher spec: keeps every answer, adds the new questions, marks them new.
export function mergeSpec(spec, version, note) {
  const known = new Set(state.spec ? state.spec.questions.map((q) => q.id) : []);
  const firstLoad = !state.spec;
  state.spec = spec;
  state.version = version;
  state.note = note;
  const added = [];
  for (const q of spec.questions) {
    if (!known.has(q.id)) {
      if (!firstLoad) { state.newIds.add(q.id); added.push(q.id); }
    }
    const a = answerOf(q);
    // A draft may predate a spec change; keep only what still fits.
    const ids = q.options.map((o) => o.id);
    a.selected = a.selected.filter((id) => ids.includes(id));
    if (q.kind === "rank" && (a.order.length !== ids.length || !ids.every((id) => a.order.includes(id)))) {
      a.order = ids.slice();
      a.ranked = false;
    }
  }
  return added;
}

// ---- storage: never let a blocked localStorage break the page ----
function store() {
  try { return window.localStorage; } catch { return null; }
}
export function load(key, fallback) {
  try {
    const raw = store()?.getItem(key);
    return raw == null ? fallback : JSON.parse(raw);
  } catch { return fallback; }
}
export function save(key, value) {
  try { store()?.setItem(key, JSON.stringify(value)); } catch { /* storage blocked or full */ }
}
export function forget(key) {
  try { store()?.removeItem(key); } catch { /* storage blocked */ }
}

export const draftKey = () => `askrich:draft:${state.interviewId}`;

// An answer still as blankAnswer() made it. restoreDraft() starts every question from a blank
// answer, so the draft leaves these out: with 1,000 questions the full draft was hundreds of
// kilobytes written at every step.
function untouched(q, a) {
  return a.mode === "answer" && !a.selected.length && !a.other && !a.notes && !a.ranked
    && a.otherOn === (q.options.length === 0) && !Object.keys(a.optionTexts).length
    && a.order.length === q.options.length && a.order.every((id, i) => id === q.options[i].id);
}

export function saveDraft() {
  // While a submit waits for uploads, each one that lands still goes into the draft.
  if (state.phase !== "open" && state.phase !== "waiting") return;
  const answers = {};
  for (const q of state.spec.questions) {
    const a = state.answers[q.id];
    if (a && !untouched(q, a)) answers[q.id] = a;
  }
  save(draftKey(), {
    answers, generalNotes: state.generalNotes, attachments: state.attachments, screen: state.screen,
    newIds: [...state.newIds], known: state.spec.questions.map((q) => q.id),
  });
}

export function restoreDraft() {
  const d = load(draftKey(), null);
  if (!d || typeof d !== "object") return false;
  for (const q of state.spec.questions) {
    const saved = d.answers && d.answers[q.id];
    if (saved && typeof saved === "object") state.answers[q.id] = { ...blankAnswer(q), ...saved };
  }
  if (typeof d.generalNotes === "string") state.generalNotes = d.generalNotes;
  if (d.attachments && typeof d.attachments === "object") {
    for (const [key, files] of Object.entries(d.attachments)) {
      if (!Array.isArray(files)) continue;
      state.attachments[key] = files.filter((f) => f && typeof f.id === "string" && typeof f.name === "string"
        && typeof f.mimeType === "string" && typeof f.bytes === "number");
    }
  }
  if (Array.isArray(d.newIds)) for (const id of d.newIds) if (questionById(id)) state.newIds.add(id);
  // Follow-ups that arrived while the page was closed are new to this user too.
  if (Array.isArray(d.known)) for (const q of state.spec.questions) if (!d.known.includes(q.id)) state.newIds.add(q.id);
  mergeSpec(state.spec, state.version, state.note);
  if (typeof d.screen === "string" && screens().includes(d.screen)) state.screen = d.screen;
  return true;
}
