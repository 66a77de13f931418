// Small DOM helpers every page's modules share (the form's and the inbox's), the page's one
// live region, and its colour theme.
import { t, sentences, language } from "./i18n.js";
import { load, save } from "./state.js";

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

// A heading in Chinese: the browser may break its line between any two characters, splitting a
// word ("是/否"), and Chinese has no word-break: auto-phrase as Japanese does. So its words (from
// Intl.Segmenter) are marked with <wbr>, and .phrases lets the line break only there, at spaces
// and after punctuation, or inside a word too long for a line (form.css). No <wbr> touches a
// punctuation mark: one would let "？" open a line. Other languages get the text as it is.
let segmenter = null;
export function setPhrases(el, text) {
  text = String(text);
  const lang = language();
  if (!lang.startsWith("zh") || typeof Intl.Segmenter !== "function") {
    if (el.textContent !== text || el.childElementCount) el.textContent = text;
    return;
  }
  if (el.textContent === text && el.classList.contains("phrases")) return;
  if (!segmenter || segmenter.resolvedOptions().locale !== lang) segmenter = new Intl.Segmenter(lang, { granularity: "word" });
  const out = [];
  let before = null;
  for (const part of segmenter.segment(text)) {
    if (before && before.isWordLike && part.isWordLike) out.push(document.createElement("wbr"));
    out.push(part.segment);
    before = part;
  }
  el.replaceChildren(...out);
  el.classList.add("phrases");
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

// ---- the colour theme: the system's, light or dark, kept in this browser ----
const THEMES = ["auto", "light", "dark"];

export function storedTheme() {
  const stored = load("askrich:theme", "auto");
  return THEMES.includes(stored) ? stored : "auto";
}

export function applyTheme(theme) {
  const root = document.documentElement;
  if (theme === "light" || theme === "dark") root.dataset.theme = theme;
  else delete root.dataset.theme;
  $("#btn-theme").textContent = t(`theme.${theme === "light" || theme === "dark" ? theme : "auto"}`);
}

// The theme after `theme`, applied, kept and announced. Cycled from the caller's memory, not
// from storage, so a blocked localStorage still cycles.
export function nextTheme(theme) {
  const next = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
  save("askrich:theme", next);
  applyTheme(next);
  announce(t(`theme.announce.${next}`));
  return next;
}
