// Attachments: files the user adds to a question's note or to the general notes, through an
// Attach button (several files at once), a paste into the note, or a drop onto the question.
// Each is uploaded at once to our own server; the draft keeps what was uploaded (ids and
// metadata), so a reload shows the same files. Thumbnails come from our own route, so the page's
// Content-Security-Policy (img-src 'self' data:) needs no blob: or other source.
import { state, saveDraft, filesOf, addFile, dropFile } from "./state.js";
import { mayTalk } from "./guard.js";
import { request, upload as sendFile, attachmentSrc } from "./transport.js";
import { t, tPlain, figure } from "./i18n.js";
import { announce as say } from "./dom.js";

// The server's limits, from /api/s (its `limits`): a file's bytes, the files of an interview and
// their bytes in all, and every free text's characters. Checked here to say so before sending.
const limit = (name) => state.limits[name];
// The same limits as the words about them take them: sizes in the page's units, the count
// also choosing the plural.
const limitWords = () => ({
  size: sizeText(limit("attachmentBytes")), count: limit("attachments"), total: sizeText(limit("attachmentsBytes")),
});
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

// In the page's language: 1.5 MB, 1,5 MB, ...
export function sizeText(bytes) {
  if (bytes < 1024) return t("attach.sizeBytes", { size: figure(bytes, 0) });
  if (bytes < 1024 * 1024) return t("attach.sizeKb", { size: figure(bytes / 1024, bytes < 10 * 1024 ? 1 : 0) });
  return t("attach.sizeMb", { size: figure(bytes / (1024 * 1024), 1) });
}

// The server's refusals in the user's words, told apart by the stable `code` of its JSON error
// body; its own text only for the unforeseen.
const REFUSALS = new Map([
  ["too-large", "attach.tooBig"],
  ["attachments-too-large", "attach.tooMuch"],
  ["too-many-files", "attach.tooMany"],
  ["not-pending", "attach.closed"],
]);

function refusalText(name, status, body) {
  const key = REFUSALS.get(body.code);
  if (key) return t(key, { name, ...limitWords() });
  const error = typeof body.error === "string" ? body.error : "";
  return t("attach.refused", { name, error: error || `HTTP ${status}` });
}

// ---- state: key ("" for the general notes, else a question id) -> uploaded files ----
const uploaded = () => Object.values(state.attachments).flat();
// Uploads started and not answered yet, so that a burst cannot pass the limits.
const inFlight = { count: 0, bytes: 0 };

// Files picked, pasted or dropped and not yet uploaded or refused: a submit waits for them, so
// that no file the user added arrives after the answers that should have named it.
let queued = 0;
let failures = 0;
let idle = [];
export const uploadsRunning = () => queued;

// Resolves once nothing is queued, with how many of the files added meanwhile were refused.
export function uploadsSettled() {
  const before = failures;
  if (!queued) return Promise.resolve(0);
  return new Promise((resolve) => idle.push(() => resolve(failures - before)));
}

function dequeued(problem) {
  queued--;
  if (problem) failures++;
  if (queued === 0) {
    const waiting = idle;
    idle = [];
    for (const wake of waiting) wake();
  }
}

// ---- the block under a note ----
const blocks = new Map(); // key -> {root, list, problem}
let uid = 0;

// Puts the Attach button, the list and the problem line after `note` (a question's .note or
// the review's .general), and shows what the draft already holds for `key`.
export function mountAttachments(note, key) {
  uid++;
  const root = document.createElement("div");
  root.className = "attach";
  root.dataset.attachKey = key;
  const input = document.createElement("input");
  input.type = "file";
  input.multiple = true;
  input.className = "attach-input";
  input.hidden = true;
  input.tabIndex = -1;
  input.setAttribute("aria-hidden", "true");
  const row = document.createElement("div");
  row.className = "attach-row";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "btn small attach-button";
  button.textContent = t("attach.button");
  button.setAttribute("aria-label", tPlain(key === "" ? "attach.generalLabel" : "attach.buttonLabel"));
  const hint = document.createElement("span");
  hint.className = "muted attach-hint";
  hint.id = `attach${uid}-hint`;
  hint.textContent = t("attach.hint", limitWords());
  button.setAttribute("aria-describedby", hint.id);
  row.append(button, hint);
  const list = document.createElement("ul");
  list.className = "attach-list";
  list.setAttribute("aria-label", tPlain("attach.listLabel"));
  const problem = document.createElement("p");
  problem.className = "attach-problem";
  problem.hidden = true;
  root.append(input, row, list, problem);
  note.after(root);
  blocks.set(key, { root, list, problem });
  renderList(key);
  return root;
}

