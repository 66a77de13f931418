#!/usr/bin/env python3
"""ask-user-rich: a stdio MCP server that asks the user a long, structured interview.

An agent sends every question of a round in one `ask_user_rich` call; this server serves the
interview as a local web form, blocks the call until the user submits, and returns every answer,
structured. Run it as an MCP command (`python3 askrich.py`), or try it with
`python3 askrich.py demo`. Standard library only; Python 3.8 to 3.13.

Security model, in three lines: the form server listens on loopback and answers only requests
whose Host is a loopback name (DNS rebinding) and whose Origin, if any, is its own; each
interview URL carries a 144-bit bearer token, never logged whole; submits must be JSON, which
forces a CORS preflight that is never answered.

Contents, in the order data flows (each a banner below):
  Constants · Configuration · Errors
  Interview model and validation    the call's arguments → a normalized spec, or every problem
  Answers and results               the form's answers → the result the agent receives
  Logs and the answer archive       server.log and answers/*.json
  Attachments                       the files the user adds to notes
  Interviews and the waits on them  Interview, its waiters, and the SessionHub of them all
  JSON-RPC over stdio               one message a line, parsed strictly
  The form's files                  assets/, from a checkout or from the running askrich.pyz
  HTTP form server                  the route table and the request plumbing
  Runtime                           the hub, the log and the lazily started form server
  Tool definitions                  instructions, schemas, the results' shapes
  Per-call objects and the eras     what a tool talks to for one call, legacy and modern
  The MCP server                    each era's methods, dispatch, shutdown
  Delivery                          openers, and the client's own form (elicitation)
  The tools                         ask_user_rich, append_questions, await_user_answers
  The code cache · Command line
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = [
    "Config",
    "InvalidInterview",
    "InterviewError",
    "Interview",
    "Runtime",
    "McpServer",
    "validate_interview",
    "validate_questions",
    "build_result",
    "plan_openers",
    "main",
]

# Only what the MCP handshake needs is imported here: every agent session spawns this server,
# so start-up time is felt. The HTTP server, subprocess, unicodedata, difflib, secrets and the
# like are imported where they are first used.
import json
import os
import sys
import threading
import time


# ============================================================================================
# Constants
# ============================================================================================

SERVER_NAME = "ask-user-rich"
SERVER_TITLE = "Ask User Rich"
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # the initialize era
LATEST_PROTOCOL = PROTOCOL_VERSIONS[0]
MODERN_PROTOCOL = "2026-07-28"  # no initialize: every request carries its version in _meta
SUPPORTED_VERSIONS = (MODERN_PROTOCOL,) + PROTOCOL_VERSIONS
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_POLL_MS = 2000
REQUEST_STATE_SECONDS = 3600  # a multi round-trip retry must come within the hour
SERVER_INFO = {"name": SERVER_NAME, "title": SERVER_TITLE, "version": __version__}
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

ENV_OPEN = "ASK_USER_RICH_OPEN"
ENV_OPEN_CMD = "ASK_USER_RICH_OPEN_CMD"
ENV_PORT = "ASK_USER_RICH_PORT"
ENV_HOST = "ASK_USER_RICH_HOST"
ENV_PUBLIC_HOST = "ASK_USER_RICH_PUBLIC_HOST"
ENV_PROGRESS_MS = "ASK_USER_RICH_PROGRESS_MS"
ENV_LOG_DIR = "ASK_USER_RICH_LOG_DIR"
ENV_PROTOCOL = "ASK_USER_RICH_PROTOCOL"
ENV_CODE_CACHE = "ASK_USER_RICH_CODE_CACHE"
ENV_RESTARTED = "ASK_USER_RICH_RESTARTED"  # internal: askrich.pyz started over from its code cache

MAX_TIMEOUT_SECONDS = 604800  # one week
SETTLED_RETENTION_SECONDS = 30 * 60
MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer stdin line is refused without being held whole
MAX_BODY_BYTES = 5 * 1024 * 1024
SSE_PING_SECONDS = 15.0
STATE_HISTORY = 32  # states an event stream can catch up on after a burst of changes
PROGRESS_CHANGE_MIN_SECONDS = 1.0  # answered-count changes are reported at most once a second
OPENER_GRACE_SECONDS = 5.0  # an opener still running after this long is a foreground launcher
HTTP_IDLE_TIMEOUT_SECONDS = 30  # a client that trickles its request in loses its thread
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")

# Where the summary cuts a header, a note, an Other answer and the general notes.
CUT_HEADER, CUT_NOTES, CUT_OTHER, CUT_GENERAL = 80, 140, 100, 400

# The languages the form speaks (assets/i18n/<tag>.json); the form picks one, English by default.
FORM_LANGUAGES = ("en", "ja", "zh-CN", "zh-TW", "ko", "es", "fr", "de", "pt-BR", "ru", "ar")

# The files the form may load, relative to assets/. Nothing else under /assets/ is served.
ASSET_FILES = frozenset(
    {
        "form.html",
        "form.css",
        "js/main.js",
        "js/state.js",
        "js/view.js",
        "js/keys.js",
        "js/rank.js",
        "js/live.js",
        "js/i18n.js",
        "js/attach.js",
        "vendor/marked.esm.js",
        "vendor/purify.es.mjs",
    }
    | {"i18n/%s.json" % tag for tag in FORM_LANGUAGES}
)
# Fixed, not guessed: on Windows `mimetypes` often calls .js text/plain, which browsers refuse
# to run as a module.
ASSET_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


# ============================================================================================
# Configuration
# ============================================================================================

class Config:
    """Every setting, read once from the environment. Tests construct it directly."""

    __slots__ = (
        "open_browser",
        "open_cmd",
        "port",
        "host",
        "public_host",
        "progress_ms",
        "log_dir",
        "protocol",
    )

    def __init__(
        self,
        *,
        open_browser: bool = True,
        open_cmd: str | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        public_host: str = "localhost",
        progress_ms: int = 15000,
        log_dir: str | None = None,
        protocol: str = "auto",
    ) -> None:
        self.open_browser = open_browser
        self.open_cmd = open_cmd
        self.port = port
        self.host = host
        self.public_host = public_host
        self.progress_ms = progress_ms
        self.log_dir = log_dir or default_log_dir()
        self.protocol = protocol  # "auto": both eras; "legacy": only the initialize era

    @classmethod
    def from_env(cls, environ=None) -> tuple[Config, list[str]]:
        """The configuration and a list of warnings, one per bad value (its default is used)."""
        env = os.environ if environ is None else environ
        warnings: list[str] = []

        def integer(name: str, default: int, low: int, high: int) -> int:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                value = int(raw)
            except ValueError:
                value = None
            if value is None or not low <= value <= high:
                warnings.append(
                    "%s=%r is not a number from %d to %d; using %d" % (name, raw, low, high, default)
                )
                return default
            return value

        open_raw = env.get(ENV_OPEN, "").strip().lower()
        if open_raw not in ("", "0", "1", "false", "true", "no", "yes", "off", "on"):
            warnings.append("%s=%r is not 0 or 1; browsers will be opened" % (ENV_OPEN, open_raw))
        protocol = env.get(ENV_PROTOCOL, "").strip().lower() or "auto"
        if protocol not in ("auto", "legacy"):
            warnings.append("%s=%r is not auto or legacy; serving both eras" % (ENV_PROTOCOL, protocol))
            protocol = "auto"
        return (
            cls(
                open_browser=open_raw not in ("0", "false", "no", "off"),
                open_cmd=env.get(ENV_OPEN_CMD, "").strip() or None,
                port=integer(ENV_PORT, 0, 0, 65535),
                host=env.get(ENV_HOST, "").strip() or "127.0.0.1",
                public_host=env.get(ENV_PUBLIC_HOST, "").strip() or "localhost",
                progress_ms=integer(ENV_PROGRESS_MS, 15000, 10, 86_400_000),
                log_dir=env.get(ENV_LOG_DIR, "").strip() or default_log_dir(env),
                protocol=protocol,
            ),
            warnings,
        )


def default_log_dir(environ=None) -> str:
    """The platform's per-user state directory for logs and the answer archive."""
    env = os.environ if environ is None else environ
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Logs", SERVER_NAME)
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, SERVER_NAME)
    base = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return os.path.join(base, SERVER_NAME)


# ============================================================================================
# Errors
# ============================================================================================

class InvalidInterview(ValueError):
    """Arguments that do not make an interview; `problems` lists every `- path: problem` line."""

    def __init__(self, problems: list[str], heading: str = "Invalid interview:") -> None:
        self.problems = problems
        self.heading = heading
        super().__init__("\n".join([heading] + ["- " + p for p in problems]))


class InterviewError(Exception):
    """A change or a wait the session hub refuses. It carries the facts only: the HTTP layer,
    the MCP tools and the command line each word it for their own reader."""


class UnknownInterview(InterviewError):
    def __init__(self, session_id) -> None:
        super().__init__("unknown interview %r" % (session_id,))
        self.session_id = session_id


class InterviewSettled(InterviewError):
    """The interview takes no more answers or questions: it is submitted, declined or cancelled."""

    def __init__(self, interview_id: str, state: str) -> None:
        super().__init__("interview %s already %s" % (interview_id, state))
        self.interview_id = interview_id
        self.state = state


class StaleVersion(InterviewError):
    """A submit made against older questions than the interview now has."""

    def __init__(self, version: int) -> None:
        super().__init__("the interview is at version %d" % version)
        self.version = version


class InvalidAnswers(InterviewError):
    """A submit whose body or answers do not fit the interview; `problems` names each answer's
    problem when the answers themselves were judged."""

    def __init__(self, text: str, problems=None) -> None:
        super().__init__(text)
        self.text = text
        self.problems = problems


class FormServerUnavailable(InterviewError):
    """The form server could not bind its address; the next interview tries again."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__("cannot bind %s:%d: %s" % (host, port, reason))
        self.host = host
        self.port = port
        self.reason = reason


# ============================================================================================
# Interview model and validation
# ============================================================================================
#
# An interview arrives as untrusted JSON from the model. Validation checks everything, reports
# every problem at once (so one corrected call suffices), and returns the normalized spec with
# every default filled in: the form and the result builder never guess.

ID_MAX = 200
ID_ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")
DELIVERIES = ("browser", "link", "elicitation")
KINDS = ("choice", "rank")
ASK_FIELDS = ("title", "intro", "questions", "delivery", "timeoutSeconds", "language")
APPEND_FIELDS = ("sessionId", "questions", "note")
AWAIT_FIELDS = ("sessionId", "timeoutSeconds")
QUESTION_FIELDS = (
    "id", "header", "body", "kind", "options", "recommended", "rationale", "multiSelect",
    "allowOther", "dependsOn",
)
OPTION_FIELDS = ("id", "label", "description", "preview", "textInput")
TEXT_INPUT_FIELDS = ("placeholder", "required")
ID_RULE = (
    "ids may only contain A-Z, a-z, 0-9, '_', '.', ':' and '-' "
    "(no accents, spaces or other Unicode)"
)


def quote(text: str) -> str:
    """A value as it appears in an error text: JSON-style double quotes, Unicode kept."""
    return json.dumps(text, ensure_ascii=False)


def describe(value) -> str:
    """A short, safe rendering of any JSON value for an error text (never recurses)."""
    if isinstance(value, str):
        return quote(value if len(value) <= 60 else value[:59] + "…")
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a " + type(value).__name__


def slugify(text: str) -> str:
    """An ASCII id suggestion: accents dropped, every other run of bad characters made '-'."""
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    out, pending_dash = [], False
    for ch in kept:
        if ch in ID_ALLOWED:
            if pending_dash and out:
                out.append("-")
            pending_dash = False
            out.append(ch)
        else:
            pending_dash = True
    return "".join(out).strip("-")[:ID_MAX]


def did_you_mean(name: str, fields) -> str:
    """'; did you mean "x"?' for a misspelt field name, or '' when nothing is close."""
    for field in fields:
        if field.lower() == name.lower():
            return "; did you mean %s?" % quote(field)
    import difflib

    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    return "; did you mean %s?" % quote(close[0]) if close else ""


class Problems:
    """Collects `path: problem` lines; one place builds every message prefix."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, path: str, text: str) -> None:
        self.lines.append("%s: %s" % (path, text))

    def unknown_fields(self, path, obj: dict, fields) -> None:
        """Every field of `obj` not in `fields`; `path` None files each under its own name
        (the top-level arguments of a tool)."""
        for name in obj:
            if name not in fields:
                self.add(path or name, "unknown field %s%s" % (quote(name), did_you_mean(name, fields)))

    def check_id(self, path: str, value, what: str = "id") -> str | None:
        """The id when it is well formed, else None with the problem recorded."""
        if not isinstance(value, str):
            self.add(path, "%s must be a string id, not %s" % (quote(what), describe(value)))
            return None
        if not value:
            self.add(path, "%s must not be empty" % quote(what))
            return None
        if any(ch not in ID_ALLOWED for ch in value):
            slug = slugify(value)
            fix = "; use %s instead." % quote(slug) if slug else "."
            self.add(path, "id %s is not ASCII-safe: %s%s Labels and headers may use any characters."
                     % (quote(value), ID_RULE, fix))
            return None
        if len(value) > ID_MAX:
            self.add(path, "id %s is longer than %d characters" % (describe(value), ID_MAX))
            return None
        return value

    def unique_id(self, path: str, obj: dict, seen: set, kind: str) -> str | None:
        """The required `id` of a question or option, checked and not yet in `seen`."""
        if obj.get("id") is None:
            self.add(path, '"id" is required')
            return None
        value = self.check_id(path, obj["id"])
        if value is not None:
            if value in seen:
                self.add(path, "duplicate %s id %s" % (kind, quote(value)))
            seen.add(value)
        return value

    def text(self, path: str, obj: dict, field: str, *, required: bool = False) -> str | None:
        """An optional (or required, non-empty) string field; null counts as absent."""
        value = obj.get(field)
        if value is None:
            if required:
                self.add(path, "%s is required" % quote(field))
            return None
        if not isinstance(value, str):
            self.add(path, "%s must be a string, not %s" % (quote(field), describe(value)))
            return None
        if required and not value.strip():
            self.add(path, "%s must not be empty" % quote(field))
            return None
        return value

    def flag(self, path: str, obj: dict, field: str, default: bool) -> bool:
        value = obj.get(field)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.add(path, "%s must be true or false, not %s" % (quote(field), describe(value)))
            return default
        return value


def question_path(index: int, raw) -> str:
    """`questions[3] (db)`: the position, and the id when the question has a usable one."""
    qid = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(qid, str) and qid:
        return "questions[%d] (%s)" % (index, qid if len(qid) <= 40 else qid[:39] + "…")
    return "questions[%d]" % index


def validate_questions(raw_questions, existing_ids=(), *, heading: str = "Invalid interview:"):
    """Normalized questions, or InvalidInterview listing every problem.

    `existing_ids` are the ids of the questions already in the interview (for appends): new ids
    must not repeat them, and `dependsOn` may name them.
    """
    problems = Problems()
    questions = _check_questions(raw_questions, list(existing_ids), problems)
    if problems.lines:
        raise InvalidInterview(problems.lines, heading)
    return questions


FOLLOW_UP_HEADING = "Invalid follow-up questions:"


def validate_follow_ups(raw_questions, note, existing_ids) -> list:
    """append_questions' questions, judged by the same rules as ask_user_rich's and numbered
    from the first appended one, with its note; or InvalidInterview listing every problem."""
    problems = Problems()
    questions = _check_questions(raw_questions, list(existing_ids), problems)
    if note is not None and not isinstance(note, str):
        problems.add("note", '"note" must be a markdown string, not %s' % describe(note))
    if problems.lines:
        raise InvalidInterview(problems.lines, FOLLOW_UP_HEADING)
    return questions


def _check_questions(raw_questions, existing_ids: list, problems: Problems) -> list:
    if not isinstance(raw_questions, list) or not raw_questions:
        problems.add("questions", '"questions" must be a non-empty array')
        return []
    # Where each id stands, so that dependsOn can say "later" rather than "unknown".
    position = {qid: -1 for qid in existing_ids}
    for index, raw in enumerate(raw_questions):
        qid = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(qid, str) and qid not in position:
            position[qid] = index
    seen = set(existing_ids)
    questions = []
    for index, raw in enumerate(raw_questions):
        question = _check_question(raw, index, position, seen, problems)
        if question is not None:
            questions.append(question)
    return questions


def _check_question(raw, index: int, position: dict, seen: set, problems: Problems):
    path = question_path(index, raw)
    if not isinstance(raw, dict):
        problems.add(path, "a question must be an object, not %s" % describe(raw))
        return None
    before = len(problems.lines)
    problems.unknown_fields(path, raw, QUESTION_FIELDS)
    qid = problems.unique_id(path, raw, seen, "question")
    header = problems.text(path, raw, "header", required=True)
    body = problems.text(path, raw, "body")
    rationale = problems.text(path, raw, "rationale")
    kind = raw.get("kind", "choice")
    if kind is None:
        kind = "choice"
    if kind not in KINDS:
        problems.add(path, '"kind" must be "choice" or "rank", not %s' % describe(kind))
        kind = "choice"
    rank = kind == "rank"
    multi = problems.flag(path, raw, "multiSelect", False)
    allow_other = problems.flag(path, raw, "allowOther", not rank)
    raw_options = raw.get("options")
    options = _check_options(raw_options, path, rank, problems)
    # A non-array `options` was already reported; counting it again would only add noise.
    options_given = isinstance(raw_options, list) or raw_options is None

    if rank:
        if options_given and len(raw_options or []) < 2:
            problems.add(
                path,
                "a rank question needs at least 2 options to order (it has %d)"
                % len(raw_options or []),
            )
        if multi:
            problems.add(
                path,
                "multiSelect does not apply to rank questions; drop it "
                "(the user orders every option)",
            )
        allow_other = False  # a rank answer is an order; an Other text would have no place
        recommended = _check_rank_recommendation(raw.get("recommended"), path, options, problems)
    else:
        if options_given and not options and not allow_other:
            problems.add(path, "has no options and allowOther=false, so it cannot be answered")
        recommended = _check_choice_recommendation(
            raw.get("recommended"), path, options, multi, problems
        )

    depends_on = _check_depends_on(raw.get("dependsOn"), path, qid, index, position, problems)
    if len(problems.lines) > before:
        return None
    return {
        "id": qid,
        "header": header,
        "body": body,
        "kind": kind,
        "options": options,
        "recommended": recommended,
        "rationale": rationale,
        "multiSelect": multi,
        "allowOther": allow_other,
        "dependsOn": depends_on,
    }


def _check_options(raw_options, path: str, rank: bool, problems: Problems) -> list:
    if raw_options is None:
        return []
    if not isinstance(raw_options, list):
        problems.add(path, '"options" must be an array, not %s' % describe(raw_options))
        return []
    options, seen = [], set()
    for index, raw in enumerate(raw_options):
        option_path = "%s.options[%d]" % (path, index)
        if not isinstance(raw, dict):
            problems.add(option_path, "an option must be an object, not %s" % describe(raw))
            continue
        problems.unknown_fields(option_path, raw, OPTION_FIELDS)
        oid = problems.unique_id(option_path, raw, seen, "option")
        label = problems.text(option_path, raw, "label", required=True)
        description = problems.text(option_path, raw, "description")
        preview = problems.text(option_path, raw, "preview")
        text_input = None
        if raw.get("textInput") is not None:
            if rank:
                problems.add(option_path, "textInput does not apply to rank options")
            else:
                text_input = _check_text_input(raw["textInput"], option_path, problems)
        options.append(
            {
                "id": oid,
                "label": label,
                "description": description,
                "preview": preview,
                "textInput": text_input,
            }
        )
    return options


def _check_text_input(raw, path: str, problems: Problems):
    if not isinstance(raw, dict):
        problems.add(
            path,
            '"textInput" must be an object like {"placeholder": "…", "required": true}, not %s'
            % describe(raw),
        )
        return None
    text_path = path + ".textInput"
    problems.unknown_fields(text_path, raw, TEXT_INPUT_FIELDS)
    return {
        "placeholder": problems.text(text_path, raw, "placeholder"),
        "required": problems.flag(text_path, raw, "required", False),
    }


def _recommended_list(raw, path: str, problems: Problems):
    """`recommended` as a list of well-formed ids, or None when absent or unusable."""
    if raw is None:
        return None
    entries = raw if isinstance(raw, list) else [raw]
    if not isinstance(raw, (list, str)):
        problems.add(
            path,
            '"recommended" must be an option id or an array of option ids, not %s' % describe(raw),
        )
        return None
    ids = [problems.check_id(path, entry, "recommended") for entry in entries]
    return None if None in ids else ids


ID_LIST_MAX = 40  # option ids listed in one problem line; more only bloat every line


def _option_hints(options: list):
    """(each label and each label's slug -> the id of the first option that has it,
    the option ids as one problem line lists them)."""
    labels: dict = {}
    for option in options:
        label = option["label"] or ""
        labels.setdefault(label, option["id"])
        if label and option["id"]:
            labels.setdefault(slugify(label), option["id"])
    ids = [option["id"] for option in options if option["id"]]
    listed = ", ".join(ids[:ID_LIST_MAX]) + (", …" if len(ids) > ID_LIST_MAX else "")
    return labels, listed


def _not_an_option(value: str, options: list, hints) -> str:
    """Why `value` is not an option id, with the id to use when it looks like a label.

    `hints` is `_option_hints(options)`, built once per question: rebuilding it for every bad
    value, and listing every id in every line, made a client's thousands of wrong ids over
    thousands of options cost minutes and gigabytes."""
    labels, listed = hints
    if value in labels:
        return "recommended %s is not one of its option ids (it looks like a label; use the id %s)" % (
            quote(value),
            quote(labels[value]),
        )
    if not options:
        return "recommended %s is not one of its option ids (the question has no options)" % quote(
            value
        )
    return "recommended %s is not one of its option ids (ids: %s)" % (quote(value), listed)


def _check_choice_recommendation(raw, path: str, options: list, multi: bool, problems: Problems):
    ids = _recommended_list(raw, path, problems)
    if not ids:
        return []
    if len(ids) > 1 and not multi:
        problems.add(path, "several recommended ids but multiSelect is false")
    option_ids = {option["id"] for option in options}
    seen, hints = set(), None
    for value in ids:
        if value not in option_ids:
            hints = _option_hints(options) if hints is None else hints
            problems.add(path, _not_an_option(value, options, hints))
        elif value in seen:
            problems.add(path, "recommended lists %s twice" % quote(value))
        seen.add(value)
    return ids


