// Start-up and wiring: loads the interview, binds the controls (delegated on the screen root),
// navigation, submit, and the live line to the server.
import {
  state, api, answerOf, questionById, statusOf, counts, screens, mergeSpec, restoreDraft,
  saveDraft, draftKey, forget, load, save, toggleOption, setOther, takeRecommendation,
  missingTexts, payload, hasRecommendation, isAnswered,
} from "./state.js";
import {
  buildScreens, addQuestionScreens, syncAll, syncQuestion, syncRail, syncNav, showScreen,
  screenEl, endScreen, notice, clearNotice, keepInView, reducedMotion, applyTheme, qviews,
  qNumber, ensureBuilt, markSeen, quotedList,
} from "./view.js";
import { syncReview } from "./review.js";
import { $, announce, setPhrases } from "./dom.js";
import { bindKeys, KEY_TABLE } from "./keys.js";
import { t, sentences, setLanguage, setAgent, translatePage, fillKeys } from "./i18n.js";
import { onRankChange, onRankAnnounce, cancelHold, applyRecommended } from "./rank.js";
import { startLive, reportProgress } from "./live.js";
import { isTrusted, proofRefused, whenRefused } from "./guard.js";
import { bindAttachments, uploadsRunning, uploadsSettled } from "./attach.js";
import { showShare } from "./share.js";
import { connect, request, hostTheme, submitted, offerFullscreen } from "./transport.js";
import { watchVisibility } from "./visibility.js";

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
  announce(n ? t("accept.done", { count: n }) : t("accept.none"));
}

function openHelp() {
  const d = $("#help");
  if (!d.open) d.showModal();
}

// ---------------------------------------------------------------- submit
// `again`: a button that sends once more (the server could not keep the answers).
function submitProblem(text, jumps = [], again = null) {
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
    b.textContent = t("submit.goTo", { n: qNumber(q) });
    box.append(b, " ");
  }
  if (again) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "btn small send-again";
    b.textContent = t("submit.sendAgain");
    b.addEventListener("click", () => { submitProblem(""); again(); });
    box.append(b);
  }
  box.hidden = false;
}

// What the submit is waiting for, said while it waits (a status, not a problem).
function submitStatus(text) {
  const box = $(".review .submit-status");
  if (!box) return;
  box.textContent = text;
  box.hidden = !text;
}

// Waits for the files still uploading, so that the answers name them; false (and the reason
// shown) when one of them did not make it, so the user can see which before sending.
async function uploadsFinished() {
  const running = uploadsRunning();
  if (!running) return true;
  state.phase = "waiting";
  document.body.classList.add("busy");
  submitStatus(t("submit.waitingUploads", { count: running }));
  const refused = await uploadsSettled();
  document.body.classList.remove("busy");
  submitStatus("");
  state.phase = "open";
  if (refused) { submitProblem(t("submit.uploadFailed", { count: refused })); return false; }
  return true;
}

async function submit() {
  if (state.phase !== "open") return;
  if (state.screen !== "review" && !state.showAll) { go("review"); return; }
  const blocked = state.spec.questions.filter((q) => missingTexts(q).length);
  if (blocked.length) {
    for (const q of blocked) { ensureBuilt(q).el.classList.add("tried"); syncQuestion(q); }
    const first = blocked[0];
    const names = quotedList(missingTexts(first).map((o) => o.label));
    const more = blocked.length > 1 ? t("submit.needsTextMore", { count: blocked.length - 1 }) : "";
    submitProblem(sentences(t("submit.needsText", { n: qNumber(first), names }), more), blocked);
    syncReview();
    return;
  }
  submitProblem("");
  const c = counts();
  if (c.open > 0 && !state.confirmArmed) {
    state.confirmArmed = true;
    const box = $(".review .confirm");
    $(".confirm-text", box).textContent = sentences(t("confirm.open", { count: c.open }), t("confirm.again"));
    box.hidden = false;
    $("#btn-submit").textContent = t("review.submitAnyway");
    announce($(".confirm-text", box).textContent);
    return;
  }
  $(".review .confirm").hidden = true;
  if (!(await uploadsFinished())) return;
  const sent = await send(payload(), submit);
  if (!sent) return;
  const { r, body } = sent;
  if (r.ok) {
    const k = body.counts || {};
    done(t("end.sent"), t("end.counts", {
      answered: k.answered ?? c.answered, deferred: k.deferred ?? c.deferred,
      needsInfo: k.needsInfo ?? c.needsInfo, unanswered: k.unanswered ?? c.open,
    }), t(body.delivered ? "end.delivered" : "end.saved"), { counts: true });
    return;
  }
  if (body.code === "stale-version") {
    await pullSpec();
    state.confirmArmed = false;
    $("#btn-submit").textContent = t("review.submit");
    notice("warn", t("race.notice"), { id: "race", action: { label: t("race.go"), run: goNew } });
    if (!goNew()) go("review");
    return;
  }
  await refused(r, body, submit);
}

