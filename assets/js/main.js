// Start-up and wiring: loads the interview, binds the controls (delegated on the screen root),
// navigation, submit, and the live line to the server.
import {
  state, token, api, answerOf, questionById, statusOf, counts, screens, mergeSpec, restoreDraft,
  saveDraft, draftKey, forget, load, save, toggleOption, setOther, takeRecommendation,
  missingTexts, payload, hasRecommendation, isAnswered,
} from "./state.js";
import {
  buildScreens, addQuestionScreens, syncAll, syncQuestion, syncRail, syncReview, syncNav, showScreen,
  screenEl, endScreen, notice, clearNotice, announce, keepInView, reducedMotion, applyTheme, qviews,
  qNumber, ensureBuilt, markSeen,
} from "./view.js";
import { bindKeys, KEY_TABLE } from "./keys.js";
import { onRankChange, onRankAnnounce, cancelHold, applyRecommended } from "./rank.js";
import { startLive, reportProgress } from "./live.js";
import { bindAttachments } from "./attach.js";

const $ = (sel, root = document) => root.querySelector(sel);
const THEMES = ["auto", "light", "dark"];
let theme = "auto";
let stopLive = () => {};

// ---------------------------------------------------------------- changes
function changed(q) {
  if (q) syncQuestion(q);
  syncRail();
  syncReview();
  saveDraft();
  reportProgress(counts);
}

// ---------------------------------------------------------------- navigation
function currentQuestion() {
  const focusSec = document.activeElement && document.activeElement.closest
    && document.activeElement.closest("section.question");
  if (focusSec) return questionById(focusSec.dataset.qid) || null;
  if (state.screen && state.screen.startsWith("q:")) return questionById(state.screen.slice(2)) || null;
  return null;
}

function go(key, dir = 0) {
  if (!key) return;
  cancelHold();
  const list = screens();
  if (!dir) dir = Math.sign(list.indexOf(key) - list.indexOf(state.screen));
  if (state.showAll) {
    state.screen = key;
    if (key.startsWith("q:")) markSeen(key.slice(2));
    const el = screenEl(key);
    syncRail();
    syncNav();
    if (el) {
      const top = $("#bar").getBoundingClientRect().bottom;
      const y = window.scrollY + el.getBoundingClientRect().top - top - 8;
      tracking.suspendUntil = performance.now() + 900;
      window.scrollTo({ top: Math.max(0, y), behavior: reducedMotion() ? "auto" : "smooth" });
      el.focus({ preventScroll: true });
    }
  } else {
    const el = showScreen(key, dir);
    window.scrollTo({ top: 0 });
    if (el) el.focus({ preventScroll: true });
  }
  if (key.startsWith("q:")) syncQuestion(questionById(key.slice(2)));
  if (key === "review") syncReview();
  saveDraft();
}

function step(delta) {
  const list = screens();
  const i = list.indexOf(state.screen);
  const j = i + delta;
  if (j < 0 || j >= list.length) return;
  go(list[j], delta);
}

function next() {
  if (state.screen === "review") submit();
  else step(1);
}

function goNew() {
  const first = state.spec.questions.find((q) => state.newIds.has(q.id));
  if (!first) return false;
  go(`q:${first.id}`);
  return true;
}

function toggleShowAll() {
  state.showAll = !state.showAll;
  save("askrich:showAll", state.showAll);
  showScreen(state.screen, 0);
  const el = screenEl(state.screen);
  if (state.showAll && el) {
    const top = $("#bar").getBoundingClientRect().bottom;
    tracking.suspendUntil = performance.now() + 300;
    window.scrollTo({ top: Math.max(0, window.scrollY + el.getBoundingClientRect().top - top - 8) });
  } else window.scrollTo({ top: 0 });
  announce(state.showAll ? "Showing all questions on one page." : "Showing one question at a time.");
}