def permutation_problems(given: list, option_ids: list) -> list:
    """The parts of a 'must list every option id exactly once' message; empty when it does."""
    # Sets, in one pass: the list comes from the form's POST body, and the quadratic version
    # spent minutes on a 5 MiB `ranked` array while holding the interview's lock.
    known, present, twice, unknown, repeated = set(option_ids), set(), set(), [], []
    for value in given:
        if not isinstance(value, str) or value not in known:
            unknown.append(value)
        elif value not in present:
            present.add(value)
        elif value not in twice:
            twice.add(value)
            repeated.append(value)
    missing = [oid for oid in option_ids if oid not in present]
    parts = []
    if missing:
        parts.append("missing " + ", ".join(quote(v) for v in missing))
    if unknown:
        parts.append("not option ids: " + ", ".join(quote(str(v)) for v in unknown))
    if repeated:
        parts.append("repeated " + ", ".join(quote(v) for v in repeated))
    return parts


def _check_rank_recommendation(raw, path: str, options: list, problems: Problems):
    option_ids = [option["id"] for option in options if option["id"]]
    if isinstance(raw, str):
        example = ", ".join(quote(oid) for oid in (option_ids[:4] or ["a", "b"]))
        problems.add(
            path,
            "recommended on a rank question is the recommended order, an array holding every "
            "option id exactly once (e.g. [%s]), not the single id %s" % (example, quote(raw)),
        )
        return []
    ids = _recommended_list(raw, path, problems)
    if not ids:
        return []
    parts = permutation_problems(ids, option_ids)
    if parts:
        parts.append("ids: [%s]" % ", ".join(quote(v) for v in option_ids))
        problems.add(
            path,
            "recommended must list every option id exactly once, in the order you recommend (%s)"
            % "; ".join(parts),
        )
    return ids


def _check_depends_on(raw, path: str, qid, index: int, position: dict, problems: Problems) -> list:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.add(
            path, '"dependsOn" must be an array of earlier question ids, not %s' % describe(raw)
        )
        return []
    links, linked = [], set()
    for entry in raw:
        target = problems.check_id(path, entry, "dependsOn")
        if target is None:
            continue
        if target == qid:
            problems.add(path, "depends on itself")
        elif target not in position:
            problems.add(path, "dependsOn %s is not an earlier question id" % quote(target))
        elif position[target] > index:
            problems.add(
                path,
                "dependsOn %s points at a later question; move %s before %s or drop the link"
                % (quote(target), quote(target), quote(qid or "this question")),
            )
        elif target not in linked:  # a set: a client may send thousands of links
            linked.add(target)
            links.append(target)
    return links


def validate_interview(args) -> tuple[dict, dict]:
    """(spec, call options) for `ask_user_rich` arguments, or InvalidInterview.

    The spec is `{title, intro, questions, language}` with every default filled in; the call
    options are `{delivery, timeoutSeconds}`.
    """
    problems = Problems()
    if not isinstance(args, dict):
        problems.add("arguments", "must be an object, not %s" % describe(args))
        raise InvalidInterview(problems.lines)
    problems.unknown_fields(None, args, ASK_FIELDS)
    title = args.get("title")
    if title is None:
        problems.add("title", '"title" is required')
    elif not isinstance(title, str) or not title.strip():
        problems.add("title", '"title" must be a non-empty string, not %s' % describe(title))
    intro = problems.text("intro", args, "intro")
    delivery = args.get("delivery")
    if delivery is None:
        delivery = "browser"
    elif delivery not in DELIVERIES:
        problems.add(
            "delivery",
            '"delivery" must be one of %s, not %s'
            % (", ".join(quote(d) for d in DELIVERIES), describe(delivery)),
        )
    timeout = check_timeout(args.get("timeoutSeconds"), problems)
    language = check_language(args.get("language"), problems)
    questions = _check_questions(args.get("questions"), [], problems)
    if problems.lines:
        raise InvalidInterview(problems.lines)
    spec = {"title": title, "intro": intro, "questions": questions, "language": language}
    return spec, {"delivery": delivery, "timeoutSeconds": timeout}


LANGUAGE_TAG_MAX = 64


def check_language(value, problems: Problems):
    """`language` as given, None when absent. Only its shape is checked: a well-formed tag the
    form has no translation for is not the agent's mistake (the form falls back)."""
    if value is None:
        return None
    if isinstance(value, str):
        parts = value.split("-")
        # "i-" and "x-" start the old grandfathered and the private-use tags.
        if (
            len(value) <= LANGUAGE_TAG_MAX
            and (2 <= len(parts[0]) <= 8 or parts[0].lower() in ("i", "x"))
            and parts[0].isascii()
            and parts[0].isalpha()
            and all(1 <= len(part) <= 8 and part.isascii() and part.isalnum() for part in parts)
        ):
            return value
    fix = "e.g. \"ja\" or \"pt-BR\", the language the user writes in"
    if isinstance(value, str) and "_" in value and value.strip():
        fix = "use %s" % quote(value.strip().replace("_", "-"))
    problems.add(
        "language",
        '"language" must be a BCP 47 language tag (%s), not %s' % (fix, describe(value)),
    )
    return None


def check_timeout(value, problems: Problems):
    """`timeoutSeconds` as an int, None when absent; integral floats such as 30.0 are taken."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TIMEOUT_SECONDS:
        problems.add(
            "timeoutSeconds",
            '"timeoutSeconds" must be an integer from 1 to %d (seconds), not %s'
            % (MAX_TIMEOUT_SECONDS, describe(value)),
        )
        return None
    return value


AGENT_NAME_MAX = 40
# Words of a client's `name` that are written in capitals when made readable.
NAME_ACRONYMS = frozenset({"ai", "api", "cli", "ide", "llm", "mcp", "sdk", "ui"})
# Trailing words of a `name` that say what the program is, not who it is: "gemini-cli-mcp-client"
# reads "Gemini CLI".
NAME_NOISE = frozenset({"client", "mcp"})


def agent_name(client_info) -> str | None:
    """What the form calls the agent: the client's `title`, else its `name` made readable
    ("claude-code" -> "Claude Code"), cut to AGENT_NAME_MAX; None when it gave neither."""
    if not isinstance(client_info, dict):
        return None
    title = client_info.get("title")
    name = client_info.get("name")
    if isinstance(title, str) and title.split():
        readable = " ".join(title.split())
    elif isinstance(name, str):
        readable = readable_client_name(name)
    else:
        return None
    readable = "".join(ch for ch in readable if ch.isprintable())
    if not readable:
        return None
    return readable if len(readable) <= AGENT_NAME_MAX else readable[: AGENT_NAME_MAX - 1] + "…"


def readable_client_name(name: str) -> str:
    """A machine name such as "claude-code" or "gemini-cli-mcp-client" as a person writes it."""
    words = name.replace("_", " ").replace("-", " ").replace("/", " ").split()
    while words and words[-1].lower() in NAME_NOISE:
        words.pop()
    out = []
    for word in words:
        if word.lower() in NAME_ACRONYMS:
            out.append(word.upper())
        elif word.islower():
            out.append(word[0].upper() + word[1:])
        else:
            out.append(word)  # "VSCode", "Zed": the client chose its capitals
    return " ".join(out)


# ============================================================================================
# Answers and results
# ============================================================================================
#
# The form posts raw answers; they are checked against the spec, then turned into the result
# the agent reads. The result must stand on its own (Claude Code shows the model only
# structuredContent, and a backgrounded call returns long after its question scrolled away),
# so it restates the title, each header and each label, and carries a one-screen summary.

ANSWER_FIELDS = ("status", "selected", "optionTexts", "other", "ranked", "notes")
ANSWER_MODES = {"answer": "answered", "defer": "deferred", "needs-info": "needs-info"}


def unanswered(notes=None) -> dict:
    return {
        "status": "unanswered",
        "selected": [],
        "optionTexts": {},
        "other": None,
        "ranked": None,
        "notes": notes,
    }


def _clean_text(value):
    """A free-text answer: stripped, None when empty or not a string."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value or None


def check_submission(spec: dict, payload: dict) -> dict:
    """Normalized answers by question id, or InvalidAnswers naming every problem."""
    raw_answers = payload["answers"]
    questions = {q["id"]: q for q in spec["questions"]}
    problems = []
    for qid in raw_answers:
        if qid not in questions:
            problems.append("unknown question id %s" % quote(qid))
    answers = {}
    for qid, question in questions.items():
        raw = raw_answers.get(qid)
        if raw is None:
            answers[qid] = unanswered()
            continue
        where = "question %s: " % quote(qid)
        if not isinstance(raw, dict):
            problems.append(where + "an answer must be an object, not %s" % describe(raw))
            continue
        before = len(problems)
        answer = _check_answer(question, raw, problems, where)
        if len(problems) == before:
            answers[qid] = answer
    if problems:
        raise InvalidAnswers("; ".join(problems), problems)
    return answers


def _check_answer(question: dict, raw: dict, problems: list, where: str) -> dict:
    for name in raw:
        if name not in ANSWER_FIELDS:
            problems.append(where + "unknown field %s" % quote(name))
    mode = raw.get("status", "answer")
    if mode not in ANSWER_MODES:
        problems.append(
            where + 'status must be "answer", "defer" or "needs-info", not %s' % describe(mode)
        )
        return unanswered()
    notes = raw.get("notes")
    if notes is not None and not isinstance(notes, str):
        problems.append(where + "notes must be a string, not %s" % describe(notes))
    notes = _clean_text(notes)
    if mode != "answer":
        answer = unanswered(notes)
        answer["status"] = ANSWER_MODES[mode]
        return answer

    options = {option["id"]: option for option in question["options"]}
    option_order = [option["id"] for option in question["options"]]
    selected = raw.get("selected") or []
    if not isinstance(selected, list) or not all(isinstance(v, str) for v in selected):
        problems.append(where + "selected must be an array of option ids")
        selected = []
    for value in selected:
        if value not in options:
            problems.append(where + "unknown option id %s" % quote(value))
    chosen = set(selected)  # a set: `selected` is the form's, of any length
    picked = [oid for oid in option_order if oid in chosen]
    if question["kind"] == "rank" and picked:
        problems.append(where + "a rank question takes ranked, not selected")
    if not question["multiSelect"] and len(picked) > 1:
        problems.append(where + "single-select got %d options" % len(picked))

    other = raw.get("other")
    if other is not None and not isinstance(other, str):
        problems.append(where + "other must be a string, not %s" % describe(other))
    other = _clean_text(other)
    if other is not None and not question["allowOther"]:
        problems.append(where + "this question takes no Other answer")

    texts = raw.get("optionTexts") or {}
    option_texts = {}
    if not isinstance(texts, dict):
        problems.append(where + "optionTexts must be an object of option id to text")
        texts = {}
    for oid, text in texts.items():
        if oid not in options:
            problems.append(where + "optionTexts names unknown option id %s" % quote(oid))
        elif options[oid]["textInput"] is None:
            problems.append(where + "option %s has no text field" % quote(oid))
        elif text is not None and not isinstance(text, str):
            problems.append(where + "the text of option %s must be a string" % quote(oid))
    for oid in picked:
        text_input = options[oid]["textInput"]
        if text_input is None:
            continue
        text = _clean_text(texts.get(oid))
        if text is not None:
            option_texts[oid] = text
        elif text_input["required"]:
            problems.append(where + "option %s needs its text" % quote(oid))

    ranked = raw.get("ranked")
    if ranked is not None and ranked != []:
        if question["kind"] != "rank":
            problems.append(where + "ranked applies only to rank questions")
            ranked = None
        elif not isinstance(ranked, list):
            problems.append(where + "ranked must be an array of option ids")
            ranked = None
        else:
            parts = permutation_problems(ranked, option_order)
            if parts:
                problems.append(
                    where + "ranked must list every option id exactly once (%s)" % "; ".join(parts)
                )
                ranked = None
    else:
        ranked = None

    answered = bool(ranked) if question["kind"] == "rank" else bool(picked or other)
    if not answered:
        return unanswered(notes)
    return {
        "status": "answered",
        "selected": picked,
        "optionTexts": option_texts,
        "other": other,
        "ranked": ranked,
        "notes": notes,
    }


def iso_utc(timestamp: float) -> str:
    """2026-11-30T09:21:37.123Z"""
    whole = int(timestamp)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + ".%03dZ" % int(
        (timestamp - whole) * 1000
    )


def build_result(
    spec: dict,
    answers: dict,
    general_notes,
    *,
    interview_id: str,
    status: str,
    via: str,
    submitted_at: float,
    duration_seconds: float,
    attachments=None,
    archive_path=None,
) -> dict:
    """The structuredContent of a settled interview, `summary` first, every field in full.
    `attachments` maps a question id ("" for the general notes) to the uploads the user attached
    there; `archive_path` is the archive file that holds the result (None: not written)."""
    attachments = attachments or {}
    rows = []
    counts = {"answered": 0, "deferred": 0, "needsInfo": 0, "unanswered": 0}
    count_key = {
        "answered": "answered",
        "deferred": "deferred",
        "needs-info": "needsInfo",
        "unanswered": "unanswered",
    }
    for question in spec["questions"]:
        answer = answers.get(question["id"]) or unanswered()
        labels = {option["id"]: option["label"] for option in question["options"]}
        counts[count_key[answer["status"]]] += 1
        ranked = answer["ranked"]
        rows.append(
            {
                "id": question["id"],
                "header": question["header"],
                "status": answer["status"],
                "selected": list(answer["selected"]),
                "selectedLabels": [labels[oid] for oid in answer["selected"]],
                "optionTexts": dict(answer["optionTexts"]),
                "other": answer["other"],
                "ranked": list(ranked) if ranked else None,
                "rankedLabels": [labels[oid] for oid in ranked] if ranked else None,
                "notes": answer["notes"],
                "followedRecommendation": followed_recommendation(question, answer),
                "attachments": list(attachments.get(question["id"], [])),
            }
        )
    result = {
        "summary": "",
        "interviewId": interview_id,
        "title": spec["title"],
        "status": status,
        "via": via,
        "submittedAt": iso_utc(submitted_at),
        "durationSeconds": max(0, int(round(duration_seconds))),
        "counts": counts,
        "generalNotes": _clean_text(general_notes),
        "generalAttachments": list(attachments.get("", [])),
        "archivePath": archive_path,
        "answers": rows,
    }
    result["summary"] = summarize(result, spec)
    return result


def with_archive_path(result: dict, spec: dict, path) -> dict:
    """The result naming `path` (None: the archive could not be written) as its archive."""
    result = dict(result, archivePath=path)
    result["summary"] = summarize(result, spec)
    return result


# A result whose JSON passes this many characters is sent compact. Claude Code keeps the model's
# copy of a tool result inline only up to a size per tool (above it the model gets a 2 KB preview
# and a file path), and every client pays for the result in the agent's context.
COMPACT_ABOVE_CHARS = 40000


def compact_json(value) -> str:
    """JSON as Claude Code hands structuredContent to the model: no spaces, Unicode as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def fit_result(result: dict, spec: dict) -> dict:
    """What the agent receives: the result as it is while both its JSON and its text blocks
    stay within COMPACT_ABOVE_CHARS, else the compact form (the archive keeps every field)."""
    full = {key: value for key, value in result.items() if key != "summary"}
    text_size = len(result["summary"]) + len(pretty_result_json(full))
    if len(compact_json(result)) <= COMPACT_ABOVE_CHARS and text_size <= COMPACT_ABOVE_CHARS:
        return result
    return compact_result(result, spec)


def compact_result(result: dict, spec: dict) -> dict:
    """Rows without their header and without any null, [] or {} field; a summary of only the
    answers that need the agent's attention; `compact: true`."""
    compact = dict(result, compact=True)
    compact["answers"] = [
        {key: value for key, value in row.items()
         if key != "header" and value is not None and value != [] and value != {}}
        for row in result["answers"]
    ]
    compact["summary"] = summarize(result, spec, compact=True)
    return compact


def needs_attention(row: dict) -> bool:
    """Anything but an answer exactly as recommended, with nothing typed or attached."""
    return not (
        row["followedRecommendation"] is True
        and not row["notes"]
        and not row["optionTexts"]
        and not row.get("attachments")
    )


def followed_recommendation(question: dict, answer: dict):
    if not question["recommended"] or answer["status"] != "answered":
        return None
    if question["kind"] == "rank":
        return answer["ranked"] == question["recommended"]
    return answer["other"] is None and set(answer["selected"]) == set(question["recommended"])


def cut(text: str, limit: int) -> str:
    """Whitespace runs collapsed to one space, then cut to `limit` characters with '…'."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_duration(seconds: float) -> str:
    """42s, 3m05s, 1h02m05s."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return "%dh%02dm%02ds" % (hours, minutes, secs)
    if minutes:
        return "%dm%02ds" % (minutes, secs)
    return "%ds" % secs


def summarize(result: dict, spec: dict, compact: bool = False) -> str:
    """The text the model reads first: one line per question, cut for a glance. Compact: one
    line per question that needs attention, and the ids of the rest on one line."""
    counts = result["counts"]
    title = quote(cut(result["title"], CUT_HEADER))
    tally = "%d answered, %d deferred, %d need more info, %d unanswered." % (
        counts["answered"],
        counts["deferred"],
        counts["needsInfo"],
        counts["unanswered"],
    )
    if result["status"] == "submitted":
        head = "%s submitted after %s via %s: %s" % (
            title,
            format_duration(result["durationSeconds"]),
            result["via"],
            tally,
        )
    else:
        head = "%s %s via %s: %s" % (title, result["status"], result["via"], tally)
    questions = {q["id"]: q for q in spec["questions"]}
    lines = [head]
    followed = []
    for number, row in enumerate(result["answers"], 1):
        if compact and not needs_attention(row):
            followed.append(row["id"])
            continue
        question = questions.get(row["id"])
        lines.append(
            "%d. [%s] %s -> %s"
            % (number, row["id"], cut(row["header"], CUT_HEADER), _summary_answer(row, question))
        )
    if followed:
        lines.append("Followed the recommendation (%d): %s" % (len(followed), ", ".join(followed)))
    general = result.get("generalAttachments")
    if result["generalNotes"] or general:
        text = quote(cut(result["generalNotes"], CUT_GENERAL)) if result["generalNotes"] else "none"
        lines.append("General notes: %s%s" % (text, attachment_names(general)))
    if not compact:
        lines.append("Full answers (JSON) follow; notes are untruncated there.")
    lines.append(archive_line(result.get("archivePath")))
    return "\n".join(lines)


def archive_line(path) -> str:
    if path is None:
        return "Everything, as JSON: none (the answer archive could not be written)."
    return "Everything, as JSON: %s" % path


def _summary_answer(row: dict, question) -> str:
    status = row["status"]
    if status == "deferred":
        text = "DEFERRED"
    elif status == "needs-info":
        text = "NEEDS-INFO"
    elif status == "unanswered":
        text = "UNANSWERED"
    elif row["ranked"]:
        text = " > ".join(row["rankedLabels"])
    else:
        parts = []
        for oid, label in zip(row["selected"], row["selectedLabels"]):
            typed = row["optionTexts"].get(oid)
            parts.append("%s [%s]" % (label, cut(typed, CUT_OTHER)) if typed else label)
        if row["other"] is not None:
            parts.append("Other: %s" % quote(cut(row["other"], CUT_OTHER)))
        text = ", ".join(parts)
    if row["followedRecommendation"] is True:
        text += " (recommended)"
    elif row["followedRecommendation"] is False and question is not None:
        labels = {option["id"]: option["label"] for option in question["options"]}
        joiner = " > " if question["kind"] == "rank" else ", "
        text += " (recommended was %s)" % joiner.join(
            labels.get(oid, oid) for oid in question["recommended"]
        )
    if row["notes"]:
        text += " | notes: %s" % quote(cut(row["notes"], CUT_NOTES))
    return text + attachment_names(row.get("attachments"))


def attachment_names(attachments) -> str:
    """` | attachments: a.png, b.log` for a summary line, or "" (archives from before
    attachments have none)."""
    if not attachments:
        return ""
    return " | attachments: " + ", ".join(entry["name"] for entry in attachments)


# ============================================================================================
# Logs and the answer archive
# ============================================================================================

def json_utf8(value, indent=None) -> bytes:
    """JSON as UTF-8, readable where it can be. JSON may carry a lone surrogate ("\\ud800" is a
    legal escape), which UTF-8 cannot encode: then every non-ASCII character is escaped instead.
    (Encoding it strictly made a submit holding one crash without an answer, every time.)"""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, indent=indent).encode("ascii")


def redact(token: str) -> str:
    """A token as it may appear in a log: its first 4 characters, never the live bearer."""
    return token[:4] + "…"