// Posts the answers; {r, body} once the server answered, null when it could not be reached
// (then `again` is offered: behind the front door, another process takes over within seconds).
async function send(body, again) {
  state.phase = "submitting";
  document.body.classList.add("busy");
  let r;
  try {
    r = await request("/submit", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
  } catch {
    state.phase = "open";
    document.body.classList.remove("busy");
    serverGone();
    submitProblem(t("submit.unreachable"), [], again);
    return null;
  }
  document.body.classList.remove("busy");
  let reply = {};
  try { reply = await r.json(); } catch { /* empty or non-JSON body */ }
  state.phase = r.ok ? "done" : "open";
  if (r.ok) submitted(state.spec.title, reply.summary);
  return { r, body: reply };
}

function done(heading, text, more, how) {
  forget(draftKey());
  stopLive();
  endScreen(heading, text, more, how).focus();
}

// A submit the server did not take, for a reason other than new questions, told by the body's
// `code` (its English `error` may be reworded). "not-saved": it could not keep them (a full
// disk); nothing settled, and `again` sends the same answers once more. "owner-unreachable",
// "owner-timeout": the front door could not reach the process that holds the form.
async function refused(r, body, again) {
  if (body.code === "not-pending") { finished(await settledState()); return; }
  if (body.code === "not-found") { expired(); return; }
  if (body.code === "owner-unreachable" || body.code === "owner-timeout") {
    submitProblem(t("submit.unreachable"), [], again);
    return;
  }
  if (body.code === "not-saved") {
    submitProblem(t("submit.notSaved", { reason: body.reason || body.error || `HTTP ${r.status}` }), [], again);
    return;
  }
  submitProblem(t("submit.rejected", { error: body.error || `HTTP ${r.status}` }));
}

// ---------------------------------------------------------------- skip the interview
function openSkip() {
  if (state.phase !== "open") return;
  const d = $("#skip");
  $("#skip-text").textContent = t("skip.text");
  if (!d.open) d.showModal();
}

// Declines the whole interview. The answers made so far go along, except a pick whose required
// text is still empty: the user is leaving, not asked to finish it. New questions that arrived
// meanwhile change nothing, so the submit names no version.
async function skipInterview() {
  if (state.phase !== "open") return;
  const d = $("#skip");
  const reason = $("#skip-reason").value.trim();
  d.close();
  const body = payload();
  delete body.specVersion;
  body.declined = true;
  for (const q of state.spec.questions) {
    if (missingTexts(q).length) body.answers[q.id] = { status: "answer", notes: answerOf(q).notes, selected: [] };
  }
  // The reason follows the user's own general notes after a blank line.
  body.generalNotes = [state.generalNotes.trim(), reason].filter(Boolean).join("\n\n");
  await sendSkip(body);
}

async function sendSkip(body) {
  if (uploadsRunning() && state.screen !== "review") go("review"); // where the wait is shown
  if (!(await uploadsFinished())) return;
  const sent = await send(Object.assign(body, { attachments: payload().attachments }), () => sendSkip(body));
  if (!sent) { if (state.screen !== "review") go("review"); return; }
  if (sent.r.ok) {
    done(t("end.skipped"), t("end.skippedText"), t(sent.body.delivered ? "end.closeTab" : "end.skippedSaved"));
    return;
  }
  if (state.screen !== "review") go("review");
  await refused(sent.r, sent.body, () => sendSkip(body));
}

// Which end the interview came to, from /state: "submitted", "declined", "cancelled" (null when
// the server cannot say).
async function settledState() {
  try {
    const r = await request("/state", { cache: "no-store" });
    return (await r.json()).state ?? null;
  } catch {
    return null;
  }
}

// `settled`: the interview's state, "submitted", "declined" or "cancelled"; `handedBack`: it was
// cancelled because the agent asks these questions in its own terminal instead.
function finished(settled, handedBack = false) {
  state.phase = "submitted";
  stopLive();
  forget(draftKey());
  if (settled === "cancelled" && handedBack) endScreen(t("end.handedBack"), t("end.handedBackText"), t("end.closeTab"));
  else if (settled === "cancelled") endScreen(t("end.cancelled"), t("end.cancelledText"), t("end.closeTab"));
  else if (settled === "declined") endScreen(t("end.declined"), t("end.declinedText"), t("end.closeTab"));
  else endScreen(t("end.already"), t("end.alreadyText"), t("end.closeTab"));
}

function expired() {
  state.phase = "expired";
  stopLive();
  endScreen(t("end.expired"), t("end.expiredText"), t("end.expiredMore"));
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
  showScreen(state.screen, 0);
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
  if (s.state === "submitted" || s.state === "declined" || s.state === "cancelled") { finished(s.state, s.handedBack === true); return; }
  if (s.version > state.version) pullSpec();
  if (s.waiting) { state.everWaited = true; clearNotice("stopped"); }
  else if (state.everWaited && state.waiting) {
    notice("info", t("waiting.stopped"), { id: "stopped" });
  }
  state.waiting = s.waiting;
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
      case "btn-theme": {
        // Cycled from memory, not from storage, so a blocked localStorage still cycles.
        const nextTheme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
        theme = nextTheme;
        save("askrich:theme", nextTheme);
        applyTheme(nextTheme);
        announce(t(`theme.announce.${nextTheme}`));
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
  theme = THEMES.includes(load("askrich:theme", "auto")) ? load("askrich:theme", "auto") : "auto";
  applyTheme(theme);
  bindKeys({
    next, prev: () => step(-1), first: () => go(screens()[0]), last: () => go("review"),
    currentQuestion, changed, focusNote, leaveField, acceptAll, toggleShowAll, goNew, openHelp,
    isAnswered,
  });
  onRankChange(changed);
  onRankAnnounce(announce);
  bindControls();
  bindAttachments();
  let r = null;
  const known = await connect();
  theme = hostTheme() || theme;
  if (known) {
    try { r = await request("", { cache: "no-store" }); } catch { /* reported below */ }
  }
  const body = r ? await r.json().catch(() => null) : null;
  const data = r && r.ok ? body : null;
  await speak(data && data.spec.language, data && data.agent);
  document.body.classList.remove("loading");
  // A page that got no interview (expired, unreachable, refused) must not go on saying it is
  // loading one: its header names the product instead.
  if (!data) $("#title").textContent = "Ask User Rich";
  if (!known || (body && body.code === "not-found")) { expired(); return; }
  if (!r) {
    state.phase = "error";
    endScreen(t("end.unreachable"), t("end.unreachableText"), t("end.unreachableMore"));
    return;
  }
  if (!r.ok || !data) {
    state.phase = "error";
    endScreen(t("end.loadFailed"), t("end.loadFailedText", { status: r.status }), t("end.reload"));
    return;
  }
  state.interviewId = data.id;
  state.limits = data.limits;
  setPhrases($("#title"), data.spec.title);
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
    notice("info", t("followups.since", { count: state.newIds.size }),
      { markdown: state.note && state.note.text, id: "follow-ups", action: { label: t("followups.go"), run: goNew } });
  }
  syncRail();
  document.body.classList.add("ready");
  reportProgress(counts, 0);
  offerFullscreen(state.spec.questions.length);
  whenRefused(impostor);
  stopLive = startLive({ onState, onGone: serverGone, onBack: () => clearNotice("gone") });
  watchVisibility(); // the notices stop only once the person can see the form
}

start();
