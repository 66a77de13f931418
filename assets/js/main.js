// Start-up and wiring: loads the interview, binds the controls (delegated on the screen root),
// navigation and the live line to the server. It owns the form's state with submit.js (the end
// of the interview) and keys.js (the keyboard): each changes the state, then has view.js show it.
import {
  state, api, answerOf, questionById, statusOf, counts, screens, mergeSpec, restoreDraft,
  saveDraft, load, save, toggleOption, setOther, takeRecommendation, hasRecommendation, isAnswered,
  setPhase, setScreen, setGeneralNotes, setShowAll, setWaiting, begin, setMode, setOtherText, setOptionText,
  setNotes, markSeen,
} from "./state.js";
import {
  buildScreens, addQuestionScreens, syncAll, syncQuestion, syncRail, syncNav, syncTitle, showScreen,
  screenEl, endScreen, notice, clearNotice, keepInView, reducedMotion, qviews,
} from "./view.js";
import { syncReview } from "./review.js";
import { $, announce, setPhrases, storedTheme, applyTheme, nextTheme } from "./dom.js";
import { bindKeys, KEY_TABLE } from "./keys.js";
import { t, sentences, setLanguage, setAgent, translatePage, fillKeys } from "./i18n.js";
import { onRankChange, onRankAnnounce, cancelHold, applyRecommended } from "./rank.js";
import { startLive, reportProgress } from "./live.js";
import { isTrusted, proofRefused, whenRefused } from "./guard.js";
import { bindAttachments } from "./attach.js";
import { bindTextLimits } from "./textlimit.js";
import { bindSubmit, submit, openSkip, skipInterview, finished, expired } from "./submit.js";
import { showShare } from "./share.js";
import { connect, request, hostTheme, followHostTheme, offerFullscreen, session } from "./transport.js";
import { watchVisibility } from "./visibility.js";
import { permissionSpec } from "./permission.js";

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
// Arriving at a screen: a follow-up stops being new once shown, and the notice about them goes
// with the last one.
function visit(key) {
  setScreen(key);
  if (!key.startsWith("q:") || !markSeen(key.slice(2))) return;
  if (!state.newIds.size) clearNotice("follow-ups");
  syncTitle();
  reportProgress(counts); // the inbox's badge counts the follow-ups not seen yet
}

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
  visit(key);
  if (state.showAll) {
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
    const el = showScreen(dir);
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
  save("askrich:showAll", setShowAll(!state.showAll));
  visit(state.screen);
  showScreen(0);
  const el = screenEl(state.screen);
  if (state.showAll && el) {
    const top = $("#bar").getBoundingClientRect().bottom;
    tracking.suspendUntil = performance.now() + 300;
    window.scrollTo({ top: Math.max(0, window.scrollY + el.getBoundingClientRect().top - top - 8) });
  } else window.scrollTo({ top: 0 });
  announce(t(state.showAll ? "view.announceAll" : "view.announceOne"));
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
      visit(cur);
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
  announce(n ? t("accept.done", { count: n }) : t("accept.none"));
}

function openHelp() {
  const d = $("#help");
  if (!d.open) d.showModal();
}

// ---------------------------------------------------------------- live
async function pullSpec() {
  const r = await request("", { cache: "no-store" });
  if (!r.ok) return [];
  const data = await r.json();
  if (data.version === state.version && state.spec) return [];
  const added = mergeSpec(data.spec, data.version, data.note);
  addQuestionScreens(added);
  if (added.length) {
    const text = t("followups.added", { count: added.length });
    notice("info", text, {
      markdown: data.note && data.note.text, id: "follow-ups", action: { label: t("followups.go"), run: goNew },
      say: sentences(text, t("followups.pressG")),
    });
  }
  syncAll();
  visit(state.screen);
  showScreen(0);
  saveDraft();
  reportProgress(counts);
  return added;
}