class Log:
    """server.log plus stderr, one line per event: time, pid, event, key=value pairs.

    A log directory that cannot be written degrades to stderr only, with one warning: logging
    must never break a call.
    """

    def __init__(self, log_dir: str, stream=None) -> None:
        self.log_dir = log_dir
        self.stream = stream if stream is not None else sys.stderr
        self.lock = threading.Lock()
        self.listener = None  # called with (level, event, fields); the MCP server forwards them
        self.file = None
        try:
            os.makedirs(log_dir, mode=0o700, exist_ok=True)
            self.file = open(os.path.join(log_dir, "server.log"), "a", encoding="utf-8")
        except OSError as error:
            self._warn_degraded(error)

    def _warn_degraded(self, error: OSError) -> None:
        self._write_stderr(
            "%s %d log-degraded dir=%s error=%s (logging to stderr only)"
            % (iso_utc(time.time()), os.getpid(), quote(self.log_dir), quote(str(error)))
        )

    def _write_stderr(self, line: str) -> None:
        try:
            self.stream.write("[ask-user-rich] " + line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def event(self, event: str, level: str = "info", **fields) -> None:
        pairs = " ".join("%s=%s" % (key, _log_value(value)) for key, value in fields.items())
        line = "%s %d %s%s" % (iso_utc(time.time()), os.getpid(), event, " " + pairs if pairs else "")
        # A lone surrogate in a logged value (a title, an id) failed the UTF-8 write and turned
        # file logging off for good; write it as an escape instead.
        line = line.encode("utf-8", "backslashreplace").decode("utf-8")
        with self.lock:
            if self.file is not None:
                try:
                    self.file.write(line + "\n")
                    self.file.flush()
                except (OSError, ValueError) as error:
                    self.file = None
                    self._warn_degraded(error)
            self._write_stderr(line)
        listener = self.listener
        if listener is not None:
            listener(level, event, fields)

    def find_line(self, text: str):
        """The first line of server.log holding `text`, or None (also when there is no file)."""
        try:
            with open(os.path.join(self.log_dir, "server.log"), encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if text in line:
                        return line
        except OSError:
            pass
        return None

    def close(self) -> None:
        with self.lock:
            if self.file is not None:
                try:
                    self.file.close()
                except OSError:
                    pass
                self.file = None


LOG_VALUE_MAX = 1000  # a client's 15 MB request id or title must not become a 15 MB log line


def _log_value(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > LOG_VALUE_MAX:
        text = text[: LOG_VALUE_MAX - 1] + "…"
    if not text or any(ch.isspace() or ch in "\"=" for ch in text):
        return quote(text)
    return text


def sync_directory(folder: str) -> None:
    """Make a rename or removal in `folder` survive a crash, where POSIX allows it."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


class Archive:
    """answers/<submittedAt>-<interviewId>.json: every settled result, durable before the ack."""

    def __init__(self, log_dir: str, log: Log) -> None:
        self.directory = os.path.join(log_dir, "answers")
        self.log = log

    def path_for(self, interview_id: str, submitted_at: str) -> str:
        """Where save() puts the record of this interview settled at that time (absolute)."""
        stamp = submitted_at.replace(":", "-").replace(".", "-")
        return os.path.abspath(os.path.join(self.directory, "%s-%s.json" % (stamp, interview_id)))

    def save(self, record: dict) -> str | None:
        """Write atomically (temp file, fsync, rename); the path, or None if it could not be."""
        path = self.path_for(record["interviewId"], record["submittedAt"])
        temporary = path + ".tmp"
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            # O_EXCL | O_NOFOLLOW: never write the answers through a file or symlink someone
            # planted under the temporary name (a log dir set to a shared place such as /tmp).
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            descriptor = os.open(temporary, flags, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(json_utf8(record, indent=2))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
            sync_directory(self.directory)
        except OSError as error:
            self.log.event(
                "archive-failed", "error", interview=record["interviewId"], error=str(error)
            )
            try:
                os.unlink(temporary)
            except OSError:
                pass
            return None
        return path

    def find(self, interview_id: str) -> dict | None:
        """The newest archived record of an interview, or None."""
        if not is_session_id(interview_id):
            return None
        try:
            names = sorted(
                name
                for name in os.listdir(self.directory)
                if name.endswith("-%s.json" % interview_id)
            )
        except OSError:
            return None
        for name in reversed(names):
            try:
                with open(os.path.join(self.directory, name), encoding="utf-8") as handle:
                    record = json.load(handle)
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and record.get("interviewId") == interview_id:
                # Where it is now, whatever it said when written (older records say nothing).
                record["archivePath"] = os.path.abspath(os.path.join(self.directory, name))
                return record
        return None


# ============================================================================================
# Attachments: the files the user adds to notes
# ============================================================================================

ATTACHMENT_MAX_BYTES = 10 * 1024 * 1024
ATTACHMENTS_MAX_COUNT = 20
ATTACHMENTS_MAX_TOTAL_BYTES = 50 * 1024 * 1024
ATTACHMENT_NAME_MAX = 100
ATTACHMENT_NAME_MAX_BYTES = 200  # 100 four-byte characters would pass most file systems' 255
ATTACHMENT_CHUNK_BYTES = 64 * 1024
# The types the form may show as a thumbnail; anything else is served as a download.
ATTACHMENT_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
ATTACHMENT_NAME_RESERVED = frozenset('<>:"|?*')  # Windows refuses them in file names


def safe_attachment_name(name: str) -> str:
    """A name that is one file in its folder on any system: its last path part, without control
    characters, leading dots or dot runs, at most 100 characters; `attachment` when nothing is
    left. The extension is kept when the name is cut."""
    import unicodedata

    name = unicodedata.normalize("NFC", name).replace("\\", "/").split("/")[-1]
    name = "".join(
        "_" if ch in ATTACHMENT_NAME_RESERVED else ch
        for ch in name
        if not unicodedata.category(ch).startswith("C")
    )
    while ".." in name:
        name = name.replace("..", ".")
    name = name.strip(" .")
    stem, extension = os.path.splitext(name)
    if len(extension) > 16:
        stem, extension = name, ""
    stem = stem[: ATTACHMENT_NAME_MAX - len(extension)]
    while len((stem + extension).encode("utf-8")) > ATTACHMENT_NAME_MAX_BYTES:
        stem = stem[:-1]
    name = (stem.rstrip(" .") + extension).strip(" .") if stem.strip(" .") else ""
    return name or "attachment"


def attachment_media_type(content_type: str) -> str:
    """The upload's declared type, lower-cased, without parameters; octet-stream when it is
    missing or not a type/subtype."""
    media = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789!#$&^_.+-")
    if not (0 < len(kind) <= 64 and 0 < len(subtype) <= 64) or not set(kind + subtype) <= allowed:
        return "application/octet-stream"
    return media


class AttachmentRefused(Exception):
    """An upload, a removal or a reference the attachment store does not take."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


class AttachmentStore:
    """The files the user uploaded to one interview, in <log dir>/attachments/<interview id>/.

    Each is written to a temporary file in that folder, fsynced, then renamed, so that a 201
    means the file is on disk whole. The limits are reserved before writing starts, so that
    uploads running at once cannot pass them together.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self.files: dict = {}  # id -> {id, name, path, mimeType, bytes}
        self.reserved_count = 0
        self.reserved_bytes = 0

    def add(self, name: str, media_type: str, length: int, source) -> dict:
        """Store `length` bytes read from `source`; the upload's public description."""
        import secrets

        if length > ATTACHMENT_MAX_BYTES:
            raise AttachmentRefused(413, "a file may be at most 10 MiB")
        with self.lock:
            if self.reserved_count + 1 > ATTACHMENTS_MAX_COUNT:
                raise AttachmentRefused(
                    413, "an interview may have at most %d attachments" % ATTACHMENTS_MAX_COUNT
                )
            if self.reserved_bytes + length > ATTACHMENTS_MAX_TOTAL_BYTES:
                raise AttachmentRefused(413, "an interview's attachments may be at most 50 MiB in all")
            self.reserved_count += 1
            self.reserved_bytes += length
            attachment_id = secrets.token_hex(8)
        entry = {
            "id": attachment_id,
            "name": safe_attachment_name(name),
            "path": "",
            "mimeType": media_type,
            "bytes": length,
        }
        try:
            entry["path"] = self._write(attachment_id, entry["name"], length, source)
        except BaseException as error:
            with self.lock:
                self.reserved_count -= 1
                self.reserved_bytes -= length
            if isinstance(error, OSError):
                raise AttachmentRefused(
                    500, "the file could not be stored in %s: %s" % (quote(self.folder), error.strerror or error)
                ) from None
            raise
        with self.lock:
            self.files[attachment_id] = entry
        return entry

    def _write(self, attachment_id: str, name: str, length: int, source) -> str:
        folder = self._ensure_folder()
        path = os.path.join(folder, "%s-%s" % (attachment_id, name))
        if os.path.dirname(os.path.abspath(path)) != folder:
            raise AttachmentRefused(400, "the file name %s cannot be stored" % quote(name))
        temporary = os.path.join(folder, ".%s.part" % attachment_id)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        descriptor = os.open(temporary, flags, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                left = length
                while left:
                    try:
                        chunk = source.read(min(left, ATTACHMENT_CHUNK_BYTES))
                    except OSError:  # the page went away, or stalled past the idle timeout
                        chunk = b""
                    if not chunk:
                        raise AttachmentRefused(
                            400, "the upload ended after %d of its %d bytes" % (length - left, length)
                        )
                    handle.write(chunk)
                    left -= len(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
        sync_directory(folder)
        return path

    def _ensure_folder(self) -> str:
        """The interview's folder, made 0700 (and its parent) on the first upload; never a
        symlink someone planted in a shared log dir."""
        folder = os.path.abspath(self.folder)
        if not os.path.isdir(folder):
            parent = os.path.dirname(folder)
            os.makedirs(parent, mode=0o700, exist_ok=True)
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                pass
            sync_directory(parent)
        if os.path.islink(folder) or not os.path.isdir(folder):
            raise AttachmentRefused(500, "the attachment folder %s is not a folder" % quote(folder))
        os.chmod(folder, 0o700)
        return folder

    def get(self, attachment_id) -> dict | None:
        with self.lock:
            return self.files.get(attachment_id)

    def remove(self, attachment_id) -> None:
        with self.lock:
            entry = self.files.pop(attachment_id, None)
            if entry is None:
                raise AttachmentRefused(404, "not found")
            self.reserved_count -= 1
            self.reserved_bytes -= entry["bytes"]
        try:
            os.unlink(entry["path"])
        except FileNotFoundError:
            pass
        sync_directory(os.path.dirname(entry["path"]))

    def pick(self, raw, question_ids) -> dict:
        """A submit's `attachments` map checked: question id ("" for the general notes) -> the
        uploads it names, in order; InvalidAnswers naming every problem."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise InvalidAnswers("attachments must be an object of question id to attachment ids")
        problems = []
        picked = {}
        for qid, ids in raw.items():
            if qid != "" and qid not in question_ids:
                problems.append("attachments names unknown question id %s" % quote(qid))
                continue
            if not isinstance(ids, list) or not all(isinstance(value, str) for value in ids):
                problems.append("attachments of %s must be an array of attachment ids" % quote(qid))
                continue
            rows = []
            for value in dict.fromkeys(ids):
                entry = self.get(value)
                if entry is None:
                    problems.append("attachment %s is not one of this interview's uploads" % quote(value))
                else:
                    rows.append(dict(entry))
            picked[qid] = rows
        if problems:
            raise InvalidAnswers("; ".join(problems), problems)
        return picked


# ============================================================================================
# Interviews and the waits on them: the session hub
# ============================================================================================

def is_session_id(value) -> bool:
    return (
        isinstance(value, str)
        and len(value) == 12
        and all(ch in "0123456789abcdef" for ch in value)
    )


def token_key(token: str) -> bytes:
    """Interviews are found by a digest of their token, so that the lookup's timing does not
    depend on how much of a guessed token matches a real one."""
    import hashlib

    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class Interview:
    """One interview: its spec, its state, and the condition every wait on it uses.

    The state moves once, from pending to the result's status (submitted, declined or
    cancelled), through settle(). `revision` grows on every change that the /state JSON shows;
    the condition is also notified on form activity (progress, streams opening and closing)
    that only the progress reports use. Waiters enter and leave through waiter().
    """

    def __init__(self, interview_id: str, token: str, spec: dict, url: str,
                 attachments: AttachmentStore, options=None, agent=None) -> None:
        self.id = interview_id
        self.token = token
        self.spec = spec
        self.url = url
        self.options = options or {"delivery": "browser", "timeoutSeconds": None}
        self.agent = agent  # what the form calls the agent (agent_name()); None: "the agent"
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.created = time.time()
        self.created_monotonic = time.monotonic()
        self.version = 1
        self.note = None
        self.state = "pending"
        self.result = None
        self.settled_monotonic = None
        self.closed = False  # the server is shutting down: every wait ends
        self.waiters = 0
        self.revision = 0
        self.states: list = []  # the last STATE_HISTORY (revision, /state JSON), for streams
        self.counts = None  # the form's latest {answered, deferred, needsInfo, open}
        self.counts_revision = 0
        self.page_views = 0
        self.streams = 0
        self.attachments = attachments

    def state_json(self) -> dict:
        return {"state": self.state, "waiting": self.waiters > 0, "version": self.version}

    def form_status(self) -> str:
        if self.streams > 0:
            return "form open"
        if self.page_views or self.counts is not None:
            return "form closed"
        return "form not opened yet"

    def touch(self) -> None:
        """Record a change the /state JSON shows. Call with the lock held."""
        self.revision += 1
        # Kept so that an event stream sends every state, not only the newest: two changes
        # close together (a submit, then its waiter leaving) must reach the page as two events.
        self.states.append((self.revision, self.state_json()))
        del self.states[:-STATE_HISTORY]
        self.changed.notify_all()

    def wake(self) -> None:
        """Let every wait look at its condition again (a cancellation, a response, shutdown)."""
        with self.changed:
            self.changed.notify_all()

    def check_pending(self) -> None:
        """InterviewSettled unless the interview still takes answers. Call with the lock held."""
        if self.state != "pending":
            raise InterviewSettled(self.id, self.state)

    def settle(self, result: dict) -> None:
        """pending -> the result's status, exactly once; call with the lock held."""
        self.check_pending()
        self.result = result
        self.state = result["status"]
        self.settled_monotonic = time.monotonic()
        self.touch()

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def waiter(self, cancellation=None) -> "Waiter":
        """`with interview.waiter(cancellation) as waiter: waiter.wait(...)`: counted in the
        /state JSON while inside."""
        return Waiter(self, cancellation if cancellation is not None else Cancellation())

    def progress(self) -> dict:
        """What a progress report says, as facts; call with the lock held."""
        return {
            "title": self.spec["title"],
            "answered": (self.counts or {}).get("answered", 0),
            "total": len(self.spec["questions"]),
            "form": self.form_status(),
            "elapsedSeconds": int(time.time() - self.created),
        }


class Cancellation:
    """The flag that ends a caller's waits early (a tool call the client cancelled). It wakes
    the interview it is waiting on, if any."""

    def __init__(self) -> None:
        self.is_set = False
        self.watched = None

    def cancel(self) -> None:
        self.is_set = True
        interview = self.watched
        if interview is not None:
            interview.wake()


class Waiter:
    """One wait on an interview (a tool call, an elicitation, the command line)."""

    def __init__(self, interview: Interview, cancellation: Cancellation) -> None:
        self.interview = interview
        self.cancellation = cancellation

    def __enter__(self) -> "Waiter":
        self.cancellation.watched = self.interview
        with self.interview.changed:
            self.interview.waiters += 1
            self.interview.touch()
        return self

    def __exit__(self, *exc_info) -> None:
        with self.interview.changed:
            self.interview.waiters -= 1
            self.interview.touch()
        self.cancellation.watched = None

    def wait(self, timeout=None, answered=None) -> str:
        """Block until the first of: "answered" (`answered()` turned true; checked with the
        lock held, so whoever makes it true must notify the condition), "settled",
        "cancelled", "shutdown", "timeout"."""
        interview = self.interview
        deadline = None if timeout is None else time.monotonic() + timeout
        with interview.changed:
            while True:
                if answered is not None and answered():
                    return "answered"
                if interview.state != "pending":
                    return "settled"
                if self.cancellation.is_set:
                    return "cancelled"
                if interview.closed:
                    return "shutdown"
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return "timeout"
                interview.changed.wait(remaining)


class ProgressTicker:
    """Reports an interview's progress from a thread of its own while a waiter waits: at once,
    then every `interval` seconds, and when the form's counts change (at most once a second).
    `report(facts, first)` runs with no lock held; leaving the `with` block returns only once
    no report is running, so nothing is reported after the waiter's result."""

    def __init__(self, interview: Interview, report, interval: float) -> None:
        self.interview = interview
        self.report = report
        self.interval = interval
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="ask-user-rich-progress", daemon=True)

    def __enter__(self) -> "ProgressTicker":
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        with self.interview.changed:
            self.stopped = True
            self.interview.changed.notify_all()
        self.thread.join()

    def _due(self, seen_counts: int, last_sent: float, next_tick: float):
        """None when a report is due now, else how long to sleep. Call with the lock held."""
        now = time.monotonic()
        if now >= next_tick:
            return None
        wake = next_tick
        if self.interview.counts_revision != seen_counts:
            if now - last_sent >= PROGRESS_CHANGE_MIN_SECONDS:
                return None
            wake = min(wake, last_sent + PROGRESS_CHANGE_MIN_SECONDS)
        return wake - now

    def _run(self) -> None:
        interview = self.interview
        seen_counts, last_sent, next_tick = -1, float("-inf"), time.monotonic()
        while True:
            with interview.changed:
                while True:
                    if self.stopped:
                        return
                    sleep = self._due(seen_counts, last_sent, next_tick)
                    if sleep is None:
                        break
                    interview.changed.wait(sleep)
                seen_counts = interview.counts_revision
                facts = interview.progress()
            self.report(facts, last_sent == float("-inf"))
            last_sent = time.monotonic()
            next_tick = last_sent + self.interval


class SessionHub:
    """Every interview of this process, by id and by token digest."""

    def __init__(self, log: Log, archive: Archive) -> None:
        self.log = log
        self.archive = archive
        self.lock = threading.Lock()
        self.by_id: dict = {}
        self.by_token: dict = {}
        self.closed = False

    # -- lifecycle ------------------------------------------------------------------------

    def create(self, spec: dict, base_url: str, options=None, agent=None) -> Interview:
        import secrets

        for question in spec["questions"]:
            question["version"] = 1
        with self.lock:
            interview_id = secrets.token_hex(6)
            while interview_id in self.by_id:
                interview_id = secrets.token_hex(6)
            token = secrets.token_urlsafe(18)
            store = AttachmentStore(os.path.join(self.log.log_dir, "attachments", interview_id))
            url = "%s/s/%s" % (base_url, token)
            interview = Interview(interview_id, token, spec, url, store, options, agent)
            self.by_id[interview_id] = interview
            self.by_token[token_key(token)] = interview
        self.log.event(
            "session-created",
            interview=interview_id,
            token=redact(token),
            questions=len(spec["questions"]),
            title=spec["title"],
        )
        return interview

    def _purge_expired(self) -> None:
        """Drop interviews settled more than 30 minutes ago (their archive remains)."""
        horizon = time.monotonic() - SETTLED_RETENTION_SECONDS
        with self.lock:
            expired = [
                interview
                for interview in self.by_id.values()
                if interview.settled_monotonic is not None
                and interview.settled_monotonic < horizon
            ]
            for interview in expired:
                del self.by_id[interview.id]
                del self.by_token[token_key(interview.token)]
        for interview in expired:
            self.log.event("session-expired", interview=interview.id)
            with interview.changed:
                interview.touch()

    def get(self, interview_id) -> Interview | None:
        self._purge_expired()
        if not isinstance(interview_id, str):
            return None
        with self.lock:
            return self.by_id.get(interview_id)

    def require(self, interview_id) -> Interview:
        """The interview, or UnknownInterview."""
        interview = self.get(interview_id)
        if interview is None:
            raise UnknownInterview(interview_id)
        return interview

    def find_by_token(self, token: str) -> Interview | None:
        import hmac

        self._purge_expired()
        with self.lock:
            interview = self.by_token.get(token_key(token))
        if interview is None or not hmac.compare_digest(
            interview.token.encode("ascii"), token.encode("utf-8", "surrogatepass")
        ):
            return None
        return interview

    def is_live(self, interview: Interview) -> bool:
        with self.lock:
            return self.by_id.get(interview.id) is interview and not self.closed

    def close(self) -> None:
        """Stop every wait and every event stream."""
        with self.lock:
            self.closed = True
            interviews = list(self.by_id.values())
        for interview in interviews:
            interview.close()

    # -- changes from the agent -----------------------------------------------------------

    def append(self, interview_id, raw_questions, note) -> dict:
        interview = self.require(interview_id)
        with interview.changed:
            interview.check_pending()
            existing = [question["id"] for question in interview.spec["questions"]]
            questions = validate_follow_ups(raw_questions, note, existing)
            interview.version += 1
            for question in questions:
                question["version"] = interview.version
            interview.spec["questions"].extend(questions)
            if note is not None and note.strip():
                interview.note = {"version": interview.version, "text": note}
            interview.touch()
            reply = {
                "status": "appended",
                "sessionId": interview.id,
                "appended": len(questions),
                "total": len(interview.spec["questions"]),
                "version": interview.version,
                "url": interview.url,
            }
        self.log.event(
            "questions-appended",
            interview=interview.id,
            appended=len(questions),
            total=reply["total"],
            version=reply["version"],
        )
        return reply

    # -- changes from the form ------------------------------------------------------------

    def record_page_view(self, interview: Interview, user_agent: str) -> None:
        with interview.changed:
            interview.page_views += 1
            interview.changed.notify_all()
        self.log.event("page-view", interview=interview.id, user_agent=user_agent)

    def record_stream(self, interview: Interview, delta: int) -> None:
        with interview.changed:
            interview.streams += delta
            interview.changed.notify_all()

    def record_counts(self, interview: Interview, counts: dict) -> None:
        with interview.changed:
            if counts != interview.counts:
                interview.counts = counts
                interview.counts_revision += 1
                interview.changed.notify_all()
        self.log.event("form-progress", "debug", interview=interview.id, **counts)

    def check_pending(self, interview: Interview) -> None:
        """InterviewSettled unless the interview still takes a submit."""
        with interview.lock:
            interview.check_pending()

    def submit(self, interview: Interview, payload) -> dict:
        """Check, archive durably, settle, wake every waiter; the reply for the form."""
        if not isinstance(payload, dict) or not isinstance(payload.get("answers"), dict):
            raise InvalidAnswers("payload must be an object with an answers object")
        with interview.changed:
            interview.check_pending()
            version = payload.get("specVersion")
            if version is not None and (
                isinstance(version, bool) or not isinstance(version, int) or version != interview.version
            ):
                raise StaleVersion(interview.version)
            answers = check_submission(interview.spec, payload)
            question_ids = {question["id"] for question in interview.spec["questions"]}
            attached = interview.attachments.pick(payload.get("attachments"), question_ids)
            general_notes = payload.get("generalNotes")
            if general_notes is not None and not isinstance(general_notes, str):
                raise InvalidAnswers("generalNotes must be a string")
            declined = payload.get("declined", False)
            if not isinstance(declined, bool):
                raise InvalidAnswers("declined must be true or false, not %s" % describe(declined))
            status = "declined" if declined else "submitted"
            delivered = interview.waiters > 0
            path = self._settle(interview, answers, general_notes, status, "browser", attached)
            counts = interview.result["counts"]
        self._log_archived(interview, path)
        self.log.event(status, interview=interview.id, delivered=delivered, **counts)
        return {"ok": True, "counts": counts, "delivered": delivered}

    def settle_without_form(self, interview: Interview, answers: dict, status: str, via: str):
        """Settle through another channel (a native elicitation); None if already settled."""
        with interview.changed:
            if interview.state != "pending":
                return None
            path = self._settle(interview, answers, None, status, via)
            result = interview.result
        self._log_archived(interview, path)
        return result

    def _settle(self, interview: Interview, answers, general_notes, status: str, via: str,
                attachments=None):
        """Call with the lock held: the archive is durable before anyone is told. The
        archive's path, or None when it could not be written."""
        now = time.time()
        result = build_result(
            interview.spec,
            answers,
            general_notes,
            interview_id=interview.id,
            status=status,
            via=via,
            submitted_at=now,
            duration_seconds=now - interview.created,
            attachments=attachments,
            archive_path=self.archive.path_for(interview.id, iso_utc(now)),
        )
        record = {key: value for key, value in result.items() if key != "summary"}
        record["interview"] = interview.spec
        path = self.archive.save(record)
        if path != result["archivePath"]:
            result = with_archive_path(result, interview.spec, path)
        interview.settle(fit_result(result, interview.spec))
        return path

    def _log_archived(self, interview: Interview, path) -> None:
        self.log.event("archived" if path else "archive-skipped", interview=interview.id, path=path)

    # -- waiting --------------------------------------------------------------------------

    def wait(self, interview: Interview, cancellation=None, timeout=None, report=None, interval=15.0):
        """Block until the interview settles; (result, why) with why one of "settled",
        "timeout", "cancelled", "shutdown". With `report`, a ProgressTicker calls
        `report(facts, first)` meanwhile."""
        self.log.event(
            "wait-start",
            interview=interview.id,
            timeout=timeout,
            progressToken="present" if report else "absent",
        )
        try:
            with interview.waiter(cancellation) as waiter:
                if report is None:
                    why = waiter.wait(timeout)
                else:
                    with ProgressTicker(interview, report, interval):
                        why = waiter.wait(timeout)
        finally:
            self.log.event("wait-end", interview=interview.id)
        return (interview.result if why == "settled" else None), why


# ============================================================================================
# JSON-RPC over stdio: one message a line, parsed strictly
# ============================================================================================

class JsonRpcError(Exception):
    def __init__(self, code: int, message: str, data=None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class LineWriter:
    """Whole JSON-RPC lines to the client, one write at a time.

    send() writes at once from the calling thread, which must hold no hub or interview lock.
    post() only queues the line for a thread of this writer's own: the log forwarding uses it,
    because log events come from the form server's threads, and a client that stops reading
    stdout must never stall a page, /state or a submit. Queued lines go out, in order, once
    the client reads again.
    """

    def __init__(self, stream, on_broken) -> None:
        from collections import deque

        self.stream = stream
        self.on_broken = on_broken
        self.lock = threading.Lock()
        self.queued = deque()
        self.queue_changed = threading.Condition()
        self.poster = None
        self.broken = False

    def send(self, message) -> None:
        data = (json.dumps(message) + "\n").encode("utf-8")
        with self.lock:
            if self.broken:
                return
            try:
                self.stream.write(data)
                self.stream.flush()
            except (OSError, ValueError):
                self.broken = True
        if self.broken:
            self.on_broken()  # the client is gone

    def post(self, message) -> None:
        with self.queue_changed:
            self.queued.append(message)
            if self.poster is None:
                self.poster = threading.Thread(target=self._post_queued, name="ask-user-rich-writer", daemon=True)
                self.poster.start()
            self.queue_changed.notify_all()

    def _post_queued(self) -> None:
        while True:
            with self.queue_changed:
                while not self.queued:
                    self.queue_changed.wait()
                message = self.queued[0]
            self.send(message)
            with self.queue_changed:
                self.queued.popleft()
                self.queue_changed.notify_all()

    def drain(self, timeout: float) -> None:
        """Wait (a bounded time) until every posted line is out."""
        deadline = time.monotonic() + timeout
        with self.queue_changed:
            while self.queued and not self.broken:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self.queue_changed.wait(remaining)


class JsonRpcStdio:
    """JSON-RPC 2.0 over a pair of byte streams, one message a line: framing, batches, ids,
    the responses to our own requests, notifications, and the cancellation of calls in flight.

    stdin is read on its own thread. `handler.handle_request(request_id, method, params)`
    returns the result, or None when the request is answered later (see begin_call);
    `handler.handle_notification(method, params)` takes the rest.
    """

    def __init__(self, reader, writer, log: Log, handler) -> None:
        self.reader = reader
        self.out = LineWriter(writer, self.stop)
        self.log = log
        self.handler = handler
        self.lock = threading.Lock()
        self.calls: dict = {}  # request id -> Cancellation, for requests answered later
        self.requests: dict = {}  # our request id -> callback(response message)
        self.request_counter = 0
        self.stopped = threading.Event()
        self.reader_thread = None

    # -- the loop -------------------------------------------------------------------------

    def serve(self) -> None:
        """Read until EOF or stop()."""
        self.reader_thread = threading.Thread(target=self.read_loop, name="ask-user-rich-stdin", daemon=True)
        self.reader_thread.start()
        self.stopped.wait()
        self.out.drain(1.0)

    def stop(self) -> None:
        self.stopped.set()

    def read_loop(self) -> None:
        try:
            for line in bounded_lines(self.reader, MAX_LINE_BYTES):
                if self.stopped.is_set():
                    break
                self.handle_line(line)
        except (OSError, ValueError) as error:
            self.log.event("stdin-error", "error", error=str(error))
        finally:
            self.log.event("stdin-closed")
            self.stop()

    def handle_line(self, line) -> None:
        if line is None:  # longer than MAX_LINE_BYTES; skipped without being held
            return self.send(rpc_error(None, -32700, "Parse error: line longer than %d bytes" % MAX_LINE_BYTES))
        if not line.strip():
            return None
        try:
            message = parse_json(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            return self.send(rpc_error(None, -32700, "Parse error: %s" % error))
        if isinstance(message, list):
            if not message:
                return self.send(rpc_error(None, -32600, "Invalid Request: empty batch"))
            replies = [reply for reply in map(self.handle_message, message) if reply is not None]
            if replies:
                self.send(replies)
            return None
        reply = self.handle_message(message)
        if reply is not None:
            self.send(reply)
        return None

    # -- writing --------------------------------------------------------------------------

    def send(self, message) -> None:
        self.out.send(message)

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def respond(self, request_id, result) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    # -- one message ----------------------------------------------------------------------

    def handle_message(self, message):
        """The reply to one message (None for notifications, responses and deferred calls)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return rpc_error(_request_id(message), -32600, "Invalid Request: not a JSON-RPC 2.0 message")
        method = message.get("method")
        has_id = "id" in message
        if method is None:
            if has_id and ("result" in message or "error" in message):
                self.handle_response(message)
                return None
            return rpc_error(_request_id(message), -32600, "Invalid Request: no method")
        if not isinstance(method, str):
            return rpc_error(_request_id(message), -32600, "Invalid Request: method must be a string")
        params = message.get("params", {})
        if not has_id:
            self.handle_notification(method, params if isinstance(params, dict) else {})
            return None
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int, float)) and request_id is not None:
            return rpc_error(None, -32600, "Invalid Request: id must be a string or a number")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return rpc_error(request_id, -32602, "Invalid params: params must be an object")
        try:
            result = self.handler.handle_request(request_id, method, params)
        except JsonRpcError as error:
            return rpc_error(request_id, error.code, error.message, error.data)
        except Exception as error:  # a bug must not take the server down
            self.log.event("internal-error", "error", method=method, error=repr(error)[:300])
            return rpc_error(request_id, -32603, "Internal error: %s" % error)
        return None if result is None else {"jsonrpc": "2.0", "id": request_id, "result": result}

    def handle_notification(self, method: str, params: dict) -> None:
        if method == "notifications/cancelled":
            with self.lock:
                cancellation = self.calls.get(_hashable(params.get("requestId")))
            if cancellation is not None:
                self.log.event("call-cancelled", request=str(params.get("requestId")))
                cancellation.cancel()
            return
        self.handler.handle_notification(method, params)

    def handle_response(self, message: dict) -> None:
        with self.lock:
            callback = self.requests.pop(_hashable(message.get("id")), None)
        if callback is not None:
            callback(message)

    # -- calls answered later, and requests of our own ------------------------------------

    def begin_call(self, request_id) -> Cancellation:
        """Register a request answered later; notifications/cancelled for it sets the flag."""
        key = _hashable(request_id)
        with self.lock:
            if key in self.calls:
                raise JsonRpcError(-32600, "Invalid Request: request id %s is already in use" % describe(request_id))
            cancellation = Cancellation()
            self.calls[key] = cancellation
        return cancellation

    def end_call(self, request_id, cancellation: Cancellation) -> None:
        """Forget a call registered by begin_call (only that one: its id may be in use again)."""
        key = _hashable(request_id)
        with self.lock:
            if self.calls.get(key) is cancellation:
                del self.calls[key]

    def request(self, method: str, params: dict, on_response) -> str:
        """Send a request to the client; `on_response(message)` runs on the stdin thread when
        its response comes. Our ids are strings never reused."""
        with self.lock:
            self.request_counter += 1
            request_id = "srv-%d" % self.request_counter
            self.requests[request_id] = on_response
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def forget(self, request_id: str) -> None:
        with self.lock:
            self.requests.pop(request_id, None)


def _hashable(value):
    """Request ids as dict keys: 1 and 1.0 are one id, "1" another."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, (str, int, float)) and not isinstance(value, bool) else repr(value)


def _request_id(message):
    """The id of a message, when it is one a response may carry; else None."""
    if isinstance(message, dict):
        value = message.get("id")
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return value
    return None


def rpc_error(request_id, code: int, message: str, data=None) -> dict:
    error = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _reject_constant(name: str):
    raise ValueError("%s is not valid JSON" % name)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number %s is too large" % text[:40])
    return value


def parse_json(text: str):
    """json.loads, strictly: Python accepts NaN, Infinity and 1e999 by default, and would echo
    such an id back as a line that is not JSON."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)


def bounded_lines(stream, limit: int):
    """Lines of a binary stream; a line longer than `limit` yields None and is skipped in
    chunks, never held whole in memory."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while True:
                rest = stream.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


# ============================================================================================
# The form's files: read from a checkout or from the running askrich.pyz
# ============================================================================================

def read_asset(name: str) -> bytes:
    """One file of assets/, read the same way from a checkout and from inside askrich.pyz;
    OSError when it cannot be had."""
    parts = name.split("/")
    loader = globals().get("__loader__")
    archive = getattr(loader, "archive", None)
    if archive:
        # Through the zip this process runs from, never a path remembered in compiled code:
        # the code cache is shared by every copy of the same archive, wherever each one is.
        try:
            if RUNNING_ARCHIVE is not None and RUNNING_ARCHIVE.changed():
                return RUNNING_ARCHIVE.read("/".join(["assets"] + parts))
            return loader.get_data(os.path.join(archive, "assets", *parts))
        except OSError:
            raise
        except Exception as error:  # zipimport's, zlib's or zipfile's word for a damaged zip
            raise OSError("cannot read %s from %s: %s" % (name, archive, error)) from error
    # Beside the real file: askrich.py may be run through a symlink on the PATH.
    folder = os.path.dirname(os.path.realpath(__file__))
    with open(os.path.join(folder, "assets", *parts), "rb") as handle:
        return handle.read()


class RunningArchive:
    """The zip a server process runs from, held open from its start. zipimport reads a member
    by the path and the offsets it found at start, so once a release is installed over the
    archive, or the archive is moved away, while the server runs, its form's files are read
    from the file held here instead: the bytes this server started with while any name still
    holds them, else the whole of what replaced them in place."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.handle = open(path, "rb")
        self.stamp = self.stamp_of(os.fstat(self.handle.fileno()))
        self.lock = threading.Lock()

    @staticmethod
    def stamp_of(status) -> tuple:
        return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)

    def changed(self) -> bool:
        try:
            return self.stamp_of(os.stat(self.path)) != self.stamp
        except OSError:
            return True

    def read(self, member: str) -> bytes:
        import zipfile

        with self.lock:  # one file position for every thread of the form server
            self.handle.seek(0)
            with zipfile.ZipFile(self.handle) as archive:
                return archive.read(member)


RUNNING_ARCHIVE = None  # a RunningArchive while a stdio server runs from askrich.pyz on POSIX


def hold_running_archive() -> None:
    """Open RUNNING_ARCHIVE when this process runs from a zip. Not on Windows, where a file held
    open cannot be replaced: that would keep users from installing an update."""
    global RUNNING_ARCHIVE
    archive = getattr(globals().get("__loader__"), "archive", None)
    if archive and os.name == "posix" and RUNNING_ARCHIVE is None:
        try:
            RUNNING_ARCHIVE = RunningArchive(os.path.abspath(archive))
        except OSError:
            pass  # already gone: zipimport's own reads are all there is


# ============================================================================================
# HTTP form server
# ============================================================================================
#
# http.server is imported on first use (it pulls in email, html, socketserver, ...), so the
# server classes are built by a function the first time a form is needed.

TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
MAX_PROGRESS_BYTES = 64 * 1024
NOT_FOUND_TEXT = "Interview not found or expired."
JSON_CONTENT_TYPE = "application/json; charset=utf-8"


class Reply:
    """What a route answers: a status, its own headers and a body (bytes, or a file opened for
    reading, sent in chunks and closed). The request handler adds the security headers every
    response carries, and sends no body to HEAD."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers=None, body=b"") -> None:
        self.status = status
        self.headers = dict(headers or {})
        self.body = body


class EventStream:
    """What the events route answers instead of a Reply: the request handler keeps the
    connection and writes the interview's states to it until the page or the server goes."""

    __slots__ = ("interview",)

    def __init__(self, interview) -> None:
        self.interview = interview


class HttpRefusal(Exception):
    """A request refused with a JSON error; raised by routing, body reading and routes."""

    def __init__(self, status: int, error: str, headers=None, **fields) -> None:
        super().__init__(error)
        self.status = status
        self.headers = dict(headers or {})
        self.body = dict({"error": error}, **fields)

    def reply(self) -> Reply:
        return json_reply(self.status, self.body, self.headers)


def json_reply(status: int, payload, headers=None) -> Reply:
    return Reply(status, dict({"Content-Type": JSON_CONTENT_TYPE}, **(headers or {})), json_utf8(payload))


def text_reply(status: int, text: str) -> Reply:
    return Reply(status, {"Content-Type": "text/plain; charset=utf-8"}, text.encode("utf-8"))


def find_interview(hub, token: str):
    if not token or len(token) > 64 or not set(token) <= TOKEN_CHARS:
        return None
    return hub.find_by_token(token)


def api_interview(request, params: dict):
    """The interview a /api/s/<token>/... route names, or a 404."""
    interview = find_interview(request.runtime.hub, params["token"])
    if interview is None:
        raise HttpRefusal(404, "not found")
    return interview


def require_json_body(request) -> None:
    if not is_json_media_type(request.headers.get("Content-Type", "")):
        raise HttpRefusal(415, "expected application/json")


# -- routes -----------------------------------------------------------------------------------
#
# Each takes the request (its runtime, headers and body readers) and the path's parameters,
# and returns a Reply (or an EventStream), or raises HttpRefusal.


def route_form_page(request, params: dict):
    interview = find_interview(request.runtime.hub, params["token"])
    if interview is None:
        return text_reply(404, NOT_FOUND_TEXT)
    request.runtime.hub.record_page_view(interview, request.headers.get("User-Agent", "")[:200])
    return route_asset(request, {"name": "form.html"})


def route_asset(request, params: dict):
    name = params["name"]
    if name not in ASSET_FILES:
        raise HttpRefusal(404, "not found")
    try:
        body = read_asset(name)
    except OSError:
        raise HttpRefusal(404, "not found") from None
    content_type = ASSET_CONTENT_TYPES.get(os.path.splitext(name)[1], "application/octet-stream")
    return Reply(200, {"Content-Type": content_type}, body)


def route_interview(request, params: dict):
    return json_reply(200, request.runtime.form_payload(api_interview(request, params)))


def route_state(request, params: dict):
    interview = api_interview(request, params)
    with interview.lock:
        state = interview.state_json()
    return json_reply(200, state)


def route_events(request, params: dict):
    return EventStream(api_interview(request, params))


def route_progress(request, params: dict):
    interview = api_interview(request, params)
    require_json_body(request)
    counts = progress_counts(request.read_json(MAX_PROGRESS_BYTES))
    if counts is None:
        raise HttpRefusal(422, "progress must be an object of answered, deferred, needsInfo and open counts")
    request.runtime.hub.record_counts(interview, counts)
    return Reply(204)


def route_submit(request, params: dict):
    interview = api_interview(request, params)
    require_json_body(request)
    hub = request.runtime.hub
    try:
        hub.check_pending(interview)
        reply = hub.submit(interview, request.read_json(MAX_BODY_BYTES))
    except InterviewError as error:
        status, body = http_error(error)
        hub.log.event(
            "submit-rejected", interview=interview.id, status=status,
            # Cut: a hostile body can make the full text megabytes long.
            error=cut(body["error"], 500),
        )
        return json_reply(status, body)
    return json_reply(200, reply)


def route_attachment_upload(request, params: dict):
    """The raw body is the file, its name in X-Attachment-Name (percent-encoded): a custom header
    forces a CORS preflight, which is never answered, so another site cannot upload."""
    import urllib.parse

    # Until the file is stored, a refusal leaves the body unread or cut short: the connection
    # cannot carry another request.
    closing = request.close_connection
    request.close_connection = True
    interview = api_interview(request, params)
    encoded = request.headers.get("X-Attachment-Name")
    if encoded is None:
        raise HttpRefusal(400, "the X-Attachment-Name header is required: the file's name, percent-encoded")
    hub = request.runtime.hub
    try:
        hub.check_pending(interview)
    except InterviewError as error:
        return json_reply(*http_error(error))
    length = request.body_length(ATTACHMENT_MAX_BYTES, "a file may be at most 10 MiB")
    name = urllib.parse.unquote(encoded, errors="replace")
    media_type = attachment_media_type(request.headers.get("Content-Type", ""))
    try:
        entry = interview.attachments.add(name, media_type, length, request.rfile)
    except AttachmentRefused as refusal:
        raise HttpRefusal(refusal.status, refusal.error) from None
    request.close_connection = closing
    hub.log.event("attachment-stored", interview=interview.id, attachment=entry["id"],
                  bytes=length, mimeType=media_type)
    return json_reply(201, {key: entry[key] for key in ("id", "name", "mimeType", "bytes")})


def route_attachment(request, params: dict):
    """An upload's bytes: images as themselves, for the thumbnails; anything else only as a
    download, so that the browser never renders an uploaded page or script from our origin."""
    entry = api_interview(request, params).attachments.get(params["id"])
    if entry is None:
        raise HttpRefusal(404, "not found")
    try:
        # Sent in chunks: a page showing several large screenshots must not hold them whole.
        body = open(entry["path"], "rb")
    except OSError:
        raise HttpRefusal(404, "not found") from None
    if entry["mimeType"] in ATTACHMENT_IMAGE_TYPES:
        return Reply(200, {"Content-Type": entry["mimeType"]}, body)
    import urllib.parse

    disposition = "attachment; filename*=UTF-8''%s" % urllib.parse.quote(entry["name"], safe="")
    return Reply(200, {"Content-Type": "application/octet-stream", "Content-Disposition": disposition}, body)


def route_attachment_remove(request, params: dict):
    interview = api_interview(request, params)
    hub = request.runtime.hub
    try:
        # Pending is checked under the interview's lock so that a submit cannot settle
        # with a file that is being removed.
        with interview.lock:
            interview.check_pending()
            interview.attachments.remove(params["id"])
    except InterviewError as error:
        return json_reply(*http_error(error))
    except AttachmentRefused as refusal:
        raise HttpRefusal(refusal.status, refusal.error) from None
    hub.log.event("attachment-removed", interview=interview.id, attachment=params["id"])
    return Reply(204)


# (method, path pattern, route). A pattern's `<name>` takes one path segment (not empty),
# `<name*>` the rest of the path; the query string is never part of the match.
ROUTES = (
    ("GET", "/s/<token>", route_form_page),
    ("GET", "/assets/<name*>", route_asset),
    ("GET", "/api/s/<token>", route_interview),
    ("GET", "/api/s/<token>/state", route_state),
    ("GET", "/api/s/<token>/events", route_events),
    ("POST", "/api/s/<token>/progress", route_progress),
    ("POST", "/api/s/<token>/submit", route_submit),
    ("POST", "/api/s/<token>/attachments", route_attachment_upload),
    ("GET", "/api/s/<token>/attachments/<id>", route_attachment),
    ("DELETE", "/api/s/<token>/attachments/<id>", route_attachment_remove),
)


def match_path(pattern: str, path: str):
    """The parameters of `path` under `pattern`, or None when it does not match."""
    wanted = pattern.split("/")
    given = path.split("?", 1)[0].split("/")
    params = {}
    for index, part in enumerate(wanted):
        if part.endswith("*>"):
            if len(given) <= index:
                return None
            params[part[1:-2]] = "/".join(given[index:])
            return params
        if index >= len(given):
            return None
        if part.startswith("<"):
            if not given[index]:
                return None
            params[part[1:-1]] = given[index]
        elif part != given[index]:
            return None
    return params if len(given) == len(wanted) else None


def resolve_route(method: str, path: str):
    """(route, params) for a request; HttpRefusal 404 for a path no route has, 405 with an
    Allow header for a path that routes take with other methods only."""
    allowed = []
    for route_method, pattern, route in ROUTES:
        params = match_path(pattern, path)
        if params is None:
            continue
        if route_method == method:
            return route, params
        if route_method not in allowed:
            allowed.append(route_method)
    if allowed:
        methods = ", ".join(allowed)
        raise HttpRefusal(405, "use %s" % " or ".join(allowed), {"Allow": methods})
    raise HttpRefusal(404, "not found")


class FormRequestPlumbing:
    """The request handler's own work, mixed into http.server's BaseHTTPRequestHandler when the
    form server is first built: the two checks, body reading, sending, the event stream."""

    server_version = "ask-user-rich/" + __version__
    sys_version = ""
    timeout = HTTP_IDLE_TIMEOUT_SECONDS
    error_content_type = "application/json"

    @property
    def runtime(self):
        return self.server.runtime

    def log_message(self, format, *args):  # noqa: A002 (the base class's signature)
        # The default writes the request line, token included, to stderr. Our own events
        # log what matters, with tokens redacted.
        pass

    def send_error(self, code, message=None, explain=None):
        # Every error, even one raised by the base class for a malformed request line,
        # is JSON with the security headers, never the default HTML page. Only the
        # standard phrase: the base class's messages quote the raw request line, token
        # included. The connection closes, as the base class's own send_error does.
        self.close_connection = True
        if getattr(self, "request_version", "") == "HTTP/0.9":
            # A status line and headers (CSP, nosniff) even for an unparsable request.
            self.request_version = "HTTP/1.0"
        try:
            self.send_reply(json_reply(code, {"error": self.responses.get(code, ("error",))[0]}))
        except OSError:
            pass

    def parse_request(self):
        # An HTTP/0.9 request ("GET /path", no version) gets a response without a status
        # line or headers, so without the CSP: refuse it rather than serve the form bare.
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":
            self.send_error(400)
            return False
        return True

    def handle_routed(self):
        """Every method the base class knows comes here: the two checks, then the route."""
        try:
            self.check_host_and_origin()
            route, params = resolve_route(self.command, self.path)
            reply = route(self, params)
        except HttpRefusal as refusal:
            reply = refusal.reply()
        if isinstance(reply, EventStream):
            return self.stream_events(reply.interview)
        self.send_reply(reply)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = handle_routed
    do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = handle_routed

    def send_reply(self, reply: Reply) -> None:
        body = reply.body
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            length = len(body) if isinstance(body, bytes) else os.fstat(body.fileno()).st_size
            self.send_header("Content-Length", str(length))
            self.send_security_headers()
            self.end_headers()
            if self.command == "HEAD" or not length:
                return
            if isinstance(body, bytes):
                self.wfile.write(body)
            else:
                import shutil

                shutil.copyfileobj(body, self.wfile, ATTACHMENT_CHUNK_BYTES)
        finally:
            if not isinstance(body, bytes):
                body.close()

    def send_security_headers(self):
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")

    def check_host_and_origin(self) -> None:
        """Before any route, a rebinding page or another site learns nothing."""
        if host_name(self.headers.get("Host", "")) not in self.server.allowed_hosts:
            raise HttpRefusal(403, "forbidden host")
        origin = self.headers.get("Origin")
        if origin is not None and origin not in self.server.allowed_origins:
            raise HttpRefusal(403, "forbidden origin")

    def body_length(self, limit: int, too_big: str = "") -> int:
        """The declared body length, or HttpRefusal 411/413 (unread, so the connection closes)."""
        length = (self.headers.get("Content-Length") or "").strip()
        # isascii too: "²" (latin-1 0xB2) passes isdigit() but not int().
        if not (length.isascii() and length.isdigit()):
            raise HttpRefusal(411, "a Content-Length header is required")
        length = int(length)
        if length > limit:
            self.close_connection = True
            raise HttpRefusal(413, too_big or "body larger than %d bytes" % limit)
        return length

    def read_json(self, limit: int):
        """The parsed JSON body, or HttpRefusal 411/413/400."""
        raw = self.rfile.read(self.body_length(limit))
        try:
            return parse_json(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            raise HttpRefusal(400, "invalid JSON: %s" % error) from None

    def stream_events(self, interview):
        """Server-Sent Events: the /state JSON at once and on every change."""
        hub = self.runtime.hub
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_security_headers()
        self.end_headers()
        self.close_connection = True
        hub.record_stream(interview, +1)
        try:
            seen, sent = None, None
            while hub.is_live(interview):
                with interview.changed:
                    changed = interview.changed.wait_for(
                        lambda: interview.revision != seen or hub.closed, SSE_PING_SECONDS
                    )
                    states = [state for revision, state in interview.states
                              if seen is not None and revision > seen]
                    states = states or [interview.state_json()]
                    seen = interview.revision
                if hub.closed or self.page_gone():
                    break
                chunk = ": ping\n\n"
                if changed:
                    fresh = [json.dumps(state) for state in states]
                    fresh = [data for previous, data in zip([sent] + fresh, fresh) if data != previous]
                    chunk = "".join("event: state\ndata: %s\n\n" % data for data in fresh) or chunk
                    sent = fresh[-1] if fresh else sent
                self.wfile.write(chunk.encode("utf-8"))
                self.wfile.flush()
        except OSError:
            pass  # the page went away
        finally:
            hub.record_stream(interview, -1)

    def page_gone(self) -> bool:
        """True once the page closed its end (readable, yet nothing to read). Writing alone
        notices only on the second write after the close, so a reloaded page left a dead
        stream holding its thread (and counting as "form open") for up to two pings."""
        import socket

        # A non-blocking peek rather than select(), which fails above fd 1024.
        self.connection.settimeout(0)
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False  # nothing to read: the page is still there
        except OSError:
            return True
        finally:
            self.connection.settimeout(self.timeout)


_FORM_SERVER_CLASS = None


def http_error(error: InterviewError):
    """(status, JSON body) for a change the hub refused, as the form reads them."""
    if isinstance(error, InterviewSettled):
        return 409, {"error": "interview already %s" % error.state}
    if isinstance(error, StaleVersion):
        return 409, {"error": "new questions were added", "version": error.version}
    if isinstance(error, InvalidAnswers):
        body = {"error": error.text}
        if error.problems is not None:
            body["problems"] = error.problems
        return 422, body
    if isinstance(error, UnknownInterview):
        return 404, {"error": NOT_FOUND_TEXT}
    return 500, {"error": "internal error"}


def form_server_class():
    """The ThreadingHTTPServer subclass that serves forms (built once, on first use)."""
    global _FORM_SERVER_CLASS
    if _FORM_SERVER_CLASS is None:
        _FORM_SERVER_CLASS = _build_form_server_class()
    return _FORM_SERVER_CLASS


def _build_form_server_class():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class FormRequestHandler(FormRequestPlumbing, BaseHTTPRequestHandler):
        pass

    class FormServer(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        # socketserver's listen backlog is 5: a page (or a local client) opening many
        # connections at once filled it, and later connections, the form's own included, lost
        # their SYN and waited 1-3 s for a retry (200 connections took 30 s to open).
        request_queue_size = 256

        def __init__(self, runtime, address):
            self.runtime = runtime
            super().__init__(address, FormRequestHandler)
            port = self.server_address[1]
            config = runtime.config
            names = {"localhost", "127.0.0.1", "[::1]", config.public_host.lower()}
            self.allowed_hosts = frozenset(names)
            self.allowed_origins = frozenset("http://%s:%d" % (name, port) for name in names)

        def handle_error(self, request, client_address):
            # A broken connection is routine for a local form; never print a traceback to
            # stderr with a request in it.
            error = sys.exc_info()[1]
            if not isinstance(error, OSError):
                self.runtime.log.event("http-error", "error", error=repr(error)[:300])

    return FormServer


def host_name(host_header: str) -> str:
    """The Host header without its port, lower-cased: 'localhost', '[::1]', ..."""
    host = host_header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end != -1 else host
    return host.rsplit(":", 1)[0] if ":" in host else host


def is_json_media_type(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def progress_counts(payload):
    """{answered, deferred, needsInfo, open} as non-negative ints, or None."""
    if not isinstance(payload, dict):
        return None
    counts = {}
    for key in ("answered", "deferred", "needsInfo", "open"):
        value = payload.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        counts[key] = value
    return counts


# ============================================================================================
# Runtime: the hub, the archive, the log and the lazily started form server, together
# ============================================================================================

class Runtime:
    """What the MCP server, the command line and the tests drive."""

    def __init__(self, config: Config, log: Log | None = None) -> None:
        self.config = config
        self.log = log if log is not None else Log(config.log_dir)
        self.archive = Archive(config.log_dir, self.log)
        self.hub = SessionHub(self.log, self.archive)
        self.server_lock = threading.Lock()
        self.form_server = None
        self.server_thread = None

    def base_url(self) -> str:
        """Start the form server on first need; its base URL. FormServerUnavailable if it
        cannot bind."""
        with self.server_lock:
            if self.form_server is None:
                address = (self.config.host, self.config.port)
                try:
                    server = form_server_class()(self, address)
                except OSError as error:
                    self.log.event("http-bind-failed", "error", host=self.config.host,
                                   port=self.config.port, error=str(error))
                    raise FormServerUnavailable(self.config.host, self.config.port, str(error))
                self.server_thread = threading.Thread(
                    target=server.serve_forever, kwargs={"poll_interval": 0.2},
                    name="ask-user-rich-http", daemon=True,
                )
                self.server_thread.start()
                self.form_server = server
                self.log.event("http-started", host=self.config.host, port=server.server_address[1])
            return "http://%s:%d" % (self.config.public_host, self.form_server.server_address[1])

    def open_interview(self, args, **details) -> Interview:
        """The one way to start an interview (the tools, demo/ask, doctor): validate
        `ask_user_rich` arguments (InvalidInterview), start the form server if need be
        (FormServerUnavailable) and open the interview; its call options are in `options`.
        `details` go to SessionHub.create as they are."""
        spec, options = validate_interview(args)
        return self.hub.create(spec, self.base_url(), options, **details)

    def append_questions(self, session_id, questions, note=None) -> dict:
        return self.hub.append(session_id, questions, note)

    def wait_for_result(self, session_id, timeout=None):
        """The settled result (structuredContent), or None on timeout."""
        result, _ = self.hub.wait(self.hub.require(session_id), timeout=timeout)
        return result

    def form_payload(self, interview: Interview) -> dict:
        with interview.lock:
            return {
                "id": interview.id,
                "state": interview.state,
                "version": interview.version,
                "note": interview.note,
                "agent": interview.agent,
                "spec": interview.spec,
                "result": interview.result,
            }

    def close(self) -> None:
        self.hub.close()
        with self.server_lock:
            server, self.form_server = self.form_server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            self.log.event("http-stopped")
        self.log.close()


# ============================================================================================
# Tool definitions: instructions, schemas and the results' shapes
# ============================================================================================

RULES_TEXT = """Rules (a call that breaks one is rejected with every problem listed, and nothing is shown to the user):
- ids (question ids, option ids, recommended and dependsOn entries) match ^[A-Za-z0-9_.:-]{1,200}$: ASCII only, no spaces or accents ("secao-tabs", not "seção-tabs"). Labels, headers and markdown take any Unicode.
- Question ids are unique in the interview (appends included); option ids are unique in their question.
- recommended names option ids, never labels: a single id, or an array of ids when multiSelect is true. Several ids on a single-select question are rejected.
- kind "rank": the user orders every option. It needs at least 2 options, takes no multiSelect and no textInput (allowOther is ignored there); its recommended is the full order, an array holding every option id exactly once.
- A question with no options and allowOther false cannot be answered and is rejected.
- dependsOn lists ids of earlier questions only (not itself, not a later one).
- Unknown fields are rejected (a typo such as "multiselect" must not silently change the interview).
- timeoutSeconds is an integer from 1 to 604800; delivery is "browser", "link" or "elicitation"."""

AFTER_TEXT = """After the call:
- status "submitted": read every answer and its notes (notes often change the meaning). "deferred" and "needs-info" are open questions, not consent: do not act as if the recommendation was accepted; answer the needs-info notes and ask again when it matters.
- status "declined": the user chose not to answer now; do not proceed as if they agreed.
- Answers and the general notes may carry attachments (screenshots, logs): read each file at its absolute path with your own file tools.
- status "awaiting": show the url to the user, then call await_user_answers with the sessionId to wait for the submit.
- Follow-up questions while the form is open (or while a call waits): append_questions, not a second interview."""

# In the instructions and in ask_user_rich's description, as AFTER_TEXT is: a client may show
# the model only one of them.
LANGUAGE_TEXT = (
    'Set language to the language the user writes in (a BCP 47 tag such as "ja" or "pt-BR"), '
    "and write the questions in it."
)

COMPACT_TEXT = (
    "A large result comes compact (the summary lists only the answers that need you; rows lose "
    "headers and empty fields), and archivePath names the JSON file that holds every field."
)

SERVER_INSTRUCTIONS = (
    "ask-user-rich asks the user a structured interview in a local web form and returns every "
    "answer. Prefer ask_user_rich over the built-in AskUserQuestion when a round has more than "
    "4 questions or options, long question text, code or layout previews, a recommendation you "
    "want to argue for, or a ranking. Put every question of the round in one call, give each a "
    "recommended option with a rationale, and use markdown in body/rationale/preview. "
    + LANGUAGE_TEXT + " Every rule that rejects a call is in ask_user_rich's description.\n\n"
    + AFTER_TEXT
)

_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,200}$"}
_MARKDOWN = {"type": "string", "description": "Markdown."}

QUESTION_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "header"],
    "properties": {
        "id": dict(_ID, description="Unique in the interview. ASCII: A-Z a-z 0-9 _ . : -"),
        "header": {"type": "string", "minLength": 1, "description": "The question itself; any length."},
        "body": dict(_MARKDOWN, description="Markdown context shown under the header."),
        "kind": {
            "type": "string",
            "enum": list(KINDS),
            "default": "choice",
            "description": "choice (default) or rank: the user puts every option in order.",
        },
        "options": {
            "type": "array",
            "default": [],
            "description": "Any number. Empty: a free-text question (needs allowOther true).",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "label"],
                "properties": {
                    "id": dict(_ID, description="Unique in the question. ASCII."),
                    "label": {"type": "string", "minLength": 1},
                    "description": dict(_MARKDOWN, description="Markdown: what it means, the trade-off."),
                    "preview": dict(
                        _MARKDOWN,
                        description="Markdown shown in a box beside the option, e.g. a fenced code block.",
                    ),
                    "textInput": {
                        "type": "object",
                        "additionalProperties": False,
                        "description": "A text field shown when this option is picked (not on rank).",
                        "properties": {
                            "placeholder": {"type": "string"},
                            "required": {
                                "type": "boolean",
                                "description": "The answer cannot be submitted with this option picked and the field empty.",
                            },
                        },
                    },
                },
            },
        },
        "recommended": {
            "description": "Option id (single select), array of ids (multiSelect), or for rank the full recommended order. Ids, never labels.",
            "anyOf": [_ID, {"type": "array", "items": _ID}],
        },
        "rationale": dict(_MARKDOWN, description="Markdown: why you recommend it."),
        "multiSelect": {"type": "boolean", "default": False},
        "allowOther": {
            "type": "boolean",
            "default": True,
            "description": "A free-text Other answer. Ignored on rank questions (always off there).",
        },
        "dependsOn": {
            "type": "array",
            "items": _ID,
            "default": [],
            "description": "Ids of earlier questions this one builds on (display only).",
        },
    },
}

# append_questions takes questions of exactly ask_user_rich's shape; the schema is not repeated,
# since every tool definition is paid for in the model's context in every session.
FOLLOW_UP_SCHEMA = {
    "type": "object",
    "description": "A question with the same fields and rules as in ask_user_rich's questions.",
}

_NULLABLE_TEXT = {"type": ["string", "null"]}
ATTACHMENTS_SCHEMA = {
    "type": "array",
    "description": "Files the user attached; open each at its absolute path with your own file tools.",
    "items": {
        "type": "object",
        "required": ["id", "name", "path", "mimeType", "bytes"],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "path": {"type": "string", "description": "Absolute path of the file on this machine."},
            "mimeType": {"type": "string"},
            "bytes": {"type": "integer"},
        },
    },
}
ANSWER_SCHEMA = {
    "type": "object",
    "required": [
        "id", "header", "status", "selected", "selectedLabels", "optionTexts", "other",
        "ranked", "rankedLabels", "notes", "followedRecommendation", "attachments",
    ],
    "properties": {
        "id": {"type": "string"},
        "header": {"type": "string"},
        "status": {"type": "string", "enum": ["answered", "deferred", "needs-info", "unanswered"]},
        "selected": {"type": "array", "items": {"type": "string"}},
        "selectedLabels": {"type": "array", "items": {"type": "string"}},
        "optionTexts": {"type": "object", "additionalProperties": {"type": "string"}},
        "other": _NULLABLE_TEXT,
        "ranked": {"type": ["array", "null"], "items": {"type": "string"}},
        "rankedLabels": {"type": ["array", "null"], "items": {"type": "string"}},
        "notes": _NULLABLE_TEXT,
        "followedRecommendation": {"type": ["boolean", "null"]},
        "attachments": ATTACHMENTS_SCHEMA,
    },
}

# A compact result's rows: the same fields, none required but the id and the status, no header.
COMPACT_ANSWER_SCHEMA = {
    "type": "object",
    "required": ["id", "status"],
    "additionalProperties": False,
    "properties": {key: value for key, value in ANSWER_SCHEMA["properties"].items() if key != "header"},
}

RESULT_SCHEMA = {
    "type": "object",
    "required": ["status", "summary"],
    "properties": {
        "status": {"type": "string", "enum": ["submitted", "declined", "cancelled", "awaiting"]},
        "summary": {"type": "string", "description": "One line per question; read it first."},
        "interviewId": {"type": "string"},
        "title": {"type": "string"},
        "via": {"type": "string", "enum": ["browser", "elicitation"]},
        "submittedAt": {"type": "string"},
        "durationSeconds": {"type": "number"},
        "counts": {
            "type": "object",
            "properties": {
                key: {"type": "integer"} for key in ("answered", "deferred", "needsInfo", "unanswered")
            },
        },
        "generalNotes": _NULLABLE_TEXT,
        "generalAttachments": ATTACHMENTS_SCHEMA,
        "archivePath": {
            "type": ["string", "null"],
            "description": "The archive file holding every field of the result; null if it could not be written.",
        },
        "compact": {
            "type": "boolean",
            "description": "true: a large result, rows without header or empty fields; archivePath has them all.",
        },
        "answers": {"type": "array", "items": {"anyOf": [ANSWER_SCHEMA, COMPACT_ANSWER_SCHEMA]}},
        "sessionId": {"type": "string", "description": "awaiting: pass it to await_user_answers."},
        "url": {"type": "string", "description": "awaiting: show it to the user."},
        "reason": {"type": "string", "description": "awaiting: why the call ended without answers."},
    },
}

APPEND_RESULT_SCHEMA = {
    "type": "object",
    "required": ["status", "sessionId", "appended", "total", "version", "url"],
    "properties": {
        "status": {"type": "string", "enum": ["appended"]},
        "sessionId": {"type": "string"},
        "appended": {"type": "integer"},
        "total": {"type": "integer"},
        "version": {"type": "integer"},
        "url": {"type": "string"},
    },
}

_SESSION_ID = {
    "type": "string",
    "pattern": "^[0-9a-f]{12}$",
    "description": "The sessionId (= interviewId) from ask_user_rich.",
}
_TIMEOUT = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_TIMEOUT_SECONDS,
    "description": "Stop waiting after this many seconds and return status awaiting; the form stays open. Default: wait until the client gives up.",
}
ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": False,
    "openWorldHint": False,
}