function renderList(key) {
  const block = blocks.get(key);
  if (!block) return;
  const pending = [...block.list.querySelectorAll(".attach-item.pending")];
  block.list.replaceChildren(...filesOf(key).map((file) => itemEl(file)), ...pending);
  block.list.hidden = block.list.childElementCount === 0;
}

function itemEl(file) {
  const li = document.createElement("li");
  li.className = "attach-item";
  li.dataset.attachmentId = file.id;
  if (IMAGE_TYPES.has(file.mimeType)) {
    const img = document.createElement("img");
    img.className = "attach-thumb";
    img.alt = ""; // the name beside it says what it is
    // An image request carries the token too: only to a server that has not been lost (none
    // in the app inside a host, which shows the images it uploaded as data).
    const src = attachmentSrc(file.id);
    if (src) img.src = src;
    li.append(img);
  }
  const name = document.createElement("span");
  name.className = "attach-name";
  name.textContent = file.name;
  const size = document.createElement("span");
  size.className = "muted attach-size";
  size.textContent = sizeText(file.bytes);
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "link attach-remove";
  remove.textContent = t("attach.remove");
  remove.setAttribute("aria-label", tPlain("attach.removeLabel", { name: file.name }));
  li.append(name, size, remove);
  return li;
}

function pendingEl(name) {
  const li = document.createElement("li");
  li.className = "attach-item pending";
  const label = document.createElement("span");
  label.className = "attach-name";
  label.textContent = t("attach.uploading", { name });
  const bar = document.createElement("progress");
  bar.className = "attach-progress";
  bar.max = 100;
  bar.setAttribute("aria-label", tPlain("attach.progressLabel", { name }));
  li.append(label, bar);
  return li;
}

function showProblem(key, lines) {
  const block = blocks.get(key);
  if (!block) return;
  block.problem.replaceChildren(...lines.map((line) => {
    const p = document.createElement("span");
    p.textContent = line;
    return p;
  }));
  block.problem.hidden = lines.length === 0;
}

// ---- upload and removal ----
async function upload(key, file) {
  const name = file.name || "pasted";
  if (await mayTalk() !== "ours") return t("attach.unreachable", { name });
  return new Promise((resolve) => {
    const block = blocks.get(key);
    const item = pendingEl(name);
    block.list.append(item);
    block.list.hidden = false;
    const finish = (problem) => {
      inFlight.count--;
      inFlight.bytes -= file.size;
      item.remove();
      resolve(problem);
    };
    const progressed = (sent, total) => { item.querySelector("progress").value = Math.round((sent / total) * 100); };
    inFlight.count++;
    inFlight.bytes += file.size;
    sendFile(file, progressed, name).then(({ status, body }) => {
      if (status === 201 && typeof body.id === "string") {
        addFile(key, { id: body.id, name: body.name, mimeType: body.mimeType, bytes: body.bytes });
        saveDraft();
        renderList(key);
        say(t("attach.done", { name: body.name, size: sizeText(body.bytes) }));
        finish(null);
        return;
      }
      finish(refusalText(name, status, body && typeof body === "object" ? body : {}));
    }, () => finish(t("attach.unreachable", { name })));
  });
}

// Uploads files for `key`, one after another; refusals (too big, too many, the server's) are
// shown under that note and announced.
export async function attachFiles(key, files) {
  if (state.phase !== "open" || !blocks.has(key)) return;
  showProblem(key, []);
  const problems = [];
  queued += files.length;
  for (const file of files) {
    const stored = uploaded();
    const bytes = stored.reduce((n, f) => n + f.bytes, 0) + inFlight.bytes;
    let problem = null;
    if (file.size > limit("attachmentBytes")) problem = t("attach.tooBig", { name: file.name, ...limitWords() });
    else if (stored.length + inFlight.count >= limit("attachments")) problem = t("attach.tooMany", { name: file.name, ...limitWords() });
    else if (bytes + file.size > limit("attachmentsBytes")) problem = t("attach.tooMuch", { name: file.name, ...limitWords() });
    else problem = await upload(key, file);
    if (problem) {
      problems.push(problem);
      showProblem(key, problems);
      say(problem);
    }
    dequeued(problem);
  }
}

