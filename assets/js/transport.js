// How the form reaches its interview. In a browser tab: HTTP to the form server that served the
// page. Inside an MCP host (the app, a document the server built with everything inline): the
// host's tools/call over postMessage JSON-RPC, to the server's app-only tools (form_state,
// form_submit, form_progress, form_attach, form_detach), which run the same code as the routes.
// The rest of the form asks this module and never which of the two it runs in.
import { api, token as pathToken } from "./state.js";
import { connectionLost, guardedFetch, isTrusted } from "./guard.js";

const APP_DATA = document.getElementById("askrich-app");
export const inApp = APP_DATA !== null;
// The interview this page answers: from the URL in a tab, from the tool's result in the app.
export const session = { token: inApp ? "" : pathToken, id: null };
// Live follow-ups: the browser's event stream; the app polls form_state (2.5 s) instead.
export const streams = !inApp;

const CHUNK_BYTES = 384 * 1024; // 512 KiB once in base64: the most one form_attach call takes
const APPS_PROTOCOL = "2026-01-26";
const STATUS_KEY = "ask-user-rich/status"; // an app-only tool's result: the status its route answers

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
let toolResult = null;
const resultArrived = new Promise((resolve) => { toolResult = resolve; });

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
  if (m.method === "ui/notifications/tool-result") toolResult(m.params || {});
  else if (m.method === "ui/notifications/host-context-changed") applyContext(m.params || {});
  if (m.id === undefined) return;
  if (m.method === "ui/resource-teardown" || m.method === "ping") send({ id: m.id, result: {} });
  else send({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
}

// One app-only tool; its result as a Response-like answer: the route's JSON body and status.
async function callForm(name, fields) {
  const result = await rpc("tools/call", { name, arguments: { sessionId: session.id, token: session.token, ...fields } });
  const body = result.structuredContent || {};
  const status = (result._meta && result._meta[STATUS_KEY]) || (result.isError ? 400 : 200);
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
  if (changed.theme === "light" || changed.theme === "dark") root.dataset.theme = changed.theme;
  const given = (changed.styles && changed.styles.variables) || {};
  for (const [ours, theirs] of Object.entries(HOST_STYLES)) {
    if (given[theirs]) root.style.setProperty(ours, given[theirs]);
  }
  if (given["--font-sans"]) root.style.setProperty("font-family", given["--font-sans"]);
}
export const hostTheme = () => (inApp && (context.theme === "light" || context.theme === "dark") ? context.theme : null);

function reportSize() {
  let last = "";
  const observer = new ResizeObserver(() => {
    const el = document.documentElement;
    const size = { width: Math.ceil(el.scrollWidth), height: Math.ceil(el.scrollHeight) };
    const key = `${size.width}x${size.height}`;
    if (key !== last) { last = key; notify("ui/notifications/size-changed", size); }
  });
  observer.observe(document.body);
}

// Resolves once this page knows its interview (true) or knows it has none (false): at once in
// a tab; in the app after the handshake with the host and the tool's result.
export async function connect() {
  if (!inApp) return Boolean(session.token);
  window.addEventListener("message", onMessage);
  try {
    const init = await rpc("ui/initialize", {
      protocolVersion: APPS_PROTOCOL,
      appInfo: { name: "ask-user-rich", version: "1" },
      appCapabilities: { availableDisplayModes: ["inline", "fullscreen"] },
    });
    applyContext(init.hostContext || {});
  } catch {
    return false;
  }
  notify("ui/notifications/initialized");
  reportSize();
  const result = await resultArrived;
  const shown = result.structuredContent || {};
  session.id = typeof shown.sessionId === "string" ? shown.sessionId : null;
  session.token = ((typeof shown.url === "string" ? shown.url : "").match(/\/s\/([^/?#]+)/) || [])[1] || "";
  return Boolean(session.id && session.token);
}

// A long interview asks for the whole window, where the host offers it.
export function offerFullscreen(questions) {
  const modes = context.availableDisplayModes || [];
  if (!inApp || questions < 8 || !modes.includes("fullscreen") || context.displayMode === "fullscreen") return;
  rpc("ui/request-display-mode", { mode: "fullscreen" }).catch(() => { /* the host said no */ });
}

// After the submit: the summary into the model's context, then a message that makes the agent
// fetch the answers (await_user_answers).
export async function submitted(title, summary) {
  if (!inApp) return;
  try {
    await rpc("ui/update-model-context", { content: [{ type: "text", text: summary }] });
  } catch { /* a host without model context still gets the message */ }
  await rpc("ui/message", {
    role: "user", content: [{ type: "text", text: `I answered "${title}" (sessionId ${session.id}).` }],
  }).catch(() => { /* the host refused: await_user_answers still returns the answers */ });
}