# Claude Code keeps a tool result in the conversation up to `anthropic/maxResultSizeChars`
# characters, at most 500,000, and saves anything larger to a file the model sees only as a
# 2 KB preview. A submit may carry 5 MiB of answers, so no smaller figure covers every result.
MAX_RESULT_SIZE_CHARS = 500000


def claude_code_hints(search_hint: str) -> dict:
    """A tool's `_meta` for Claude Code: the words its tool search matches while MCP tools
    are deferred (whole words: "question" does not find "questions"), and the inline size."""
    return {"anthropic/searchHint": search_hint, "anthropic/maxResultSizeChars": MAX_RESULT_SIZE_CHARS}


TOOLS = (
    {
        "name": "ask_user_rich",
        "title": "Ask the user a rich interview",
        "description": (
            "Ask the user any number of questions in one local web form and block until they "
            "submit; returns every answer, structured. Each question can carry markdown context, "
            "options with descriptions and code previews, a recommendation with its rationale, "
            "multi-select, a free-text Other, per-option text fields (textInput), or a ranking "
            "(kind: rank). The user can also defer a question, ask for more info, and add notes. "
            "Use it instead of AskUserQuestion for more than 4 questions or options, long "
            "headers, previews or rankings. " + LANGUAGE_TEXT + "\n\n" + RULES_TEXT + "\n\n" + AFTER_TEXT
            + "\n- " + COMPACT_TEXT
        ),
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["title", "questions"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "description": "The interview's title."},
                "intro": dict(_MARKDOWN, description="Markdown shown on an intro screen before the first question."),
                "questions": {"type": "array", "minItems": 1, "items": QUESTION_SCHEMA},
                "delivery": {
                    "type": "string",
                    "enum": list(DELIVERIES),
                    "default": "browser",
                    "description": "browser (default): open the form and wait. link: return the URL at once (then call await_user_answers). elicitation: the client's own form for small flat interviews (no rank, no textInput); falls back to browser.",
                },
                "timeoutSeconds": _TIMEOUT,
                "language": {
                    "type": "string",
                    "description": "The language of the form's own words (buttons, help); default: the browser's.",
                },
            },
        },
        "outputSchema": RESULT_SCHEMA,
        "annotations": ANNOTATIONS,
        "_meta": claude_code_hints(
            "ask the user questions and wait for the answers: interview, question, clarify, choose between options, decision, preferences, approval, confirm, feedback, rank, survey, form"
        ),
    },
    {
        "name": "append_questions",
        "title": "Add follow-up questions to an open interview",
        "description": (
            "Add follow-up questions to an interview whose form is still open (after an "
            "awaiting result, or while ask_user_rich / await_user_answers waits). Returns at "
            "once; the open form shows them live, and the answers arrive through the call that "
            "waits (or call await_user_answers). Same question rules as ask_user_rich; ids must "
            "be unique across the whole interview; dependsOn may name any existing question or "
            "an earlier one in this call; problems are numbered from questions[0], the first "
            "appended question. Fails once the user has submitted: then ask a new interview."
        ),
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["sessionId", "questions"],
            "properties": {
                "sessionId": _SESSION_ID,
                "questions": {"type": "array", "minItems": 1, "items": FOLLOW_UP_SCHEMA},
                "note": dict(_MARKDOWN, description="Markdown shown to the user with the new questions."),
            },
        },
        "outputSchema": APPEND_RESULT_SCHEMA,
        "annotations": ANNOTATIONS,
        "_meta": claude_code_hints(
            "add follow-up questions to the interview the user is answering; ask more, another question"
        ),
    },
    {
        "name": "await_user_answers",
        "title": "Wait for the answers to an open interview",
        "description": (
            "Wait for the user to submit an interview that ask_user_rich left open (status "
            "awaiting: delivery link, no browser, timeoutSeconds, or a cancelled call) and "
            "return the same result as ask_user_rich. Returns at once if they already submitted "
            "(also after a server restart, from the answer archive). Answers may carry "
            "attachments: files with absolute paths you can open with your own file tools. "
            + COMPACT_TEXT
        ),
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["sessionId"],
            "properties": {"sessionId": _SESSION_ID, "timeoutSeconds": _TIMEOUT},
        },
        "outputSchema": RESULT_SCHEMA,
        "annotations": ANNOTATIONS,
        "_meta": claude_code_hints(
            "wait for the user's answers to an open interview; get the answers, collect the result after a link"
        ),
    },
)
TOOL_NAMES = frozenset(tool["name"] for tool in TOOLS)


