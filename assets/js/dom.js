// Small DOM helpers every screen module shares, and the page's one live region.
import { sentences } from "./i18n.js";

export const $ = (sel, root = document) => root.querySelector(sel);

// The first element of a <template>, ready to fill.
export const clone = (id) => document.getElementById(id).content.firstElementChild.cloneNode(true);

// Writes only when the text changed, so that an unchanged sync costs no style or layout.
export function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

// A row of counts ("Answered: 3 · Deferred: 1 · …"): each label keeps its number on its line,
// and the row wraps only after a separator, never before one. Written only when it changed.
export function setCounts(el, text) {
  const parts = String(text).split(/(\s*[·・]\s*)/);
  // The separator hangs at the end of a line: a space before it would let it open the next.
  for (let i = 1; i < parts.length; i += 2) parts[i] = parts[i].replace(/^\s+/, "\u00a0");
  if (el.textContent === parts.join("") && el.querySelector(".count")) return;
  el.replaceChildren(...parts.map((part, i) => {
    if (i % 2) return part;
    const group = document.createElement("span");
    group.className = "count";
    group.textContent = part;
    return group;
  }));
}

export const whenIdle = (fn) => (window.requestIdleCallback || ((f) => setTimeout(f, 50)))(fn);

// Everything a screen reader is told without moving the focus goes through this one region
// (#announcer), so that two messages never compete for the same moment: messages said in the
// same frame are read as one, in order.
let pending = [];
export function announce(text) {
  const el = document.getElementById("announcer");
  if (!el || !text) return;
  if (pending.length) { pending.push(text); return; }
  pending.push(text);
  el.textContent = "";
  // A fresh text node makes screen readers announce repeated messages too.
  requestAnimationFrame(() => {
    el.textContent = sentences(...pending);
    pending = [];
  });
}
