// The end of an interview: the submit (checked, confirmed, waiting for uploads, sent) and the
// skip, and the end screens, whichever way it ended (sent, skipped, settled elsewhere, expired).
// The navigation and the live line stay main.js's: it hands them over once, in bindSubmit().
import {
  state, answerOf, counts, draftKey, forget, missingTexts, payload, setPhase, armConfirm,
} from "./state.js";
import { syncQuestion, endScreen, notice, qNumber, ensureBuilt, quotedList } from "./view.js";
import { syncReview } from "./review.js";
import { $, announce } from "./dom.js";
import { t, tPlain, sentences } from "./i18n.js";
import { uploadsRunning, uploadsSettled } from "./attach.js";
import { request, session, submitted } from "./transport.js";

// {go, goNew, pullSpec, stopLive, serverGone}: main.js's navigation and live line.
let act = null;
export function bindSubmit(actions) {
  act = actions;
}

// ---------------------------------------------------------------- the submit
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
  setPhase("waiting");
  document.body.classList.add("busy");
  submitStatus(t("submit.waitingUploads", { count: running }));
  const refused = await uploadsSettled();
  document.body.classList.remove("busy");
  submitStatus("");
  setPhase("open");
  if (refused) { submitProblem(t("submit.uploadFailed", { count: refused })); return false; }
  return true;
}

export async function submit() {
  if (state.phase !== "open") return;
  if (state.screen !== "review" && !state.showAll) { act.go("review"); return; }
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
    armConfirm(true);
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
    await act.pullSpec();
    armConfirm(false);
    $("#btn-submit").textContent = t("review.submit");
    notice("warn", t("race.notice"), { id: "race", action: { label: t("race.go"), run: act.goNew } });
    if (!act.goNew()) act.go("review");
    return;
  }
  await refused(r, body, submit);
}

// Posts the answers; {r, body} once the server answered, null when it could not be reached
// (then `again` is offered: behind the front door, another process takes over within seconds).
async function send(body, again) {
  setPhase("submitting");
  document.body.classList.add("busy");
  let r;
  try {
    r = await request("/submit", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
  } catch {
    setPhase("open");
    document.body.classList.remove("busy");
    act.serverGone();
    submitProblem(t("submit.unreachable"), [], again);
    return null;
  }
  document.body.classList.remove("busy");
  let reply = {};
  try { reply = await r.json(); } catch { /* empty or non-JSON body */ }
  setPhase(r.ok ? "done" : "open");
  if (r.ok) {
    submitted(body, reply.summary,
      tPlain(body.declined ? "app.skipped" : "app.answered", { title: state.spec.title, id: session.id }));
  }
  return { r, body: reply };
}

function done(heading, text, more, how) {
  forget(draftKey());
  act.stopLive();
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

// ---------------------------------------------------------------- skipping the interview
export function openSkip() {
  if (state.phase !== "open") return;
  const d = $("#skip");
  $("#skip-text").textContent = t("skip.text");
  if (!d.open) d.showModal();
}

// Declines the whole interview. The answers made so far go along, except a pick whose required
// text is still empty: the user is leaving, not asked to finish it. New questions that arrived
// meanwhile change nothing, so the submit names no version.
export async function skipInterview() {
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
  if (uploadsRunning() && state.screen !== "review") act.go("review"); // where the wait is shown
  if (!(await uploadsFinished())) return;
  const sent = await send(Object.assign(body, { attachments: payload().attachments }), () => sendSkip(body));
  if (!sent) { if (state.screen !== "review") act.go("review"); return; }
  if (sent.r.ok) {
    done(t("end.skipped"), t("end.skippedText"), t(sent.body.delivered ? "end.closeTab" : "end.skippedSaved"));
    return;
  }
  if (state.screen !== "review") act.go("review");
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
// cancelled because the agent asks these questions in its own terminal instead;
// `answeredThere`: because the person answered it in the agent's terminal first.
export function finished(settled, handedBack = false, answeredThere = false) {
  setPhase("submitted");
  act.stopLive();
  forget(draftKey());
  if (settled === "cancelled" && answeredThere) endScreen(t("end.answeredInTerminal"), t("end.answeredInTerminalText"), t("end.closeTab"));
  else if (settled === "cancelled" && handedBack) endScreen(t("end.handedBack"), t("end.handedBackText"), t("end.closeTab"));
  else if (settled === "cancelled") endScreen(t("end.cancelled"), t("end.cancelledText"), t("end.closeTab"));
  else if (settled === "declined") endScreen(t("end.declined"), t("end.declinedText"), t("end.closeTab"));
  else endScreen(t("end.already"), t("end.alreadyText"), t("end.closeTab"));
}

export function expired() {
  setPhase("expired");
  act.stopLive();
  endScreen(t("end.expired"), t("end.expiredText"), t("end.expiredMore"));
}
