// How the form reaches its interview. In a browser tab: HTTP to the form server that served the
// page. Inside an MCP host (the app, a document the server built with everything inline): the
// host's tools/call over postMessage JSON-RPC, to the server's app-only tools (form_state,
// form_submit, form_progress, form_attach, form_detach), which run the same code as the routes.
// The rest of the form asks this module and never which of the two it runs in.
import { api, token as pathToken } from "./state.js";
import { connectionLost, guardedFetch, isTrusted } from "./guard.js";

const APP_DATA = document.getElementById("askrich-app");
export const inApp = APP_DATA !== null;
if (inApp) document.documentElement.classList.add("in-app");
// The interview this page answers: from the URL in a tab, from the tool's result in the app.
export const session = { token: inApp ? "" : pathToken, id: null, key: "", error: null, settled: null };
// Live follow-ups: the browser's event stream; the app polls form_state instead (pollDelay).
export const streams = !inApp;

const CHUNK_BYTES = 384 * 1024; // 512 KiB once in base64: the most one form_attach call takes
const APPS_PROTOCOL = "2026-01-26";
const APP_KEY = "ask-user-rich/app"; // {sessionId, token, key} in the _meta the host hands the app

// A Response-like answer ({ok, status, json()}) for one of the form's requests: `path` is the
// part after /api/s/<token> ("", "/state", "/progress", "/submit", "/attachments/<id>").
export async function request(path, init = {}) {
  if (!inApp) return guardedFetch(api(path), init);
  const method = (init.method || "GET").toUpperCase();
  const body = init.body ? JSON.parse(init.body) : {};
  const detach = path.match(/^\/attachments\/([^/]+)$/);
  if (method === "GET" && (path === "" || path === "/state")) return callForm("form_state", { full: path === "" });
  if (method === "POST" && path === "/progress") return callForm("form_progress", body);
  if (method === "POST" && path === "/submit") return callForm("form_submit", body);
  if (method === "DELETE" && detach) return callForm("form_detach", { id: decodeURIComponent(detach[1]) });
  throw new Error(`no app operation for ${method} ${path}`);
}

// Uploads one file; resolves to {status, body} once the server answered, rejects when it could
// not be reached. `progress(sent, total)` follows the bytes.
export function upload(file, progress, name = file.name || "attachment") {
  return inApp ? uploadThroughHost(file, progress, name) : uploadOverHttp(file, progress, name);
}

function uploadOverHttp(file, progress, name) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", api("/attachments"));
    xhr.setRequestHeader("Content-Type", file.type || "application/octet-stream");
    xhr.setRequestHeader("X-Attachment-Name", encodeURIComponent(name));
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) progress(e.loaded, e.total); };
    xhr.onload = () => {
      let body = {};
      try { body = JSON.parse(xhr.responseText || "{}"); } catch { /* not JSON */ }
      resolve({ status: xhr.status, body });
    };
    xhr.onerror = () => { connectionLost(); reject(new Error("network")); };
    xhr.send(file);
  });
}

// In chunks of at most 512 KiB of base64, each a form_attach call; the first opens the upload.
async function uploadThroughHost(file, progress, name) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const fields = { name, mimeType: file.type || "application/octet-stream", size: bytes.length };
  let offset = 0;
  for (;;) {
    const end = Math.min(offset + CHUNK_BYTES, bytes.length);
    const r = await callForm("form_attach", { ...fields, offset, data: base64(bytes.subarray(offset, end)) });
    const body = await r.json();
    if (r.status !== 202) {
      // A data: URL: the resource declares data: for images (_meta.ui.csp), where a host's
      // default policy would refuse every image, blob: URLs too.
      if (r.status === 201 && file.type && file.type.startsWith("image/")) thumbnails.set(body.id, dataUrl(file.type, bytes));
      return { status: r.status, body };
    }
    fields.uploadId = body.uploadId;
    offset = end;
    progress(offset, bytes.length);
  }
}

