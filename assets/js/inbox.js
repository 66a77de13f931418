// The inbox page: every interview waiting for the user, from every agent, live. The listing
// comes from /api/inbox/<key>/events (Server-Sent Events), or from /inbox/events on a page a
// form's link opened: it exchanged the link's one-time ticket for a session, which it keeps in
// this tab only (sessionStorage: no other port's page can read it, and no cookie goes to every
// port of localhost) and sends as a header; it never sees the key. The rows are updated in
// place, so that focus and scrolling stay where they are when one arrives or leaves.
import { t, tPlain, setLanguage, translatePage, language } from "./i18n.js";
import { $, clone, setPhrases, announce, storedTheme, applyTheme, nextTheme } from "./dom.js";
import { askProof, canProve, newNonce, proofVerdict } from "./prove.js";
import { showShare } from "./share.js";

const key = (location.pathname.match(/^\/inbox\/(?!enter\/)([^/]+)$/) || [])[1] || "";
const ticket = (location.pathname.match(/^\/inbox\/enter\/([^/]+)$/) || [])[1] || "";
const STREAM = key ? `/api/inbox/${key}/events` : "/inbox/events";
const SESSION_HEADER = "X-Ask-User-Rich-Session";
const KEPT = "ask-user-rich-inbox-session";
const RETRY_MS = 3000;
const AGE_REFRESH_MS = 30000;

let theme = "auto";
let rows = [];
let known = null; // interview ids already listed: a notification is only for a new one
let announcedCount = null;

const rowKey = (row) => `${row.pid}:${row.interviewId}`;

function folderName(path) {
  const parts = String(path || "").split(/[\\/]+/).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : "";
}

function agentLabel(row) {
  if (row.agent) return row.agent;
  const word = t("agent.fallback");
  return word ? word[0].toLocaleUpperCase(language()) + word.slice(1) : "";
}

// "asked 5 minutes ago", in the page's language.
function age(createdAt) {
  const then = Date.parse(createdAt);
  if (Number.isNaN(then)) return "";
  const seconds = Math.max(0, (Date.now() - then) / 1000);
  if (seconds < 60) return t("inbox.justNow");
  let when;
  try {
    const format = new Intl.RelativeTimeFormat(language(), { numeric: "auto" });
    if (seconds < 3600) when = format.format(-Math.floor(seconds / 60), "minute");
    else if (seconds < 86400) when = format.format(-Math.floor(seconds / 3600), "hour");
    else when = format.format(-Math.floor(seconds / 86400), "day");
  } catch {
    when = `${Math.floor(seconds / 60)} min`;
  }
  return t("inbox.asked", { when });
}

function fillRow(li, row) {
  $(".inbox-agent", li).textContent = agentLabel(row);
  const project = $(".inbox-project", li);
  project.textContent = folderName(row.project) || t("inbox.noProject");
  project.title = row.project || "";
  const link = $(".inbox-link", li);
  // A permission ask says what the agent wants to do ("wants to run npm test"), not a title.
  const asked = row.permission;
  setPhrases(link, asked ? t(`inbox.wants.${asked.action}`, { what: asked.what }) : row.title);
  if (link.getAttribute("href") !== row.url) link.href = row.url;
  const progress = $(".inbox-progress", li);
  progress.hidden = Boolean(asked);
  progress.textContent = asked ? "" : t("inbox.answered", { answered: row.answered, total: row.questions });
  const when = $(".inbox-age", li);
  when.textContent = age(row.createdAt);
  when.title = new Date(row.createdAt).toLocaleString(language());
  const badge = $(".inbox-badge", li);
  badge.hidden = !row.followUpsUnseen;
  badge.textContent = row.followUpsUnseen ? t("inbox.followUps", { count: row.followUpsUnseen }) : "";
  const blocked = $(".inbox-blocked", li);
  blocked.hidden = !row.waiting;
  blocked.textContent = row.waiting ? t("inbox.blocked", { agent: agentLabel(row) }) : "";
  // When the person's away policy acts on it, unless they answer first.
  const away = $(".inbox-away", li);
  const at = row.awayAt ? new Date(row.awayAt) : null;
  away.hidden = !at;
  away.textContent = at ? t(row.away === "decline" ? "inbox.awayDecline" : "inbox.awayRecommended",
    { time: at.toLocaleTimeString(language(), { hour: "2-digit", minute: "2-digit" }) }) : "";
}