def error_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def answers_result(result: dict) -> dict:
    """A settled interview: the summary, then the JSON without it (one line when compact)."""
    full = {key: value for key, value in result.items() if key != "summary"}
    return {
        "content": [
            {"type": "text", "text": result["summary"]},
            {"type": "text", "text": compact_json(full) if result.get("compact") else pretty_result_json(full)},
        ],
        "structuredContent": result,
    }


def pretty_result_json(full: dict) -> str:
    """Indented JSON with one answer per line: readable, and a third the size of indent=2
    (a 100-question result must stay well under 100 KB with structuredContent beside it)."""
    fields = []
    for key, value in full.items():
        if key == "answers" and value:
            rows = ",\n".join("    " + json.dumps(row, ensure_ascii=False) for row in value)
            text = "[\n%s\n  ]" % rows
        else:
            text = json.dumps(value, ensure_ascii=False)
        fields.append("  %s: %s" % (json.dumps(key), text))
    return "{\n%s\n}" % ",\n".join(fields)


def awaiting_result(interview: Interview, reason: str) -> dict:
    text = (
        "%s\nThe interview %s is waiting at:\n%s\n\nShow this link to the user, then call "
        "await_user_answers with sessionId %s to wait for the submit."
        % (reason, quote(interview.spec["title"]), interview.url, quote(interview.id))
    )
    structured = {
        "status": "awaiting",
        "sessionId": interview.id,
        "url": interview.url,
        "reason": reason,
        "summary": text,
    }
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def archived_result(record: dict) -> dict:
    """A result read back from the archive, with its summary rebuilt."""
    spec = record.get("interview") or {"questions": []}
    result = {"summary": ""}
    result.update((key, value) for key, value in record.items() if key != "interview")
    # Archived before attachments existed: the shape the outputSchema promises all the same.
    result.setdefault("generalAttachments", [])
    for row in result.get("answers") or []:
        if isinstance(row, dict):
            row.setdefault("attachments", [])
    result.setdefault("archivePath", None)
    result["summary"] = summarize(result, spec)
    return fit_result(result, spec)