function base64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}
const dataUrl = (type, bytes) => `data:${type};base64,${base64(bytes)}`;

// A thumbnail's source, "" for none. The app may load no URL but data: ones: its thumbnails are
// the images it uploaded, as data. In a tab, only from a server that has not been lost, since
// the request carries the token (guard.js).
const thumbnails = new Map();
export function attachmentSrc(id) {
  if (inApp) return thumbnails.get(id) || "";
  return isTrusted() ? api(`/attachments/${encodeURIComponent(id)}`) : "";
}

// One language file's strings: fetched in a tab, inline in the app.
export async function languageFile(tag) {
  if (inApp) return JSON.parse(APP_DATA.textContent).languages[tag] || {};
  const r = await fetch(`/assets/i18n/${tag}.json`);
  return r.ok ? r.json() : {};
}

// ---------------------------------------------------------------- the app's side of MCP Apps

let nextId = 1;
const waiting = new Map();
let context = {};
let offered = {}; // the host's hostCapabilities: what it may be asked
let elicitation = null; // the host's elicitation/create this form answers: {id, params}
let arrived = null;
// The host hands the interview either as the tool's result (the call returned at once) or as
// an elicitation/create it shows us in (the call blocks until we answer it).
// The moment is marked ("askrich:handed"), for the benchmark of the first question's delay.
const handed = new Promise((resolve) => { arrived = (given) => { performance.mark("askrich:handed"); resolve(given); }; });
let themeFollower = () => {};

function send(message) { window.parent.postMessage({ jsonrpc: "2.0", ...message }, "*"); }
const notify = (method, params = {}) => send({ method, params });

function rpc(method, params = {}) {
  const id = nextId++;
  send({ id, method, params });
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}