// In show-all the rail follows the question being read: the last screen whose top has passed
// the upper third of the space under the header.
const tracking = { suspendUntil: 0, queued: false, timer: 0 };
function trackScroll() {
  if (!state.showAll || state.phase !== "open" || tracking.queued) return;
  tracking.queued = true;
  requestAnimationFrame(() => {
    tracking.queued = false;
    const wait = tracking.suspendUntil - performance.now();
    if (wait > 0) {
      // A scroll we started is still running; look again once it has settled.
      clearTimeout(tracking.timer);
      tracking.timer = setTimeout(trackScroll, wait + 20);
      return;
    }
    const top = $("#bar").getBoundingClientRect().bottom;
    const line = top + (window.innerHeight - top) / 3;
    let cur = null;
    for (const sec of $("#main").children) {
      if (!sec.dataset.screen) continue;
      if (sec.getBoundingClientRect().top <= line) cur = sec.dataset.screen;
    }
    if (window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2) cur = "review";
    if (cur && cur !== state.screen) {
      state.screen = cur;
      if (cur.startsWith("q:")) markSeen(cur.slice(2));
      syncRail();
      syncNav();
      saveDraft();
    }
  });
}

function focusNote(q) {
  const refs = qviews.get(q.id);
  if (refs) refs.el.querySelector(".note-text").focus();
}

function leaveField(field) {
  const sec = field.closest("section.screen");
  field.blur();
  if (sec) sec.focus({ preventScroll: true });
}

function acceptAll() {
  let n = 0;
  for (const q of state.spec.questions) {
    if (statusOf(q) === "open" && hasRecommendation(q) && takeRecommendation(q)) { n++; syncQuestion(q); }
  }
  changed(null);
  announce(n ? `Accepted ${n} recommendation${n === 1 ? "" : "s"}.` : "No open question has a recommendation.");
}

function openHelp() {
  const d = $("#help");
  if (!d.open) d.showModal();
}

// ---------------------------------------------------------------- submit
function submitProblem(text, jumps = []) {
  const box = $(".review .submit-problem");
  if (!box) return;
  box.replaceChildren();
  if (!text) { box.hidden = true; return; }
  const p = document.createElement("p");
  p.textContent = text;
  box.append(p);
  for (const q of jumps) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "link";
    b.dataset.goto = `q:${q.id}`;
    b.textContent = `Go to question ${qNumber(q)}`;
    box.append(b, " ");
  }
  box.hidden = false;
}

async function submit() {
  if (state.phase !== "open") return;
  if (state.screen !== "review" && !state.showAll) { go("review"); return; }
  const blocked = state.spec.questions.filter((q) => missingTexts(q).length);
  if (blocked.length) {
    for (const q of blocked) { ensureBuilt(q).el.classList.add("tried"); syncQuestion(q); }
    const first = blocked[0];
    const names = missingTexts(first).map((o) => `"${o.label}"`).join(", ");
    submitProblem(`Question ${qNumber(first)} needs the text for ${names} before the answers can be sent`
      + `${blocked.length > 1 ? ` (and ${blocked.length - 1} more question${blocked.length > 2 ? "s" : ""})` : ""}.`, blocked);
    syncReview();
    return;
  }
  submitProblem("");
  const c = counts();
  if (c.open > 0 && !state.confirmArmed) {
    state.confirmArmed = true;
    const box = $(".review .confirm");
    $(".confirm-text", box).textContent = `${c.open} question${c.open === 1 ? " is" : "s are"} still open. `
      + "Submit again to send the answers anyway, or click a row to answer it.";
    box.hidden = false;
    $("#btn-submit").textContent = "Submit anyway";
    announce($(".confirm-text", box).textContent);
    return;
  }
  $(".review .confirm").hidden = true;
  state.phase = "submitting";
  document.body.classList.add("busy");
  let r;
  try {
    r = await fetch(api("/submit"), {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payload()),
    });
  } catch {
    state.phase = "open";
    document.body.classList.remove("busy");
    serverGone();
    submitProblem("The answers were not sent: the form server cannot be reached. Your draft is kept in this browser; submit again once the server is back.");
    return;
  }
  document.body.classList.remove("busy");
  let body = {};
  try { body = await r.json(); } catch { /* empty or non-JSON body */ }
  if (r.ok) {
    state.phase = "done";
    forget(draftKey());
    stopLive();
    const k = body.counts || {};
    endScreen("Answers sent",
      `${k.answered ?? c.answered} answered, ${k.deferred ?? c.deferred} deferred, `
      + `${k.needsInfo ?? c.needsInfo} need more info, ${k.unanswered ?? c.open} unanswered.`,
      body.delivered
        ? "Claude has your answers now. You can close this tab."
        : "No Claude call is waiting right now: your answers are saved, and Claude collects them with await_user_answers. You can close this tab.").focus();
    return;
  }
  state.phase = "open";
  if (r.status === 409 && typeof body.version === "number") {
    await pullSpec();
    state.confirmArmed = false;
    $("#btn-submit").textContent = "Submit answers";
    notice("warn", "Claude added questions while you were submitting, so nothing was sent yet. "
      + "Look at the new questions, then submit again.", { id: "race", action: { label: "Go to the new questions (G)", run: goNew } });
    if (!goNew()) go("review");
    return;
  }
  if (r.status === 409) { finished(body.error || "interview already submitted"); return; }
  if (r.status === 404) { expired(); return; }
  submitProblem(`The server did not accept the answers: ${body.error || `HTTP ${r.status}`}. The interview is still open; fix it and submit again.`);
}

