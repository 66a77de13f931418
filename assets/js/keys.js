// The keyboard: one table (shown by "?") and one keydown handler. Single-key shortcuts never
// fire while an IME is composing or while the user types in a text field (only Esc and
// Ctrl/Cmd+Enter do there).
import {
  state, answerOf, takeRecommendation, clearAnswer, toggleOption, setOther, toggleMode,
} from "./state.js";
import { optionInputs, qviews } from "./view.js";
import { rankKey, keepOrder, resetOrder, applyRecommended, focusRank, cancelHold, isHolding } from "./rank.js";
import { isRtl } from "./i18n.js";

// The rows of the "?" table: the keys (in backticks, shown as <kbd>) and what they do are
// the strings keys.<row>.keys and keys.<row>.what of each language.
export const KEY_TABLE = [
  "nav", "enter", "modEnter", "homeEnd", "options", "space", "digits", "other", "rec", "note",
  "deferInfo", "clear", "acceptAll", "showAll", "goNew", "rankHold", "rankShift", "rankDigits",
  "rankKeys", "esc", "tab", "help",
];

let act = null;
export function bindKeys(actions) {
  act = actions;
  document.addEventListener("keydown", onKeyDown);
}

function isTextField(el) {
  if (!el || !el.tagName) return false;
  if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
  if (el.tagName !== "INPUT") return false;
  return !["radio", "checkbox", "button", "submit", "reset", "range", "color", "file"].includes(el.type);
}

const isOption = (el) => el && el.classList && el.classList.contains("opt-input");

function focusOptionAt(q, i) {
  const inputs = optionInputs(q);
  if (!inputs.length) return;
  const el = inputs[Math.max(0, Math.min(inputs.length - 1, i))];
  for (const x of inputs) x.tabIndex = x === el ? 0 : -1;
  el.focus();
}

function moveInOptions(q, delta, target) {
  const inputs = optionInputs(q);
  const i = inputs.indexOf(target);
  if (i < 0) {
    const stop = inputs.find((x) => x.tabIndex === 0) || inputs[0];
    if (stop) focusOptionAt(q, inputs.indexOf(stop));
  } else focusOptionAt(q, i + delta);
}

function pickFocused(q, input) {
  if (input.value === "__other") {
    const a = answerOf(q);
    setOther(q, !a.otherOn);
  } else toggleOption(q, input.value);
  act.changed(q);
}

function onKeyDown(e) {
  if (e.defaultPrevented || e.isComposing || e.keyCode === 229) return;
  const help = document.getElementById("help");
  if (help.open) {
    if (e.key === "?") { e.preventDefault(); help.close(); }
    return; // the dialog handles Esc and Tab itself
  }
  if (document.getElementById("skip").open || document.getElementById("share")?.open) return;
  const t = e.target;
  const mod = e.ctrlKey || e.metaKey;
  if (state.phase !== "open") return;

  if (e.key === "Enter" && mod) {
    e.preventDefault();
    act.next();
    return;
  }
  if (isTextField(t)) {
    if (e.key === "Escape") {
      e.preventDefault();
      act.leaveField(t);
    }
    return;
  }
  if (mod || e.altKey) return;

  const q = act.currentQuestion();
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;

  if (q && q.kind === "rank" && rankKey(e, q)) { e.preventDefault(); return; }
  if (key === "Escape" && isHolding()) { e.preventDefault(); cancelHold(); return; }

  const onButton = t && (t.tagName === "BUTTON" || t.tagName === "A" || t.tagName === "SUMMARY");
  const onMode = t && t.closest && t.closest(".mode");
  let handled = true;
  // Right to left, the next screen is to the left, where the Next button is.
  const backKey = isRtl() ? "ArrowRight" : "ArrowLeft";
  const nextKey = isRtl() ? "ArrowLeft" : "ArrowRight";
  switch (key) {
    case backKey: case "h": act.prev(); break;
    case nextKey: case "l": act.next(); break;
    case "Home": act.first(); break;
    case "End": act.last(); break;
    case "Enter":
      if (onButton) { handled = false; break; }
      if (q && isOption(t) && !q.multiSelect && q.kind !== "rank" && !act.isAnswered(q)) pickFocused(q, t);
      act.next();
      break;
    case "ArrowUp": case "ArrowDown": case "k": case "j": {
      if (!q || (onMode && key.startsWith("Arrow"))) { handled = false; break; }
      const delta = key === "ArrowUp" || key === "k" ? -1 : 1;
      if (q.kind === "rank") focusRank(q);
      else if (optionInputs(q).length) moveInOptions(q, delta, t);
      else handled = false;
      break;
    }
    case " ":
      if (q && isOption(t)) pickFocused(q, t);
      else handled = false;
      break;
    case "o": {
      const refs = q && qviews.get(q.id);
      if (!refs || !refs.otherText) { handled = false; break; }
      if (refs.otherInput) { setOther(q, true); act.changed(q); }
      refs.otherText.focus();
      break;
    }
    case "r":
      if (!q) { handled = false; break; }
      if (q.kind === "rank") applyRecommended(q);
      else if (takeRecommendation(q)) act.changed(q);
      break;
    case "n":
      if (q) act.focusNote(q); else if (state.screen === "review") document.getElementById("general-notes").focus();
      else handled = false;
      break;
    case "d": case "i": {
      if (!q) { handled = false; break; }
      toggleMode(q, key === "d" ? "defer" : "needs-info");
      act.changed(q);
      if (key === "i") act.focusNote(q);
      break;
    }
    case "x": case "Backspace":
      if (!q) { handled = false; break; }
      if (q.kind === "rank") resetOrder(q);
      else { clearAnswer(q); act.changed(q); }
      break;
    case "c":
      if (q && q.kind === "rank") keepOrder(q); else handled = false;
      break;
    case "a":
      if (state.screen === "review" && !state.showAll) act.acceptAll();
      else if (state.showAll && !q) act.acceptAll();
      else handled = false;
      break;
    case "v": act.toggleShowAll(); break;
    case "g": if (!act.goNew()) handled = false; break;
    case "?": act.openHelp(); break;
    default:
      if (/^[1-9]$/.test(key) && q && q.kind !== "rank") {
        const o = q.options[Number(key) - 1];
        if (!o) { handled = false; break; }
        toggleOption(q, o.id, q.multiSelect ? undefined : true);
        act.changed(q);
        focusOptionAt(q, Number(key) - 1);
      } else handled = false;
  }
  if (handled) e.preventDefault();
}