function render(listing) {
  rows = Array.isArray(listing.interviews) ? listing.interviews : [];
  $("#btn-share").hidden = listing.share !== true;
  const list = $("#inbox-list");
  const existing = new Map([...list.children].map((li) => [li.dataset.key, li]));
  const wanted = new Set(rows.map(rowKey));
  for (const [k, li] of existing) if (!wanted.has(k)) li.remove();
  let before = list.firstElementChild;
  for (const row of rows) {
    const k = rowKey(row);
    let li = existing.get(k);
    if (!li || !li.isConnected) {
      li = clone("tpl-inbox-row");
      li.dataset.key = k;
      li.dataset.interview = row.interviewId;
    }
    fillRow(li, row);
    if (li !== before) list.insertBefore(li, before);
    before = li.nextElementSibling;
  }
  const count = rows.length;
  const heading = $("#inbox-heading");
  heading.hidden = count === 0;
  heading.textContent = count ? t("inbox.heading", { count }) : "";
  $("#inbox-empty").hidden = count !== 0;
  document.title = count ? `(${count}) ${tPlain("inbox.title")}` : tPlain("inbox.title");
  if (announcedCount !== null && announcedCount !== count) announce(count ? t("inbox.heading", { count }) : t("inbox.empty"));
  announcedCount = count;
  notifyNew();
}

// A browser notification for each interview that arrived since the last listing, once the
// user allowed them (asked only from the button, never on its own).
function notifyNew() {
  const ids = new Set(rows.map((row) => row.interviewId));
  const first = known === null;
  const fresh = first ? [] : rows.filter((row) => !known.has(row.interviewId));
  known = ids;
  if (!fresh.length || typeof Notification !== "function" || Notification.permission !== "granted") return;
  for (const row of fresh) {
    try {
      const note = new Notification(tPlain("inbox.notificationTitle"), {
        body: tPlain("inbox.notification", { agent: agentLabel(row), title: row.title }),
        tag: row.interviewId,
      });
      note.addEventListener("click", () => { window.focus(); note.close(); });
    } catch { /* a browser that shows notifications only from a service worker */ }
  }
}

function syncNotifyButton() {
  const button = $("#btn-notify");
  const able = typeof Notification === "function";
  button.hidden = !able || Notification.permission === "granted";
  if (!able) return;
  button.disabled = Notification.permission === "denied";
  button.textContent = t(Notification.permission === "denied" ? "inbox.notifyBlocked" : "inbox.notify");
}

// A notice of `kind` ("warn", "error") named `id`, saying the string `id` names, shown once.
function showNotice(kind, id) {
  const box = $("#notices");
  if (box.querySelector(`[data-id="${id}"]`)) return;
  const n = document.createElement("div");
  n.className = `notice notice-${kind}`;
  n.dataset.id = id;
  const p = document.createElement("p");
  p.textContent = t(`inbox.${id}`);
  n.append(p);
  box.append(n);
}

function lost(on) {
  if (on) showNotice("warn", "lost");
  else $('#notices [data-id="lost"]')?.remove();
}

// The stream. When it drops, it is closed at once rather than reconnected as it is, key or
// session and all, to whatever holds the port by then: when a process holding the inbox exits,
// another of ours holds the address too, but elsewhere (or once none of ours lives) another
// user's program may. So the page first has the server prove it knows the key for this very
// origin (prove.js; a page opened from a form checks a proof keyed by the verifier it got with
// its session), and sends nothing to a server that cannot.
let verifier = null;
let session = "";

// A request to the inbox: with the session header on a page a ticket opened, never a cookie.
const ask = (url, init) => fetch(url, {
  cache: "no-store", credentials: "omit", headers: key || !session ? {} : { [SESSION_HEADER]: session }, ...init,
});

function shown(listing) {
  lost(false);
  document.body.classList.remove("loading");
  document.body.classList.add("ready");
  render(listing);
}

