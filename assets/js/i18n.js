// The form's own words in the user's language: which language (the interview's `language`,
// else the browser's, else English), the strings of assets/i18n/<tag>.json, plurals through
// Intl.PluralRules, and the page's lang/dir. A missing string falls back to English, a missing
// file to English, and a missing English to the key itself: words never break the page.
import { languageFile, inApp } from "./transport.js";

export const LANGUAGES = ["en", "ja", "zh-CN", "zh-TW", "ko", "es", "fr", "de", "pt-BR", "ru", "ar"];
const RTL = new Set(["ar"]);

let lang = "en";
let strings = {};
let english = {};
let plurals = null;
let agentName = null;

// The supported language closest to one BCP 47 tag, or null: exact, then case-insensitive,
// then by script or region for Chinese, then the base language (pt-PT and pt reach pt-BR, the
// only Portuguese there is).
export function matchLanguage(tag) {
  if (typeof tag !== "string" || !tag.trim()) return null;
  const want = tag.trim().replace(/_/g, "-");
  if (LANGUAGES.includes(want)) return want;
  const lower = want.toLowerCase();
  const same = LANGUAGES.find((l) => l.toLowerCase() === lower);
  if (same) return same;
  const parts = lower.split("-");
  if (parts[0] === "zh") {
    return parts.some((p) => p === "hant" || p === "tw" || p === "hk" || p === "mo") ? "zh-TW" : "zh-CN";
  }
  return LANGUAGES.find((l) => l.toLowerCase().split("-")[0] === parts[0]) || null;
}

export function chooseLanguage(requested, browserLanguages) {
  const asked = matchLanguage(requested);
  if (asked) return asked;
  for (const tag of browserLanguages || []) {
    const m = matchLanguage(tag);
    if (m) return m;
  }
  return "en";
}

async function fetchStrings(tag) {
  try {
    const data = await languageFile(tag);
    return data && typeof data === "object" ? data : {};
  } catch {
    return {};
  }
}

// Picks and loads the language, and sets <html lang dir>. Resolves once the strings are in.
export async function setLanguage(requested) {
  const browser = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language];
  lang = chooseLanguage(requested, browser);
  const [mine, en] = await Promise.all([fetchStrings(lang), lang === "en" ? null : fetchStrings("en")]);
  strings = mine;
  english = en || mine;
  try { plurals = new Intl.PluralRules(lang); } catch { plurals = null; }
  const root = document.documentElement;
  root.lang = lang;
  root.dir = RTL.has(lang) ? "rtl" : "ltr";
  return lang;
}

export const language = () => lang;
export const isRtl = () => RTL.has(lang);

// The name the client gave the agent, or null: then the language's word for "the agent".
export function setAgent(name) {
  agentName = typeof name === "string" && name.trim() ? name.trim() : null;
}

function lookup(table, key, count) {
  const v = table[key];
  if (typeof v === "string") return v;
  if (v && typeof v === "object") {
    const cat = plurals && typeof count === "number" ? plurals.select(count) : "other";
    if (typeof v[cat] === "string") return v[cat];
    if (typeof v.other === "string") return v.other;
  }
  return null;
}

// Every inserted value that is not a number is a bidi isolate (U+2068 FIRST STRONG ISOLATE …
// U+2069 POP DIRECTIONAL ISOLATE): a Latin agent name, label or file name inside Arabic text (or
// an Arabic one inside English) keeps its own direction instead of pulling the count or the
// punctuation beside it into its run (in Arabic, a Latin name and the count after it read as one
// Latin run). Numbers stay bare: digits take the direction around them, and each template
// already puts them where the language wants them. The isolates are invisible in the page's
// text; what is not laid out as page text (the tab's title, a system notification, an aria-*
// attribute) is filled by tPlain() instead, since other code may draw them as boxes or read them.
export const FSI = "\u2068";
export const PDI = "\u2069";

// A number already written the language's way ("1,5", "١٫٥"): inserted bare, like a number.
class Figure {
  constructor(text) { this.text = text; }
  toString() { return this.text; }
}

export function figure(value, digits = 0) {
  try {
    return new Figure(new Intl.NumberFormat(lang, { maximumFractionDigits: digits }).format(value));
  } catch {
    return new Figure(value.toFixed(digits));
  }
}

const bare = (v) => typeof v === "number" || v instanceof Figure;

// One value as t() inserts it; also for the interview's own words the form strings together
// itself (the labels of a ranked order or of the options picked).
export const isolate = (v) => (bare(v) ? String(v) : `${FSI}${v}${PDI}`);

// The closing isolate is a place where a line may break, even in Korean's keep-all: a name and
// the particle written onto it ("{agent}에") would part over two lines. A word joiner (U+2060)
// after the isolate, wherever a letter follows at once, keeps them together.
export const WJ = "\u2060";
const LETTER = /\p{L}/u;
// Chinese sets a space between Han characters and a Latin word or a number: between its own
// words and an inserted name only when the name's edge is Latin or a digit ("上传 notes.txt",
// "上传报告.txt"). CSS text-autospace would do it, but it does not see across the isolates.
const HAN = /\p{Script=Han}/u;
const LATIN = /[\p{Script=Latin}\d]/u;

