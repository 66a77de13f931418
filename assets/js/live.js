// The line to the server while the form is open: state pushed through /events (Server-Sent
// Events), a /state poll every 2.5 s only when EventSource fails (always in the app inside a
// host, which has no stream), and debounced /progress posts.
import { api, state } from "./state.js";
import { request, streams } from "./transport.js";

const POLL_MS = 2500;

export function startLive({ onState, onGone, onBack }) {
  let pollTimer = null;
  let gone = false;
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
  const checkOnce = async () => {
    try {
      const r = await request("/state", { cache: "no-store" });
      if (!r.ok) {
        const body = await r.json().catch(() => ({}));
        lost(body && typeof body.code === "string" ? body.code : null);
        return false;
      }
      seen(await r.json());
      return true;
    } catch {
      lost(null);
      return false;
    }
  };
  const poll = () => {
    if (pollTimer) return;
    pollTimer = setInterval(checkOnce, POLL_MS);
    checkOnce();
  };

  if (!streams || typeof EventSource !== "function") { poll(); return stop; }
  try {
    es = new EventSource(api("/events"));
  } catch {
    poll();
    return stop;
  }
  es.addEventListener("state", (ev) => {
    try { seen(JSON.parse(ev.data)); } catch { /* a malformed event is skipped */ }
  });
  es.addEventListener("error", () => {
    // The browser reconnects by itself while the stream is CONNECTING; ask /state directly to
    // tell a restarting stream from a server that is gone, and fall back to polling when the
    // browser gave up on the stream.
    if (es.readyState === EventSource.CLOSED) { es.close(); es = null; poll(); return; }
    checkOnce();
  });

  function stop() {
    if (es) { es.close(); es = null; }
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
  }
  return stop;
}

let progressTimer = null;
let lastSent = "";
export function reportProgress(countsFn, delay = 700) {
  clearTimeout(progressTimer);
  progressTimer = setTimeout(() => {
    const c = countsFn();
    // The follow-ups not shown yet go along, for the inbox's badge.
    const body = JSON.stringify({ answered: c.answered, deferred: c.deferred, needsInfo: c.needsInfo, open: c.open,
      followUpsUnseen: state.newIds.size });
    if (body === lastSent) return;
    lastSent = body;
    request("/progress", { method: "POST", headers: { "Content-Type": "application/json" }, body })
      .catch(() => { lastSent = ""; });
  }, delay);
}
