// Small DOM helpers every screen module shares, and the page's one live region.
import { sentences } from "./i18n.js";

export const $ = (sel, root = document) => root.querySelector(sel);

// The first element of a <template>, ready to fill.
export const clone = (id) => document.getElementById(id).content.firstElementChild.cloneNode(true);

// Writes only when the text changed, so that an unchanged sync costs no style or layout.
export function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
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