function spacedFill(template, at, length, text) {
  if (!lang.startsWith("zh") || !text) return { before: "", after: "" };
  const prev = template[at - 1], next = template[at + length];
  return {
    before: prev && HAN.test(prev) && LATIN.test(text[0]) ? " " : "",
    after: next && HAN.test(next) && LATIN.test(text[text.length - 1]) ? " " : "",
  };
}

function fill(key, params, wrap) {
  const count = typeof params.count === "number" ? params.count : undefined;
  // Inside a host, the words that speak of a browser tab have their own (inHost.<key>).
  const hosted = inApp ? lookup(strings, `inHost.${key}`, count) ?? lookup(english, `inHost.${key}`, count) : undefined;
  const template = hosted ?? lookup(strings, key, count) ?? lookup(english, key, count) ?? key;
  const values = { agent: agentName || lookup(strings, "agent.fallback") || lookup(english, "agent.fallback") || "", ...params };
  // A sentence that starts with the common noun for the agent starts with a capital (inside the
  // isolate); the same noun later in the sentence does not.
  const capital = template.startsWith("{agent}") && !agentName;
  return template.replace(/\{(\w+)\}/g, (m, name, at) => {
    if (!(name in values)) return m;
    const raw = values[name];
    const v = capital && at === 0 && raw ? raw[0].toLocaleUpperCase(lang) + raw.slice(1) : raw;
    if (bare(v)) return wrap(v);
    const space = spacedFill(template, at, m.length, String(v));
    const joined = wrap === isolate && !space.after && LETTER.test(template[at + m.length] || "");
    return space.before + wrap(v) + (joined ? WJ : space.after);
  });
}

// t("key", {count: 2, agent: …}): the string with its {placeholders} filled, each value that is
// not a number isolated. {agent} is filled in by itself.
export const t = (key, params = {}) => fill(key, params, isolate);

// The same words without isolates, for text that is not laid out in the page.
export const tPlain = (key, params = {}) => fill(key, params, String);

// A list of words the way the language joins them ("a, b" / "a、b" / "a، b").
export const list = (items) => items.join(t("list.sep"));

// Sentences one after the other: with a space, or none after 。 in Chinese and Japanese.
export const sentences = (...parts) => parts.filter(Boolean).join(t("sentence.sep"));

// A key's name as the language's keyboards and manuals write it ("Leertaste", "Échap"). The
// strings name a key between backticks by its English name, the same in every language (the key
// pressed does not change); a letter, a digit or an arrow has no entry and stays as it is.
export const keyName = (key) => lookup(strings, `key.${key}`) ?? lookup(english, `key.${key}`) ?? key;

// Text whose `backticked` parts are keys, shown as <kbd>. A key cap is laid out as one box, and
// the browser breaks a line on either side of such a box even before a closing mark ("↓ / ，再")
// or a Korean particle written onto the key ("`Space`로"), so the marks and the particle touching
// a key are kept on its line with it.
const OPENING = /[(\[{«“‘（「『【〔〈《]+$/u;
const CLOSING = /^(?:\p{Script=Hangul}|[)\]}»”’.,:;?!、。，．：；？！）」』】〕〉》])+/u;
export function fillKeys(el, text) {
  const parts = String(text).split("`");
  const out = [];
  for (let i = 0; i < parts.length; i++) {
    if (i % 2 === 0) { if (parts[i]) out.push(parts[i]); continue; }
    const k = document.createElement("kbd");
    k.textContent = keyName(parts[i]);
    const prev = out[out.length - 1];
    const before = typeof prev === "string" ? prev.match(OPENING) : null;
    const after = i + 1 < parts.length ? parts[i + 1].match(CLOSING) : null;
    if (!before && !after) { out.push(k); continue; }
    const keep = document.createElement("span");
    keep.className = "keep";
    if (before) {
      out[out.length - 1] = prev.slice(0, -before[0].length);
      keep.append(before[0]);
    }
    keep.append(k);
    if (after) {
      keep.append(after[0]);
      parts[i + 1] = parts[i + 1].slice(after[0].length);
    }
    out.push(keep);
  }
  el.replaceChildren(...out.filter((part) => part !== ""));
}

// Fills the markup's own words, in the page and in every <template>, from data-i18n (text),
// data-i18n-keys (text with <kbd> keys) and data-i18n-<attribute> (title, aria-label, …).
export function translatePage(root = document) {
  const roots = [root, ...[...root.querySelectorAll("template")].map((tpl) => tpl.content)];
  for (const r of roots) {
    for (const el of r.querySelectorAll("*")) {
      for (const attr of [...el.attributes]) {
        if (!attr.name.startsWith("data-i18n")) continue;
        const what = attr.name.slice("data-i18n".length);
        if (what === "") el.textContent = t(attr.value);
        else if (what === "-keys") fillKeys(el, t(attr.value));
        // aria-* is read out, never laid out: it gets no isolates.
        else el.setAttribute(what.slice(1), (what.startsWith("-aria-") ? tPlain : t)(attr.value));
      }
    }
  }
}
