// Whether the person can see this page, told to the server: its notices wait for a page in
// view (visible and focused), not for a page that loaded, since the opener may load the form in
// a background tab or behind other windows. In an MCP host the app's load stands for this
// (the host shows it in the conversation).
import { inApp, request } from "./transport.js";

// This page among the interview's others (each tab reports for itself).
const page = Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, "0")).join("");
let sent = ""; // the last report the server took
let wanted = "";
let sending = false;

const post = (body) => request("/visibility",
  // keepalive: the report of a page being closed still leaves.
  { method: "POST", headers: { "Content-Type": "application/json" }, body, keepalive: true });

function report(visibility = document.visibilityState) {
  wanted = JSON.stringify({ page, visibility: visibility === "visible" ? "visible" : "hidden",
    focus: visibility === "visible" && document.hasFocus() });
  if (!sending) send();
}

// One report at a time, so that they arrive in order; the newest goes next.
function send() {
  if (wanted === sent) return;
  const body = wanted;
  sending = true;
  post(body).then((r) => { if (r.ok) sent = body; }, () => { /* told at the next change */ }).finally(() => {
    sending = false;
    if (wanted !== body) send();
  });
}

export function watchVisibility() {
  if (inApp) return;
  document.addEventListener("visibilitychange", () => report());
  window.addEventListener("focus", () => report());
  window.addEventListener("blur", () => report());
  // Leaving: at once, whatever is on its way (its event stream closing says it too). A page
  // back from the back-forward cache says again.
  window.addEventListener("pagehide", () => {
    wanted = sent = "";
    post(JSON.stringify({ page, visibility: "hidden", focus: false })).catch(() => {});
  });
  window.addEventListener("pageshow", (e) => { if (e.persisted) report(); });
  report();
}