async function removeFile(key, id, button) {
  const file = filesOf(key).find((f) => f.id === id);
  if (!file) return;
  button.disabled = true;
  let status = 0;
  let body = {};
  try {
    const r = await request(`/attachments/${encodeURIComponent(id)}`, { method: "DELETE" });
    status = r.status;
    if (status !== 204) body = await r.json().catch(() => ({}));
  } catch { /* unreachable: status 0 */ }
  // "not-found": the server has it no more, which is what was asked.
  if (status !== 204 && body.code !== "not-found") {
    button.disabled = false;
    const problem = status ? t("attach.removeFailed", { name: file.name, error: body.error || `HTTP ${status}` })
      : t("attach.removeUnreachable", { name: file.name });
    showProblem(key, [problem]);
    say(problem);
    return;
  }
  const at = dropFile(key, file);
  saveDraft();
  renderList(key);
  // Focus goes where the removed file was: the next file's Remove, else the Attach button.
  const block = blocks.get(key);
  const buttons = block.list.querySelectorAll(".attach-remove");
  (buttons[Math.min(at, buttons.length - 1)] || block.root.querySelector(".attach-button")).focus();
  say(t("attach.removed", { name: file.name }));
}

// ---- wiring, delegated on the document once ----
// Whose files a control or field adds to: "" (the general notes) or a question's id; null for none.
export function keyOf(el) {
  const attach = el.closest && el.closest(".attach");
  if (attach) return attach.dataset.attachKey;
  const question = el.closest && el.closest("section.question");
  if (question) return question.dataset.qid;
  if (el.closest && el.closest(".review .general")) return "";
  if (el.id === "general-notes" || el.id === "skip-reason") return "";
  return null;
}

function dropTarget(el) {
  return el.closest && (el.closest("section.question") || el.closest(".review .general"));
}

const carriesFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files");

export function bindAttachments() {
  document.addEventListener("click", (e) => {
    const button = e.target.closest && e.target.closest(".attach-button, .attach-remove");
    if (!button) return;
    const key = keyOf(button);
    if (button.classList.contains("attach-button")) button.closest(".attach").querySelector(".attach-input").click();
    else removeFile(key, button.closest(".attach-item").dataset.attachmentId, button);
  });
  document.addEventListener("change", (e) => {
    const input = e.target;
    if (!input.classList || !input.classList.contains("attach-input")) return;
    const files = [...input.files];
    input.value = ""; // the same file can be picked again after a removal
    attachFiles(keyOf(input), files);
  });
  document.addEventListener("paste", (e) => {
    const field = e.target;
    if (!field.matches || !field.matches(".note-text, #general-notes")) return;
    const files = e.clipboardData ? [...e.clipboardData.files] : [];
    if (!files.length) return; // text pastes as usual
    e.preventDefault();
    attachFiles(keyOf(field), files);
  });
  // A file dropped anywhere else would make the browser leave the form for the file.
  document.addEventListener("dragover", (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    const target = dropTarget(e.target);
    e.dataTransfer.dropEffect = target && state.phase === "open" ? "copy" : "none";
    for (const el of document.querySelectorAll(".dropping")) if (el !== target) el.classList.remove("dropping");
    if (target) {
      target.classList.add("dropping");
      target.dataset.dropText = t("attach.drop");
    }
  });
  document.addEventListener("dragleave", (e) => {
    const target = dropTarget(e.target);
    if (target && !target.contains(e.relatedTarget)) target.classList.remove("dropping");
  });
  document.addEventListener("drop", (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    const target = dropTarget(e.target);
    for (const el of document.querySelectorAll(".dropping")) el.classList.remove("dropping");
    if (target) attachFiles(keyOf(target), [...e.dataTransfer.files]);
  });
}