def unknown_session_text(session_id) -> str:
    return 'No interview with sessionId %s (it may have expired or the server restarted).' % (
        quote(session_id) if isinstance(session_id, str) else describe(session_id)
    )


def tool_error_text(error: Exception) -> str:
    """What the model reads when the hub or the form server refuses a tool call."""
    if isinstance(error, UnknownInterview):
        return unknown_session_text(error.session_id)
    if isinstance(error, InterviewSettled):
        return (
            'Interview "%s" is already %s, so questions can no longer be appended. '
            "Ask the follow-ups in a new ask_user_rich call." % (error.interview_id, error.state)
        )
    if isinstance(error, FormServerUnavailable):
        return (
            "Could not start the form server on %s:%d (%s). Free the port or set %s to another "
            "one (0 picks a free port); the next call tries again."
            % (error.host, error.port, error.reason, ENV_PORT)
        )
    return str(error)


def progress_message(facts: dict) -> str:
    """`Waiting for answers to "T": 3 of 12 answered, form open (1:05 elapsed)`."""
    hours, rest = divmod(facts["elapsedSeconds"], 3600)
    clock = "%d:%02d:%02d" % (hours, rest // 60, rest % 60) if hours else "%d:%02d" % divmod(rest, 60)
    return "Waiting for answers to %s: %d of %d answered, %s (%s elapsed)" % (
        quote(cut(facts["title"], CUT_HEADER)),
        facts["answered"],
        facts["total"],
        facts["form"],
        clock,
    )


# ============================================================================================
# Per-call objects and the two protocol eras
# ============================================================================================

class InputRequired(Exception):
    """Raised by a client of an era without server-to-client requests: the call must end now,
    asking the client for `requests` (key -> elicitation), and be retried with the answers."""

    def __init__(self, interview: Interview, requests: dict) -> None:
        super().__init__("input required")
        self.interview = interview
        self.requests = requests


class CallClient:
    """What both eras' per-call clients share: the call's request id, its cancellation, and
    progress notifications on its token, counted 1, 2, 3, … for this call."""

    def __init__(self, server: "McpServer", request_id, progress_token, cancellation: Cancellation) -> None:
        self.server = server
        self.transport = server.transport
        self.request_id = request_id
        self.progress_token = progress_token
        self.cancellation = cancellation
        self.progress_count = 0

    def progress(self, message: str, url=None) -> None:
        """A progress notification; `url` (the first report only) is added to the message."""
        if self.progress_token is None:
            return
        self.progress_count += 1
        self.transport.notify("notifications/progress", {
            "progressToken": self.progress_token, "progress": self.progress_count,
            "message": message + (". Form: " + url if url else ""),
        })


class LegacyClient(CallClient):
    """What one tools/call can do with a client of the `initialize` era: the capabilities it
    declared at initialize, progress on the call's token, elicitation by sending
    `elicitation/create` requests and waiting for their responses."""

    def __init__(self, server: "McpServer", request_id, progress_token, cancellation: Cancellation) -> None:
        super().__init__(server, request_id, progress_token, cancellation)
        self.url_elicitations: dict = {}  # our elicitation key -> elicitationId

    @property
    def client_info(self) -> dict:
        return self.server.session()["clientInfo"]

    @property
    def reports_progress(self) -> bool:
        return self.progress_token is not None

    def elicitation_modes(self) -> frozenset:
        return elicitation_modes(self.server.session()["capabilities"])

    def resumed_interview(self, hub: SessionHub):
        """This era has no retries: every call starts afresh."""
        return None

    def retrying(self, key: str) -> bool:
        return False

    def about_to_block(self, interview: Interview) -> None:
        """This era has no tasks: the call blocks in place."""

    def elicit(self, key: str, params: dict, interview: Interview):
        """Send `elicitation/create` and wait, with no timeout of ours, for the first of: the
        client's response ("answered", response), a submit through the web form ("settled"),
        the call's cancellation ("cancelled") or shutdown ("shutdown"). A request still open
        then is cancelled at the client, so its dialog goes away."""
        import uuid

        params = dict(params)
        if params.get("mode") == "url":
            params["elicitationId"] = self.url_elicitations[key] = str(uuid.uuid4())
        responses = []

        def on_response(message: dict) -> None:
            with interview.changed:
                responses.append(message)
                interview.changed.notify_all()

        request_id = self.transport.request("elicitation/create", params, on_response)
        self.server.log.event("elicitation-request", interview=interview.id, request=request_id,
                              elicitation=params.get("elicitationId"))
        with interview.waiter(self.cancellation) as waiter:
            outcome = waiter.wait(answered=lambda: bool(responses))
        self.transport.forget(request_id)
        if outcome == "answered":
            return outcome, responses[0]
        if outcome in ("settled", "cancelled"):
            reason = "the form was submitted in the browser" if outcome == "settled" else "the tool call ended"
            self.transport.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})
        return outcome, None

    def elicitation_finished(self, key: str, interview: Interview) -> None:
        """notifications/elicitation/complete for a URL elicitation whose interview settled."""
        elicitation_id = self.url_elicitations.pop(key, None)
        with interview.lock:
            settled = interview.state != "pending"
        if elicitation_id is not None and settled:
            self.transport.notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})

    def finish(self, result) -> None:
        """The call's response; none after a cancellation, which the client expects."""
        if result is not None and not self.cancellation.is_set:
            self.transport.respond(self.request_id, result)


def elicitation_modes(capabilities) -> frozenset:
    """The elicitation modes a client declared: `{}` is form only (2025-06-18)."""
    declared = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(declared, dict):
        return frozenset()
    modes = frozenset(mode for mode in ("form", "url") if isinstance(declared.get(mode), dict))
    return modes or frozenset({"form"})


# -- the 2026-07-28 era: requests that carry their own version, retries, tasks ----------------


def modern_envelope(result: dict, result_type: str = "complete") -> dict:
    """A result as the 2026-07-28 era sends it: with its resultType and our serverInfo."""
    wrapped = dict(result)
    wrapped["resultType"] = result_type
    meta = dict(wrapped.get("_meta") or {})
    meta[META_SERVER_INFO] = dict(SERVER_INFO)
    wrapped["_meta"] = meta
    return wrapped


class ModernRequest:
    """What one 2026-07-28 request says about its client, read from its own `_meta` alone."""

    __slots__ = ("capabilities", "client_info", "log_level", "tasks")

    def __init__(self, capabilities: dict, client_info: dict, log_level, tasks: bool) -> None:
        self.capabilities = capabilities
        self.client_info = client_info
        self.log_level = log_level
        self.tasks = tasks

    @classmethod
    def parse(cls, meta):
        """The request's facts; None for a request of the initialize era; JsonRpcError for a
        modern request that cannot be served."""
        if not isinstance(meta, dict) or META_VERSION not in meta:
            return None
        version = meta[META_VERSION]
        if version != MODERN_PROTOCOL:
            raise JsonRpcError(-32022, "Unsupported protocol version", {
                "supported": list(SUPPORTED_VERSIONS),
                "requested": version if isinstance(version, str) else describe(version),
            })
        capabilities = meta.get(META_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise JsonRpcError(-32602, "Invalid params: a %s request needs _meta[%s], an object of the "
                               "client's capabilities ({} when it has none)" % (MODERN_PROTOCOL, quote(META_CAPABILITIES)))
        level = meta.get(META_LOG_LEVEL)
        if level is not None and not (isinstance(level, str) and level in LOG_LEVELS):
            raise JsonRpcError(-32602, "Invalid params: _meta[%s] must be one of %s"
                               % (quote(META_LOG_LEVEL), ", ".join(LOG_LEVELS)))
        client_info = meta.get(META_CLIENT_INFO)
        extensions = capabilities.get("extensions")
        return cls(
            capabilities,
            client_info if isinstance(client_info, dict) else {},
            level,
            isinstance(extensions, dict) and TASKS_EXTENSION in extensions,
        )


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def arguments_digest(arguments: dict) -> str:
    import hashlib

    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class RequestStateSeal:
    """The `requestState` of a multi round-trip call: opaque to the client and sealed with
    HMAC-SHA256 under a key made at start, so a retry can name only an interview this process
    asked about, for the same tool and arguments, within the hour."""

    def __init__(self, key: bytes | None = None) -> None:
        # Made here, at start, but only os.urandom: hmac and hashlib are imported at the first
        # seal, so that a server that never elicits keeps its idle memory.
        self.key = key if key is not None else os.urandom(32)

    def _mac(self, body: str) -> str:
        import hashlib
        import hmac

        return _b64(hmac.new(self.key, body.encode("ascii"), hashlib.sha256).digest())

    def seal(self, interview_id: str, tool: str, arguments: dict, key: str, now=None) -> str:
        expires = int((time.time() if now is None else now) + REQUEST_STATE_SECONDS)
        payload = {"i": interview_id, "t": tool, "a": arguments_digest(arguments), "k": key, "e": expires}
        body = _b64(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("ascii"))
        return body + "." + self._mac(body)

    def open(self, state, tool: str, arguments: dict, now=None):
        """(interview id, input key) of a state this process sealed for this tool and these
        arguments; else JsonRpcError -32602 saying why."""
        import base64
        import hmac

        def invalid(why: str):
            return JsonRpcError(-32602, "invalid requestState: %s" % why)

        if not isinstance(state, str):
            raise invalid("it must be the string the first call returned, not %s" % describe(state))
        body, _, mac = state.partition(".")
        if not (body and mac and state.isascii()) or not hmac.compare_digest(mac, self._mac(body)):
            raise invalid("it is not one this server process made, or it was changed; call the tool again without it")
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            raise invalid("it is not one this server process made; call the tool again without it")
        if payload["e"] < (time.time() if now is None else now):
            raise invalid("it expired (a retry must come within an hour); call the tool again without it")
        if payload["t"] != tool:
            raise invalid("it was made for %s, not %s" % (payload["t"], tool))
        if payload["a"] != arguments_digest(arguments):
            raise invalid("it was made for other arguments; retry with exactly the arguments of the first call")
        return payload["i"], payload["k"]


class Task:
    """One call that became a task: what tasks/get shows of it."""

    def __init__(self, task_id: str, interview_id: str, message: str, cancellation, now: float) -> None:
        self.id = task_id
        self.interview_id = interview_id
        self.status = "working"
        self.message = message
        self.created = now
        self.updated = now
        self.result = None
        self.error = None
        self.cancellation = cancellation
        self.settled_monotonic = None

    def view(self) -> dict:
        shown = {
            "taskId": self.id,
            "status": self.status,
            "statusMessage": self.message,
            "createdAt": iso_utc(self.created),
            "lastUpdatedAt": iso_utc(self.updated),
            "ttlMs": None,
            "pollIntervalMs": TASK_POLL_MS,
        }
        if self.result is not None:
            shown["result"] = self.result
        if self.error is not None:
            shown["error"] = self.error
        return shown


class TaskRegistry:
    """Every task of this process, and those of an earlier one recovered from the archive."""

    def __init__(self, log: Log, archive: Archive) -> None:
        self.log = log
        self.archive = archive
        self.lock = threading.Lock()
        self.tasks: dict = {}
        self.counter = 0

    def create(self, interview: Interview, message: str, cancellation) -> dict:
        with self.lock:
            self.counter += 1
            task = Task("%s.%d" % (interview.id, self.counter), interview.id, message, cancellation, time.time())
            self.tasks[task.id] = task
            view = task.view()
        self.log.event("task-created", task=task.id, interview=interview.id)
        return view

    def update(self, task_id: str, message: str) -> None:
        with self.lock:
            task = self.tasks.get(task_id)
            if task is not None and task.status == "working" and task.message != message:
                task.message = message
                task.updated = time.time()

    def complete(self, task_id: str, result: dict) -> None:
        with self.lock:
            task = self.tasks.get(task_id)
            if task is None or task.status != "working":
                return
            task.status = "completed"
            task.result = result
            self._settled(task)
        self.log.event("task-completed", task=task_id)

    def cancel(self, task_id) -> None:
        task = self._find(task_id)
        with self.lock:
            if task.status != "working":
                return
            task.status = "cancelled"
            self._settled(task)
        self.log.event("task-cancelled", task=task.id)
        task.cancellation.cancel()

    def get(self, task_id) -> dict:
        task = self._find(task_id)
        with self.lock:
            return task.view()

    def _settled(self, task: Task) -> None:
        task.updated = time.time()
        task.settled_monotonic = time.monotonic()

    def _find(self, task_id) -> Task:
        """The task, recovered from the archive if an earlier process made it; else -32602."""
        horizon = time.monotonic() - SETTLED_RETENTION_SECONDS
        with self.lock:
            for key in [key for key, task in self.tasks.items()
                        if task.settled_monotonic is not None and task.settled_monotonic < horizon]:
                del self.tasks[key]
            task = self.tasks.get(task_id)
        if task is None:
            task = self._recover(task_id)
        if task is None:
            raise JsonRpcError(-32602, "unknown task %s" % quote(task_id))
        return task

    def _recover(self, task_id: str):
        interview_id, dot, number = task_id.partition(".")
        if not (is_session_id(interview_id) and dot and number.isdigit() and number.isascii()):
            return None
        if self.log.find_line(" task-created task=%s " % task_id) is None:
            return None  # never made here: not a task of an earlier process either
        task = Task(task_id, interview_id, "", Cancellation(), time.time())
        record = self.archive.find(interview_id)
        if record is not None:
            task.status = "completed"
            task.result = modern_envelope(answers_result(archived_result(record)))
            task.message = task.result["structuredContent"]["summary"].split("\n", 1)[0]
        else:
            task.status = "failed"
            task.message = (
                "The server restarted before the user submitted interview %s, so its answers are "
                "lost. Ask the questions again in a new ask_user_rich call." % quote(interview_id)
            )
            task.error = {"code": -32603, "message": task.message}
        self._settled(task)
        with self.lock:
            self.tasks.setdefault(task_id, task)
            return self.tasks[task_id]


class ModernClient(CallClient):
    """What one tools/call can do with a client of the 2026-07-28 era, from that request's own
    `_meta`: no requests to the client (an elicitation ends the call with `input_required`,
    and the retry brings the answer), and, when the request declares the tasks extension, a
    call about to block answers at once with a task that the rest of the call reports into."""

    def __init__(self, server: "McpServer", request_id, request: ModernRequest, params: dict,
                 cancellation: Cancellation, resumed=None) -> None:
        super().__init__(server, request_id, progress_token(params), cancellation)
        self.request = request
        self.resumed = resumed  # (interview id, input key) from a verified requestState
        responses = params.get("inputResponses")
        self.input_responses = responses if isinstance(responses, dict) else {}
        self.task_id = None

    @property
    def client_info(self) -> dict:
        return self.request.client_info

    @property
    def reports_progress(self) -> bool:
        return self.progress_token is not None or self.task_id is not None

    def elicitation_modes(self) -> frozenset:
        return elicitation_modes(self.request.capabilities)

    def resumed_interview(self, hub: SessionHub):
        return None if self.resumed is None else hub.require(self.resumed[0])

    def retrying(self, key: str) -> bool:
        return self.resumed is not None and self.resumed[1] == key

    def progress(self, message: str, url=None) -> None:
        """Into the task once there is one (the request, answered, has no token left to
        report on); else a progress notification on the request's token."""
        if self.task_id is not None:
            self.server.tasks.update(self.task_id, message)
        else:
            super().progress(message, url)

    def about_to_block(self, interview: Interview) -> None:
        if not self.request.tasks or self.task_id is not None:
            return
        with interview.lock:
            message = progress_message(interview.progress())
        view = self.server.tasks.create(interview, message, self.cancellation)
        self.task_id = view["taskId"]
        # Answered: from here on only tasks/cancel stops the call, never a late
        # notifications/cancelled for this request id.
        self.transport.end_call(self.request_id, self.cancellation)
        self.transport.respond(self.request_id, modern_envelope(view, "task"))

    def elicit(self, key: str, params: dict, interview: Interview):
        if self.retrying(key):
            response = self.input_responses.get(key)
            if isinstance(response, dict) and response.get("action") in ("accept", "decline", "cancel"):
                return "answered", {"result": response}
        with interview.lock:
            if interview.state != "pending":
                return "settled", None
        raise InputRequired(interview, {key: {"method": "elicitation/create", "params": params}})

    def elicitation_finished(self, key: str, interview: Interview) -> None:
        """This era has no elicitationId and no completion notice."""

    def input_required(self, needed: InputRequired, tool: str, arguments: dict) -> dict:
        (key,) = needed.requests
        state = self.server.seal.seal(needed.interview.id, tool, arguments, key)
        self.server.log.event("input-required", interview=needed.interview.id, key=key)
        return modern_envelope({"inputRequests": needed.requests, "requestState": state}, "input_required")

    def finish(self, result) -> None:
        if self.task_id is not None:
            if result is not None:
                self.server.tasks.complete(self.task_id, modern_envelope(result))
            return
        if result is None or self.cancellation.is_set:
            return
        if self.request.log_level is not None:
            self.transport.out.drain(1.0)  # its log messages come before its response
        self.transport.respond(self.request_id, result if "resultType" in result else modern_envelope(result))


# ============================================================================================
# The MCP server: methods of each era, dispatch and shutdown
# ============================================================================================

class McpServer:
    """The MCP methods over a JsonRpcStdio transport, in both protocol eras: a request whose
    `_meta` names its protocol version is served from that `_meta` alone (2026-07-28), any
    other from what `initialize` said. Each tools/call runs on a worker thread of its own and
    reaches the client through a per-call client object of its era."""

    def __init__(self, runtime: Runtime, reader, writer) -> None:
        self.runtime = runtime
        self.log = runtime.log
        self.writer = writer
        self.transport = JsonRpcStdio(reader, writer, self.log, self)
        self.tools = InterviewTools(runtime)
        self.seal = RequestStateSeal()
        self.tasks = TaskRegistry(self.log, runtime.archive)
        self.modern_enabled = runtime.config.protocol != "legacy"
        self.session_lock = threading.Lock()
        self.client_capabilities: dict = {}
        self.client_info: dict = {}
        self.protocol_version = None
        self.log_level = None
        self.call_log_levels: dict = {}  # modern calls in flight that asked for log messages
        self.log.listener = self.forward_log

    @property
    def reader_thread(self):
        return self.transport.reader_thread

    def serve(self) -> None:
        """Serve until stdin ends or stop(); then end every wait."""
        try:
            self.transport.serve()
        finally:
            self.runtime.hub.close()

    def stop(self) -> None:
        self.transport.stop()

    def session(self) -> dict:
        """What the `initialize` handshake told us about the client."""
        with self.session_lock:
            return {"capabilities": self.client_capabilities, "clientInfo": self.client_info}

    # -- requests -------------------------------------------------------------------------

    def handle_request(self, request_id, method: str, params: dict):
        meta = params.get("_meta")
        modern_meta = self.modern_enabled and isinstance(meta, dict) and META_VERSION in meta
        modern = modern_meta or (self.modern_enabled and method == "server/discover")
        if method == "initialize":
            modern = False
        self.log.event("request", "debug", method=method, era="modern" if modern else "legacy")
        if not modern:
            return self.handle_legacy(request_id, method, params)
        request = ModernRequest.parse(meta)
        if request is None:  # a bare server/discover probe
            return modern_envelope(self.discover())
        result = self.handle_modern(request_id, method, params, request)
        return None if result is None else modern_envelope(result)

    def handle_legacy(self, request_id, method: str, params: dict):
        if method == "tools/call":
            name, arguments = tool_call_arguments(params)
            cancellation = self.transport.begin_call(request_id)
            client = LegacyClient(self, request_id, progress_token(params), cancellation)
            return self.start_tool_call(client, name, arguments)
        if method == "initialize":
            return self.initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": list(TOOLS)}
        if method == "logging/setLevel":
            level = params.get("level")
            if level not in LOG_LEVELS:
                raise JsonRpcError(
                    -32602, "Invalid params: level must be one of %s" % ", ".join(LOG_LEVELS)
                )
            self.log_level = level
            return {}
        if method == "server/discover":
            # Only with the 2026-07-28 era turned off: an immediate "not found" makes the
            # client fall back to initialize at once instead of waiting out its connect timeout.
            raise JsonRpcError(-32601, "Method not found: server/discover (use initialize)")
        raise JsonRpcError(-32601, "Method not found: %s" % method)

    def handle_modern(self, request_id, method: str, params: dict, request: ModernRequest):
        if method == "tools/call":
            name, arguments = tool_call_arguments(params)
            resumed = None
            if params.get("requestState") is not None:
                resumed = self.seal.open(params["requestState"], name, arguments)
            cancellation = self.transport.begin_call(request_id)
            client = ModernClient(self, request_id, request, params, cancellation, resumed)
            return self.start_tool_call(client, name, arguments, request.log_level)
        if method == "server/discover":
            return self.discover()
        if method == "ping":
            return {}
        if method == "tools/list":
            # Cache hints, which the 2026-07-28 schema requires here: ask again each time.
            return {"tools": list(TOOLS), "ttlMs": 0, "cacheScope": "private"}
        if method in ("tasks/get", "tasks/cancel", "tasks/update"):
            task_id = params.get("taskId")
            if not isinstance(task_id, str):
                raise JsonRpcError(-32602, "Invalid params: taskId must be a string, not %s" % describe(task_id))
            if method == "tasks/get":
                return self.tasks.get(task_id)
            if method == "tasks/cancel":
                self.tasks.cancel(task_id)
            else:
                self.tasks.get(task_id)  # our tasks never ask for input: responses are ignored
            return {}
        raise JsonRpcError(-32601, "Method not found: %s" % method)

    def discover(self) -> dict:
        return {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": {"tools": {}, "extensions": {TASKS_EXTENSION: {}}},
            "instructions": SERVER_INSTRUCTIONS,
        }

    def initialize(self, params: dict) -> dict:
        requested = params.get("protocolVersion")
        version = requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        with self.session_lock:
            self.protocol_version = version
            self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
            self.client_info = client_info if isinstance(client_info, dict) else {}
        self.log.event(
            "initialize",
            protocol=version,
            requested=requested if isinstance(requested, str) else None,
            client=self.client_info.get("name"),
            elicitation=json.dumps(self.client_capabilities.get("elicitation")),
        )
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "logging": {}},
            "serverInfo": dict(SERVER_INFO),
            "instructions": SERVER_INSTRUCTIONS,
        }

    def handle_notification(self, method: str, params: dict) -> None:
        if method == "notifications/initialized":
            self.log.event("initialized")

    # -- tool calls -----------------------------------------------------------------------

    def start_tool_call(self, client, name: str, arguments: dict, log_level=None):
        """Run the call on a worker; `log_level`: the level its own `_meta` asked log messages
        at, for as long as it runs."""
        if log_level is not None:
            with self.session_lock:
                self.call_log_levels[_hashable(client.request_id)] = log_level
        worker = threading.Thread(
            target=self.run_tool_call, args=(client, name, arguments),
            name="ask-user-rich-call", daemon=True,
        )
        worker.start()
        return None

    def run_tool_call(self, client, name: str, arguments: dict) -> None:
        started = time.monotonic()
        self.log.event("call", tool=name, request=str(client.request_id))
        try:
            result = self.tools.call(name, arguments, client)
        except InputRequired as needed:
            result = client.input_required(needed, name, arguments)
        finally:
            self.transport.end_call(client.request_id, client.cancellation)
        cancelled = client.cancellation.is_set
        outcome = "cancelled" if cancelled or result is None else (
            "error" if result.get("isError") else
            result.get("structuredContent", {}).get("status", result.get("resultType", "ok"))
        )
        client.finish(result)
        with self.session_lock:
            self.call_log_levels.pop(_hashable(client.request_id), None)
        # Logged once the response is out: the answers reach the agent before the bookkeeping.
        self.log.event("call-end", tool=name, request=str(client.request_id), outcome=outcome,
                       ms=int((time.monotonic() - started) * 1000))

    def forward_log(self, level: str, event: str, fields: dict) -> None:
        """Log events at or above the level the client chose (at initialize's logging/setLevel,
        or in the `_meta` of a 2026-07-28 call in flight), as notifications/message. Queued,
        never written from the logging thread: that may be a form server thread."""
        with self.session_lock:
            chosen = [self.log_level] if self.log_level is not None else []
            chosen.extend(self.call_log_levels.values())
        if not chosen or LOG_LEVELS.index(level) < min(LOG_LEVELS.index(name) for name in chosen):
            return
        data = {"event": event}
        data.update((key, value) for key, value in fields.items() if key != "token")
        self.transport.out.post({"jsonrpc": "2.0", "method": "notifications/message",
                                 "params": {"level": level, "logger": SERVER_NAME, "data": data}})


