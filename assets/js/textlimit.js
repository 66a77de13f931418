// The limit of every free text (the server's `limits.freeText`, from /api/s), shown as the user
// nears it: the field stops at the limit, a countdown appears under it in the last characters,
// and a paste that would pass the limit is held back and offered as a .txt attachment instead,
// so that no word of it is lost.
import { state } from "./state.js";
import { t, tPlain, figure } from "./i18n.js";
import { announce as say } from "./dom.js";
import { attachFiles, keyOf } from "./attach.js";

const COUNTDOWN_FROM = 1000; // characters left from which the field shows how many
const LIMITED = ".note-text, #general-notes, .other-text, .opt-text-input, #skip-reason";
const PASTED_NAME = "pasted-text.txt";
let uid = 0;

// The general notes and the skip reason travel as one text: together they keep the limit.
function limitOf(field) {
  if (field.id !== "skip-reason") return state.limits.freeText;
  const general = state.generalNotes.trim();
  return Math.max(0, state.limits.freeText - (general ? general.length + 2 : 0));
}

const number = (value) => figure(value);

// The line under a field that counts down near the limit; read with the field (described by).
function counterOf(field) {
  let counter = field.nextElementSibling;
  if (counter && counter.classList.contains("text-left")) return counter;
  uid++;
  counter = document.createElement("span");
  counter.className = "muted text-left";
  counter.id = `text-left${uid}`;
  counter.hidden = true;
  field.after(counter);
  const described = field.getAttribute("aria-describedby");
  field.setAttribute("aria-describedby", described ? `${described} ${counter.id}` : counter.id);
  return counter;
}

function countDown(field) {
  const left = limitOf(field) - field.value.length;
  const near = left <= COUNTDOWN_FROM;
  if (!near && !(field.nextElementSibling && field.nextElementSibling.classList.contains("text-left"))) return;
  const counter = counterOf(field);
  const was = counter.hidden ? null : Number(counter.dataset.left);
  counter.hidden = !near;
  counter.dataset.left = String(left);
  counter.textContent = t("text.left", { count: Math.max(0, left), left: number(Math.max(0, left)) });
  // Spoken when the countdown starts and when the field is full, not at every key.
  if (near && (was === null || (left <= 0 && was > 0))) say(counter.textContent);
}

// A paste that would take the field past the limit is held back and offered as a .txt file.
function longPaste(e, field) {
  const text = e.clipboardData.getData("text/plain");
  const start = field.selectionStart ?? field.value.length;
  const end = field.selectionEnd ?? start;
  const limit = limitOf(field);
  if (field.value.length - (end - start) + text.length <= limit) return;
  e.preventDefault();
  offerAsFile(field, text, limit);
}

function offerAsFile(field, text, limit) {
  const key = keyOf(field);
  const holder = field.closest(".other, .opt-text, .note, .general, dialog") || field.parentElement;
  holder.querySelector(":scope > .text-offer")?.remove();
  const box = document.createElement("div");
  box.className = "text-offer";
  box.setAttribute("role", "group");
  const p = document.createElement("p");
  const said = { count: text.length, size: number(text.length), limit: number(limit) };
  p.textContent = t("text.tooLong", said);
  box.id = `text-offer${++uid}`;
  box.setAttribute("aria-label", tPlain("text.tooLong", said));
  const attach = document.createElement("button");
  attach.type = "button";
  attach.className = "btn small text-offer-attach";
  attach.textContent = t("text.attach", { type: ".txt" }); // isolated: right to left it stays ".txt"
  const dismiss = document.createElement("button");
  dismiss.type = "button";
  dismiss.className = "btn small text-offer-dismiss";
  dismiss.textContent = t("text.dismiss");
  box.append(p, attach, " ", dismiss);
  holder.append(box);
  say(p.textContent);
  attach.focus();
  attach.addEventListener("click", () => {
    box.remove();
    field.focus();
    attachFiles(key, [new File([text], PASTED_NAME, { type: "text/plain" })]);
  });
  dismiss.addEventListener("click", () => { box.remove(); field.focus(); });
}

// ---- wiring, delegated on the document once ----
const limited = (el) => el.matches && el.matches(LIMITED);

export function bindTextLimits() {
  document.addEventListener("focusin", (e) => {
    if (limited(e.target)) e.target.maxLength = limitOf(e.target);
  });
  document.addEventListener("input", (e) => {
    if (limited(e.target)) countDown(e.target);
  });
  // A paste of files is the attachments' (attach.js); a paste of text is checked here.
  document.addEventListener("paste", (e) => {
    if (limited(e.target) && e.clipboardData && !e.clipboardData.files.length) longPaste(e, e.target);
  });
}