function onMessage(event) {
  if (event.source !== window.parent) return;
  const m = event.data;
  if (!m || m.jsonrpc !== "2.0") return;
  if (m.id !== undefined && !m.method) {
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    if (m.error) w.reject(new Error(m.error.message || "host error"));
    else w.resolve(m.result || {});
    return;
  }
  if (m.method === "ui/notifications/tool-result") arrived({ result: m.params || {} });
  else if (m.method === "ui/notifications/host-context-changed") applyContext(m.params || {});
  if (m.id === undefined) return;
  if (m.method === "elicitation/create" && !elicitation) {
    elicitation = { id: m.id, params: m.params || {} };
    arrived({ meta: (elicitation.params._meta || {})[APP_KEY] });
  } else if (m.method === "ui/resource-teardown" || m.method === "ping") send({ id: m.id, result: {} });
  else send({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
}

// One app-only tool; its result as a Response-like answer: the route's JSON body and status.
async function callForm(name, fields) {
  const result = await rpc("tools/call", {
    name, arguments: { sessionId: session.id, token: session.token, appKey: session.key, ...fields },
  });
  const body = result.structuredContent || {};
  const status = body.statusCode || (result.isError ? 400 : 200);
  return { ok: !result.isError, status, json: async () => body };
}

// The host's look: its light or dark, and the style variables it gives, under our own names.
const HOST_STYLES = {
  "--panel": "--color-background-primary", "--bg": "--color-background-secondary",
  "--code-bg": "--color-background-tertiary", "--text": "--color-text-primary",
  "--muted": "--color-text-secondary", "--line": "--color-border-primary",
  "--bad": "--color-text-danger", "--ok": "--color-text-success", "--warn": "--color-text-warning",
  "--info": "--color-text-info", "--focus": "--color-ring-primary", "--radius": "--border-radius-md",
};
function applyContext(changed) {
  context = { ...context, ...changed };
  const root = document.documentElement;
  if (changed.theme === "light" || changed.theme === "dark") {
    root.dataset.theme = changed.theme; // at once, before the form's own words are loaded
    themeFollower(changed.theme);
  }
  const given = (changed.styles && changed.styles.variables) || {};
  for (const [ours, theirs] of Object.entries(HOST_STYLES)) {
    if (given[theirs]) root.style.setProperty(ours, given[theirs]);
  }
  if (given["--font-sans"]) root.style.setProperty("font-family", given["--font-sans"]);
  syncFullscreen();
}
export const hostTheme = () => (inApp && (context.theme === "light" || context.theme === "dark") ? context.theme : null);
// `follow(theme)` runs whenever the host switches its theme, so the theme control says so too.
export function followHostTheme(follow) { themeFollower = follow; }

// The host sizes the frame to the page: the page's own height (not the frame's, which only grows).
function reportSize() {
  let last = "";
  const observer = new ResizeObserver(() => {
    const el = document.documentElement;
    const size = { width: Math.ceil(el.scrollWidth), height: Math.ceil(el.getBoundingClientRect().height) };
    const key = `${size.width}x${size.height}`;
    if (key !== last) { last = key; notify("ui/notifications/size-changed", size); }
  });
  observer.observe(document.documentElement);
}

// Links leave through the host (the frame may open nothing), where it offers that.
function openLinksThroughHost() {
  document.addEventListener("click", (e) => {
    const a = e.target.closest && e.target.closest("a[href]");
    if (!a || !/^https?:$/.test(a.protocol)) return;
    e.preventDefault();
    if (offered.openLinks) rpc("ui/open-link", { url: a.href }).catch(() => { /* the host said no */ });
  });
}

// The person is busy with the form: followed by the polls, which slow down when nobody is.
const QUICK_POLL_MS = 2500;
const IDLE_POLL_MS = 15000;
const ACTIVE_MS = 60000;
let lastAct = performance.now();
let inView = true; // the frame within the host's window, not scrolled away in the conversation
let busyAgain = () => {};
const acted = () => {
  lastAct = performance.now();
  busyAgain();
};
// `wake()` runs whenever the person acts or the page comes into view, so that a poll waiting
// out a quiet spell can come sooner.
export function onBusyAgain(wake) { busyAgain = wake; }
// The wait before the next look at the interview's state. The app polls quickly only while it
// is visible and the person acted within the last minute: some hosts tell the agent of every
// call an app makes.
export function pollDelay() {
  if (!inApp) return QUICK_POLL_MS;
  const busy = document.visibilityState === "visible" && inView && performance.now() - lastAct < ACTIVE_MS;
  return busy ? QUICK_POLL_MS : IDLE_POLL_MS;
}

// Resolves once this page knows its interview (true) or knows it has none (false): at once in
// a tab; in the app after the handshake with the host and the tool's result (or its
// elicitation). A failed call leaves its error in session.error.
export async function connect() {
  if (!inApp) return Boolean(session.token);
  window.addEventListener("message", onMessage);
  for (const type of ["keydown", "pointerdown", "input"]) document.addEventListener(type, acted, true);
  document.addEventListener("visibilitychange", () => busyAgain());
  new IntersectionObserver(([entry]) => {
    inView = entry.isIntersecting;
    if (inView) busyAgain();
  }).observe(document.documentElement);
  try {
    const init = await rpc("ui/initialize", {
      protocolVersion: APPS_PROTOCOL,
      appInfo: { name: "ask-user-rich", version: "1" },
      appCapabilities: { availableDisplayModes: ["inline", "fullscreen"], elicitation: {} },
    });
    offered = init.hostCapabilities || {};
    applyContext(init.hostContext || {});
  } catch {
    return false;
  }
  notify("ui/notifications/initialized");
  reportSize();
  openLinksThroughHost();
  const { result, meta } = await handed;
  if (result && result.isError) {
    session.error = (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
    return false;
  }
  // A call that blocked until the answers came (an elicitation the host showed) hands over its
  // answers: the interview is over, and the page says so.
  const shown = (result && result.structuredContent) || {};
  if (!meta && ["submitted", "declined", "cancelled"].includes(shown.status)) {
    session.settled = { status: shown.status, title: typeof shown.title === "string" ? shown.title : "" };
    return false;
  }
  const app = meta || (result && result._meta && result._meta[APP_KEY]) || {};
  session.id = typeof app.sessionId === "string" ? app.sessionId : null;
  session.token = typeof app.token === "string" ? app.token : "";
  session.key = typeof app.key === "string" ? app.key : "";
  return Boolean(session.id && session.token && session.key);
}

// Full screen, for a long interview, on the person's click alone (the host's own button may
// also change it: the label follows hostContext.displayMode).
let fullscreenOffered = false;
export function offerFullscreen(questions, label) {
  const button = document.getElementById("btn-fullscreen");
  if (!inApp || !button || questions < 8) return;
  fullscreenOffered = true;
  fullscreenLabel = label;
  button.addEventListener("click", () => {
    const mode = context.displayMode === "fullscreen" ? "inline" : "fullscreen";
    rpc("ui/request-display-mode", { mode }).then((r) => applyContext({ displayMode: r.mode || context.displayMode }),
      () => { /* the host said no */ });
  });
  syncFullscreen();
}
let fullscreenLabel = () => "";
function syncFullscreen() {
  const button = document.getElementById("btn-fullscreen");
  if (!button || !fullscreenOffered) return;
  button.hidden = !(context.availableDisplayModes || []).includes("fullscreen");
  button.textContent = fullscreenLabel(context.displayMode === "fullscreen");
}

// After a submit or a skip (`answers`: the body sent; `message`: the chat message, in the
// form's language). In the host's elicitation: its answer, the content its schema asks for.
// Else the summary into the model's context and a message that makes the agent fetch the
// answers (await_user_answers), each only where the host offers it.
export async function submitted(answers, summary, message) {
  if (!inApp) return;
  if (elicitation) {
    const result = answers.declined ? { action: "decline" }
      : { action: "accept", content: elicitationContent(elicitation.params.requestedSchema, answers.answers || {}) };
    send({ id: elicitation.id, result });
    return;
  }
  if (offered.updateModelContext) {
    await rpc("ui/update-model-context", { content: [{ type: "text", text: summary }] }).catch(() => {});
  }
  if (offered.message) {
    await rpc("ui/message", { role: "user", content: [{ type: "text", text: message }] })
      .catch(() => { /* the host refused: await_user_answers still returns the answers */ });
  }
}

// The answers as the server's flat schema (§6) has them: a single select's option id, a multi
// select's ids, `<id>__other` for text of one's own, `<id>__<option id>` for an option's own
// text, and a ranking as its option ids in order. The server keeps the answers the form
// submitted; this is what the host checks against the schema it was given.
function elicitationContent(schema, answers) {
  const content = {};
  for (const [name, field] of Object.entries((schema && schema.properties) || {})) {
    const answer = answers[name];
    if (answer) {
      if (field.type === "array") content[name] = answer.selected || [];
      else if (field.oneOf) {
        if (answer.selected && answer.selected.length) content[name] = answer.selected[0];
      } else if (Array.isArray(answer.ranked) && answer.ranked.length) {
        content[name] = answer.ranked.join(", ");
      } else if (typeof answer.other === "string" && answer.other) {
        content[name] = answer.other; // a question without options: the person's own words
      }
      continue;
    }
    const text = ownText(name, answers);
    if (text) content[name] = text;
  }
  return content;
}

// The text a `<question id>__other` or `<question id>__<option id>` field holds, if any.
function ownText(name, answers) {
  for (const [qid, answer] of Object.entries(answers)) {
    if (!answer || !name.startsWith(qid + "__")) continue;
    const rest = name.slice(qid.length + 2);
    const text = rest === "other" ? answer.other : (answer.optionTexts || {})[rest];
    if (typeof text === "string" && text) return text;
  }
  return "";
}