// The events stream read with fetch() (EventSource sends no header), one `inbox` event at a
// time, until it ends.
async function readStream() {
  const r = await ask(STREAM);
  if (!r.ok || !r.body) throw new Error(`the inbox answered ${r.status}`);
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    pending += decoder.decode(value, { stream: true });
    let end;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const lines = pending.slice(0, end).split("\n");
      pending = pending.slice(end + 2);
      const name = (lines.find((line) => line.startsWith("event: ")) || "").slice(7);
      const data = lines.filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n");
      if (name !== "inbox") continue;
      let listing = null;
      try { listing = JSON.parse(data); } catch { continue; }
      shown(listing);
    }
  }
}

function connect() {
  readStream().catch(() => {}).then(() => {
    lost(true);
    setTimeout(reconnect, RETRY_MS);
  });
}

async function proven() {
  if (!canProve()) return "ours"; // no Web Crypto outside a secure context: nothing to check with
  if (!key && verifier === null) return "impostor";
  const nonce = newNonce();
  const named = key ? "" : `&session=${session.split(".")[1] || ""}`;
  return askProof(`/api/inbox/prove?nonce=${nonce}${named}`, (body) => (key
    ? proofVerdict(key, nonce, body.proof, body.origin)
    : proofVerdict(verifier, nonce, body.pageProof, body.origin)));
}

async function reconnect() {
  const verdict = await proven();
  if (verdict === "ours") { connect(); return; }
  if (verdict === "unreachable") { setTimeout(reconnect, RETRY_MS); return; }
  stopped(verdict);
}

function stopped(verdict) {
  lost(false);
  showNotice("error", verdict === "relayed" ? "relayed" : "impostor");
}

// The ticket in this page's address, exchanged once for a session kept in this tab; the
// address then says /inbox, so that a reload sends no used ticket. A reload finds the session
// in the tab, and sends it only to a server that proves the key for this origin.
async function enter() {
  if (key) return true;
  if (ticket) {
    let body = null;
    try {
      const r = await ask(`/inbox/enter/${ticket}`, { method: "POST" });
      body = r.ok ? await r.json() : null;
    } catch { /* told below */ }
    history.replaceState(null, "", "/inbox");
    if (!body || typeof body.session !== "string" || typeof body.verifier !== "string") return false;
    session = body.session;
    verifier = body.verifier;
    try { sessionStorage.setItem(KEPT, JSON.stringify({ session, verifier })); } catch { /* this tab only */ }
    return true;
  }
  try {
    const kept = JSON.parse(sessionStorage.getItem(KEPT) || "null");
    if (kept && typeof kept.session === "string" && typeof kept.verifier === "string") {
      session = kept.session;
      verifier = kept.verifier;
    }
  } catch { /* nothing kept */ }
  if (!session) return false;
  const verdict = await proven();
  if (verdict === "ours" || verdict === "unreachable") return true;
  stopped(verdict);
  return null;
}

function bind() {
  $("#btn-theme").addEventListener("click", () => { theme = nextTheme(theme); });
  // The Answered view (history.js) loads only once asked for.
  $("#view-answered").addEventListener("click", () => {
    import("./history.js").then((view) => view.showHistory({ key, agentLabel, folderName, ask }));
  });
  // The inbox on another device: a one-time way in, fresh for each showing (a QR code lives on
  // screen longer than a ticket's minute would allow if it were made with the listing).
  $("#btn-share").addEventListener("click", async () => {
    const r = await ask(key ? `/api/inbox/${key}/share` : "/inbox/share").catch(() => null);
    const body = r && r.ok ? await r.json().catch(() => null) : null;
    if (body && typeof body.url === "string") showShare(body.url, t("share.inboxText"));
  });
  $("#btn-notify").addEventListener("click", async () => {
    try { await Notification.requestPermission(); } catch { /* dismissed */ }
    syncNotifyButton();
  });
  setInterval(() => {
    for (const li of $("#inbox-list").children) {
      const row = rows.find((r) => rowKey(r) === li.dataset.key);
      if (row) $(".inbox-age", li).textContent = age(row.createdAt);
    }
  }, AGE_REFRESH_MS);
}

async function start() {
  theme = storedTheme();
  await setLanguage(null);
  translatePage();
  applyTheme(theme);
  document.title = tPlain("inbox.title");
  syncNotifyButton();
  bind();
  const entered = await enter();
  if (entered === null) return; // refused: the person was told why
  if (!entered) { showNotice("error", "closed"); return; }
  connect();
}

start();