function finished(what) {
  state.phase = "submitted";
  stopLive();
  forget(draftKey());
  if (/cancel/.test(what)) {
    endScreen("This interview was cancelled", "Claude cancelled it, so it takes no more answers.", "You can close this tab.");
  } else {
    endScreen("Already submitted", "The answers to this interview were already sent, perhaps from another tab.", "You can close this tab.");
  }
}

function expired() {
  state.phase = "expired";
  stopLive();
  endScreen("This interview is no longer available",
    "It expired or the server restarted, so it cannot take answers any more.",
    "If you had started answering, your draft is still kept in this browser for this link.");
}

// ---------------------------------------------------------------- live
async function pullSpec() {
  const r = await fetch(api(), { cache: "no-store" });
  if (!r.ok) return [];
  const data = await r.json();
  if (data.version === state.version && state.spec) return [];
  const added = mergeSpec(data.spec, data.version, data.note);
  addQuestionScreens(added);
  if (added.length) {
    notice("info", `Claude added ${added.length} follow-up question${added.length === 1 ? "" : "s"}.`,
      { markdown: data.note && data.note.text, id: "follow-ups", action: { label: "Go to them (G)", run: goNew } });
    announce(`Claude added ${added.length} follow-up questions. Press G to go to them.`);
  }
  syncAll();
  showScreen(state.screen, 0);
  saveDraft();
  return added;
}

function onState(s) {
  // The live line's state, readable by the tests as a gate: "open" once the first event came,
  // "waiting" while a Claude call waits for the answers.
  document.body.dataset.live = s.waiting ? "waiting" : "open";
  if (state.phase !== "open") return;
  if (s.state === "submitted" || s.state === "cancelled") { finished(s.state); return; }
  if (s.version > state.version) pullSpec();
  if (s.waiting) { state.everWaited = true; clearNotice("stopped"); }
  else if (state.everWaited && state.waiting) {
    notice("info", "Claude stopped waiting for these answers. You can still submit: they are saved and Claude can collect them later.", { id: "stopped" });
  }
  state.waiting = s.waiting;
}

function serverGone(status) {
  if (status === 404) { expired(); return; }
  notice("error", "The form server cannot be reached. Your answers are kept in this browser as a draft; they will be here when you reload this page with the server back.", { id: "gone" });
}

// ---------------------------------------------------------------- controls
function questionOf(el) {
  const sec = el.closest("section.question");
  return sec ? questionById(sec.dataset.qid) : null;
}

