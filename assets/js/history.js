// The inbox's Answered view: what was decided, newest first, from the answer archive (the last
// 100 settled interviews and permission decisions), searchable over titles, questions and
// answers, each opening a read-only view of its answers. Loaded by inbox.js only once the
// person asks for the view; the listing is read from the same place, and with the same key or
// session, as the inbox's own.
import { t, language } from "./i18n.js";
import { $, clone, setPhrases, announce } from "./dom.js";

const SEARCH_DELAY_MS = 250;

let context = null; // {key, agentLabel, folderName, ask: fetch() as the inbox's own requests}, from inbox.js
let searchTimer = null;
let asked = 0; // the latest listing asked for: an older answer arriving late is dropped

const base = () => (context.key ? `/api/inbox/${context.key}/history` : "/inbox/history");

export function showHistory(given) {
  const first = context === null;
  context = given;
  if (first) bind();
  select(true);
  list();
}

function bind() {
  $("#view-waiting").addEventListener("click", () => select(false));
  $("#history-search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(list, SEARCH_DELAY_MS);
  });
  $("#history-back").addEventListener("click", () => {
    $("#history-entry").hidden = true;
    $("#history-list").hidden = false;
    $("#history-search").hidden = false;
    $("#history-search").focus();
  });
  $("#history-list").addEventListener("click", (e) => {
    const button = e.target.closest(".history-open");
    if (button) open(button.closest("li").dataset.interview);
  });
}

function select(answered) {
  $("#view-answered").setAttribute("aria-pressed", String(answered));
  $("#view-waiting").setAttribute("aria-pressed", String(!answered));
  $("#answered-view").hidden = !answered;
  $("#waiting-view").hidden = answered;
}

async function fetchJson(url) {
  const r = await context.ask(url);
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  return r.json();
}

async function list() {
  const query = $("#history-search").value.trim();
  const mine = ++asked;
  let body = null;
  try {
    body = await fetchJson(`${base()}?q=${encodeURIComponent(query)}`);
  } catch { /* said below */ }
  if (mine !== asked) return;
  const entries = body && Array.isArray(body.history) ? body.history : null;
  const ul = $("#history-list");
  ul.replaceChildren(...(entries || []).map(row));
  const empty = $("#history-empty");
  empty.hidden = entries !== null && entries.length > 0;
  empty.textContent = entries === null ? t("inbox.historyFailed") : query ? t("inbox.historyNoMatch") : t("inbox.historyEmpty");
  if (!empty.hidden) announce(empty.textContent);
}

function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : date.toLocaleString(language(), { dateStyle: "medium", timeStyle: "short" });
}

function facts(entry) {
  return {
    outcome: t(`inbox.outcome.${entry.outcome}`) || entry.outcome,
    by: t(entry.decidedBy === "away-policy" ? "inbox.byPolicy" : "inbox.byPerson"),
    when: when(entry.when),
  };
}

function row(entry) {
  const li = clone("tpl-history-row");
  li.dataset.interview = entry.interviewId;
  li.dataset.kind = entry.kind;
  $(".inbox-agent", li).textContent = context.agentLabel(entry);
  const project = $(".inbox-project", li);
  project.textContent = context.folderName(entry.project) || t("inbox.noProject");
  project.title = entry.project || "";
  setPhrases($(".history-open", li), entry.title || entry.tool || entry.interviewId);
  const { outcome, by, when: at } = facts(entry);
  $(".history-outcome", li).textContent = outcome;
  $(".history-by", li).textContent = by;
  $(".inbox-age", li).textContent = at;
  return li;
}

// One entry's answers, read-only: the question, then what was answered and by whom.
async function open(interviewId) {
  let entry = null;
  try {
    entry = await fetchJson(`${base()}/${encodeURIComponent(interviewId)}`);
  } catch {
    announce(t("inbox.historyFailed"));
    return;
  }
  const view = $("#history-entry");
  $(".history-title", view).textContent = entry.title || entry.tool || "";
  const { outcome, by, when: at } = facts(entry);
  // Each fact in its own box: names and dates of either direction never run into each other.
  $(".history-facts", view).replaceChildren(...[context.agentLabel(entry), context.folderName(entry.project), at, outcome, by]
    .filter(Boolean).map((fact) => {
      const span = document.createElement("span");
      span.textContent = fact;
      return span;
    }));
  const answers = $(".history-answers", view);
  answers.replaceChildren();
  for (const answer of entry.answers || []) {
    const question = document.createElement("dt");
    question.textContent = answer.header || answer.id;
    const given = document.createElement("dd");
    given.dataset.id = answer.id;
    given.textContent = answerText(answer);
    if (answer.by === "away-policy") {
      given.classList.add("history-by-policy");
      const mark = document.createElement("span");
      mark.className = "chip history-policy";
      mark.textContent = t("inbox.takenByPolicy");
      given.append(" ", mark);
    }
    if (answer.notes) {
      const notes = document.createElement("p");
      notes.className = "history-notes";
      notes.textContent = `${t("inbox.notes")}: ${answer.notes}`;
      given.append(notes);
    }
    answers.append(question, given);
  }
  if (entry.generalNotes) {
    const head = document.createElement("dt");
    head.textContent = t("inbox.generalNotes");
    const notes = document.createElement("dd");
    notes.textContent = entry.generalNotes;
    answers.append(head, notes);
  }
  $("#history-list").hidden = true;
  $("#history-search").hidden = true;
  $("#history-empty").hidden = true;
  view.hidden = false;
  $("#history-back").focus();
}

function answerText(answer) {
  if (answer.status === "deferred") return t("inbox.answer.deferred");
  if (answer.status === "needs-info") return t("inbox.answer.needsInfo");
  if (answer.status !== "answered") return t("inbox.answer.unanswered");
  const strings = (value) => (Array.isArray(value) ? value.filter((v) => typeof v === "string") : []);
  if (Array.isArray(answer.rankedLabels)) return strings(answer.rankedLabels).join(" > ");
  const parts = strings(answer.selectedLabels);
  parts.push(...strings(Object.values(answer.optionTexts || {})));
  if (answer.other) parts.push(answer.other);
  return parts.join(t("list.sep"));
}