def progress_token(params: dict):
    """The request's `_meta.progressToken` when it is one a notification can carry, else None."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, (str, int, float)):
        return None
    return token


def tool_call_arguments(params: dict):
    """(tool name, arguments) of a tools/call, or the protocol error that refuses it."""
    name = params.get("name")
    # isinstance first: a list or object name is unhashable, and `in` a frozenset raised.
    if not isinstance(name, str) or name not in TOOL_NAMES:
        raise JsonRpcError(-32602, "Unknown tool: %s" % describe(name))
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise JsonRpcError(-32602, "Invalid params: arguments must be an object")
    return name, arguments


# ============================================================================================
# Delivery: putting the form in front of the user (the opener plan, the client's own form)
# ============================================================================================
#
# A pure function plans the candidates from facts gathered once (so every platform can be
# tested on any machine); a walker tries them in order, never through a shell, with the URL as
# an argument of its own.


WSL_INTEROP_DIR = "/proc/sys/fs/binfmt_misc"
WSL_WINDOWS_ROOT = "/mnt/c"  # cmd.exe and powershell.exe warn about (or fail in) a Linux cwd
WSL_CMD_EXE = "/mnt/c/Windows/System32/cmd.exe"
# Where the Windows openers live when the distro does not append the Windows PATH.
WSL_WINDOWS_PATHS = {
    "explorer.exe": "/mnt/c/Windows/explorer.exe",
    "powershell.exe": "/mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe",
}
WSL_INTEROP_FIX = (
    "to re-enable WSL interop run: sudo sh -c 'echo \":WSLInterop:M::MZ::/init:PF\" > "
    "/usr/lib/binfmt.d/WSLInterop.conf' && sudo systemctl restart systemd-binfmt (or run "
    "wsl.exe --shutdown from Windows and reopen the distro)"
)
# cmd.exe re-parses its command line: these would split the URL into commands, redirections or
# variable expansions.
CMD_UNSAFE = frozenset('&|<>^%!()"')
# PowerShell treats these as single quotes (doubled inside a single-quoted string) ...
POWERSHELL_SINGLE_QUOTES = frozenset("'\u2018\u2019\u201a\u201b")
# ... and these as double quotes (plus the backtick, its escape character): the Windows command
# line re-quotes double quotes, so a URL holding any of them is not handed to PowerShell at all.
POWERSHELL_DOUBLE_QUOTES = frozenset('"\u201c\u201d\u201e`')
LINUX_DISPLAY_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY")


class Opener:
    """One way to open a URL: the argv to run, where, and which exit codes mean success."""

    __slots__ = ("name", "argv", "cwd", "ok_codes")

    def __init__(self, name: str, argv: list, cwd=None, ok_codes=(0,)) -> None:
        self.name = name
        self.argv = argv
        self.cwd = cwd
        self.ok_codes = tuple(ok_codes)

    def __repr__(self) -> str:
        return "Opener(%r, %r)" % (self.name, self.argv)

    def describe(self, url: str) -> str:
        """The command as doctor prints it, with `url` shown as <url>."""
        text = " ".join(word.replace(url, "<url>") if word else '""' for word in self.argv)
        if self.cwd:
            text += "  (in %s)" % self.cwd
        if self.ok_codes != (0,):
            text += "  (exit %s = opened)" % " or ".join(str(code) for code in self.ok_codes)
        return text


def opener_facts(config: Config, environ=None) -> dict:
    """Everything the opener plan depends on, read from this machine. `plan_openers` is pure;
    tests build these dicts by hand for every platform."""
    import shutil

    env = os.environ if environ is None else environ
    platform = sys.platform
    linux = platform.startswith("linux")
    release = os.uname().release if hasattr(os, "uname") else ""
    wsl = linux and (bool(env.get("WSL_DISTRO_NAME")) or "microsoft" in release.lower())
    path = env.get("PATH", os.defpath)

    def which(name: str):
        found = shutil.which(name, path=path)
        if found is None and wsl and os.path.isfile(WSL_WINDOWS_PATHS.get(name, "")):
            found = WSL_WINDOWS_PATHS[name]
        return found

    names = ("open", "xdg-open", "xdg-mime", "wslview", "explorer.exe", "powershell.exe")
    installed = {name: which(name) for name in names}
    installed["cmd.exe"] = WSL_CMD_EXE if wsl and os.path.isfile(WSL_CMD_EXE) else None
    display = {name: env.get(name, "") for name in LINUX_DISPLAY_VARIABLES}
    facts = {
        "platform": platform,
        "open_enabled": config.open_browser,
        "open_cmd": _open_cmd_argv(config.open_cmd, path),
        "wsl": wsl,
        "interop": _wsl_interop() if wsl else None,
        "installed": installed,
        "display": display,
        "ssh": any(env.get(name) for name in ("SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY")),
        "container": bool(env.get("container"))
        or os.path.exists("/.dockerenv")
        or os.path.exists("/run/.containerenv"),
        "windows_root": WSL_WINDOWS_ROOT if wsl and os.path.isdir(WSL_WINDOWS_ROOT) else None,
        "https_handler": None,
        "https_handler_installed": None,
    }
    # The handler only decides anything on WSL without interop; asking costs a subprocess.
    if wsl and not facts["interop"] and installed["xdg-mime"] and any(display.values()):
        handler = _query_https_handler(installed["xdg-mime"])
        facts["https_handler"] = handler
        facts["https_handler_installed"] = bool(handler) and _desktop_file_exists(handler, env)
    return facts


def _open_cmd_argv(open_cmd, path: str):
    """ASK_USER_RICH_OPEN_CMD as an argv: a program path as it is (spaces and all), else split
    the way a POSIX shell would, without running one."""
    import shlex
    import shutil

    if not open_cmd:
        return None
    if os.path.isfile(open_cmd) or shutil.which(open_cmd, path=path):
        return [open_cmd]
    try:
        return shlex.split(open_cmd) or [open_cmd]
    except ValueError:
        return [open_cmd]


def _wsl_interop() -> bool:
    """An enabled binfmt entry named WSLInterop* lets Linux run .exe files."""
    try:
        entries = [name for name in os.listdir(WSL_INTEROP_DIR) if name.startswith("WSLInterop")]
    except OSError:
        return False
    for name in entries:
        try:
            with open(os.path.join(WSL_INTEROP_DIR, name), encoding="utf-8") as handle:
                if handle.readline().strip() != "disabled":
                    return True
        except OSError:
            return True  # listed but unreadable: the entry is there, which is what counts
    return False


def _query_https_handler(xdg_mime: str) -> str:
    import subprocess

    try:
        done = subprocess.run(
            [xdg_mime, "query", "default", "x-scheme-handler/https"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.decode("utf-8", "replace").strip()


def _desktop_file_exists(handler: str, env) -> bool:
    home = os.path.expanduser("~")
    data_home = env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    data_dirs = (env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")
    return any(
        os.path.isfile(os.path.join(base, "applications", handler))
        for base in [data_home] + data_dirs
        if base
    )


def plan_openers(url: str, facts: dict):
    """(candidates, notes): the openers to try in order, and why each other one was left out.

    Pure: `facts` is what `opener_facts` gathered (or what a test wrote)."""
    if not facts["open_enabled"]:
        return [], ["opening is disabled (%s=0)" % ENV_OPEN]
    if facts.get("open_cmd"):
        argv = list(facts["open_cmd"])
        return [Opener("%s (%s)" % (ENV_OPEN_CMD, argv[0]), argv + [url])], []
    platform = facts["platform"]
    if platform == "darwin":
        if facts.get("ssh"):
            # `open` would succeed on the Mac's own screen, in front of nobody at this terminal.
            return [], ["open skipped: this is an SSH session, so a browser would appear on the "
                        "Mac's own screen, not in front of you"]
        return [Opener("open", ["open", url])], []
    if platform == "win32":
        unsafe = _cmd_unsafe(url)
        if unsafe:
            return [], ["cmd /c start skipped: the URL holds characters cmd would reinterpret (%s)" % unsafe]
        return [Opener("cmd /c start", ["cmd", "/c", "start", "", url])], []
    if facts.get("wsl"):
        if facts.get("interop"):
            return _plan_wsl_interop(url, facts)
        return _plan_wsl_without_interop(url, facts)
    return _plan_linux(url, facts)


def _plan_linux(url: str, facts: dict):
    xdg_open = facts["installed"].get("xdg-open")
    if not xdg_open:
        return [], ["xdg-open is not installed"]
    if not any(facts["display"].values()):
        return [], [
            "xdg-open skipped: there is no graphical display here (DISPLAY and WAYLAND_DISPLAY "
            "are unset), so no browser window could appear"
        ]
    return [Opener("xdg-open", [xdg_open, url])], []


def _plan_wsl_interop(url: str, facts: dict):
    installed = facts["installed"]
    cwd = facts.get("windows_root")
    candidates, notes = [], []
    if installed.get("wslview"):
        candidates.append(Opener("wslview", [installed["wslview"], url]))
    else:
        notes.append("wslview is not installed (package wslu)")
    if installed.get("explorer.exe"):
        # explorer.exe exits with 1 even when it opened the URL.
        candidates.append(Opener("explorer.exe", [installed["explorer.exe"], url], ok_codes=(0, 1)))
    else:
        notes.append("explorer.exe was not found")
    unsafe = _cmd_unsafe(url)
    if not installed.get("cmd.exe"):
        notes.append("cmd.exe was not found at %s" % WSL_CMD_EXE)
    elif unsafe:
        notes.append("cmd.exe skipped: the URL holds characters cmd would reinterpret (%s)" % unsafe)
    else:
        candidates.append(Opener("cmd.exe", [installed["cmd.exe"], "/c", "start", "", url], cwd=cwd))
    unsafe = _powershell_unsafe(url)
    if not installed.get("powershell.exe"):
        notes.append("powershell.exe was not found")
    elif unsafe:
        notes.append("powershell.exe skipped: the URL holds %s" % unsafe)
    else:
        quoted = "".join(ch * 2 if ch in POWERSHELL_SINGLE_QUOTES else ch for ch in url)
        argv = [installed["powershell.exe"], "-NoProfile", "-NonInteractive", "-Command",
                "Start-Process '%s'" % quoted]
        candidates.append(Opener("powershell.exe", argv, cwd=cwd))
    return candidates, notes


def _plan_wsl_without_interop(url: str, facts: dict):
    installed = facts["installed"]
    notes = [
        "WSL interop is disabled (no WSLInterop entry in %s), so Windows openers "
        "(explorer.exe, cmd.exe, powershell.exe) cannot run" % WSL_INTEROP_DIR
    ]
    handler = facts.get("https_handler")
    if not installed.get("xdg-open"):
        notes.append("xdg-open is not installed")
    elif not any(facts["display"].values()):
        notes.append("xdg-open skipped: there is no Linux GUI (DISPLAY and WAYLAND_DISPLAY are unset)")
    elif not installed.get("xdg-mime"):
        notes.append("xdg-open skipped: xdg-mime is not installed, so the https handler is unknown")
    elif not handler:
        notes.append("xdg-open skipped: xdg-mime names no https handler (no Linux browser is installed)")
    elif handler.lower().startswith("wslview"):
        notes.append("xdg-open skipped: the https handler is %s, which needs interop" % handler)
    elif not facts.get("https_handler_installed"):
        notes.append("xdg-open skipped: the https handler %s is not installed" % handler)
    else:
        return [Opener("xdg-open", [installed["xdg-open"], url])], notes
    return [], notes


def _cmd_unsafe(url: str) -> str:
    """The characters of `url` that cmd.exe would reinterpret, quoted; empty when none."""
    bad = sorted({ch for ch in url if ch in CMD_UNSAFE or ch.isspace() or ord(ch) < 32 or ord(ch) == 127})
    return ", ".join(quote(ch) for ch in bad)


def _powershell_unsafe(url: str) -> str:
    """What keeps `url` out of a PowerShell single-quoted string; empty when nothing does."""
    problems = []
    if any(ch.isspace() for ch in url):
        problems.append("whitespace")
    if any(ch in POWERSHELL_DOUBLE_QUOTES for ch in url):
        problems.append("quotes")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in url):
        problems.append("control characters")
    return " and ".join(problems)


def opener_advice(url: str, facts: dict) -> list:
    """What the user can do when no opener works: the fix for this kind of machine first."""
    from urllib.parse import urlsplit

    try:
        port = urlsplit(url).port
    except ValueError:
        port = None
    port_text = str(port) if port else "PORT"
    advice = []
    if facts.get("open_cmd"):
        return ["open the link by hand"]  # the user chose the opener; the machine is theirs to know
    if facts.get("wsl") and not facts.get("interop"):
        advice.append(WSL_INTEROP_FIX)
    if facts.get("ssh"):
        advice.append(
            "over SSH, forward the form's port from your own machine with "
            "`ssh -L %s:localhost:%s <this host>` and open the link there; set %s to a fixed "
            "port so the forward keeps working across restarts" % (port_text, port_text, ENV_PORT)
        )
    if facts.get("container"):
        advice.append(
            "in a container, set %s to a fixed port and %s=0.0.0.0, publish it with "
            "`-p 127.0.0.1:%s:%s`, and open the link on the host" % (ENV_PORT, ENV_HOST, port_text, port_text)
        )
    desktop_less = facts["platform"] not in ("darwin", "win32") and not any(facts["display"].values())
    if desktop_less and not (facts.get("ssh") or facts.get("container") or facts.get("wsl")):
        advice.append(
            "if this machine has a desktop, start the agent from a terminal inside it (so DISPLAY "
            "or WAYLAND_DISPLAY is set), or name an opener that works here in %s" % ENV_OPEN_CMD
        )
    advice.append("open the link by hand")
    return advice


def walk_openers(candidates: list, grace: float = OPENER_GRACE_SECONDS):
    """Try each candidate until one succeeds: (opened, what happened with each one tried).

    A candidate succeeds on one of its exit codes, or when it is still running after `grace`
    seconds (a launcher that stays in the foreground). Never through a shell."""
    import subprocess
    import tempfile

    tried = []
    for opener in candidates:
        with tempfile.TemporaryFile() as errors:
            try:
                process = subprocess.Popen(
                    opener.argv,
                    cwd=opener.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,  # stdout is the MCP channel: nothing else may write
                    stderr=errors,  # a file, not a pipe: a launcher left running never blocks on it
                    close_fds=True,
                )
            except OSError as error:
                tried.append("%s could not start (%s)" % (opener.name, error.strerror or error))
                continue
            try:
                code = process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                threading.Thread(target=process.wait, name="ask-user-rich-opener", daemon=True).start()
                tried.append("%s is still running after %gs, taken as opened" % (opener.name, grace))
                return True, "; ".join(tried)
            if code in opener.ok_codes:
                tried.append("%s exited with %d (opened)" % (opener.name, code))
                return True, "; ".join(tried)
            errors.seek(0)
            said = " ".join(errors.read(2000).decode("utf-8", "replace").split())
            tried.append(
                "%s exited with %d%s" % (opener.name, code, ": %s" % cut(said, 160) if said else "")
            )
    return False, "; ".join(tried)


def open_browser(url: str, config: Config, log: Log, facts=None):
    """(opened, why): plan and walk the openers, logging the outcome (the URL never).

    When nothing opened, `why` names every opener tried and skipped and ends with what the user
    can do."""
    facts = opener_facts(config) if facts is None else facts
    candidates, notes = plan_openers(url, facts)
    opened, tried = walk_openers(candidates) if candidates else (False, "")
    parts = notes + ([tried] if tried else [])
    if not opened:
        if not candidates and not notes:
            parts.append("no opener is available on %s" % facts["platform"])
        if facts["open_enabled"]:
            parts += opener_advice(url, facts)
    why = "; ".join(parts)
    log.event("browser-open", opened=opened, detail=why.replace(url, "<url>"))
    return opened, why


# -- the client's own form (form-mode elicitation) ----------------------------------------
#
# Form elicitation takes a flat object of strings, enums and arrays of enums: one field per
# question, plus "<id>__other" for a free-text Other. No notes, no defer, no previews.

ELICITATION_OTHER_SUFFIX = "__other"


def elicitation_unfit(questions: list):
    """Why these questions cannot be one flat native form; None when they can."""
    ids = {question["id"] for question in questions}
    for question in questions:
        if question["kind"] == "rank":
            return "question %s is a rank question" % quote(question["id"])
        for option in question["options"]:
            if option["textInput"] is not None:
                return "option %s of question %s has a text field (textInput)" % (
                    quote(option["id"]), quote(question["id"]))
        other = question["id"] + ELICITATION_OTHER_SUFFIX
        if question["options"] and question["allowOther"] and other in ids:
            return "question id %s is also the name of the Other field of %s" % (
                quote(other), quote(question["id"]))
    return None


def elicitation_message(spec: dict, questions: list) -> str:
    lines = [spec["title"]]
    if spec.get("intro"):
        lines += ["", spec["intro"]]
    lines += ["", "%d question%s. Leave a field empty to skip it." % (
        len(questions), "" if len(questions) == 1 else "s")]
    return "\n".join(lines)


def elicitation_schema(questions: list) -> dict:
    """The requestedSchema: single select a titled `oneOf` with the recommendation as its
    default, multi select an array with titled `items.anyOf`, free text a string."""
    properties = {}
    for question in questions:
        recommended = question["recommended"]
        choices = [
            {"const": option["id"],
             "title": option["label"] + (" (recommended)" if option["id"] in recommended else "")}
            for option in question["options"]
        ]
        field = {"type": "string", "title": question["header"]}
        if choices and question["multiSelect"]:
            field = {"type": "array", "title": question["header"], "items": {"anyOf": choices}}
            if recommended:
                field["default"] = list(recommended)
        elif choices:
            field["oneOf"] = choices
            if recommended:
                field["default"] = recommended[0]
        description = _elicitation_description(question)
        if description:
            field["description"] = description
        properties[question["id"]] = field
        if choices and question["allowOther"]:
            properties[question["id"] + ELICITATION_OTHER_SUFFIX] = {
                "type": "string",
                "title": "%s (Other)" % question["header"],
                "description": "Your own answer, if none of the options fits.",
            }
    return {"type": "object", "properties": properties}


def _elicitation_description(question: dict) -> str:
    parts = [question["body"]] if question["body"] else []
    if question["recommended"] and question["rationale"]:
        parts.append("Why recommended: " + question["rationale"])
    return "\n\n".join(parts)


def answers_from_elicitation(questions: list, content):
    """(answers by question id, ignored values): the client's accepted content, read leniently.

    A value that is not one of the question's option ids, or of the wrong type, is left out
    and reported; so are fields the form did not ask for."""
    content = content if isinstance(content, dict) else {}
    answers, ignored, asked = {}, [], set()
    for question in questions:
        qid = question["id"]
        asked.add(qid)
        value = content.get(qid)
        option_ids = [option["id"] for option in question["options"]]
        selected, other = [], None
        if not option_ids:
            other, bad = _elicited_text(value)
            ignored += ["%s=%s" % (qid, bad)] if bad else []
        else:
            values = value if isinstance(value, list) else [] if value in (None, "") else [value]
            kept = []
            for entry in values:
                if isinstance(entry, str) and entry in option_ids:
                    if entry not in kept:
                        kept.append(entry)
                else:
                    ignored.append("%s=%s" % (qid, describe(entry)))
            if not question["multiSelect"] and len(kept) > 1:
                ignored += ["%s=%s" % (qid, quote(entry)) for entry in kept[1:]]
                kept = kept[:1]
            selected = [oid for oid in option_ids if oid in kept]
            if question["allowOther"]:
                asked.add(qid + ELICITATION_OTHER_SUFFIX)
                other, bad = _elicited_text(content.get(qid + ELICITATION_OTHER_SUFFIX))
                ignored += ["%s%s=%s" % (qid, ELICITATION_OTHER_SUFFIX, bad)] if bad else []
        if selected or other:
            answers[qid] = {"status": "answered", "selected": selected, "optionTexts": {},
                            "other": other, "ranked": None, "notes": None}
        else:
            answers[qid] = unanswered()
    ignored += ["%s (not asked)" % quote(key) for key in content if key not in asked]
    return answers, ignored


def _elicited_text(value):
    """(text or None, description of an unusable value or None)."""
    if value is None or isinstance(value, str):
        return _clean_text(value), None
    return None, describe(value)


def elicitation_action(response):
    """(action, detail) of the client's response to elicitation/create: action is "accept",
    "decline" or "cancel", or None with the error as detail."""
    if not isinstance(response, dict):
        return None, "no response"
    result = response.get("result")
    if isinstance(result, dict) and result.get("action") in ("accept", "decline", "cancel"):
        return result["action"], ""
    error = response.get("error")
    if isinstance(error, dict):
        return None, "error %s: %s" % (error.get("code"), error.get("message"))
    return None, "an unexpected response %s" % cut(json.dumps(response), 200)


# ============================================================================================
# The tools: ask_user_rich, append_questions, await_user_answers
# ============================================================================================

class InterviewTools:
    """The three tools and their delivery (browser, link, form and URL elicitation, waiting).
    They talk to the client only through the per-call client object: `client_info`,
    `elicitation_modes()`, `reports_progress`, `progress(message)`, `elicit(key, params,
    interview)`, `elicitation_finished(key, interview)`, `about_to_block(interview)` and its
    `cancellation`; so every protocol era serves the same tools."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.log = runtime.log

    def call(self, name: str, arguments: dict, client):
        """The tools/call result, or None when the call ends without a response."""
        try:
            return getattr(self, name)(arguments, client)
        except InvalidInterview as problems:
            return error_result(str(problems))
        except InterviewError as error:
            return error_result(tool_error_text(error))
        except InputRequired:
            raise
        except Exception as error:
            self.log.event("internal-error", "error", tool=name, error=repr(error)[:300])
            return error_result(
                "ask-user-rich failed inside %s: %r. The interview, if any, stays open; "
                "see server.log in %s." % (name, error, self.runtime.config.log_dir)
            )

    def ask_user_rich(self, arguments: dict, client):
        interview = client.resumed_interview(self.runtime.hub) or self.runtime.open_interview(
            arguments, agent=agent_name(client.client_info)
        )
        delivery = interview.options["delivery"]
        if delivery == "link":
            return awaiting_result(interview, "Browser opening was skipped (delivery=link).")
        if delivery == "elicitation":
            handled, result = self.deliver_by_elicitation(interview, client)
            if handled:
                return result
        return self.deliver_by_browser(interview, client, interview.options["timeoutSeconds"])

    def append_questions(self, arguments: dict, client):
        problems = check_session_arguments(arguments, APPEND_FIELDS)
        if problems.lines:
            raise InvalidInterview(problems.lines, FOLLOW_UP_HEADING)
        interview = self.runtime.hub.require(arguments["sessionId"])
        reply = self.runtime.append_questions(interview.id, arguments.get("questions"), arguments.get("note"))
        return appended_result(reply, interview.spec["title"])

    def await_user_answers(self, arguments: dict, client):
        problems = check_session_arguments(arguments, AWAIT_FIELDS)
        timeout = check_timeout(arguments.get("timeoutSeconds"), problems)
        if problems.lines:
            raise InvalidInterview(problems.lines, "Invalid arguments:")
        session_id = arguments.get("sessionId")
        interview = self.runtime.hub.get(session_id)
        if interview is None:
            record = self.runtime.archive.find(session_id)
            if record is None:
                raise UnknownInterview(session_id)
            self.log.event("archive-hit", interview=session_id)
            return answers_result(archived_result(record))
        return self.wait_for_answers(interview, client, timeout)

    def wait_for_answers(self, interview: Interview, client, timeout):
        """Block until the submit; the result, an awaiting result, or None (no response)."""
        with interview.lock:
            if interview.state != "pending":
                return answers_result(interview.result)
        client.about_to_block(interview)
        report = None
        if client.reports_progress:
            def report(facts: dict, first: bool) -> None:
                # Only the first report carries the token-bearing URL.
                client.progress(progress_message(facts), interview.url if first else None)

        result, why = self.runtime.hub.wait(
            interview, client.cancellation, timeout, report, self.runtime.config.progress_ms / 1000.0
        )
        if why == "settled":
            return answers_result(result)
        if why == "timeout":
            return awaiting_result(interview, "Stopped waiting after %ds (timeoutSeconds)." % timeout)
        return None

    # -- delivery -------------------------------------------------------------------------

    def deliver_by_browser(self, interview: Interview, client, timeout):
        """Open the form and wait; else ask the client to open it (URL elicitation); else
        return the link at once with every reason."""
        if client.retrying(URL_ELICITATION_KEY):  # the browser already failed in the first round
            return self.deliver_by_url_elicitation(interview, client, timeout, None)
        config = self.runtime.config
        opened, why = open_browser(interview.url, config, self.log)
        if opened:
            return self.wait_for_answers(interview, client, timeout)
        if config.open_browser and "url" in client.elicitation_modes():
            return self.deliver_by_url_elicitation(interview, client, timeout, why)
        return awaiting_result(interview, "Could not open the browser (%s)." % why)

    def deliver_by_url_elicitation(self, interview: Interview, client, timeout, why: str):
        """A URL-mode elicitation: the client shows the link and opens it with the user's
        consent; then wait as after a browser open. `why` the browser did not open: None in the
        retry of a multi round-trip call, which carries the user's answer to the first round."""
        with interview.lock:
            count = len(interview.spec["questions"])
        params = {
            "mode": "url",
            "url": interview.url,
            "message": "Answer %d question%s in the form %s. No browser could be opened from "
            "here, so please open this link." % (count, "" if count == 1 else "s",
                                                 quote(interview.spec["title"])),
        }
        self.log.event("url-elicitation", interview=interview.id)
        outcome, response = client.elicit(URL_ELICITATION_KEY, params, interview)
        if outcome == "settled":
            client.elicitation_finished(URL_ELICITATION_KEY, interview)
            return answers_result(interview.result)
        if outcome != "answered":
            return None
        action, detail = elicitation_action(response)
        self.log.event("url-elicitation-answer", interview=interview.id,
                       action=action or "error", detail=detail)
        if action != "accept":
            reason = URL_DECLINED_TEXT if why is None else url_refusal_reason(why, action, detail)
            return awaiting_result(interview, reason)
        result = self.wait_for_answers(interview, client, timeout)
        client.elicitation_finished(URL_ELICITATION_KEY, interview)
        return result

    def deliver_by_elicitation(self, interview: Interview, client):
        """The client's own form (form-mode elicitation): (handled, result). Not handled when
        the client declared no form elicitation, the interview is not flat, or the client
        failed the request: the caller then delivers by browser."""
        with interview.lock:
            questions = list(interview.spec["questions"])
        if "form" not in client.elicitation_modes():
            unfit = "the client declared no form elicitation"
        else:
            unfit = elicitation_unfit(questions)
        if unfit is not None:
            self.log.event("elicitation-fallback", interview=interview.id, why=unfit)
            return False, None
        params = {
            "mode": "form",
            "message": elicitation_message(interview.spec, questions),
            "requestedSchema": elicitation_schema(questions),
        }
        self.log.event("form-elicitation", interview=interview.id, questions=len(questions))
        outcome, response = client.elicit(FORM_ELICITATION_KEY, params, interview)
        if outcome == "settled":
            return True, answers_result(interview.result)
        if outcome != "answered":
            return True, None
        action, detail = elicitation_action(response)
        if action is None:
            self.log.event("elicitation-fallback", interview=interview.id,
                           why="the client failed the form elicitation: %s" % detail)
            return False, None
        if action == "accept":
            answers, ignored = answers_from_elicitation(questions, response["result"].get("content"))
            if ignored:
                self.log.event("elicitation-ignored", "warning", interview=interview.id,
                               values=cut(", ".join(ignored), 400))
            status = "submitted"
        else:
            answers = {question["id"]: unanswered() for question in questions}
            status = "declined" if action == "decline" else "cancelled"
        self.log.event("form-elicitation-answer", interview=interview.id, action=action)
        # None: the web form was submitted first, and its answers stand.
        result = self.runtime.hub.settle_without_form(interview, answers, status, "elicitation")
        return True, answers_result(result if result is not None else interview.result)