function onState(s) {
  // The live line's state, readable by the tests as a gate: "open" once the first event came,
  // "waiting" while an agent's call waits for the answers.
  document.body.dataset.live = s.waiting ? "waiting" : "open";
  syncInboxLink(s.inbox);
  syncShare(s.share);
  if (state.phase !== "open") return;
  if (s.state === "submitted" || s.state === "declined" || s.state === "cancelled") { finished(s.state, s.handedBack === true, s.answeredInTerminal === true); return; }
  if (s.version > state.version) pullSpec();
  if (setWaiting(s.waiting)) notice("info", t("waiting.stopped"), { id: "stopped" });
  else if (s.waiting) clearNotice("stopped");
}

// "Other device" in the header, while the server names the address this form has through the
// person's tunnel (a public URL is set).
function syncShare(url) {
  const button = $("#btn-share");
  button.hidden = !(typeof url === "string" && /^https?:\/\//.test(url));
  if (!button.hidden) button.dataset.url = url;
}

// "2 more waiting" in the header, to the inbox, while other interviews wait anywhere. The server
// names the inbox only once whoever holds its port proved it is ours, and the link goes to this
// form's own server, which sends the browser on with a one-time ticket: the form never holds the
// inbox's key. Following it sends the token, so only to a server that has not been lost.
function syncInboxLink(inbox) {
  const link = $("#inbox-more");
  const count = inbox && typeof inbox.waiting === "number" ? inbox.waiting : 0;
  const url = inbox && inbox.url === api("/inbox") ? inbox.url : null;
  link.hidden = !(count > 0 && url && state.phase === "open" && isTrusted());
  if (link.hidden) return;
  if (!link.dataset.guarded) {
    link.dataset.guarded = "1";
    link.addEventListener("click", (e) => { if (!isTrusted()) e.preventDefault(); });
  }
  if (link.getAttribute("href") !== url) link.href = url;
  link.textContent = t("inbox.moreWaiting", { count });
}

// `code`: the error code of the server's last answer; "not-found" once it no longer knows the
// interview (it restarted), which is final.
function serverGone(code) {
  if (code === "not-found") { expired(); return; }
  if (proofRefused()) return;
  notice("error", t("server.gone"), { id: "gone" });
}

// Whatever holds this address now could not prove it knows this form's link: nothing more goes
// to it, and the person is told why, with the answers left on screen and in this browser.
function impostor() {
  stopLive();
  clearNotice("gone");
  notice("error", t("server.impostor"), { id: "impostor" });
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
      setMode(q, t.value);
      changed(q);
    }
  });
  main.addEventListener("input", (e) => {
    const t = e.target;
    if (t.id === "general-notes") { setGeneralNotes(t.value); saveDraft(); return; }
    const q = questionOf(t);
    if (!q) return;
    if (t.classList.contains("other-text")) setOtherText(q, t.value);
    else if (t.classList.contains("opt-text-input")) setOptionText(q, t.dataset.opt, t.value);
    else if (t.classList.contains("note-text")) setNotes(q, t.value);
    else return;
    changed(q);
  });
  document.addEventListener("click", (e) => {
    const btn = e.target.closest("button, a");
    if (!btn) return;
    if (btn.dataset.goto) { e.preventDefault(); go(btn.dataset.goto); return; }
    if (btn.classList.contains("rec-take")) {
      const q = questionOf(btn);
      if (q.kind === "rank") applyRecommended(q);
      else if (takeRecommendation(q)) changed(q);
      return;
    }
    switch (btn.id) {
      case "btn-back": step(-1); break;
      case "btn-next": next(); break;
      case "btn-submit": submit(); break;
      case "btn-accept-all": acceptAll(); break;
      case "btn-view": toggleShowAll(); break;
      case "btn-help": openHelp(); break;
      case "help-close": $("#help").close(); break;
      case "btn-share": showShare($("#btn-share").dataset.url, t("share.formText")); break;
      case "btn-skip": case "btn-skip-bar": openSkip(); break;
      case "skip-cancel": $("#skip").close(); break;
      case "skip-confirm": skipInterview(); break;
      case "btn-theme": theme = nextTheme(theme); break;
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
  for (const row of KEY_TABLE) {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    fillKeys(th, t(`keys.${row}.keys`));
    const td = document.createElement("td");
    td.textContent = t(`keys.${row}.what`);
    tr.append(th, td);
    body.append(tr);
  }
}

// ---------------------------------------------------------------- start
// The page's own words, once the language is known (before that, the markup's English).
async function speak(language, agent) {
  await setLanguage(language);
  setAgent(agent);
  translatePage();
  applyTheme(theme);
  fillHelp();
}

async function start() {
  theme = storedTheme();
  applyTheme(theme);
  bindSubmit({ go, goNew, pullSpec, stopLive: () => stopLive(), serverGone });
  bindKeys({
    next, prev: () => step(-1), first: () => go(screens()[0]), last: () => go("review"),
    currentQuestion, changed, focusNote, leaveField, acceptAll, toggleShowAll, goNew, openHelp,
    isAnswered,
  });
  onRankChange(changed);
  onRankAnnounce(announce);
  bindControls();
  bindAttachments();
  bindTextLimits();
  let r = null;
  const known = await connect();
  theme = hostTheme() || theme;
  followHostTheme((hosts) => { theme = hosts; applyTheme(theme); });
  if (known) {
    try { r = await request("", { cache: "no-store" }); } catch { /* reported below */ }
  }
  const body = r ? await r.json().catch(() => null) : null;
  const data = r && r.ok ? body : null;
  await speak(data && data.spec.language, data && data.agent);
  if (data && data.permission) data.spec = permissionSpec(data.spec, data.permission);
  document.body.classList.remove("loading");
  // A page that got no interview (expired, unreachable, refused) must not go on saying it is
  // loading one: its header names the product instead.
  if (!data) $("#title").textContent = "Ask User Rich";
  if (session.error) { // the call failed (an invalid interview): its error, not "expired"
    setPhase("error");
    endScreen(t("end.loadFailed"), session.error, "");
    return;
  }
  if (session.settled) { // the call returned the answers: nothing is left to answer here
    if (session.settled.title) setPhrases($("#title"), session.settled.title);
    finished(session.settled.status);
    return;
  }
  if (!known || (body && body.code === "not-found")) { expired(); return; }
  if (!r) {
    setPhase("error");
    endScreen(t("end.unreachable"), t("end.unreachableText"), t("end.unreachableMore"));
    return;
  }
  if (!r.ok || !data) {
    setPhase("error");
    endScreen(t("end.loadFailed"), t("end.loadFailedText", { status: r.status }), t("end.reload"));
    return;
  }
  begin(data.id, data.limits);
  setPhrases($("#title"), data.spec.title);
  document.title = `${data.spec.title} · Ask User Rich`;
  if (data.state !== "pending") {
    setPhase("open");
    finished(data.state);
    return;
  }
  mergeSpec(data.spec, data.version, data.note);
  setPhase("open");
  setShowAll(load("askrich:showAll", false) === true);
  setScreen(screens()[0]);
  restoreDraft();
  buildScreens();
  syncAll();
  visit(state.screen);
  showScreen(0);
  if (state.showAll && state.screen !== screens()[0]) {
    const el = screenEl(state.screen);
    if (el) window.scrollTo({ top: window.scrollY + el.getBoundingClientRect().top - $("#bar").getBoundingClientRect().bottom - 8 });
  }
  if (state.newIds.size) {
    notice("info", t("followups.since", { count: state.newIds.size }),
      { markdown: state.note && state.note.text, id: "follow-ups", action: { label: t("followups.go"), run: goNew } });
  }
  syncRail();
  document.body.classList.add("ready");
  performance.mark("askrich:interactive"); // the first question answers keys and clicks now
  reportProgress(counts, 0);
  offerFullscreen(state.spec.questions.length, (on) => t(on ? "app.inline" : "app.fullscreen"));
  whenRefused(impostor);
  stopLive = startLive({ onState, onGone: serverGone, onBack: () => clearNotice("gone") });
  watchVisibility(); // the notices stop only once the person can see the form
}

start();