function bindControls() {
  const main = $("#main");
  main.addEventListener("change", (e) => {
    const t = e.target;
    const q = questionOf(t);
    if (!q) return;
    if (t.classList.contains("opt-input")) {
      if (t.value === "__other") setOther(q, t.checked);
      else toggleOption(q, t.value, t.checked);
      changed(q);
    } else if (t.closest(".mode")) {
      answerOf(q).mode = t.value;
      changed(q);
    }
  });
  main.addEventListener("input", (e) => {
    const t = e.target;
    if (t.id === "general-notes") { state.generalNotes = t.value; saveDraft(); return; }
    const q = questionOf(t);
    if (!q) return;
    const a = answerOf(q);
    if (t.classList.contains("other-text")) {
      a.other = t.value;
      if (q.options.length && t.value.trim() && !a.otherOn) setOther(q, true);
      if (q.options.length === 0) a.mode = "answer";
    } else if (t.classList.contains("opt-text-input")) {
      a.optionTexts[t.dataset.opt] = t.value;
    } else if (t.classList.contains("note-text")) {
      a.notes = t.value;
    } else return;
    changed(q);
  });
  document.addEventListener("click", (e) => {
    const t = e.target.closest("button, a");
    if (!t) return;
    if (t.dataset.goto) { e.preventDefault(); go(t.dataset.goto); return; }
    if (t.classList.contains("rec-take")) {
      const q = questionOf(t);
      if (q.kind === "rank") applyRecommended(q);
      else if (takeRecommendation(q)) changed(q);
      return;
    }
    switch (t.id) {
      case "btn-back": step(-1); break;
      case "btn-next": next(); break;
      case "btn-submit": submit(); break;
      case "btn-accept-all": acceptAll(); break;
      case "btn-view": toggleShowAll(); break;
      case "btn-help": openHelp(); break;
      case "help-close": $("#help").close(); break;
      case "btn-theme": {
        // Cycled from memory, not from storage, so a blocked localStorage still cycles.
        const nextTheme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
        theme = nextTheme;
        save("askrich:theme", nextTheme);
        applyTheme(nextTheme);
        announce(`Theme: ${nextTheme === "auto" ? "follow the system" : nextTheme}.`);
        break;
      }
      default:
    }
  });

  // Scrolling follows the keyboard, never the mouse.
  let keyboard = false;
  document.addEventListener("keydown", () => { keyboard = true; }, true);
  document.addEventListener("pointerdown", () => { keyboard = false; }, true);
  document.addEventListener("focusin", (e) => {
    if (!keyboard || state.phase !== "open") return;
    const t = e.target;
    if (t.matches("section.screen, #main")) return;
    keepInView(t.closest(".opt, .rank-row") || t);
  });
  window.addEventListener("scroll", trackScroll, { passive: true });
  main.addEventListener("animationend", (e) => e.target.classList.remove("slide-next", "slide-prev"));
}

function fillHelp() {
  const body = $("#help-rows");
  for (const [keys, what] of KEY_TABLE) {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    keys.split("`").forEach((part, i) => {
      if (i % 2 === 0) { if (part) th.append(part); return; }
      const k = document.createElement("kbd");
      k.textContent = part;
      th.append(k);
    });
    const td = document.createElement("td");
    td.textContent = what;
    tr.append(th, td);
    body.append(tr);
  }
}

// ---------------------------------------------------------------- start
async function start() {
  theme = THEMES.includes(load("askrich:theme", "auto")) ? load("askrich:theme", "auto") : "auto";
  applyTheme(theme);
  fillHelp();
  bindKeys({
    next, prev: () => step(-1), first: () => go(screens()[0]), last: () => go("review"),
    currentQuestion, changed, focusNote, leaveField, acceptAll, toggleShowAll, goNew, openHelp,
    isAnswered,
  });
  onRankChange(changed);
  onRankAnnounce(announce);
  bindControls();
  bindAttachments();
  document.body.classList.remove("loading");
  if (!token) { expired(); return; }
  let r;
  try {
    r = await fetch(api(), { cache: "no-store" });
  } catch {
    state.phase = "error";
    endScreen("The form server cannot be reached", "The server that serves this interview is not running.",
      "Any draft you saved is kept in this browser; reload once the server is back.");
    return;
  }
  if (r.status === 404) { expired(); return; }
  if (!r.ok) {
    state.phase = "error";
    endScreen("The interview could not be loaded", `The server answered HTTP ${r.status}.`, "Reload to try again.");
    return;
  }
  const data = await r.json();
  state.interviewId = data.id;
  $("#title").textContent = data.spec.title;
  document.title = `${data.spec.title} · Ask User Rich`;
  if (data.state !== "pending") {
    state.phase = "open";
    finished(data.state);
    return;
  }
  mergeSpec(data.spec, data.version, data.note);
  state.phase = "open";
  state.showAll = load("askrich:showAll", false) === true;
  state.screen = screens()[0];
  restoreDraft();
  buildScreens();
  syncAll();
  showScreen(state.screen, 0);
  if (state.showAll && state.screen !== screens()[0]) {
    const el = screenEl(state.screen);
    if (el) window.scrollTo({ top: window.scrollY + el.getBoundingClientRect().top - $("#bar").getBoundingClientRect().bottom - 8 });
  }
  if (state.newIds.size) {
    notice("info", `Claude added ${state.newIds.size} follow-up question${state.newIds.size === 1 ? "" : "s"} since you last had this page open.`,
      { markdown: state.note && state.note.text, id: "follow-ups", action: { label: "Go to them (G)", run: goNew } });
  }
  syncRail();
  document.body.classList.add("ready");
  reportProgress(counts, 0);
  stopLive = startLive({ onState, onGone: serverGone, onBack: () => clearNotice("gone") });
}

start();
