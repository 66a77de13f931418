// A permission ask (an agent's "may I run this?") in the person's language. The server's spec
// says it in English, for the archive and the history; its `permission` descriptor names each
// piece by its key in assets/i18n, so the page words it here: the header ("<agent> wants to run
// a command"), each shown part's label, and the choices.
import { t, isolate } from "./i18n.js";

// The spec with its one question worded from `ask` (the form payload's `permission`).
export function permissionSpec(spec, ask) {
  const values = { tool: ask.tool };
  const header = t(`perm.header.${ask.action}`, values);
  const parts = [];
  for (const section of ask.sections) {
    parts.push(`**${t(section.key)}**\n\n${section.markdown}`);
    if (section.fold) parts.push(`<details><summary>${t("perm.showAll")}</summary>\n\n${section.fold}\n\n</details>`);
  }
  const byId = new Map(ask.options.map((o) => [o.id, o]));
  const questions = spec.questions.map((q) => Object.assign({}, q, {
    header,
    body: parts.join("\n\n"),
    options: q.options.map((o) => (byId.has(o.id) ? Object.assign({}, o, worded(byId.get(o.id))) : o)),
  }));
  return Object.assign({}, spec, { title: header, questions });
}

// One choice's label and description: what it changes (a folder, a rule) as given, then where
// the agent keeps it, or what the note does for a deny.
function worded(option) {
  // The facts (a folder, a rule) isolated: a path must not be reordered by a right-to-left page.
  const about = [option.facts && isolate(option.facts), option.where && t(option.where), option.about && t(option.about)];
  return { label: t(option.key, option.values || {}), description: about.filter(Boolean).join(" · ") || null };
}
