// The line to the server while the form is open: state pushed through /events (Server-Sent
// Events), and debounced /progress posts. When the stream drops, it is closed at once (the
// browser would reconnect by itself, token and all, to whatever holds the port by then) and
// /state is polled every 2.5 s through guard.js, which first has the server prove it knows the
// token; once it has and answers, the stream is opened again. The app inside a host has no
// stream: it polls /state (the form_state tool) from the start, slower when nobody acts
// (transport.js's pollDelay).
import { api, state, payload } from "./state.js";
import { connectionLost } from "./guard.js";
import { onBusyAgain, pollDelay, request, streams } from "./transport.js";

const RETRY_MS = 250;

export function startLive({ onState, onGone, onBack }) {
  let pollTimer = null;
  let gone = false;
  let stopped = false;
  let es = null;

  const seen = (s) => {
    if (gone) { gone = false; onBack(); }
    onState(s);
  };
  // `code`: the error body's code, or null when the server could not be reached or said none.
  const lost = (code) => {
    // "not-found": the server is back but no longer knows this interview (it restarted); that
    // is final.
    if (code === "not-found") { stop(); onGone(code); return; }
    if (!gone) { gone = true; onGone(code); }
  };
  const checkOnce = async (again = true) => {
    try {
      const r = await request("/state", { cache: "no-store" });
      if (!r.ok) {
        const body = await r.json().catch(() => ({}));
        lost(body && typeof body.code === "string" ? body.code : null);
        return false;
      }
      seen(await r.json());
      if (pollTimer && !es) openStream();
      return true;
    } catch {
      // A connection taken by a process of ours just as it exits is reset, and the next one
      // reaches another that holds the door: one more look before the person hears "gone".
      if (again && !stopped) {
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        return checkOnce(false);
      }
      lost(null);
      return false;
    }
  };
  // pollTimer: the next look's timer, true while a look is under way, null when not polling.
  let pollWait = 0; // the pending timer's delay
  const look = () => {
    pollTimer = true;
    checkOnce().finally(() => {
      if (stopped || es) { pollTimer = null; return; }
      pollWait = pollDelay();
      pollTimer = setTimeout(look, pollWait);
    });
  };
  const poll = () => {
    if (pollTimer || stopped) return;
    look();
  };
  // The person is back after a quiet spell: look now, not at the end of the long wait.
  onBusyAgain(() => {
    if (typeof pollTimer !== "number" || pollWait <= pollDelay()) return;
    clearTimeout(pollTimer);
    look();
  });

  function openStream() {
    if (stopped || !streams || typeof EventSource !== "function") return;
    try {
      es = new EventSource(api("/events"));
    } catch {
      es = null;
      return;
    }
    if (pollTimer) { clearTimeout(pollTimer); pollTimer = null; }
    es.addEventListener("state", (ev) => {
      try { seen(JSON.parse(ev.data)); } catch { /* a malformed event is skipped */ }
    });
    es.addEventListener("error", () => {
      es.close();
      es = null;
      connectionLost();
      poll();
    });
  }

  openStream();
  if (!es) poll();

  function stop() {
    stopped = true;
    if (es) { es.close(); es = null; }
    if (pollTimer) { clearTimeout(pollTimer); pollTimer = null; }
  }
  return stop;
}

let progressTimer = null;
let pendingReport = null;
let lastSent = "";
// The counts, the follow-ups not shown yet (for the inbox's badge) and the answers so far: the
// server holds them, so that the person's away policy never replaces an answer given here, even
// once the tab is closed.
export function reportProgress(countsFn, delay = 700) {
  clearTimeout(progressTimer);
  pendingReport = countsFn;
  progressTimer = setTimeout(sendProgress, delay);
}

function sendProgress(keepalive = false) {
  const countsFn = pendingReport;
  pendingReport = null;
  if (!countsFn || !state.spec) return;
  const c = countsFn();
  const body = JSON.stringify({ answered: c.answered, deferred: c.deferred, needsInfo: c.needsInfo, open: c.open,
    followUpsUnseen: state.newIds.size, answers: payload().answers });
  if (body === lastSent) return;
  lastSent = body;
  request("/progress", { method: "POST", headers: { "Content-Type": "application/json" }, body, keepalive })
    .catch(() => { lastSent = ""; });
}

// A tab closed within the debounce still reports its last answers: a keepalive request outlives
// the page (up to 64 KB, which a closing page's last change fits in all but rare cases).
addEventListener("pagehide", () => {
  if (!pendingReport) return;
  clearTimeout(progressTimer);
  sendProgress(true);
});