FORM_ELICITATION_KEY = "answers"
URL_ELICITATION_KEY = "open-form"
URL_DECLINED_TEXT = "The user declined to open the form (URL elicitation)."


def url_refusal_reason(why: str, action, detail) -> str:
    refusal = {
        "decline": "the user declined it",
        "cancel": "the user dismissed it",
    }.get(action, "the client failed: %s" % detail)
    return (
        "Could not open the browser (%s). The client was asked to open the link (URL "
        "elicitation) and %s." % (why, refusal)
    )


def check_session_arguments(arguments: dict, fields) -> Problems:
    """Unknown fields and a malformed sessionId, as problem lines."""
    problems = Problems()
    problems.unknown_fields(None, arguments, fields)
    session_id = arguments.get("sessionId")
    if session_id is None:
        problems.add("sessionId", '"sessionId" is required')
    elif not isinstance(session_id, str):
        problems.add("sessionId", '"sessionId" must be a string, not %s' % describe(session_id))
    return problems


def appended_result(reply: dict, title: str) -> dict:
    """One sentence for clients that show text, then the JSON."""
    count = reply["appended"]
    sentence = (
        "Appended %d question%s to %s (%d in all); the open form shows them now. The answers "
        "arrive through the call that is waiting, or call await_user_answers with sessionId %s."
        % (count, "" if count == 1 else "s", quote(title), reply["total"], quote(reply["sessionId"]))
    )
    return {
        "content": [{"type": "text", "text": sentence}, {"type": "text", "text": json.dumps(reply)}],
        "structuredContent": reply,
    }


# ============================================================================================
# The code cache: where askrich.pyz keeps its compiled code
# ============================================================================================
#
# A module inside a zip is compiled at every start, so askrich.pyz keeps this module's compiled
# code in a per-user folder. Its entry point runs before this module can be imported, so
# build_zipapp.py copies the three functions below, and ENV_CODE_CACHE and ENV_RESTARTED, into
# it: keep them to os and sys.


def code_cache_dir():
    """The per-user folder for compiled code, or None with no home directory."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or ""
        path = os.path.join(base, "ask-user-rich", "Cache")
    else:
        home = os.path.expanduser("~")
        if home.rstrip("/") == "":  # HOME="" would put the cache at /.cache
            home = "~"
        if sys.platform == "darwin":
            path = os.path.join(home, "Library", "Caches", "ask-user-rich")
        else:
            base = os.environ.get("XDG_CACHE_HOME")
            if not base or not os.path.isabs(base):
                base = os.path.join(home, ".cache")
            path = os.path.join(base, "ask-user-rich")
    return path if os.path.isabs(path) else None  # no home: no cache, never a relative folder


def own_folder(folder: str) -> bool:
    """Whether compiled code in `folder` may be trusted: on POSIX it must be this user's and
    writable by nobody else, or another user could plant code that we would run."""
    if os.name != "posix":
        return True
    status = os.stat(folder)
    return status.st_uid == os.getuid() and not status.st_mode & 0o022


def store_code(folder: str, name: str, blob: bytes, stem: str, keep: int = 4) -> None:
    """Write one compiled-code file into `folder` whole or not at all (0600, through a temporary
    file and a rename, so a concurrent start never reads half of it), then delete all but the
    `keep` newest files whose names start with `stem`: the versions of the code left behind."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, name)
    temporary = "%s.%d.tmp" % (path, os.getpid())
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(blob)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    try:
        older = sorted((other for other in os.listdir(folder) if other.startswith(stem) and other.endswith(".pyc")),
                       key=lambda other: os.stat(os.path.join(folder, other)).st_mtime)
        for other in older[:-keep]:
            os.unlink(os.path.join(folder, other))
    except OSError:
        pass  # another start tidied at the same time


# ============================================================================================
# Command line
# ============================================================================================

USAGE = """usage: askrich.py [demo | ask FILE.json | doctor] [--link | --no-open]

  (no command)         run the stdio MCP server (what an MCP client launches)
  demo                 ask the built-in demo interview and print the result JSON
  ask FILE.json        ask the interview in FILE.json ('-' reads stdin) and print the result
  doctor               check Python, the log directory, the browser opener and the form server
  --link               with demo/ask: do not open a browser; print the link and wait
  --no-open            the same as --link
  --version            print the version
  --help               print this help

exit codes: 0 success, 2 usage or bad interview file, 1 anything else
"""


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        return run_stdio_server()
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if args[0] in ("-V", "--version"):
        sys.stdout.write("%s %s\n" % (SERVER_NAME, __version__))
        return 0
    command, rest = args[0], args[1:]
    flags = [arg for arg in rest if arg.startswith("--")]
    positional = [arg for arg in rest if not arg.startswith("--") or arg == "-"]
    unknown = [flag for flag in flags if flag not in ("--link", "--no-open")]
    if command == "doctor" and not rest:
        return run_doctor()
    if command in ("demo", "ask") and not unknown:
        if command == "demo" and not positional:
            source = read_asset("demo.json").decode("utf-8")
        elif command == "ask" and len(positional) == 1:
            source = read_interview_file(positional[0])
            if source is None:
                return 2
        else:
            return usage_error("%s takes %s" % (command, "no file" if command == "demo" else "one FILE.json"))
        return run_cli_interview(source, open_it=not flags)
    return usage_error("unknown arguments: %s" % " ".join(args))


def usage_error(text: str) -> int:
    sys.stderr.write("askrich.py: %s\n\n%s" % (text, USAGE))
    return 2


def read_interview_file(path: str):
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as error:
        sys.stderr.write("askrich.py: cannot read %s: %s\n" % (path, error))
        return None


def run_stdio_server() -> int:
    import signal

    hold_running_archive()
    config, warnings = Config.from_env()
    protocol_out = sys.stdout.buffer
    # stdout belongs to the protocol: a stray print anywhere must land on stderr instead.
    sys.stdout = sys.stderr
    runtime = Runtime(config)
    for warning in warnings:
        runtime.log.event("config-warning", "warning", detail=warning)
    runtime.log.event("start", version=__version__, python=sys.version.split()[0], pid=os.getpid())
    server = McpServer(runtime, sys.stdin.buffer, protocol_out)

    def on_signal(signum, frame):
        runtime.log.event("signal", signal=signum)
        server.stop()

    stops = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]
    for signum in stops:
        signal.signal(signum, on_signal)
    try:
        server.serve()
    finally:
        runtime.log.event("shutdown")
        runtime.close()
    if server.reader_thread.is_alive():
        # Stopped by a signal: the stdin thread still sits in readline() holding stdin's lock,
        # and interpreter teardown would abort on it ("could not acquire lock for <stdin> at
        # interpreter shutdown", exit -6). Logs are closed; flush and leave without teardown.
        for stream in (protocol_out, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(0)
    return 0


def run_cli_interview(source: str, open_it: bool) -> int:
    """demo / ask: one interview in this terminal; the result JSON on stdout."""
    try:
        arguments = parse_json(source)
    except (ValueError, RecursionError) as error:  # a nesting bomb is a usage error too
        sys.stderr.write("askrich.py: the interview is not valid JSON: %s\n" % error)
        return 2
    try:
        validate_interview(arguments)  # before any log directory or server exists
    except InvalidInterview as problems:
        sys.stderr.write("%s\n" % problems)
        return 2
    config, warnings = Config.from_env()
    runtime = Runtime(config)
    for warning in warnings:
        runtime.log.event("config-warning", "warning", detail=warning)
    try:
        interview = runtime.open_interview(arguments)
        sys.stderr.write("\nThe interview %s is at:\n  %s\n\n" % (quote(interview.spec["title"]), interview.url))
        if open_it and interview.options["delivery"] != "link":
            opened, why = open_browser(interview.url, config, runtime.log)
            if not opened:
                sys.stderr.write("Could not open the browser (%s).\n" % why)

        def report(facts: dict, first: bool) -> None:
            sys.stderr.write("[ask-user-rich] %s\n" % progress_message(facts))

        result, why = runtime.hub.wait(
            interview, None, interview.options["timeoutSeconds"], report, config.progress_ms / 1000.0
        )
        if result is None:
            sys.stderr.write("askrich.py: stopped waiting (%s); the form is closed.\n" % why)
            return 1
        sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
        return 0
    except FormServerUnavailable as error:
        sys.stderr.write("askrich.py: could not start the form server on %s:%d (%s); free the port "
                         "or set %s to another one.\n" % (error.host, error.port, error.reason, ENV_PORT))
        return 1
    except KeyboardInterrupt:
        return 1
    finally:
        runtime.close()


def run_doctor(environ=None, facts=None, out=None) -> int:
    """Print what this machine offers (Python, log directory, WSL, display, the opener plan)
    and prove the form server works; 1 when something is broken, with what to do.

    A machine where no browser can be opened is reported with its fixes but is not broken:
    calls then return the link. `environ` and `facts` let tests describe any machine."""
    env = os.environ if environ is None else environ
    out = sys.stdout if out is None else out
    config, warnings = Config.from_env(env)
    broken = []  # (what is broken, what to do)

    def line(text: str = "") -> None:
        out.write(text + "\n")

    line("ask-user-rich %s" % __version__)
    line("Python %s (%s)" % (sys.version.split()[0], sys.executable))
    for warning in warnings:
        line("config warning: %s" % warning)
    log_problem = _doctor_log_dir(config.log_dir)
    if log_problem is None:
        line("log directory: %s (writable)" % config.log_dir)
    else:
        line("log directory: %s (NOT writable: %s; logs go to stderr only and answers are not "
             "archived)" % (config.log_dir, log_problem))
        broken.append(("the log directory cannot be written",
                       "set %s to a directory you can write, or fix its permissions" % ENV_LOG_DIR))

    facts = opener_facts(config, env) if facts is None else facts
    for text in _doctor_machine(facts):
        line(text)
    sample = "http://%s:%d/s/TOKEN" % (config.public_host, config.port)
    candidates, notes = plan_openers(sample, facts)
    line("browser opener plan (tried in order until one works):")
    for opener in candidates:
        line("  try   %s" % opener.describe(sample))
    for note in notes:
        line("  skip  %s" % note)
    if not candidates:
        line("  => no browser can be opened from here: ask_user_rich returns the link at once "
             "(status awaiting), or asks the client to open it when the client offers URL "
             "elicitation.")
        if facts["open_enabled"]:
            line("what to do:")
            for advice in opener_advice(sample, facts):
                line("  - %s" % advice)

    if config.port:
        line("fixed port %d: %s" % (config.port, _doctor_port(config.host, config.port)))
    problem = _doctor_self_test(config, line)
    if problem is not None:
        broken.append(problem)
    if broken:
        line()
        line("BROKEN:")
        for what, fix in broken:
            line("  - %s: %s" % (what, fix))
        return 1
    line()
    line("ok: the form server works%s." % (
        "" if candidates else "; no browser opens here, so share the link (see above)"))
    return 0


def _doctor_log_dir(log_dir: str):
    """None when the log directory can be created and written, else why not."""
    try:
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
        probe = os.path.join(log_dir, ".doctor-%d" % os.getpid())
        with open(probe, "w", encoding="utf-8") as handle:
            handle.write("ok")
        os.unlink(probe)
    except OSError as error:
        return error.strerror or str(error)
    return None


def _doctor_machine(facts: dict) -> list:
    """Lines about the machine: platform, WSL and interop, display, SSH, container."""
    lines = ["platform: %s" % facts["platform"]]
    if facts["platform"] in ("darwin", "win32"):
        return lines
    if facts.get("wsl"):
        lines.append("WSL: yes; interop: %s" % (
            "on" if facts.get("interop")
            else "OFF (no WSLInterop entry in %s: Windows programs cannot run)" % WSL_INTEROP_DIR))
    else:
        lines.append("WSL: no")
    shown = ["%s=%s" % (name, value) for name, value in sorted(facts["display"].items()) if value]
    lines.append("display: %s" % (", ".join(shown) if shown else
                                  "none (DISPLAY and WAYLAND_DISPLAY are unset): no browser window can appear here"))
    if facts.get("https_handler") is not None:
        lines.append("https handler (xdg-mime): %s" % (facts["https_handler"] or "none"))
    if facts.get("ssh"):
        lines.append("SSH session: yes (a browser would open on this machine, not yours)")
    if facts.get("container"):
        lines.append("container: yes")
    return lines


def _doctor_port(host: str, port: int) -> str:
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, port))
    except OSError as error:
        return "NOT free (%s); another ask-user-rich may be running there" % (error.strerror or error)
    return "free"


def _doctor_self_test(config: Config, line):
    """Serve a one-question interview on a free port, then fetch its page, an asset and its
    API and submit it, like a browser. None when all worked, else (what, what to do)."""
    import io
    import tempfile
    import urllib.request

    fetcher = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
    steps = []
    with tempfile.TemporaryDirectory() as scratch:
        probe = Config(open_browser=False, log_dir=scratch, host=config.host)
        # The self-test's own events stay in its scratch folder, not on the doctor's stderr.
        runtime = Runtime(probe, Log(scratch, stream=io.StringIO()))
        step = "starting the form server"
        try:
            interview = runtime.open_interview({"title": "doctor", "questions": [{"id": "q", "header": "ok?"}]})
            api = interview.url.replace("/s/", "/api/s/")
            for step, url, body, expected in (
                ("the form page", interview.url, None, "text/html"),
                ("the asset js/main.js", interview.url.split("/s/")[0] + "/assets/js/main.js", None, "text/javascript"),
                ("the interview API", api, None, "application/json"),
                ("a submit", api + "/submit", {"answers": {"q": {"other": "ok"}}}, "application/json"),
            ):
                request = urllib.request.Request(
                    url,
                    data=None if body is None else json.dumps(body).encode("utf-8"),
                    headers={} if body is None else {"Content-Type": "application/json"},
                )
                with fetcher.open(request, timeout=10) as response:
                    response.read()
                    kind = response.headers.get("Content-Type", "")
                    if not kind.startswith(expected):
                        raise OSError("HTTP %d with %s, expected %s" % (response.status, kind, expected))
                    steps.append("%s HTTP %d" % (step, response.status))
            if interview.state != "submitted":
                raise OSError("the submit did not settle the interview")
        except (InterviewError, OSError, InvalidInterview) as error:
            line("form server self-test: FAILED at %s (%s)" % (step, error))
            if step == "starting the form server":
                fix = "free the port or set %s / %s to something this machine can bind" % (ENV_HOST, ENV_PORT)
            else:
                fix = "reinstall ask-user-rich (askrich.py with its assets/ folder, or askrich.pyz) and check that nothing intercepts loopback connections"
            return ("the form server self-test failed at %s" % step, fix)
        finally:
            runtime.close()
    line("form server self-test: %s: OK" % ", ".join(steps))
    return None


if __name__ == "__main__":
    raise SystemExit(main())
