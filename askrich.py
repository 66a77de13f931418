#!/usr/bin/env python3
"""ask-user-rich: a stdio MCP server that puts a long, structured interview to the user.

An agent sends every question of a round in one `ask_user_rich` call; this server serves the
interview as a local web form, blocks the call until the user submits, and returns every answer,
structured. Run it as an MCP command (`python3 askrich.py`), or try it with
`python3 askrich.py demo`. Standard library only; Python 3.8 to 3.13.

Security model, in three lines: the form server listens on loopback and answers only requests
whose Host is a loopback name (DNS rebinding) and whose Origin, if any, is its own; each
interview URL carries a 144-bit bearer token, never logged whole; submits must be JSON, which
forces a CORS preflight that is never answered.

Contents, in dependency order (each a banner below, using only what the banners above it define):
  Constants · Configuration · Errors
  Interview model and validation    the call's arguments → a normalized spec, or every problem
  Answers and results               the form's answers → the result the agent receives
  Logs and the answer archive       server.log, answers/*.json and the private files under them
  Attachments                       the files the user adds to notes
  Interviews and the waits on them  Interview, its waiters, and the SessionHub of them all
  JSON-RPC over stdio               one message a line, parsed strictly
  The form's files                  assets/, from a checkout or from the running askrich.pyz
  HTTP form server                  the route table and the request plumbing
  Delivery                          openers, and the client's own form (elicitation)
  Notices                           telling the person: a desktop notice, a push to the phone
  The person's away policy          what happens when nobody answers, if the person chose it
  The inbox                         every process's pending interviews, on one page and port
  Runtime                           the hub, the log, the form server, the inbox and notices
  Tool definitions                  instructions, schemas, the results' shapes
  Per-call objects and the two protocol eras   what a tool talks to for one call
  The tools                         ask_user_rich, append_questions, await_user_answers
  The MCP server                    each era's methods, dispatch, shutdown
  The commands                      demo, ask, inbox, history and notify --test
  The hooks                         Claude Code's own questions and its permission asks
  The doctor                        what this machine gives the server, in one report
  Start-up and memory               a spawned server answers at once and idles small
  Command line                      main(): which command runs
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = (
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
)

# Only what the MCP handshake needs is imported here; everything else where it is first used
# (see "Start-up and memory").
import collections
import json
import os
import sys
import threading
import time
from types import MappingProxyType

LOADED = time.monotonic()  # about when this process started: a hook's limit counts from then


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
# MCP Apps: a host that declares this extension shows the form inside the conversation.
APPS_EXTENSION = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"
APP_RESOURCE_URI = "ui://ask-user-rich/form.html"
APP_SHOWN_REASON = "Shown in the conversation."
APP_CHUNK_MAX_CHARS = 512 * 1024  # one form_attach call carries at most this much base64
APP_OPEN_UPLOADS = 4  # unfinished form_attach uploads held in memory per interview
APP_ANSWER_SECONDS = 5  # after the app's submit, how long its answer to the host's dialog may take
TASK_POLL_MS = 2000
TASK_POLL_MAX_MS = 30000
# Claude Code shows a task's statusMessage cut at 200 characters: the form's link, at its end,
# must fit within them or the person gets a link without its token.
STATUS_LINE_CHARS = 200
# discover and the form's resource: the same answer for every caller for the life of the process.
CACHE_HINTS = MappingProxyType({"ttlMs": 3600000, "cacheScope": "public"})
# tools/list and resources/list depend on whether the request declared MCP Apps: a shared cache
# must not hand one caller's list to another, so they may be reused only by the one that asked.
CALLER_CACHE_HINTS = MappingProxyType({"ttlMs": 3600000, "cacheScope": "private"})
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
ENV_INBOX_PORT = "ASK_USER_RICH_INBOX_PORT"
ENV_PUBLIC_URL = "ASK_USER_RICH_PUBLIC_URL"
ENV_NOTIFY = "ASK_USER_RICH_NOTIFY"
ENV_NOTIFY_AFTER = "ASK_USER_RICH_NOTIFY_AFTER"
ENV_PUSH_URL = "ASK_USER_RICH_PUSH_URL"
ENV_PUSH_TOKEN = "ASK_USER_RICH_PUSH_TOKEN"
ENV_PUSH_LINK = "ASK_USER_RICH_PUSH_LINK"
ENV_AWAY = "ASK_USER_RICH_AWAY"
ENV_AWAY_AFTER = "ASK_USER_RICH_AWAY_AFTER"
ENV_PROTOCOL = "ASK_USER_RICH_PROTOCOL"
ENV_APP_FALLBACK = "ASK_USER_RICH_APP_FALLBACK"
ENV_CODE_CACHE = "ASK_USER_RICH_CODE_CACHE"
ENV_RESTARTED = "ASK_USER_RICH_RESTARTED"  # internal: askrich.pyz started over from its code cache

MAX_TIMEOUT_SECONDS = 604800  # one week
SETTLED_RETENTION_SECONDS = 30 * 60
MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer stdin line is refused without being held whole
MAX_LINE_VALUES = 200000  # JSON values in one stdin line: what parsing it may cost is bounded
MAX_BATCH = 100  # messages in one JSON-RPC batch, so its replies are bounded too
MAX_BODY_BYTES = 5 * 1024 * 1024
# Every free text the user writes (an Other, an option's text, notes, the general notes, a skip
# reason): no single field can blow up the agent's context. The form reads it from /api/s
# (form_payload), and the elicitation schema states it.
FREE_TEXT_MAX = 20000
SSE_PING_SECONDS = 15.0
STATE_HISTORY = 32  # states an event stream can catch up on after a burst of changes
PAGES_REMEMBERED = 16  # an interview's pages whose last visibility report is kept (Interview._in_view)
PROGRESS_CHANGE_MIN_SECONDS = 1.0  # answered-count changes are reported at most once a second
OPENER_GRACE_SECONDS = 5.0  # an opener still running after this long is a foreground launcher
HTTP_IDLE_TIMEOUT_SECONDS = 30  # a client that trickles its request in loses its thread
REPLY_DRAIN_SECONDS = 1.0  # how long closing waits for replies still being written
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
STOP_DEADLINE_SECONDS = 1.5  # a stop signal ends the process by then, even if a clean stop hangs
INBOX_PORT = 47615  # the inbox's one stable address, on 127.0.0.1
PUBLIC_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-[]:")
NOTIFY_MODES = ("desktop", "push", "both", "off")
# The person's away policy (what happens when nobody answers): the first is the default, and
# decides nothing for the person.
AWAY_POLICIES = ("wait", "recommended", "decline")
AWAY_AFTER_MINUTES = 30.0

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
        "js/review.js",
        "js/dom.js",
        "js/keys.js",
        "js/rank.js",
        "js/live.js",
        "js/i18n.js",
        "js/attach.js",
        "js/textlimit.js",
        "js/submit.js",
        "js/inbox.js",
        "js/history.js",
        "js/transport.js",
        "js/prove.js",
        "js/guard.js",
        "js/share.js",
        "js/visibility.js",
        "js/permission.js",
        "inbox.html",
        "vendor/marked.esm.js",
        "vendor/purify.es.mjs",
        "vendor/qrcode.mjs",
    }
    | {"i18n/%s.json" % tag for tag in FORM_LANGUAGES}
)
# Fixed, not guessed: on Windows `mimetypes` often calls .js text/plain, which browsers refuse
# to run as a module.
ASSET_CONTENT_TYPES = MappingProxyType({
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
})
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


# The states of an interview, as the /state JSON and the result's status spell them.
PENDING = "pending"
SUBMITTED = "submitted"
DECLINED = "declined"
CANCELLED = "cancelled"

PERMISSION = "permission"  # the internal option `kind` of a permission ask, and its question id
PERMISSION_DENIED = "The person denied this in ask-user-rich."
PERMISSION_ROW_CHARS = 200  # what an inbox row says the agent wants to run, at most
# What the agent wants, by tool: the key of its header (`perm.header.<action>` in assets/i18n).
PERMISSION_ACTIONS = ("run", "edit", "write", "fetch", "mcp", "use")


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
        "inbox_port",
        "public_url",
        "notify",
        "notify_after",
        "push_url",
        "push_token",
        "push_link",
        "app_fallback",
        "away",
        "away_after",
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
        inbox_port: int = 0,
        public_url: str | None = None,
        notify: str = "off",
        notify_after: int = 20,
        push_url: str | None = None,
        push_token: str | None = None,
        push_link: bool = True,
        app_fallback: int = 15,
        away: str = "wait",
        away_after: float = AWAY_AFTER_MINUTES,
    ) -> None:
        # Frozen: whatever holds a Config may rely on it staying as it was read; a changed
        # setting is a new Config (replace()).
        values = {
            "open_browser": open_browser,
            "open_cmd": open_cmd,
            "port": port,
            "host": host,
            "public_host": public_host,
            "progress_ms": progress_ms,
            "log_dir": log_dir or default_log_dir(),
            "protocol": protocol,  # "auto": both eras; "legacy": only the initialize era
            # The well-known inbox port is what from_env picks: a Config built in code (the
            # tests, the doctor's self-test) keeps out of the user's inbox unless it names a port.
            "inbox_port": inbox_port,  # 0: no inbox
            # The origin a tunnel gives the front door (https://devbox.example.ts.net): every
            # URL shown starts with it instead of http://localhost:<inbox port>.
            "public_url": public_url,
            # As for the inbox: from_env turns desktop notices on, a Config built in code
            # (tests, the doctor's self-test) never pops one up on the machine it runs on.
            "notify": notify,  # "desktop", "push", "both" or "off"
            "notify_after": notify_after,  # seconds an opened, unviewed form waits for a notice
            "push_url": push_url,
            "push_token": push_token,
            "push_link": push_link,  # may a pushed notice carry the form's (public) link
            # Seconds a host that declared MCP Apps may take to load the form before the
            # browser gets it: some declare the extension and never render the app.
            "app_fallback": app_fallback,
            "away": away,  # the person's away policy: AWAY_POLICIES
            "away_after": away_after,  # minutes without a sign of the person before it acts
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("Config is frozen: build a new one with replace(%s=...)" % name)

    def __delattr__(self, name):
        raise AttributeError("Config is frozen")

    def replace(self, **changes) -> "Config":
        """A new Config with `changes` and every other setting as here."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return Config(**values)

    def __repr__(self) -> str:
        def shown(name: str):
            value = getattr(self, name)
            # The push token and a webhook's URL are keys: a repr may end up in a log.
            return redact(value) if name in ("push_token", "push_url") and value else value

        return "Config(%s)" % ", ".join("%s=%r" % (name, shown(name)) for name in self.__slots__)

    @classmethod
    def from_env(cls, environ=None) -> tuple[Config, list[str]]:
        """The configuration and a list of warnings, one per bad value (its default is used)."""
        env = os.environ if environ is None else environ
        warnings: list[str] = []

        def integer(name: str, default: int, low: int, high: int) -> int:
            return env_integer(env, name, default, low, high, warnings)

        open_raw = env.get(ENV_OPEN, "").strip().lower()
        if open_raw not in ("", "0", "1", "false", "true", "no", "yes", "off", "on"):
            warnings.append("%s=%r is not 0 or 1; browsers will be opened" % (ENV_OPEN, open_raw))
        public_url, problem = public_origin(env.get(ENV_PUBLIC_URL, ""))
        if problem:
            warnings.append("%s=%r %s; showing local addresses" % (ENV_PUBLIC_URL, env[ENV_PUBLIC_URL], problem))
        notify = env.get(ENV_NOTIFY, "").strip().lower() or "desktop"
        if notify not in NOTIFY_MODES:
            warnings.append("%s=%r is not one of %s; using desktop" % (ENV_NOTIFY, notify, ", ".join(NOTIFY_MODES)))
            notify = "desktop"
        push_url = env.get(ENV_PUSH_URL, "").strip() or None
        if push_url is not None and push_target_kind(push_url) is None:
            warnings.append("%s is not an http(s) URL; nothing is pushed" % ENV_PUSH_URL)
            push_url = None
        push_link = env.get(ENV_PUSH_LINK, "").strip().lower()
        if push_link not in ("", "0", "1"):
            warnings.append("%s=%r is not 0 or 1; the link is sent" % (ENV_PUSH_LINK, push_link))
        away = env.get(ENV_AWAY, "").strip().lower() or AWAY_POLICIES[0]
        if away not in AWAY_POLICIES:
            warnings.append("%s=%r is not one of %s; using wait" % (ENV_AWAY, away, ", ".join(AWAY_POLICIES)))
            away = AWAY_POLICIES[0]
        away_after = away_minutes(env.get(ENV_AWAY_AFTER, ""), warnings)
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
                inbox_port=integer(ENV_INBOX_PORT, INBOX_PORT, 0, 65535),
                public_url=public_url,
                notify=notify,
                notify_after=integer(ENV_NOTIFY_AFTER, 20, 0, 86400),
                push_url=push_url,
                push_token=env.get(ENV_PUSH_TOKEN, "").strip() or None,
                push_link=push_link != "0",
                app_fallback=integer(ENV_APP_FALLBACK, 15, 0, 86400),
                away=away,
                away_after=away_after,
            ),
            warnings,
        )


def away_minutes(raw: str, warnings: list) -> float:
    """ASK_USER_RICH_AWAY_AFTER: a decimal number of minutes above 0 (a week at most)."""
    import math

    raw = raw.strip()
    if not raw:
        return AWAY_AFTER_MINUTES
    try:
        minutes = float(raw)
    except ValueError:
        minutes = math.nan
    if not 0 < minutes <= MAX_TIMEOUT_SECONDS / 60:
        warnings.append("%s=%r is not a number of minutes above 0 and at most %d; using %g"
                        % (ENV_AWAY_AFTER, raw, MAX_TIMEOUT_SECONDS // 60, AWAY_AFTER_MINUTES))
        return AWAY_AFTER_MINUTES
    return minutes


def env_integer(env, name: str, default: int, low: int, high: int, warnings: list) -> int:
    """The whole number `name` sets from `low` to `high`, else `default` (and a warning when
    it is set to something else)."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        warnings.append("%s=%r is not a number from %d to %d; using %d" % (name, raw, low, high, default))
        return default
    return value


def public_origin(raw: str):
    """(origin, None) for an http(s) origin such as https://devbox.example.ts.net or
    http://localhost:9000, lower-cased, without a trailing slash; (None, why) for anything else
    (a path, a query, credentials, another scheme); (None, None) when unset."""
    import urllib.parse

    raw = raw.strip().rstrip("/")
    if not raw:
        return None, None
    try:
        parts = urllib.parse.urlsplit(raw)
        port = parts.port
    except ValueError:
        return None, "is not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None, "is not an http:// or https:// origin"
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        return None, "must be an origin only (scheme, host and port: no path, query or user)"
    if not set(parts.hostname) <= PUBLIC_HOST_CHARS:
        return None, "has a host name that is not plain letters, digits, dots and dashes"
    netloc = parts.netloc.lower()
    if port == {"http": 80, "https": 443}[parts.scheme]:
        netloc = netloc.rsplit(":", 1)[0]  # as a browser writes the Origin header
    return "%s://%s" % (parts.scheme, netloc), None


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


def redact(token: str) -> str:
    """A token as it may appear in a log: its first 4 characters, never the live bearer."""
    return token[:4] + "…"


SLACK_HOSTS = frozenset({"hooks.slack.com"})
DISCORD_HOSTS = frozenset({"discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com"})


def push_target_kind(url: str):
    """"ntfy", "slack", "discord" or "json" for a push URL; None when it is not http(s).

    ntfy is ntfy.sh, a host whose name begins with "ntfy." (a self-hosted one), or any URL
    written `ntfy+https://…`."""
    from urllib.parse import urlsplit

    if url.startswith("ntfy+"):
        return "ntfy" if push_target_kind(url[len("ntfy+"):]) else None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return None
    if host in SLACK_HOSTS:
        return "slack"
    if host in DISCORD_HOSTS:
        return "discord"
    if host == "ntfy.sh" or host.startswith("ntfy."):
        return "ntfy"
    return "json"


# ============================================================================================
# Errors
# ============================================================================================

class InvalidInterview(ValueError):
    """Arguments that do not make an interview; `problems` lists every `- path: problem` line."""

    def __init__(self, problems: list[str], heading: str = "Invalid interview:") -> None:
        self.problems = problems
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


class AnswersNotSaved(InterviewError):
    """The archive could not be written and no call was waiting to take the answers: nothing
    settled, so that the form keeps them and the user can send them again."""

    def __init__(self, reason: str) -> None:
        super().__init__("could not save the answers: %s" % reason)
        self.reason = reason


class AttachmentRefused(InterviewError):
    """An upload or a removal the attachment store does not take. `code` names why, in the
    words of the HTTP error bodies (ERROR_CODES): too-large, too-many-files,
    attachments-too-large, upload-incomplete, bad-file-name, not-found, storage-failed."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


class FormServerUnavailable(InterviewError):
    """The form server could not bind its address; the next interview tries again."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__("cannot bind %s:%d: %s" % (host, port, reason))
        self.host = host
        self.port = port
        self.reason = reason


class UntrustedFolder(PermissionError):
    """A folder of the log dir that someone else could have planted or can write into."""


class ForeignFile(PermissionError):
    """A file where one of ours should be that is not ours: private_file_refusal() says why."""


class JsonRpcError(Exception):
    def __init__(self, code: int, message: str, data=None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class HttpRefusal(Exception):
    """A request refused with a JSON error; raised by routing, body reading and routes. `code`
    defaults to the status's own (ERROR_CODES)."""

    def __init__(self, status: int, error: str, headers=None, code=None, **fields) -> None:
        super().__init__(error)
        self.status = status
        self.headers = dict(headers or {})
        self.body = error_body(status, error, code, **fields)

    def reply(self) -> Reply:
        return json_reply(self.status, self.body, self.headers)


class InboxUnavailable(Exception):
    """The inbox cannot be kept here: a folder or the key is not private, or cannot be made."""


class InboxWriteFailed(Exception):
    """This process's registry entry could not be written now (a full disk): it is tried again."""


class _PageGone(Exception):
    """The page's side of a forwarded request ended (its body cut short, its connection closed)."""


class _OwnerFailed(Exception):
    """A new connection to the owner failed: the status to answer (502, 504) and why."""

    def __init__(self, status: int, error) -> None:
        super().__init__(status, error)
        self.status, self.error = status, error


class NoticeFailed(Exception):
    """A notice a target did not take; the message says why, without any key."""


class InputRequired(Exception):
    """Raised by a call of an era without server-to-client requests: the call must end now,
    asking the client for `requests` (key -> elicitation), and be retried with the answers."""

    def __init__(self, interview: Interview, requests: dict) -> None:
        super().__init__("input required")
        self.interview = interview
        self.requests = requests


class HookInputUnfit(ValueError):
    """The hook's input is not an AskUserQuestion call we can ask: Claude Code asks itself."""


# ============================================================================================
# Interview model and validation
# ============================================================================================
#
# An interview arrives as untrusted JSON from the model. Validation checks everything, reports
# every problem at once (so one corrected call suffices), and returns the normalized spec with
# every default filled in: the form and the result builder never guess.

ID_MAX = 200
ID_ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")
ID_PATTERN = "^[A-Za-z0-9_.:-]{1,%d}$" % ID_MAX  # ID_ALLOWED, as the tools' schemas say it
DELIVERIES = ("browser", "link", "elicitation")  # the first is the default
KINDS = ("choice", "rank")
ASK_FIELDS = ("title", "intro", "questions", "delivery", "timeoutSeconds", "language")
APPEND_FIELDS = ("sessionId", "questions", "note")
AWAIT_FIELDS = ("sessionId", "timeoutSeconds")
QUESTION_FIELDS = (
    "id", "header", "body", "kind", "options", "recommended", "rationale", "multiSelect",
    "allowOther", "dependsOn", "needsPerson",
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


def spoken_list(words) -> str:
    """'"a", "b" or "c"': JSON strings as a sentence lists them."""
    quoted = [quote(word) for word in words]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


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

    def plain(self, text: str) -> None:
        """A problem of the whole input rather than of one path in it."""
        self.lines.append(text)

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


def _check_rank_shape(raw_options, options_given: bool, multi: bool, path: str, problems: Problems) -> None:
    """What a rank question may not be: fewer than 2 options to order, or multiSelect."""
    if options_given and len(raw_options or []) < 2:
        problems.add(path, "a rank question needs at least 2 options to order (it has %d)" % len(raw_options or []))
    if multi:
        problems.add(path, "multiSelect does not apply to rank questions; drop it (the user orders every option)")


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
    needs_person = problems.flag(path, raw, "needsPerson", False)
    raw_options = raw.get("options")
    options = _check_options(raw_options, path, rank, problems)
    # A non-array `options` was already reported; counting it again would only add noise.
    options_given = isinstance(raw_options, list) or raw_options is None

    if rank:
        _check_rank_shape(raw_options, options_given, multi, path, problems)
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
        "needsPerson": needs_person,
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
        delivery = DELIVERIES[0]
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
ANSWER_MODES = MappingProxyType({"answer": "answered", "defer": "deferred", "needs-info": "needs-info"})
# Each status an answer has in the result (ANSWER_MODES' and "unanswered"), and the key of the
# result's `counts` that counts it.
ANSWER_COUNT_KEYS = MappingProxyType(
    {"answered": "answered", "deferred": "deferred", "needs-info": "needsInfo", "unanswered": "unanswered"}
)
# Who decided an answer: the person, or their away policy when nobody answered in time.
BY_PERSON = "person"
BY_AWAY_POLICY = "away-policy"
# Where an answer was given (a result's answers' `via`): the form at its own port, through
# the front door, at the public URL, inside the host, in the client's own form, through
# Claude Code's AskUserQuestion hook; and how the away policy settles.
ANSWER_VIAS = ("browser", "door", "public", "app", "elicitation", "hook")
VIA_AWAY_POLICY = "away-policy"


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


def check_submission(spec: dict, payload, uploads=None) -> dict:
    """A submit judged against the spec and the interview's uploads (an AttachmentStore; None:
    there are none): the normalized submission {answers, generalNotes, attachments, status}, or
    InvalidAnswers naming every problem."""
    if not is_submission_shaped(payload):
        raise InvalidAnswers("payload must be an object with an answers object")
    problems = Problems()
    answers = _check_answers(spec["questions"], payload["answers"], problems)
    question_ids = {question["id"] for question in spec["questions"]}
    attachments = _check_attachments(payload.get("attachments"), question_ids, uploads, problems)
    general_notes = payload.get("generalNotes")
    if general_notes is not None and not isinstance(general_notes, str):
        problems.plain("generalNotes must be a string")
    _check_length(_clean_text(general_notes), "generalNotes", None, problems)
    declined = payload.get("declined", False)
    if not isinstance(declined, bool):
        problems.plain("declined must be true or false, not %s" % describe(declined))
    if problems.lines:
        raise InvalidAnswers("; ".join(problems.lines), problems.lines)
    return {
        "answers": answers,
        "generalNotes": general_notes,
        "attachments": attachments,
        "status": DECLINED if declined else SUBMITTED,
    }


def given_answers(questions: list, raw_answers: dict) -> dict:
    """The answers a form holds so far, each checked as a submit checks it: those the person
    gave (answered, deferred, needs more info, or only notes), by question id. One that does
    not pass yet (a required text still empty), or names no question, holds nothing."""
    given = {}
    for question in questions:
        raw = raw_answers.get(question["id"])
        if not isinstance(raw, dict):
            continue
        problems = Problems()
        answer = _check_answer(question, raw, question["id"], problems)
        if not problems.lines and (answer["status"] != "unanswered" or answer["notes"]):
            given[question["id"]] = answer
    return given


def is_submission_shaped(payload) -> bool:
    """An object with an answers object: what a submit must be before anything else is read."""
    return isinstance(payload, dict) and isinstance(payload.get("answers"), dict)


def _check_answers(questions: list, raw_answers: dict, problems: Problems) -> dict:
    """Normalized answers by question id; a question left out is unanswered."""
    by_id = {q["id"]: q for q in questions}
    for qid in raw_answers:
        if qid not in by_id:
            problems.plain("unknown question id %s" % quote(qid))
    answers = {}
    for qid, question in by_id.items():
        raw = raw_answers.get(qid)
        if raw is None:
            answers[qid] = unanswered()
            continue
        path = "question %s" % quote(qid)
        if not isinstance(raw, dict):
            problems.add(path, "an answer must be an object, not %s" % describe(raw))
            continue
        before = len(problems.lines)
        answer = _check_answer(question, raw, path, problems)
        if len(problems.lines) == before:
            answers[qid] = answer
    return answers


def _check_answer(question: dict, raw: dict, path: str, problems: Problems) -> dict:
    for name in raw:
        if name not in ANSWER_FIELDS:
            problems.add(path, "unknown field %s" % quote(name))
    mode = raw.get("status", "answer")
    if mode not in ANSWER_MODES:
        problems.add(path, "status must be %s, not %s" % (spoken_list(ANSWER_MODES), describe(mode)))
        return unanswered()
    notes = _answer_text(raw, "notes", path, problems)
    if mode != "answer":
        answer = unanswered(notes)
        answer["status"] = ANSWER_MODES[mode]
        return answer
    options = {option["id"]: option for option in question["options"]}
    picked = _check_selected(question, raw.get("selected") or [], options, path, problems)
    # An Other on a question that takes none (a rank, allowOther false) is dropped, not refused:
    # the original server's own clients send one, and a drop-in must take what they send.
    other = _answer_text(raw, "other", path, problems) if question["allowOther"] else None
    option_texts = _check_option_texts(raw.get("optionTexts") or {}, picked, options, path, problems)
    ranked = _check_ranked(question, raw.get("ranked"), path, problems)
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


def _answer_text(raw: dict, field: str, path: str, problems: Problems):
    """A free-text field of an answer, cleaned (None when empty)."""
    value = raw.get(field)
    if value is not None and not isinstance(value, str):
        problems.add(path, "%s must be a string, not %s" % (field, describe(value)))
    text = _clean_text(value)
    _check_length(text, field, path, problems)
    return text


def _check_length(text, what: str, path, problems: Problems) -> None:
    """A cleaned free text (or None) past FREE_TEXT_MAX is a problem naming the field."""
    if text is not None and len(text) > FREE_TEXT_MAX:
        line = "%s %s longer than %d characters" % (what, "are" if what.endswith("notes") else "is", FREE_TEXT_MAX)
        if path is None:
            problems.plain(line)
        else:
            problems.add(path, line)


def _check_selected(question: dict, selected, options: dict, path: str, problems: Problems) -> list:
    """The selected option ids, in the question's order."""
    if not isinstance(selected, list) or not all(isinstance(v, str) for v in selected):
        problems.add(path, "selected must be an array of option ids")
        selected = []
    for value in selected:
        if value not in options:
            problems.add(path, "unknown option id %s" % quote(value))
    chosen = set(selected)  # a set: `selected` is the form's, of any length
    picked = [oid for oid in options if oid in chosen]
    if question["kind"] == "rank" and picked:
        problems.add(path, "a rank question takes ranked, not selected")
    if not question["multiSelect"] and len(picked) > 1:
        problems.add(path, "single-select got %d options" % len(picked))
    return picked


def _check_option_texts(texts, picked: list, options: dict, path: str, problems: Problems) -> dict:
    """The texts of the picked options that have a text field; a required one must be there."""
    if not isinstance(texts, dict):
        problems.add(path, "optionTexts must be an object of option id to text")
        texts = {}
    for oid, text in texts.items():
        if oid not in options:
            problems.add(path, "optionTexts names unknown option id %s" % quote(oid))
        elif options[oid]["textInput"] is None:
            problems.add(path, "option %s has no text field" % quote(oid))
        elif text is not None and not isinstance(text, str):
            problems.add(path, "the text of option %s must be a string" % quote(oid))
    option_texts = {}
    for oid in picked:
        text_input = options[oid]["textInput"]
        if text_input is None:
            continue
        text = _clean_text(texts.get(oid))
        _check_length(text, "the text of option %s" % quote(oid), path, problems)
        if text is not None:
            option_texts[oid] = text
        elif text_input["required"]:
            problems.add(path, "option %s needs its text" % quote(oid))
    return option_texts


def _check_ranked(question: dict, ranked, path: str, problems: Problems):
    """A rank question's full order, or None (not ranked, or not a rank question)."""
    if ranked is None or ranked == []:
        return None
    if question["kind"] != "rank":
        problems.add(path, "ranked applies only to rank questions")
        return None
    if not isinstance(ranked, list):
        problems.add(path, "ranked must be an array of option ids")
        return None
    parts = permutation_problems(ranked, [option["id"] for option in question["options"]])
    if parts:
        problems.add(path, "ranked must list every option id exactly once (%s)" % "; ".join(parts))
        return None
    return ranked


def _check_attachments(raw, question_ids, uploads, problems: Problems) -> dict:
    """A submit's `attachments` map: question id ("" for the general notes) -> the uploads it
    names, in order."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.plain("attachments must be an object of question id to attachment ids")
        return {}
    picked = {}
    for qid, ids in raw.items():
        if qid != "" and qid not in question_ids:
            problems.plain("attachments names unknown question id %s" % quote(qid))
            continue
        if not isinstance(ids, list) or not all(isinstance(value, str) for value in ids):
            problems.plain("attachments of %s must be an array of attachment ids" % quote(qid))
            continue
        rows = []
        for value in dict.fromkeys(ids):
            entry = None if uploads is None else uploads.get(value)
            if entry is None:
                problems.plain("attachment %s is not one of this interview's uploads" % quote(value))
            else:
                rows.append(dict(entry))
        picked[qid] = rows
    return picked


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
    sources=None,
    away=None,
) -> dict:
    """The structuredContent of a settled interview, `summary` first, every field in full.
    `attachments` maps a question id ("" for the general notes) to the uploads the user attached
    there; `archive_path` is the archive file that holds the result (None: not written).
    `sources` maps a question id to who decided its answer and where, (by, via); one left out
    is the person's, given `via`. `away`: the away policy's part ({policy, afterMinutes,
    decided}) when it settled the interview."""
    attachments = attachments or {}
    sources = sources or {}
    rows = []
    counts = {key: 0 for key in ANSWER_COUNT_KEYS.values()}
    for question in spec["questions"]:
        answer = answers.get(question["id"]) or unanswered()
        counts[ANSWER_COUNT_KEYS[answer["status"]]] += 1
        rows.append(result_row(question, answer, attachments.get(question["id"], []),
                               sources.get(question["id"], (BY_PERSON, via))))
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
    if away is not None:
        result["away"] = away
    result["summary"] = summarize(result, spec)
    return result


def result_row(question: dict, answer: dict, attachments: list, source: tuple) -> dict:
    """One question's row of the result: the answer with its labels, whether it followed the
    recommendation, its uploads, and who decided it where (`source`: (by, via))."""
    labels = {option["id"]: option["label"] for option in question["options"]}
    ranked = answer["ranked"]
    return {
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
        "attachments": list(attachments),
        "by": source[0],
        "via": source[1],
    }


def with_archive_path(result: dict, spec: dict, path) -> dict:
    """The result naming `path` (None: the archive could not be written) as its archive."""
    result = dict(result, archivePath=path)
    result["summary"] = summarize(result, spec)
    return result


# A result whose JSON passes this many characters is sent compact. Claude Code keeps the model's
# copy of a tool result inline only up to a size per tool (above it the model gets a 2 KB preview
# and a file path), and every client pays for the result in the agent's context.
COMPACT_ABOVE_CHARS = 40000


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


def compact_json(value) -> str:
    """JSON as Claude Code hands structuredContent to the model: no spaces, Unicode as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def fit_result(result: dict, spec: dict) -> tuple:
    """(what the agent receives, the text of its JSON without the summary): the result as it
    is while both its JSON and its text blocks stay within COMPACT_ABOVE_CHARS, readable;
    else the compact form, on one line (the archive keeps every field); a compact one stays
    so. The readable JSON is written once: the measure is the text sent."""
    if not result.get("compact"):
        text = pretty_result_json({key: value for key, value in result.items() if key != "summary"})
        if len(compact_json(result)) <= COMPACT_ABOVE_CHARS and len(result["summary"]) + len(text) <= COMPACT_ABOVE_CHARS:
            return result, text
        result = compact_result(result, spec)
    return result, compact_json({key: value for key, value in result.items() if key != "summary"})


def compact_result(result: dict, spec: dict) -> dict:
    """Rows without their header, without any null, [] or {} field, and without `by` and `via`
    where they are the person's and the result's own; a summary of only the answers that need
    the agent's attention; `compact: true`."""
    compact = dict(result, compact=True)
    # Who and where only when they differ from the rest: the person, where the result came.
    usual = {"by": BY_PERSON, "via": result["via"]}
    compact["answers"] = [
        {key: value for key, value in row.items()
         if key != "header" and value is not None and value != [] and value != {} and usual.get(key) != value}
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


def recommended_answer(question: dict, notes=None) -> dict:
    """The question answered as recommended (what the away policy takes)."""
    answer = unanswered(notes)
    answer["status"] = "answered"
    if question["kind"] == "rank":
        answer["ranked"] = list(question["recommended"])
    else:
        chosen = set(question["recommended"])  # in the options' order, as a submit has them
        answer["selected"] = [option["id"] for option in question["options"] if option["id"] in chosen]
    return answer


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
    if result.get("away"):
        lines.insert(0, away_line(result))
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


def minutes_text(minutes: float) -> str:
    """30 minutes, 1 minute, 0.05 minutes: as the person set it."""
    return "%g minute%s" % (minutes, "" if minutes == 1 else "s")


def away_reason(minutes: float) -> str:
    """What a declined result's general notes say when the away policy declined it."""
    return "Nobody answered within %s (the person's away policy)." % minutes_text(minutes)


def away_line(result: dict) -> str:
    """The summary's first line when the away policy settled the interview."""
    away = result["away"]
    if away["policy"] == "decline":
        return "Nobody answered within %s: the interview was declined (your away policy)." % (
            minutes_text(away["afterMinutes"]))
    return "Nobody answered within %s: the recommendation was taken for %d of %d questions (your away policy)." % (
        minutes_text(away["afterMinutes"]), len(away["decided"]), len(result["answers"]))


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
    if row.get("by") == BY_AWAY_POLICY:
        text += " [taken by the away policy]"
    if row["notes"]:
        text += " | notes: %s" % quote(cut(row["notes"], CUT_NOTES))
    return text + attachment_names(row.get("attachments"))


def attachment_names(attachments) -> str:
    """` | attachments: a.png, b.log` for a summary line, or "" (archives from before
    attachments have none)."""
    if not attachments:
        return ""
    return " | attachments: " + ", ".join(entry["name"] for entry in attachments)


def permission_choice(asked: dict, result: dict):
    """The person's decision in a settled result: {"behavior": "allow"} (with the suggestion
    as given under updatedPermissions for an `always-<i>`) or {"behavior": "deny", "message"};
    None when the form decided nothing (skipped, cancelled, no choice)."""
    rows = [row for row in result.get("answers") or [] if row.get("id") == PERMISSION]
    if result.get("status") != SUBMITTED or not rows or len(rows[0].get("selected") or []) != 1:
        return None
    row, choice = rows[0], rows[0]["selected"][0]
    if choice == "deny":
        return {"behavior": "deny", "message": row.get("notes") or PERMISSION_DENIED}
    if choice == "allow":
        return {"behavior": "allow"}
    index = int(choice.rsplit("-", 1)[1]) if choice.startswith("always-") and choice[7:].isdigit() else -1
    if not 0 <= index < len(asked["suggestions"]):
        return None
    return {"behavior": "allow", "updatedPermissions": [asked["suggestions"][index]]}


def permission_record(asked: dict, result: dict, via: str, now: float) -> dict:
    """The archive's `permission` field: what was asked, what was decided, where and when."""
    choice = permission_choice(asked, result)  # None for a cancelled ask: the terminal decides
    chosen = (choice or {}).get("updatedPermissions") or [None]
    return {"tool": asked["tool"], "input": asked["input"],
            "decision": choice["behavior"] if choice else "terminal", "suggestion": chosen[0],
            "reason": choice.get("message") if choice else None,
            "where": "terminal" if choice is None else via, "answeredAt": iso_utc(now)}


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


def archive_json(record: dict) -> bytes:
    """An archive file's bytes: one field a line and one answer a line, as readable as
    indent=2 and written by json's C encoder (indent=2 takes its pure-Python one: 90 µs of a
    submit's 300). json_utf8's escapes where UTF-8 cannot carry a lone surrogate."""
    text = pretty_result_json(record)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json_utf8(record, indent=2)


LOG_ROTATE_BYTES = 5 * 1024 * 1024  # server.log is renamed to server.log.1 past this size
LOG_KEEP = 3  # server.log.1 .. server.log.3; the oldest is dropped


# Linux: a new open file description onto whatever a descriptor of ours is (StderrLines).
OWN_DESCRIPTOR_PATH = "/proc/self/fd/%d"


class StderrLines:
    """Log lines onto stderr without ever waiting for it. MCP lets a client leave the server's
    stderr unread, and once its pipe is full a blocking write stalls whichever thread logged,
    and with it the server: so a line that stderr cannot take at once is dropped (server.log
    has it whole) and counted. A line is written whole or not at all, in one write of at most
    PIPE_BUF bytes, so concurrent lines never interleave and no lock is held while writing.

    On Linux a descriptor of our own onto the pipe or terminal (through /proc/self/fd) is
    non-blocking without touching the one we share with the client or the shell; a socket is
    written with MSG_DONTWAIT. A regular file never stalls and is written as it is. Where the
    system offers neither (macOS, Windows), lines go through the stream as they always did.
    """

    def __init__(self, stream) -> None:
        self.stream = stream
        self.descriptor = None  # our own descriptor onto stderr, when it is a real one
        self.socket = None
        self.limit = None  # bytes a line may take to be written whole in one write
        # Guards `dropped`, `writers` and `closed`, never held while writing: close() leaves our
        # descriptor open until the last write under way has ended, so that no line ever goes to
        # a descriptor number the process has since reused for another file.
        self.count_lock = threading.Lock()
        self.dropped = 0
        self.writers = 0
        self.closed = False
        try:
            self._open(stream.fileno())
        except (AttributeError, OSError, ValueError):  # not a real descriptor: a test's stream
            pass

    def _open(self, descriptor: int) -> None:
        import stat

        mode = os.fstat(descriptor).st_mode
        if stat.S_ISREG(mode):
            self.descriptor = descriptor
            return
        try:
            self.limit = os.fpathconf(descriptor, "PC_PIPE_BUF")
        except (AttributeError, OSError, ValueError):
            self.limit = 512  # what POSIX promises at least
        if stat.S_ISSOCK(mode):
            import socket

            self.socket = socket.socket(fileno=os.dup(descriptor))
        else:
            self.descriptor = os.open(OWN_DESCRIPTOR_PATH % descriptor, os.O_WRONLY | os.O_NONBLOCK
                                      | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))

    def write(self, line: str) -> None:
        """One log line now, or counted as dropped."""
        self.say("[ask-user-rich] " + line + "\n")

    def say(self, text: str) -> None:
        """`text` (whole lines) now, or counted as dropped: also what the command line tells the
        person, so that a full stderr never holds up a stop."""
        data = text.encode("utf-8", "backslashreplace")
        if self.limit is not None and len(data) > self.limit:
            data = data[: self.limit - 4].decode("utf-8", "ignore").encode("utf-8") + "…\n".encode("utf-8")
        try:
            self._send(data)
        except BlockingIOError:
            with self.count_lock:
                self.dropped += 1
        except (OSError, ValueError):  # stderr closed or gone: server.log has the line
            pass

    def _send(self, data: bytes) -> None:
        with self.count_lock:
            if self.closed:
                return
            self.writers += 1
        try:
            if self.socket is not None:
                import socket

                self.socket.send(data, socket.MSG_DONTWAIT)
            elif self.descriptor is not None:
                os.write(self.descriptor, data)
            else:
                self.stream.write(data.decode("utf-8"))
                self.stream.flush()
        finally:
            with self.count_lock:
                self.writers -= 1
                last = self.closed and self.writers == 0
            if last:
                self._release()

    def close(self) -> None:
        with self.count_lock:
            if self.closed:
                return
            self.closed = True
            idle = self.writers == 0
        if idle:
            self._release()

    def _release(self) -> None:
        """Close what is ours (not the stream's own descriptor), once no write is under way."""
        if self.socket is not None:
            self.socket.close()
        elif self.descriptor is not None and self.limit is not None:
            os.close(self.descriptor)


class Log:
    """server.log plus stderr, one line per event: time, pid, event, key=value pairs.

    A log directory that cannot be written degrades to stderr only, with one warning: logging
    must never break a call. Several processes may share server.log: each line is one append,
    and whoever sees it pass LOG_ROTATE_BYTES rotates it under a lock on the file itself; the
    others notice that the name now points at a new file and reopen it before their next line.
    The lock covers server.log only: stderr takes a line at once or drops it (StderrLines).
    `echo=False` keeps the lines off stderr (demo and ask, whose terminal is a person's); the
    warning that the log directory cannot be written still goes there.
    """

    def __init__(self, log_dir: str, stream=None, echo: bool = True) -> None:
        self.log_dir = log_dir
        self.path = os.path.join(log_dir, "server.log")
        self.stderr = StderrLines(stream if stream is not None else sys.stderr)
        self.echo = echo
        self.lock = threading.Lock()
        self.listener = None  # called with (level, event, fields, about); the MCP server forwards them
        self.descriptor = None
        self.said: set = set()  # what once() has logged
        self.rotate_retry_at = 0  # past LOG_ROTATE_BYTES: where a failed rotation is tried again
        try:
            os.makedirs(log_dir, mode=0o700, exist_ok=True)
            self.descriptor = self._open()
        except OSError as error:
            self._warn_degraded(error)

    def _open(self) -> int:
        # Ours or nothing: a server.log planted in a shared log dir (a symlink to another of the
        # user's files, another user's file that anyone can write, a FIFO) would take every
        # title, id and user agent we log.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | PRIVATE_OPEN_FLAGS | getattr(os, "O_CLOEXEC", 0)
        descriptor = os.open(self.path, flags, 0o600)
        why = private_file_refusal(descriptor)
        if why is not None:
            os.close(descriptor)
            raise PermissionError("%s %s; not used" % (self.path, why))
        return descriptor

    def _warn_degraded(self, error: OSError) -> None:
        self.stderr.write("%s log-degraded dir=%s error=%s (logging to stderr only)"
                          % (self._stamp(), quote(self.log_dir), quote(str(error))))

    @staticmethod
    def _stamp() -> str:
        return "%s %d" % (iso_utc(time.time()), os.getpid())

    def _line(self, event: str, fields: dict) -> str:
        pairs = " ".join("%s=%s" % (key, _log_value(value)) for key, value in fields.items())
        line = "%s %s%s" % (self._stamp(), event, " " + pairs if pairs else "")
        # A lone surrogate in a logged value (a title, an id) failed the UTF-8 write and turned
        # file logging off for good; write it as an escape instead.
        return line.encode("utf-8", "backslashreplace").decode("utf-8")

    def _to_file(self, line: str) -> bool:
        """Append one line to server.log; False when there is no server.log to write."""
        with self.lock:
            if self.descriptor is None:
                return False
            try:
                self._append((line + "\n").encode("utf-8"))
                return True
            except OSError as error:
                self._drop_file()
                failure = error
        self._warn_degraded(failure)
        return False

    def event(self, event: str, level: str = "info", about=None, **fields) -> None:
        """One line of `fields`; `about`: the object the event belongs to (an interview, a
        call's cancellation, a request), which the listener routes by, never by the fields."""
        line = self._line(event, fields)
        in_file = self._to_file(line)
        if self.echo or not in_file:
            self.stderr.write(line)
        listener = self.listener
        if listener is not None:
            listener(level, event, fields, about)

    def last_words(self, event: str, **fields) -> None:
        """A line to server.log from a process about to end whatever holds the lock: skipped
        if the lock does not come within a moment."""
        if self.lock.acquire(timeout=0.2):
            try:
                if self.descriptor is not None:
                    os.write(self.descriptor, (self._line(event, fields) + "\n").encode("utf-8"))
            except OSError:
                pass
            finally:
                self.lock.release()

    def once(self, event: str, level: str = "info", **fields) -> None:
        """event(), unless this process logged the same event with the same fields before."""
        key = (event,) + tuple(sorted((name, str(value)) for name, value in fields.items()))
        with self.lock:
            if key in self.said:
                return
            self.said.add(key)
        self.event(event, level, **fields)

    def _append(self, data: bytes) -> None:
        """One line onto server.log, following a rotation made by another process, and rotating
        it when it has grown past the limit. Call with the lock held."""
        self._follow_rotation()
        while data:  # one write for a line, unless the file system takes it in parts
            data = data[os.write(self.descriptor, data):]
        if os.fstat(self.descriptor).st_size > max(LOG_ROTATE_BYTES, self.rotate_retry_at):
            self._rotate()

    def _holds_current(self) -> bool:
        """Whether the file we hold is the one named server.log."""
        try:
            named = os.lstat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(self.descriptor)
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def _follow_rotation(self) -> None:
        if not self._holds_current():
            self._reopen()

    def _reopen(self) -> None:
        descriptor = self._open()
        self._drop_file()
        self.descriptor = descriptor

    def _rotate(self) -> None:
        """server.log -> .1 -> .2 -> .3, the oldest dropped, then a new server.log. The lock on
        the file we hold makes the processes that hold the same file take turns: whoever gets
        it second finds server.log renamed already (or small again) and only reopens."""
        try:
            import fcntl
        except ImportError:  # Windows: no lock, and a file that others hold open cannot be renamed
            fcntl = None
        if fcntl is not None:
            fcntl.flock(self.descriptor, fcntl.LOCK_EX)
        try:
            if not self._holds_current() or os.fstat(self.descriptor).st_size <= LOG_ROTATE_BYTES:
                return
            if fcntl is None:
                self._drop_file()
            try:
                for number in range(LOG_KEEP - 1, 0, -1):
                    try:
                        os.replace("%s.%d" % (self.path, number), "%s.%d" % (self.path, number + 1))
                    except FileNotFoundError:
                        pass
                os.replace(self.path, self.path + ".1")
            except OSError:
                # Go on writing where we are; try again once the file has grown another step.
                if self.descriptor is None:
                    self.descriptor = self._open()
                self.rotate_retry_at = os.fstat(self.descriptor).st_size + LOG_ROTATE_BYTES // 16
                return
            self.rotate_retry_at = 0
        finally:
            if fcntl is not None and self.descriptor is not None:
                fcntl.flock(self.descriptor, fcntl.LOCK_UN)
        self._reopen()

    def _drop_file(self) -> None:
        descriptor, self.descriptor = self.descriptor, None
        if descriptor is not None:
            try:
                os.close(descriptor)
            except OSError:
                pass

    def close(self) -> None:
        if self.stderr.dropped:  # said once, here: a line for each would fill server.log instead
            self._to_file(self._line("stderr-dropped", {"lines": self.stderr.dropped, "reason": "stderr was full"}))
        with self.lock:
            self._drop_file()
        self.stderr.close()


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


def _unlink_quietly(path: str) -> None:
    """Remove a file that may already be gone (what it held no longer matters)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def folder_refusal(path: str):
    """Why an existing folder may not hold the user's files, or None when it may. On POSIX it
    must be a real folder (not a symlink) of this user that group and others cannot write."""
    import stat

    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        return "is not a folder but a symlink"
    if not stat.S_ISDIR(status.st_mode):
        return "is not a folder"
    return owner_refusal(status, 0o022, "can be written by group or others")


def owner_refusal(status, open_bits: int, what: str):
    """Why a file or folder is not this user's alone (its owner, or `open_bits` set in its
    mode, said as `what`), or None. Windows has neither: there the folder's ACL decides."""
    if hasattr(os, "getuid"):
        if status.st_uid != os.getuid():
            return "belongs to another user (uid %d)" % status.st_uid
        if status.st_mode & open_bits:
            return "%s (mode %o)" % (what, status.st_mode & 0o777)
    return None


def private_folder(path: str, log: Log | None = None, create: bool = True) -> str:
    """`path`, ready to hold the user's files. Made 0700 and fsynced into its parent when it is
    new, so that nothing acknowledged in it can vanish with its folder; used as it is only when
    folder_refusal() has nothing against it. Else UntrustedFolder, said once in the log: a shared
    ASK_USER_RICH_LOG_DIR must not let another user plant, read or redirect files. With `create`
    false, a folder that is missing is an OSError too."""
    try:
        if not create:
            raise FileExistsError(path)
        os.mkdir(path, 0o700)
    except FileExistsError:
        why = folder_refusal(path)
        if why is None:
            return path
        if log is not None:
            log.once("folder-refused", "warning", folder=path, reason=why,
                     effect="treated as unwritable; nothing is read from it")
        raise UntrustedFolder("%s %s" % (path, why)) from None
    sync_directory(os.path.dirname(os.path.abspath(path)))
    return path


def private_file_refusal(descriptor: int, owner_checked: bool = True):
    """Why an open file is not one of ours, or None: ours is a regular file of this user that
    only this user can read or write, as everything this server writes is. In a folder only
    this user can write into (private_folder), `owner_checked` false: only the type counts."""
    import stat

    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        return "is not a regular file"
    return owner_refusal(status, 0o077, "can be read or written by others") if owner_checked else None


# Opening never follows a symlink, and never waits: a FIFO planted in our place would block
# open() until someone writes to it (the type is only known once it is open).
PRIVATE_OPEN_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def open_private_file(path: str, owner_checked: bool = True):
    """A file of ours, opened to read back. OSError when it cannot be opened (FileNotFoundError
    when there is none), ForeignFile when it is not ours (private_file_refusal()): anything
    else in a folder we read was not written by us, and is never taken for the user's answers."""
    descriptor = os.open(path, os.O_RDONLY | PRIVATE_OPEN_FLAGS)
    why = private_file_refusal(descriptor, owner_checked)
    if why is not None:
        os.close(descriptor)
        raise ForeignFile("%s %s" % (path, why))
    return os.fdopen(descriptor, "rb")


def create_private_file(path: str):
    """A new file at `path` (0600), opened for writing; FileExistsError when anything is there
    already, a file or a symlink planted under that name included."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def write_whole(temporary: str, fill, give_name) -> None:
    """A file whole or not at all: `fill(handle)` writes a new private file at `temporary`
    (create_private_file); it is flushed and fsynced before `give_name(temporary)` renames it,
    and the folder is fsynced after. If any step fails, the temporary file goes."""
    try:
        with create_private_file(temporary) as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        give_name(temporary)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    sync_directory(os.path.dirname(temporary))


def write_private_file(folder: str, name: str, data: bytes) -> str:
    """`data` as folder/name, whole or not at all (see write_whole)."""
    path = os.path.join(folder, name)
    write_whole(path + ".tmp", lambda handle: handle.write(data), lambda temporary: os.replace(temporary, path))
    return path


STRAY_TEMPORARY_SECONDS = 60.0  # a write takes milliseconds: an older temporary file is a crash's


def sweep_stray_temporaries(log_dir: str) -> int:
    """Remove the temporary files a process killed mid-write left in our folders (answers/,
    tasks/, inbox/ and the log folder itself); how many. Only old ones: another process may be
    writing one right now. Folders that are not ours are left alone."""
    removed = 0
    deadline = time.time() - STRAY_TEMPORARY_SECONDS
    for folder in (log_dir, os.path.join(log_dir, "answers"), os.path.join(log_dir, "tasks"),
                   os.path.join(log_dir, "inbox")):
        try:
            if folder_refusal(folder) is not None:
                continue
            names = [name for name in os.listdir(folder) if name.endswith(".tmp")]
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                if os.lstat(path).st_mtime < deadline:
                    os.unlink(path)
                    removed += 1
            except OSError:
                pass
    return removed


def read_proc(path: str):
    """A file of /proc (the kernel's word on a process or a setting), whole; None where there
    is no /proc (macOS, Windows) or no such file, or it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def proc_stat(pid: int):
    """The fields of /proc/PID/stat after the command name (which may hold spaces), from the
    state on; None where there is no /proc or no such process."""
    stat = read_proc("/proc/%d/stat" % pid)
    return None if stat is None else stat.rsplit(b")", 1)[-1].split()


def process_start(pid: int):
    """When process `pid` started, as the kernel counts it (Linux), or None where unknown: with
    the pid, it tells a live process from a later one that reuses its pid."""
    fields = proc_stat(pid)
    return fields[19].decode("ascii") if fields is not None and len(fields) > 19 else None


def process_alive(pid, started=None) -> bool:
    """Whether process `pid` runs (and, when `started` is known, is the one that started then)."""
    if isinstance(pid, bool) or not pid_alive(pid):
        return False
    now = process_start(pid) if started is not None else None
    return now is None or now == started


def process_identity() -> dict:
    """Who writes a record: the pid, when the process started, and a random id of this server
    instance that no other has (a pid alone comes back after a restart in a container)."""
    # os.urandom, as secrets.token_hex is, without its import: that pulls in hashlib and OpenSSL,
    # megabytes of idle memory at every start.
    return {"pid": os.getpid(), "started": process_start(os.getpid()), "instance": os.urandom(8).hex()}


def another_live_server(owner, mine: dict) -> bool:
    """Whether a record was written by a server other than `mine` whose process still runs.
    An earlier server with this very pid is gone: its process is this one."""
    if not isinstance(owner, dict) or owner.get("instance") == mine["instance"]:
        return False
    return owner.get("pid") != mine["pid"] and process_alive(owner.get("pid"), owner.get("started"))


class Archive:
    """answers/<submittedAt>-<interviewId>.json: every settled result, durable before the ack;
    and tasks/<interviewId>.json, the tasks made on an interview still pending, so that a later
    process can tell each one's fate without reading server.log."""

    def __init__(self, log_dir: str, log: Log) -> None:
        self.directory = os.path.join(log_dir, "answers")
        self.tasks_directory = os.path.join(log_dir, "tasks")
        # away/<interviewId>.json: an interview the away policy holds, while it is pending, so
        # that a server started after this one ends keeps its clock (Runtime.resume_away).
        self.away_directory = os.path.join(log_dir, "away")
        self.log = log
        self.owner = process_identity()  # written with every record of tasks

    def path_for(self, interview_id: str, submitted_at: str) -> str:
        """Where save() puts the record of this interview settled at that time (absolute)."""
        stamp = submitted_at.replace(":", "-").replace(".", "-")
        return os.path.abspath(os.path.join(self.directory, "%s-%s.json" % (stamp, interview_id)))

    def save(self, record: dict, about=None) -> str:
        """Write atomically (temp file, fsync, rename); the path. OSError (logged, `about` the
        interview) when it could not be written: the caller decides whether the answers may
        settle anyway."""
        path = self.path_for(record["interviewId"], record["submittedAt"])
        try:
            write_private_file(private_folder(self.directory, self.log), os.path.basename(path),
                               archive_json(record))
        except OSError as error:
            self.log.event(
                "archive-failed", "error", about=about, interview=record["interviewId"], error=str(error)
            )
            raise
        if record.get("tasks"):
            self._forget_tasks(record["interviewId"])  # the archive names them now
        # Settled: no later server takes it over. Gone before any waiter hears of the result.
        self.forget_away(record["interviewId"])
        return path

    def find(self, interview_id: str) -> dict | None:
        """The newest archived record of an interview, or None. Only files this server could
        have written count: in a folder that passes private_folder(), ours and 0600."""
        if not is_session_id(interview_id):
            return None
        try:
            names = sorted(
                name
                for name in os.listdir(private_folder(self.directory, self.log))
                if name.endswith("-%s.json" % interview_id)
            )
        except OSError:
            return None
        for name in reversed(names):
            record = self._read(os.path.join(self.directory, name))
            if isinstance(record, dict) and record.get("interviewId") == interview_id:
                # Where it is now, whatever it said when written (older records say nothing).
                record["archivePath"] = os.path.abspath(os.path.join(self.directory, name))
                return record
        return None

    def newest_first(self):
        """Every archived record, newest first (the names start with the settle's time), each
        with its archivePath; only files find() would read."""
        try:
            names = sorted((name for name in os.listdir(private_folder(self.directory, self.log, create=False))
                            if name.endswith(".json")), reverse=True)
        except OSError:
            return
        for name in names:
            path = os.path.join(self.directory, name)
            record = self._read(path)
            if isinstance(record, dict) and is_session_id(record.get("interviewId")):
                record["archivePath"] = os.path.abspath(path)
                yield record

    def _read(self, path: str):
        try:
            with open_private_file(path) as handle:
                return json.loads(handle.read().decode("utf-8"))
        except (OSError, ValueError):
            return None

    def record_tasks(self, interview_id: str, task_ids: list) -> None:
        """Note the tasks made on a pending interview, durably, before they are answered."""
        entry = dict(self.owner, interviewId=interview_id, ids=list(task_ids))
        try:
            write_private_file(private_folder(self.tasks_directory, self.log), interview_id + ".json",
                               json_utf8(entry))
        except OSError as error:
            self.log.event("task-index-failed", "error", interview=interview_id, error=str(error))

    def find_tasks(self, interview_id: str):
        """The task index of an interview that was pending when its process last wrote it."""
        if not is_session_id(interview_id):
            return None
        try:
            folder = private_folder(self.tasks_directory, self.log)
        except OSError:
            return None
        entry = self._read(os.path.join(folder, interview_id + ".json"))
        if not isinstance(entry, dict) or entry.get("interviewId") != interview_id:
            return None
        return entry

    def _forget_tasks(self, interview_id: str) -> None:
        self._forget(self.tasks_directory, interview_id)

    def _forget(self, folder: str, interview_id: str) -> None:
        path = os.path.join(folder, interview_id + ".json")
        try:
            if folder_refusal(folder) is None:
                os.unlink(path)
                sync_directory(folder)
        except OSError:
            pass

    def record_away(self, entry: dict) -> None:
        """Note what the away policy needs of a pending interview (Interview.away_record)."""
        try:
            write_private_file(private_folder(self.away_directory, self.log), entry["interviewId"] + ".json",
                               json_utf8(dict(entry, owner=self.owner)))
        except OSError as error:
            self.log.event("away-record-failed", "error", interview=entry["interviewId"], error=str(error))

    def forget_away(self, interview_id: str) -> None:
        self._forget(self.away_directory, interview_id)

    def orphaned_away(self) -> list:
        """The away records of interviews whose server is gone."""
        try:
            folder = private_folder(self.away_directory, self.log, create=False)
            names = sorted(os.listdir(folder))
        except OSError:
            return []
        found = []
        for name in names:
            entry = self._read(os.path.join(folder, name))
            if isinstance(entry, dict) and name == "%s.json" % entry.get("interviewId") \
                    and is_session_id(entry.get("interviewId")) and not another_live_server(entry.get("owner"), self.owner):
                found.append(entry)
        return found


def is_session_id(value) -> bool:
    """An interview's id."""
    return (
        isinstance(value, str)
        and len(value) == 12
        and all(ch in "0123456789abcdef" for ch in value)
    )


def working_folder() -> str:
    """The folder this process works in (the agent's project), "" when it is gone."""
    try:
        return os.getcwd()
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """Whether a process of this user with that number runs (a zombie does not count)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if os.name == "nt":
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except OSError:
        return False  # gone, or the number now belongs to another user's process
    fields = proc_stat(pid)
    return not fields or fields[0] != b"Z"  # no /proc (macOS): kill() said it is there


def _windows_pid_alive(pid: int) -> bool:
    # os.kill() on Windows terminates the process whatever the signal: ask the kernel instead.
    import ctypes

    kernel32 = ctypes.windll.kernel32
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259
    finally:
        kernel32.CloseHandle(handle)


# ============================================================================================
# Attachments: the files the user adds to notes
# ============================================================================================

ATTACHMENT_MAX_BYTES = 10 * 1024 * 1024
ATTACHMENTS_MAX_COUNT = 20
ATTACHMENTS_MAX_TOTAL_BYTES = 50 * 1024 * 1024
ATTACHMENT_TOO_LARGE = "a file may be at most %d MiB" % (ATTACHMENT_MAX_BYTES >> 20)
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


class AttachmentStore:
    """The files the user uploaded to one interview, in <log dir>/attachments/<interview id>/.

    Each is written to a temporary file in that folder, fsynced, then renamed, so that a 201
    means the file is on disk whole. The limits are reserved before writing starts, so that
    uploads running at once cannot pass them together.
    """

    def __init__(self, folder: str, log: Log | None = None) -> None:
        self.folder = folder
        self.log = log
        self.lock = threading.Lock()
        self.files: dict = {}  # id -> {id, name, path, mimeType, bytes}
        self.reserved_count = 0
        self.reserved_bytes = 0

    def add(self, name: str, media_type: str, length: int, source, commit=None) -> dict:
        """Store `length` bytes read from `source`; the upload's public description. With
        `commit`, the file takes its name and joins the uploads only inside `commit(fn)`, which
        runs fn if the interview still takes answers and raises otherwise (the file is removed
        then): an upload that ends after the submit never outlives it unnamed."""
        import secrets

        if length > ATTACHMENT_MAX_BYTES:
            raise AttachmentRefused("too-large", ATTACHMENT_TOO_LARGE)
        with self.lock:
            if self.reserved_count + 1 > ATTACHMENTS_MAX_COUNT:
                raise AttachmentRefused(
                    "too-many-files", "an interview may have at most %d attachments" % ATTACHMENTS_MAX_COUNT
                )
            if self.reserved_bytes + length > ATTACHMENTS_MAX_TOTAL_BYTES:
                raise AttachmentRefused("attachments-too-large", "an interview's attachments may be at most %d MiB in all"
                                        % (ATTACHMENTS_MAX_TOTAL_BYTES >> 20))
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

        def publish(temporary: str, path: str) -> None:
            os.replace(temporary, path)
            entry["path"] = path
            with self.lock:
                self.files[attachment_id] = entry

        run = commit if commit is not None else (lambda fn: fn())
        try:
            self._write(attachment_id, entry["name"], length, source,
                        lambda temporary, path: run(lambda: publish(temporary, path)))
        except BaseException as error:
            with self.lock:
                self.reserved_count -= 1
                self.reserved_bytes -= length
            if isinstance(error, OSError):
                raise AttachmentRefused(
                    "storage-failed", "the file could not be stored in %s: %s" % (quote(self.folder), error.strerror or error)
                ) from None
            raise
        return entry

    def _write(self, attachment_id: str, name: str, length: int, source, finish) -> None:
        """The bytes into a temporary file, fsynced; then `finish(temporary, path)` gives it
        its name (or raises, and the temporary file goes)."""
        folder = self._ensure_folder()
        path = os.path.join(folder, "%s-%s" % (attachment_id, name))
        if os.path.dirname(os.path.abspath(path)) != folder:
            raise AttachmentRefused("bad-file-name", "the file name %s cannot be stored" % quote(name))
        temporary = os.path.join(folder, ".%s.part" % attachment_id)

        def fill(handle) -> None:
            left = length
            while left:
                try:
                    chunk = source.read(min(left, ATTACHMENT_CHUNK_BYTES))
                except OSError:  # the page went away, or stalled past the idle timeout
                    chunk = b""
                if not chunk:
                    raise AttachmentRefused(
                        "upload-incomplete", "the upload ended after %d of its %d bytes" % (length - left, length)
                    )
                handle.write(chunk)
                left -= len(chunk)

        write_whole(temporary, fill, lambda temporary: finish(temporary, path))

    def _ensure_folder(self) -> str:
        """The interview's folder (and attachments/ above it), made 0700 and fsynced into its
        parent on the first upload; never a folder someone planted in a shared log dir."""
        folder = os.path.abspath(self.folder)
        private_folder(os.path.dirname(folder), self.log)
        return private_folder(folder, self.log)

    def get(self, attachment_id) -> dict | None:
        with self.lock:
            return self.files.get(attachment_id)

    def remove(self, attachment_id) -> None:
        with self.lock:
            entry = self.files.pop(attachment_id, None)
            if entry is None:
                raise AttachmentRefused("not-found", "not found")
            self.reserved_count -= 1
            self.reserved_bytes -= entry["bytes"]
        try:
            os.unlink(entry["path"])
        except FileNotFoundError:
            pass
        sync_directory(os.path.dirname(entry["path"]))


# ============================================================================================
# Interviews and the waits on them: the session hub
# ============================================================================================

# An interview's id is 12 lowercase hex digits; a task's is "<interviewId>.<n>" (TaskRegistry.create),
# and it names its interview wherever a sessionId is asked for. The tools' schemas state the same.
SESSION_ID_PATTERN = "^[0-9a-f]{12}(\\.[0-9]+)?$"


def task_interview_id(value: str):
    """The interview a task id "<interviewId>.<n>" names, or None when it is not one."""
    interview_id, dot, number = value.partition(".")
    if dot and number.isdigit() and number.isascii() and is_session_id(interview_id):
        return interview_id
    return None


def form_url(origin: str, token: str) -> str:
    """The one way a form's address is written, on a process's own port or at the front door."""
    return "%s/s/%s" % (origin, token)


def token_digest(token: str) -> str:
    """The token as our private registry names it (hex SHA-256): the front door finds a form's
    owner by it without the token being written anywhere."""
    return token_key(token).hex()


def token_key(token: str) -> bytes:
    """Interviews are found by a digest of their token, so that the lookup's timing does not
    depend on how much of a guessed token matches a real one."""
    import hashlib

    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class BuiltOnce:
    """`built()` is what `build()` returns, built on the first call only: the classes whose
    import waits until they are needed (the servers' http.server)."""

    def __init__(self, build) -> None:
        self.build = build
        self.value = None
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            if self.value is None:
                self.value = self.build()
            return self.value


class InterviewSnapshot:
    """What settling an interview reads of it, handed over when the settle is reserved: until
    that settle ends nothing changes it (appends, uploads and new tasks wait for its outcome),
    so the result and the archive are built from it without the interview's lock."""

    __slots__ = ("interview", "interview_id", "spec", "options", "agent", "created", "task_ids", "uploads",
                 "delivered")

    def __init__(self, interview, spec: dict, created: float, task_ids: list, uploads,
                 delivered: bool) -> None:
        self.interview = interview  # what the settle's log events are about; not read from
        self.interview_id = interview.id
        self.options = interview.options  # never changes
        self.agent = interview.agent  # never changes
        self.spec = spec
        self.created = created
        self.task_ids = task_ids
        self.uploads = uploads  # its AttachmentStore
        self.delivered = delivered  # a waiter was there to receive the result


class FormPresence:
    """What the form's pages have said of an interview: page views, the pages in view and
    the sightings, the event streams open, the latest counts and the follow-ups unseen; and
    the form inside the host's own: the key only its app holds, and whether it loaded.
    Only the progress reports, the notices and the inbox read it. It is the Interview's base:
    its fields are the interview's own, guarded by its lock; each change notifies its
    condition (waits judge by it too) and tells its on_change."""

    def __init__(self) -> None:
        self._counts = None  # the form's latest {answered, deferred, needsInfo, open}
        self._counts_revision = 0
        self._page_views = 0
        self._streams = 0
        # The person's eyes, as the form's pages report them (record_visibility): each
        # page's last word on whether it is in view, and how often one came into view (or
        # the app loaded). A page load is not a sighting: the opener loads tabs in the
        # background too.
        self._in_view: dict = {}
        self._sightings = 0
        # The away policy counts from the last sign of the person (wall clock, so that it
        # can be written down): the creation, a sighting, an answer changed in the form.
        self._last_sign = self.created
        # The person's answers as the form last reported them, by question id: {answer,
        # via}. The policy never replaces one.
        self._given: dict = {}
        self._unseen = None  # (follow-ups unseen, questions then), as the form last reported
        # The form inside the host: the key only its app holds (made before the call's result
        # leaves, never changed), and whether an app has loaded the whole interview.
        self._app_key = None
        self._app_loaded = threading.Event()

    def app_key(self) -> str:
        """The key of the form inside the host, made on first use."""
        import secrets

        with self._lock:
            if self._app_key is None:
                self._app_key = secrets.token_urlsafe(24)
            return self._app_key

    def holds_app_key(self, key) -> bool:
        """Whether `key` is the app's key (none was made: nothing is)."""
        import hmac

        with self._lock:
            made = self._app_key
        if not isinstance(key, str) or made is None:
            return False
        return hmac.compare_digest(key.encode("utf-8"), made.encode("utf-8"))

    def record_app_load(self) -> None:
        """An app loaded the whole interview: the host shows the form."""
        self._app_loaded.set()

    def wait_for_app(self, seconds: float) -> bool:
        """Whether an app loads the interview within `seconds`."""
        return self._app_loaded.wait(seconds)

    def attention(self) -> dict:
        """What the notices judge by: still pending, forms open, sightings so far, and
        whether a page shows the form now (it said so and its event stream is still open)."""
        with self._lock:
            return {"pending": self._result is None and not self._closed, "streams": self._streams,
                    "sightings": self._sightings,
                    "inView": self._streams > 0 and any(self._in_view.values())}

    def _unseen_count(self) -> int:
        """Follow-up questions the user has not been shown yet. Call with the lock held."""
        questions = self._spec["questions"]
        if self._unseen is None:  # no form has said yet: every follow-up is unseen
            return sum(1 for question in questions if question.get("version", 1) > 1)
        return self._unseen[0] + max(0, len(questions) - self._unseen[1])

    def record_page_view(self, seen: bool = False) -> None:
        """A page loaded; `seen`: where it cannot load unseen (the app, in the conversation)."""
        with self._lock:
            self._page_views += 1
            if seen:
                self._sighted()
            self._changed.notify_all()
        self._on_change(self)

    def record_visibility(self, page: str, in_view: bool) -> bool:
        """A page says whether it is in view now; True when it just came into view."""
        with self._lock:
            came = in_view and not self._in_view.pop(page, False)
            self._in_view[page] = in_view
            for stale in list(self._in_view)[:-PAGES_REMEMBERED]:  # the pages heard from longest ago
                del self._in_view[stale]
            if came:
                self._sighted()
            self._changed.notify_all()
        self._on_change(self)
        return came

    def _sighted(self) -> None:
        """The person saw the form: a sighting, and a sign of them. Call with the lock held."""
        self._sightings += 1
        self._last_sign = time.time()

    def record_stream(self, delta: int) -> None:
        """An event stream opened (+1) or closed (-1): the inbox looks more often while a
        form is open."""
        with self._lock:
            self._streams += delta
            self._changed.notify_all()
        self._on_change(self)

    def record_progress(self, counts: dict, unseen=None) -> None:
        """The form's counts, and its count of follow-up questions not shown to the user yet
        (None: not said); questions appended after it are added to it until the form says
        again."""
        with self._lock:
            if unseen is not None:
                self._unseen = (unseen, len(self._spec["questions"]))
            if counts != self._counts:
                self._counts = counts
                self._counts_revision += 1
                self._changed.notify_all()
        self._on_change(self)

    def record_answers(self, answers: dict, via: str) -> bool:
        """The person's answers as the form holds them now (checked, by question id; one left
        out holds nothing); True when one changed, which is a sign of the person."""
        with self._lock:
            if self._result is not None:
                return False
            before = {qid: given["answer"] for qid, given in self._given.items()}
            if answers == before:
                return False
            self._given = {qid: {"answer": answer, "via": self._given[qid]["via"]
                                 if before.get(qid) == answer else via}
                           for qid, answer in answers.items()}
            self._last_sign = time.time()
            self._changed.notify_all()
        self._on_change(self)
        return True

    def given_answers(self) -> dict:
        """What record_answers holds: question id -> {answer, via}."""
        with self._lock:
            return {qid: dict(given) for qid, given in self._given.items()}

    def last_sign(self) -> float:
        """When the person last showed up (time.time()): see __init__."""
        with self._lock:
            return self._last_sign

    def away_record(self) -> dict:
        """What a server started after this one needs to go on with the away policy's clock."""
        with self._lock:
            return {"interviewId": self.id, "spec": self._spec_now(), "agent": self.agent,
                    "createdAt": self.created, "lastSign": self._last_sign, "given": dict(self._given)}

    def resume(self, created: float, last_sign: float, given: dict) -> None:
        """Go on from an earlier server's away_record(): the same clock, the same answers
        (`given`: question id -> {answer, via}, as record_answers holds them)."""
        with self._lock:
            self.created, self._last_sign, self._given = created, last_sign, given


class Interview(FormPresence):
    """One interview: its spec, its answers once settled, its state, and the condition every
    wait on it uses. It knows no address, server or runtime: whoever shows it composes its
    link from `token`, and what the wire says of it is built from what it reads out here.

    Every field is private and read through the methods below, each of which takes the lock
    itself; no other code names a field or the lock (tests/interview/test_interview_ownership.py).
    The state moves once, from PENDING to the result's status (SUBMITTED, DECLINED or
    CANCELLED), when settle() completes it. `revision` grows on every change that the form's
    state shows; the condition is also notified on form activity (progress, streams opening
    and closing) that only the progress reports use. Waiters enter and leave through
    waiter(); every other wait is wait_until(). `on_change(interview)` is told, with no lock
    held, of every change the inbox or the notices may judge by: created (by the hub),
    appended, a page's or a waiter's coming and going, the form's counts, settled.
    """

    def __init__(self, interview_id: str, token: str, spec: dict, attachments: AttachmentStore,
                 options=None, agent=None, on_change=None, away=None) -> None:
        # Reentrant: a wait's check, run under it, may call the methods below.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self.id = interview_id
        self.token = token
        self.options = MappingProxyType(dict(options or {"delivery": DELIVERIES[0], "timeoutSeconds": None}))
        self.agent = agent  # what the form calls the agent (agent_name()); None: "the agent"
        self.created = time.time()
        # The person's away policy as it holds for this interview: (policy, minutes), or None
        # when nothing is ever decided for the person (wait, a permission ask).
        self.away = away
        self._on_change = on_change if on_change is not None else (lambda interview: None)
        super().__init__()
        self._spec = spec
        self._attachments = attachments
        self._result = None  # the result once settled
        self._version = 1
        self._note = None
        self._settling = False  # a settle is writing the archive: other changes wait for it
        self._settled_monotonic = None
        self._closed = False  # the server is shutting down: every wait ends
        self._waiting = 0
        self._revision = 0
        self._states: list = []  # the last STATE_HISTORY (revision, status()), for streams
        self._task_ids: list = []  # the tasks made on it, for the archive (TaskRegistry.create)
        # Cancelled because its questions went back to the client's own prompt (the hook
        # gave up waiting): the form says where to answer them instead.
        self._handed_back = False
        # Cancelled because the person answered in the agent's own terminal first (a
        # permission ask): the form says there is nothing left to do.
        self._answered_there = False

    # -- reading ------------------------------------------------------------------------

    @property
    def title(self) -> str:
        with self._lock:
            return self._spec["title"]

    @property
    def spec(self) -> dict:
        """The spec as it is now: a copy, which later appends do not change."""
        with self._lock:
            return self._spec_now()

    def _spec_now(self) -> dict:
        return dict(self._spec, questions=list(self._spec["questions"]))

    @property
    def state(self) -> str:
        with self._lock:
            return self._state_now()

    def _state_now(self) -> str:
        return PENDING if self._result is None else self._result["status"]

    @property
    def settled_monotonic(self):
        """When it settled, on the monotonic clock; None while pending."""
        with self._lock:
            return self._settled_monotonic

    def settled_result(self):
        """The result once settled, else None."""
        with self._lock:
            return self._result

    def status(self) -> tuple:
        """(state, a call is waiting, version, handed back, answered in the terminal), read
        together: what the form's state says (state_json)."""
        with self._lock:
            return self._status()

    def _status(self) -> tuple:
        return self._state_now(), self._waiting > 0, self._version, self._handed_back, self._answered_there

    def contents(self) -> tuple:
        """(state, version, the agent's note, spec, result or None), read together: what the
        form is built from (form_payload)."""
        with self._lock:
            return self._state_now(), self._version, self._note, self._spec_now(), self._result

    def is_pending(self) -> bool:
        """Pending and its server not shutting down."""
        with self._lock:
            return self._result is None and not self._closed

    def attachment(self, attachment_id):
        """An upload's description, or None."""
        return self._attachments.get(attachment_id)

    def activity(self) -> dict:
        """What is happening around it now, read together: settled or not, the calls waiting,
        the event streams (forms) open, the page views, the form's latest counts and how often
        they changed, the follow-ups unseen, and the questions' title and number."""
        with self._lock:
            return {"settled": self._result is not None, "waiters": self._waiting, "streams": self._streams,
                    "pageViews": self._page_views, "counts": None if self._counts is None else dict(self._counts),
                    "countsRevision": self._counts_revision, "followUpsUnseen": self._unseen_count(),
                    "title": self._spec["title"], "total": len(self._spec["questions"])}

    def check_pending(self) -> None:
        """InterviewSettled unless the interview still takes answers."""
        with self._lock:
            self._check_pending()

    def _check_pending(self) -> None:
        """Call with the lock held: wait out a settle in progress (its outcome decides),
        then InterviewSettled unless still pending."""
        self._changed.wait_for(lambda: not self._settling or self._result is not None)
        if self._result is not None:
            raise InterviewSettled(self.id, self._state_now())

    # -- transitions --------------------------------------------------------------------

    def _touch(self) -> None:
        """Record a change the form's state shows. Call with the lock held."""
        self._revision += 1
        # Kept so that an event stream sends every state, not only the newest: two changes
        # close together (a submit, then its waiter leaving) must reach the page as two events.
        self._states.append((self._revision, self._status()))
        del self._states[:-STATE_HISTORY]
        self._changed.notify_all()

    def append(self, raw_questions, note) -> tuple:
        """Follow-up questions checked and added (InvalidInterview, InterviewSettled):
        (how many, questions now, version now)."""
        with self._lock:
            self._check_pending()
            existing = [question["id"] for question in self._spec["questions"]]
            questions = validate_follow_ups(raw_questions, note, existing)
            self._version += 1
            for question in questions:
                question["version"] = self._version
            self._spec["questions"].extend(questions)
            if note is not None and note.strip():
                self._note = {"version": self._version, "text": note}
            self._touch()
            appended = len(questions), len(self._spec["questions"]), self._version
        self._on_change(self)
        return appended

    def settle(self, build, version=None, handed_back=False, answered_there=False) -> dict:
        """PENDING -> the result's status, exactly once, in three steps; the result. Reserved
        under the lock: InterviewSettled unless pending, StaleVersion unless `version` (None:
        not checked) is the current one. Built without it: `build(snapshot)` (an
        InterviewSnapshot) returns the result, writing the archive meanwhile, or raises, and
        the interview stays pending. Published: the result set, every wait woken, on_change
        told. `handed_back`, `answered_there`: see __init__."""
        snapshot = self._reserve(version)
        try:
            result = build(snapshot)
        except BaseException:
            with self._lock:
                self._settling = False
                self._changed.notify_all()
            raise
        with self._lock:
            self._handed_back = handed_back
            self._answered_there = answered_there
            self._settled_monotonic = time.monotonic()
            self._result = result
            self._settling = False
            self._touch()
        self._on_change(self)
        return result

    def _reserve(self, version) -> InterviewSnapshot:
        with self._lock:
            self._check_pending()
            if version is not None and (
                isinstance(version, bool) or not isinstance(version, int) or version != self._version
            ):
                raise StaleVersion(self._version)
            self._settling = True
            return InterviewSnapshot(self, self._spec_now(), self.created, list(self._task_ids),
                                     self._attachments, self._waiting > 0)

    def add_task(self, task_id: str, index) -> None:
        """A task made on it; while pending, `index(task ids)` runs with the lock held, so
        that a submit's archive entry either names this task or comes after the index that
        does."""
        with self._lock:
            self._changed.wait_for(lambda: not self._settling or self._result is not None)
            self._task_ids.append(task_id)
            if self._result is None:
                index(list(self._task_ids))

    def add_attachment(self, name: str, media_type: str, length: int, source) -> dict:
        """Store an upload (AttachmentRefused, InterviewSettled). The bytes are read and
        fsynced without the lock; the pending check and the rename that makes the file one
        of the uploads happen under it, so a submit settles either with this file or
        before it, and then the file is removed and the upload refused."""

        def commit(publish) -> None:
            with self._lock:
                self._check_pending()
                publish()

        return self._attachments.add(name, media_type, length, source, commit)

    def remove_attachment(self, attachment_id) -> None:
        """Remove an upload while pending (InterviewSettled, AttachmentRefused): under the
        lock, so that a submit cannot settle with a file that is being removed."""
        with self._lock:
            self._check_pending()
            self._attachments.remove(attachment_id)

    def record_waiter(self, delta: int) -> None:
        """A waiter came (+1) or left (-1): the form's state's `waiting`."""
        with self._lock:
            self._waiting += delta
            self._touch()
        self._on_change(self)

    def nudge(self) -> None:
        """Let the event streams send the form's state again: what a form shows beside it
        (the inbox's count) changed, or the hub dropped it."""
        with self._lock:
            self._touch()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    def is_closing(self) -> bool:
        """Its server is shutting down."""
        with self._lock:
            return self._closed

    # -- waiting ------------------------------------------------------------------------

    def wake(self) -> None:
        """Let every wait look at its condition again (a cancellation, a response,
        shutdown). Whoever makes a wait's condition true sets it first, then wakes."""
        with self._lock:
            self._changed.notify_all()

    def wait_until(self, check):
        """`check()`, called with the lock held now and after every change, until it
        returns something else than None or a number, which is returned. A number means:
        check again after that many seconds at the latest (a deadline); None: at the next
        change."""
        with self._lock:
            while True:
                outcome = check()
                if outcome is None:
                    self._changed.wait()
                elif isinstance(outcome, (int, float)) and not isinstance(outcome, bool):
                    self._changed.wait(outcome)
                else:
                    return outcome

    def next_states(self, seen, timeout: float, stop):
        """For an event stream: wait up to `timeout` for a revision after `seen` (or for
        `stop()`); (changed, the statuses to send, the revision they bring the stream to)."""
        with self._lock:
            changed = self._changed.wait_for(lambda: self._revision != seen or stop(), timeout)
            states = [state for revision, state in self._states if seen is not None and revision > seen]
            return changed, states or [self._status()], self._revision

    def waiter(self, cancellation=None) -> "Waiter":
        """`with interview.waiter(cancellation) as waiter: waiter.wait(...)`: counted in
        the form's state while inside."""
        return Waiter(self, cancellation if cancellation is not None else Cancellation())


def progress_snapshot(interview: Interview):
    """(how often the form's counts changed, what a progress report says, as facts), read
    together."""
    now = interview.activity()
    if now["streams"] > 0:
        form = "form open"
    elif now["pageViews"] or now["counts"] is not None:
        form = "form closed"
    else:
        form = "form not opened yet"
    return now["countsRevision"], {
        "title": now["title"],
        "answered": (now["counts"] or {}).get("answered", 0),
        "total": now["total"],
        "form": form,
        "elapsedSeconds": int(time.time() - interview.created),
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
        self.interview.record_waiter(+1)
        return self

    def __exit__(self, *exc_info) -> None:
        self.interview.record_waiter(-1)
        self.cancellation.watched = None

    def wait(self, timeout=None, answered=None) -> str:
        """Block until the first of: "answered" (`answered()` turned true; checked with the
        lock held, so whoever makes it true must then call interview.wake()), "settled",
        "cancelled", "shutdown", "timeout"."""
        interview = self.interview
        deadline = None if timeout is None else time.monotonic() + timeout

        def check():
            if answered is not None and answered():
                return "answered"
            if interview.settled_result() is not None:
                return "settled"
            if self.cancellation.is_set:
                return "cancelled"
            if not interview.is_pending():  # not settled, so its server is shutting down
                return "shutdown"
            if deadline is None:
                return None
            remaining = deadline - time.monotonic()
            return "timeout" if remaining <= 0 else remaining

        return interview.wait_until(check)


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
        self.stopped = True
        self.interview.wake()
        self.thread.join()

    def _due(self, seen_counts: int, last_sent: float, next_tick: float):
        """None when a report is due now, else how long to sleep. Call with the lock held."""
        now = time.monotonic()
        if now >= next_tick:
            return None
        wake = next_tick
        if self.interview.activity()["countsRevision"] != seen_counts:
            if now - last_sent >= PROGRESS_CHANGE_MIN_SECONDS:
                return None
            wake = min(wake, last_sent + PROGRESS_CHANGE_MIN_SECONDS)
        return wake - now

    def _run(self) -> None:
        interview = self.interview
        seen_counts, last_sent, next_tick = -1, float("-inf"), time.monotonic()
        while True:
            def check():
                if self.stopped:
                    return "stopped"
                sleep = self._due(seen_counts, last_sent, next_tick)
                return "due" if sleep is None else sleep

            if interview.wait_until(check) == "stopped":
                return
            seen_counts, facts = progress_snapshot(interview)
            self.report(facts, last_sent == float("-inf"))
            last_sent = time.monotonic()
            next_tick = last_sent + self.interval


class SessionHub:
    """Every interview of this process, by id and by token digest."""

    def __init__(self, log: Log, archive: Archive, on_change=None) -> None:
        self.log = log
        self.archive = archive
        self.lock = threading.Lock()
        self.by_id: dict = {}
        self.by_token: dict = {}
        self.closed = False
        # Told of every interview created and of every change to one (Interview's on_change).
        self.on_change = on_change if on_change is not None else (lambda interview: None)

    # -- lifecycle ------------------------------------------------------------------------

    def create(self, spec: dict, options=None, agent=None, away=None, interview_id=None) -> Interview:
        """A new pending interview. `away`: the person's away policy (policy, minutes), which
        never holds for a permission ask: nothing allows a tool on its own. `interview_id`: an
        earlier server's, for an interview taken over from it."""
        import secrets

        if (options or {}).get("kind") == PERMISSION:
            away = None
        for question in spec["questions"]:
            question["version"] = 1
        with self.lock:
            interview_id = interview_id or secrets.token_hex(6)
            while interview_id in self.by_id:
                interview_id = secrets.token_hex(6)
            token = secrets.token_urlsafe(18)
            store = AttachmentStore(os.path.join(self.log.log_dir, "attachments", interview_id), self.log)
            interview = Interview(interview_id, token, spec, store, options, agent, self.on_change, away)
            self.by_id[interview_id] = interview
            self.by_token[token_key(token)] = interview
        self.log.event(
            "session-created",
            about=interview,
            interview=interview_id,
            token=redact(token),
            questions=len(spec["questions"]),
            title=spec["title"],
        )
        self.on_change(interview)
        return interview

    def _purge_expired(self) -> None:
        """Drop interviews settled more than 30 minutes ago (their archive remains)."""
        horizon = time.monotonic() - SETTLED_RETENTION_SECONDS
        with self.lock:
            settled = [(interview, interview.settled_monotonic) for interview in self.by_id.values()]
            expired = [interview for interview, when in settled if when is not None and when < horizon]
            for interview in expired:
                del self.by_id[interview.id]
                del self.by_token[token_key(interview.token)]
        for interview in expired:
            self.log.event("session-expired", about=interview, interview=interview.id)
            interview.nudge()

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

    def find_by_token_digest(self, digest: bytes) -> Interview | None:
        self._purge_expired()
        with self.lock:
            return self.by_token.get(digest)

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
        """Follow-up questions added to a pending interview; the append_questions reply
        without the form's link (the Runtime adds it)."""
        interview = self.require(interview_id)
        appended, total, version = interview.append(raw_questions, note)
        self.log.event("questions-appended", about=interview, interview=interview.id,
                       appended=appended, total=total, version=version)
        return {"status": "appended", "sessionId": interview.id, "appended": appended, "total": total,
                "version": version}

    # -- settling -------------------------------------------------------------------------

    def record_answers(self, interview: Interview, answers: dict, via: str) -> None:
        """The person's answers so far (Interview.record_answers); a change is a sign of them."""
        if interview.record_answers(answers, via):
            self.log.event("answers-changed", "debug", about=interview, interview=interview.id,
                           given=len(answers), via=via)

    def submit(self, interview: Interview, payload, via: str = "browser") -> dict:
        """Check, archive durably, settle, wake every waiter; the reply for the form (`via`:
        "browser", or "app" for the form inside the host)."""
        delivered = []

        def build(snapshot: InterviewSnapshot):
            submission = check_submission(snapshot.spec, payload, snapshot.uploads)
            delivered.append(snapshot.delivered)
            # Unkept, answers that no call takes would be lost with the process: the form
            # keeps them instead. Taken by a waiting call, they reached the agent.
            return self._result(snapshot, submission, via, keep_or_refuse=not snapshot.delivered)

        # The version is judged only once the payload is an object with answers: a body of
        # another shape is refused as such, whatever version it names.
        version = payload.get("specVersion") if is_submission_shaped(payload) else None
        result = interview.settle(build, version)
        counts = result["counts"]
        self._log_archived(interview, result["archivePath"])
        self.log.event(result["status"], about=interview, interview=interview.id, delivered=delivered[0], **counts)
        return {"ok": True, "counts": counts, "delivered": delivered[0]}

    def settle_without_form(self, interview: Interview, answers: dict, status: str, via: str,
                            handed_back: bool = False, answered_there: bool = False):
        """Settle through another channel (a native elicitation, the hook giving the questions
        back to Claude Code, a permission answered in the terminal); None if already settled."""
        submission = {"answers": answers, "generalNotes": None, "attachments": None, "status": status}
        try:
            result = interview.settle(lambda snapshot: self._result(snapshot, submission, via),
                                      handed_back=handed_back, answered_there=answered_there)
        except InterviewSettled:
            return None
        self._log_archived(interview, result["archivePath"])
        return result

    def settle_by_policy(self, interview: Interview):
        """The away policy's turn (Interview.away): nobody answered in time. `recommended`
        keeps every answer the person gave in the form and takes the recommendation for the
        other questions that have one, except those that need the person; `decline` declines.
        The result, or None when the interview settled meanwhile."""
        policy, minutes = interview.away
        away = {"policy": policy, "afterMinutes": minutes, "decided": []}

        def build(snapshot: InterviewSnapshot):
            given = interview.given_answers()  # read once the settle is reserved: the latest
            answers, sources = {}, {}
            for question in snapshot.spec["questions"]:
                qid = question["id"]
                mine = given.get(qid)
                if mine is not None and mine["answer"]["status"] != "unanswered":
                    answers[qid], sources[qid] = mine["answer"], (BY_PERSON, mine["via"])
                    continue
                notes = mine["answer"]["notes"] if mine is not None else None
                answers[qid], sources[qid] = unanswered(notes), (BY_PERSON, None)
                if policy == "recommended" and question["recommended"] and not question.get("needsPerson"):
                    answers[qid] = recommended_answer(question, notes)
                    sources[qid] = (BY_AWAY_POLICY, None)
                    away["decided"].append(qid)
            submission = {"answers": answers, "attachments": None,
                          "generalNotes": away_reason(minutes) if policy == "decline" else None,
                          "status": DECLINED if policy == "decline" else SUBMITTED}
            return self._result(snapshot, submission, VIA_AWAY_POLICY, sources=sources, away=away)

        try:
            result = interview.settle(build)
        except InterviewSettled:
            return None
        self._log_archived(interview, result["archivePath"])
        self.log.event("away-policy", about=interview, interview=interview.id, policy=policy,
                       decided=len(away["decided"]))
        return result

    def _result(self, snapshot: InterviewSnapshot, submission: dict, via: str, keep_or_refuse=False,
                sources=None, away=None):
        """Runs while the settle is reserved, before it is published, so the archive is
        durable before anyone is told: the result, whose archivePath is None when the archive
        could not be written; with `keep_or_refuse`, AnswersNotSaved instead, and nothing
        settles."""
        now = time.time()
        spec = snapshot.spec
        result = build_result(
            spec,
            submission["answers"],
            submission["generalNotes"],
            interview_id=snapshot.interview_id,
            status=submission["status"],
            via=via,
            submitted_at=now,
            duration_seconds=now - snapshot.created,
            attachments=submission["attachments"],
            archive_path=self.archive.path_for(snapshot.interview_id, iso_utc(now)),
            sources=sources,
            away=away,
        )
        record = {key: value for key, value in result.items() if key != "summary"}
        record["interview"] = spec
        # What the history lists beside the title: who asked, and in which project.
        record["agent"], record["project"] = snapshot.agent, working_folder()
        if snapshot.task_ids:  # what a later process needs to answer tasks/get for them
            record["tasks"] = dict(self.archive.owner, ids=snapshot.task_ids)
        if snapshot.options.get("kind") == PERMISSION:
            record["kind"] = PERMISSION
            record["permission"] = permission_record(snapshot.options["permission"], result, via, now)
        try:
            path = self.archive.save(record, about=snapshot.interview)
        except OSError as error:
            if keep_or_refuse:
                raise AnswersNotSaved(error.strerror or str(error)) from None
            path = None
        if path != result["archivePath"]:
            result = with_archive_path(result, spec, path)
        return result

    def _log_archived(self, interview: Interview, path) -> None:
        self.log.event("archived" if path else "archive-skipped", about=interview, interview=interview.id, path=path)

    # -- waiting --------------------------------------------------------------------------

    def wait(self, interview: Interview, cancellation=None, timeout=None, report=None, interval=15.0):
        """Block until the interview settles; (result, why) with why one of "settled",
        "timeout", "cancelled", "shutdown". With `report`, a ProgressTicker calls
        `report(facts, first)` meanwhile."""
        try:
            with interview.waiter(cancellation) as waiter:
                # Logged once counted in /state's `waiting`: the line means the submit reaches us.
                self.log.event(
                    "wait-start",
                    about=interview,
                    interview=interview.id,
                    timeout=timeout,
                    progressToken="present" if report else "absent",
                )
                if report is None:
                    why = waiter.wait(timeout)
                else:
                    with ProgressTicker(interview, report, interval):
                        why = waiter.wait(timeout)
        finally:
            self.log.event("wait-end", about=interview, interview=interview.id)
        return (interview.settled_result() if why == "settled" else None), why


# ============================================================================================
# JSON-RPC over stdio: one message a line, parsed strictly
# ============================================================================================

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
            text = line.decode("utf-8")
            if json_values_bound(text) > MAX_LINE_VALUES:
                return self.send(rpc_error(None, -32600, "Invalid Request: more than %d JSON values in one line"
                                           % MAX_LINE_VALUES))
            message = parse_json(text)
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            return self.send(rpc_error(None, -32700, "Parse error: %s" % error))
        if isinstance(message, list):
            if not message:
                return self.send(rpc_error(None, -32600, "Invalid Request: empty batch"))
            if len(message) > MAX_BATCH:
                return self.send(rpc_error(None, -32600, "Invalid Request: a batch holds at most %d messages"
                                           % MAX_BATCH))
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

    def post_notification(self, method: str, params: dict) -> None:
        """Queue a notification (see LineWriter.post): for threads that must not block."""
        self.out.post({"jsonrpc": "2.0", "method": method, "params": params})

    def respond(self, request_id, result) -> None:
        """The response to a call answered later, after every notification queued before it:
        the messages a call caused reach the client before the call's end."""
        self.out.drain(1.0)
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
                cancellation.cancel()  # first: no log message reaches a cancelled request
                self.log.event("call-cancelled", about=cancellation, request=str(params.get("requestId")))
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


def json_values_bound(text: str) -> int:
    """At least as many as the values and keys `text` parses into (each but the first follows
    a comma or a colon, or opens an array or object), counted in C before anything is built: a
    line of tiny values costs hundreds of bytes of objects per byte. Those marks inside strings
    are left out only when the raw count is over the limit."""
    def count(part: str) -> int:
        return part.count(",") + part.count(":") + part.count("[") + part.count("{") + 1

    bound = count(text)
    if bound <= MAX_LINE_VALUES:
        return bound
    import re

    return count(re.sub(r'"[^"\\]*(?:\\.[^"\\]*)*"', "", text))


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

# This file's real folder, taken at import: run as a script, CPython drops __main__'s __file__
# once the script's body returns, and the stdio server serves on after that (run_stdio_server).
# The real one: askrich.py may be run through a symlink on the PATH.
MODULE_FOLDER = os.path.dirname(os.path.realpath(__file__))


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
            held = RunningArchive.held
            if held is not None and held.changed():
                return held.read("/".join(["assets"] + parts))
            return loader.get_data(os.path.join(archive, "assets", *parts))
        except OSError:
            raise
        except Exception as error:  # zipimport's, zlib's or zipfile's word for a damaged zip
            raise OSError("cannot read %s from %s: %s" % (name, archive, error)) from error
    with open(os.path.join(MODULE_FOLDER, "assets", *parts), "rb") as handle:
        return handle.read()


class RunningArchive:
    """The zip a server process runs from, held open from its start. zipimport reads a member
    by the path and the offsets it found at start, so once a release is installed over the
    archive, or the archive is moved away, while the server runs, its form's files are read
    from the file held here instead: the bytes this server started with while any name still
    holds them, else the whole of what replaced them in place."""

    held = None  # the one a stdio server holds while it runs from askrich.pyz on POSIX

    @classmethod
    def hold(cls) -> None:
        """Open `held` when this process runs from a zip. Not on Windows, where a file held
        open cannot be replaced: that would keep users from installing an update."""
        archive = getattr(globals().get("__loader__"), "archive", None)
        if archive and os.name == "posix" and cls.held is None:
            try:
                cls.held = cls(os.path.abspath(archive))
            except OSError:
                pass  # already gone: zipimport's own reads are all there is

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


# -- the form as one document, for MCP Apps hosts ----------------------------------------------
#
# A host shows an app in a sandboxed frame that may fetch nothing (its default CSP has
# `connect-src 'none'` and no origin for scripts): the form's styles, modules, marked, DOMPurify
# and language files go inline into one document, built at first need from the same assets/ the
# browser form is served from, in a checkout and in askrich.pyz alike (whose build runs this
# builder once as a check), so the form and the app never drift apart.

APP_ENTRY_MODULE = "js/main.js"
_IMPORT_RE = r'(?ms)^import\s+(.+?)\s+from\s+"([^"]+)";[ \t]*$'
_EXPORT_DECLARATION_RE = r"(?m)^export\s+((?:async\s+)?function\*?|const|let|class)\s+([A-Za-z_$][\w$]*)"
_EXPORT_LIST_RE = r"(?:(?<=;)|(?m:^))\s*export\s*\{([^}]*)\};?"


def app_module_name(importer: str, specifier: str) -> str:
    """The assets/ name an import names: "./x.js" beside the importer, or "/assets/...". """
    import posixpath

    if specifier.startswith("/assets/"):
        return specifier[len("/assets/"):]
    if specifier.startswith("./") or specifier.startswith("../"):
        return posixpath.normpath(posixpath.join(posixpath.dirname(importer), specifier))
    raise ValueError("%s imports %r, which the app document cannot inline" % (importer, specifier))


def app_module_body(name: str, source: str, index: dict) -> str:
    """One ES module as a function body: its imports read from the modules before it (`__m`),
    its exports returned. Modules hold no `export let` and no cycles (checked), so the values
    taken at start are the ones the module exports."""
    import re

    def imported(match) -> str:
        clause, target = match.group(1).strip(), index[app_module_name(name, match.group(2))]
        parts = []
        if not clause.startswith("{") and not clause.startswith("*"):
            default, _, clause = clause.partition(",")
            parts.append("const %s = __m[%d].default;" % (default.strip(), target))
            clause = clause.strip()
        if clause.startswith("* as "):
            parts.append("const %s = __m[%d];" % (clause[5:].strip(), target))
        elif clause:
            names = [item.split(" as ") for item in clause.strip("{} \n").replace("\n", " ").split(",") if item.strip()]
            pairs = ["%s: %s" % (pair[0].strip(), pair[1].strip()) if len(pair) == 2 else pair[0].strip()
                     for pair in names]
            parts.append("const { %s } = __m[%d];" % (", ".join(pairs), target))
        return " ".join(parts)

    exported = []

    def declared(match) -> str:
        if match.group(1) == "let":
            raise ValueError("%s exports `let %s`: the app document cannot keep it live" % (name, match.group(2)))
        exported.append("%s: %s" % (match.group(2), match.group(2)))
        return "%s %s" % (match.group(1), match.group(2))

    def listed(match) -> str:
        for item in match.group(1).split(","):
            local, _, public = item.strip().partition(" as ")
            if local:
                exported.append("%s: %s" % ((public or local).strip(), local.strip()))
        return ""

    def defaulted(match) -> str:
        exported.append("default: __default")
        return "const __default = "

    body = re.sub(_IMPORT_RE, imported, source)
    body = re.sub(_EXPORT_DECLARATION_RE, declared, body)
    body = re.sub(_EXPORT_LIST_RE, listed, body)
    body = re.sub(r"(?m)^export\s+default\s+", defaulted, body)
    body = re.sub(r"(?m)^//# sourceMappingURL=.*$", "", body)
    if re.search(r"(?m)^\s*(export|import)\s", body):
        raise ValueError("%s has an import or export the app document cannot inline" % name)
    return "%s\nreturn { %s };" % (body, ", ".join(exported))


def app_module_order(read) -> list:
    """[(name, source)] of every module the form's entry reaches, each after what it imports;
    ValueError on a cycle, which the inlined modules could not honour."""
    import re

    order, state = [], {}

    def visit(name: str, path: tuple) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise ValueError("the form's modules import each other in a cycle: %s" % " -> ".join(path + (name,)))
        state[name] = "visiting"
        source = read(name).decode("utf-8")
        for match in re.finditer(_IMPORT_RE, source):
            visit(app_module_name(name, match.group(2)), path + (name,))
        state[name] = "done"
        order.append((name, source))

    visit(APP_ENTRY_MODULE, ())
    return order


def inline_json(value) -> str:
    """JSON that cannot end the <script> element that holds it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def build_app_document(read=read_asset) -> bytes:
    """The form as one self-contained HTML document, from the files `read(name)` gives."""
    modules = app_module_order(read)
    index = {name: number for number, (name, _) in enumerate(modules)}
    scripts = "\n".join(
        "__m[%d] = (() => {\n%s\n})();" % (index[name], app_module_body(name, source, index))
        for name, source in modules
    )
    languages = {tag: json.loads(read("i18n/%s.json" % tag).decode("utf-8")) for tag in FORM_LANGUAGES}
    style = read("form.css").decode("utf-8")
    page = read("form.html").decode("utf-8")
    if "</style" in style.lower():
        raise ValueError("form.css holds '</style', which would end its element early")
    # Only inside strings and regular expressions (marked's HTML patterns), where \x3C reads
    # the same; an HTML parser would take them for the end of the script.
    scripts = scripts.replace("<!--", "\\x3C!--").replace("</script", "\\x3C/script")
    head = (
        '<style>\n%s</style>\n<script type="application/json" id="askrich-app">%s</script>\n'
        '<script type="module">\nconst __m = [];\n%s\n</script>'
        % (style, inline_json({"languages": languages}), scripts)
    )
    for tag in ('<link rel="stylesheet" href="/assets/form.css">', '<script type="module" src="/assets/js/main.js"></script>'):
        if tag not in page:
            raise ValueError("form.html no longer holds %s, which the app document replaces" % tag)
    page = page.replace('<link rel="stylesheet" href="/assets/form.css">', "")
    # The browser form's empty favicon is an image request, which hosts' policies refuse.
    page = page.replace('<link rel="icon" href="data:,">', "")
    page = page.replace('<script type="module" src="/assets/js/main.js"></script>', head)
    return page.encode("utf-8")


# ============================================================================================
# HTTP form server
# ============================================================================================
#
# http.server is imported on first use (it pulls in email, html, socketserver, ...), so the
# server classes are built by a function the first time a form is needed.

TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
HEX_DIGITS = frozenset("0123456789abcdef")
MAX_PROGRESS_BYTES = MAX_BODY_BYTES  # it carries the person's answers so far, as a submit does
MAX_VISIBILITY_BYTES = 1024
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

    def deliver(self, request) -> None:
        request.stream_events(self.interview)


# Every JSON error body is {"error": text, "code": name, ...}: the text is for people and may be
# reworded, the code is what the form and other local tools compare (tests/README.md lists them).
ERROR_CODES = MappingProxyType({
    400: "bad-request",
    403: "forbidden-host",
    404: "not-found",
    405: "method-not-allowed",
    409: "not-pending",
    411: "length-required",
    413: "too-large",
    414: "too-large",
    415: "unsupported-media-type",
    422: "invalid-answers",
    431: "too-large",
    500: "internal-error",
    501: "not-implemented",
    502: "owner-unreachable",
    504: "owner-timeout",
    507: "not-saved",
})  # the code each status has unless a refusal names another
# A refused upload or removal: its status, by the code the attachment store gives.
ATTACHMENT_STATUS = MappingProxyType({
    "too-large": 413,
    "too-many-files": 413,
    "attachments-too-large": 413,
    "upload-incomplete": 400,
    "bad-file-name": 400,
    "not-found": 404,
    "storage-failed": 500,
})


def error_body(status: int, error: str, code=None, **fields) -> dict:
    return dict({"error": error, "code": code or ERROR_CODES.get(status, "bad-request")}, **fields)


def json_reply(status: int, payload, headers=None) -> Reply:
    return Reply(status, dict({"Content-Type": JSON_CONTENT_TYPE}, **(headers or {})), json_utf8(payload))


def text_reply(status: int, text: str) -> Reply:
    return Reply(status, {"Content-Type": "text/plain; charset=utf-8"}, text.encode("utf-8"))


def is_token_shaped(text: str) -> bool:
    return bool(text) and len(text) <= 64 and set(text) <= TOKEN_CHARS


def query_value(request, name: str) -> str:
    """The first value of `name` in the request's query string, or ""."""
    import urllib.parse

    return (urllib.parse.parse_qs(request.path.partition("?")[2]).get(name) or [""])[0]


def request_nonce(request) -> str:
    """The `nonce` a prove route is asked with, or a 400."""
    nonce = query_value(request, "nonce")
    if not 16 <= len(nonce) <= 128 or not set(nonce) <= HEX_DIGITS:
        raise HttpRefusal(400, "nonce must be 16 to 128 lower-case hex digits")
    return nonce


def request_token_digest(request) -> str:
    """The `token-sha256` a form's prove route is asked with, or a 400."""
    digest = query_value(request, "token-sha256")
    if len(digest) != 64 or not set(digest) <= HEX_DIGITS:
        raise HttpRefusal(400, "token-sha256 must be 64 lower-case hex digits")
    return digest


def proof_of(secret: str, message: str) -> str:
    """hex(HMAC-SHA256(secret, message)): what a server shows to prove it knows `secret`
    without sending it, and what signs the inbox's tickets and sessions."""
    import hashlib
    import hmac

    return hmac.new(secret.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


def find_interview(hub, token: str):
    return hub.find_by_token(token) if is_token_shaped(token) else None


def api_interview(request, params: dict):
    """The interview a /api/s/<token>/... route names, or a 404."""
    interview = find_interview(request.runtime.hub, params["token"])
    if interview is None:
        raise HttpRefusal(404, "not found")
    return interview


def request_host(request) -> tuple:
    """(the Host header, lower-cased; its name; its port as written, "" when none)."""
    header = request.headers.get("Host", "").strip().lower()
    name = host_name(header)
    return header, name, header[len(name):].lstrip(":")


def names_public_url(header: str, public_url) -> bool:
    """Whether a Host header names the public URL: its host and its port, since a tunnel's
    public URL may be another port of this very host (`ssh -L 9000:localhost:47615`)."""
    return bool(public_url) and header == public_url.split("://", 1)[1].rstrip("/").lower()


def request_via(request) -> str:
    """Where a form's request came from, by the Host it names (the front door forwards it
    unchanged): the public URL -> "public", the inbox's port (the door) -> "door", else the
    form's own port -> "browser"."""
    header, _, port = request_host(request)
    config = request.runtime.config
    if names_public_url(header, config.public_url):
        return "public"
    if config.inbox_port and port.isdigit() and int(port) == config.inbox_port:
        return "door"
    return "browser"


def require_json_body(request) -> None:
    if not is_json_media_type(request.headers.get("Content-Type", "")):
        raise HttpRefusal(415, "expected application/json")


# -- the form's operations --------------------------------------------------------------------
#
# What the form does to its interview, each as (status, JSON body or None) or an HttpRefusal:
# the HTTP routes below and the app-only tools of an MCP App (the form inside the host) both
# call these, so every check and error code lives once.


def form_payload(interview) -> dict:
    """What GET /api/s/<token> answers: the interview, and the limits the form keeps before it
    sends (the server's own numbers, so the two cannot differ; each is checked here again)."""
    state, version, note, spec, result = interview.contents()
    limits = {
        "freeText": FREE_TEXT_MAX,
        "attachmentBytes": ATTACHMENT_MAX_BYTES,
        "attachments": ATTACHMENTS_MAX_COUNT,
        "attachmentsBytes": ATTACHMENTS_MAX_TOTAL_BYTES,
    }
    payload = {"id": interview.id, "state": state, "version": version, "note": note, "agent": interview.agent,
               "spec": spec, "result": result, "limits": limits}
    if interview.options.get("kind") == PERMISSION:  # the page words a permission ask itself
        payload["permission"] = interview.options["permission"]["form"]
    return payload


def state_json(status: tuple) -> dict:
    """The form's state, as GET /api/s/<token>/state and its event stream send it, from an
    Interview.status()."""
    state, waiting, version, handed_back, answered_there = status
    shown = {"state": state, "waiting": waiting, "version": version}
    if handed_back:
        shown["handedBack"] = True
    if answered_there:
        shown["answeredInTerminal"] = True
    return shown


def form_state(runtime, interview) -> dict:
    return runtime.inbox.beside(interview, state_json(interview.status()))


def form_progress(runtime, interview, payload, via: str = "browser"):
    """The form's counts, its follow-ups not seen yet and, with `answers` (as a submit has
    them), the person's answers so far, given `via` (ANSWER_VIAS): what the away policy keeps."""
    counts = progress_counts(payload)
    if counts is None:
        raise HttpRefusal(422, "progress must be an object of answered, deferred, needsInfo and open counts",
                          code="invalid-progress")
    if "answers" in payload:
        if not isinstance(payload["answers"], dict):
            raise HttpRefusal(422, "answers must be an object of question id to answer", code="invalid-progress")
        runtime.hub.record_answers(interview, given_answers(interview.spec["questions"], payload["answers"]), via)
    unseen = payload.get("followUpsUnseen")
    unseen = unseen if isinstance(unseen, int) and not isinstance(unseen, bool) and unseen >= 0 else None
    interview.record_progress(counts, unseen)
    runtime.log.event("form-progress", "debug", about=interview, interview=interview.id, **counts)
    return 204, None


def record_page_view(runtime, interview, user_agent: str, seen: bool = False) -> None:
    """A page loaded (`seen`: see Interview.record_page_view)."""
    interview.record_page_view(seen)
    runtime.log.event("page-view", about=interview, interview=interview.id, user_agent=user_agent)


def form_visibility(runtime, interview, payload):
    """A page's report of whether the person can see it: {"page": its id, "visibility":
    "visible" or "hidden" (document.visibilityState), "focus": document.hasFocus()}. In view
    means visible and focused: a tab the opener put behind other windows is visible to the
    browser in some desktops, yet nobody looks at it."""
    if not isinstance(payload, dict):
        raise HttpRefusal(400, "visibility must be an object of page, visibility and focus", code="invalid-visibility")
    page, visibility, focus = payload.get("page"), payload.get("visibility"), payload.get("focus")
    problems = []
    if not isinstance(page, str) or not is_token_shaped(page):
        problems.append("page must be the page's id: 1 to 64 letters, digits, '-' or '_' (got %s)" % describe(page))
    if visibility not in ("visible", "hidden"):
        problems.append("visibility must be \"visible\" or \"hidden\" (got %s)" % describe(visibility))
    if not isinstance(focus, bool):
        problems.append("focus must be true or false (got %s)" % describe(focus))
    if problems:
        raise HttpRefusal(400, "; ".join(problems), code="invalid-visibility")
    in_view = visibility == "visible" and focus
    came = interview.record_visibility(page, in_view)
    runtime.log.event("page-visibility", "debug", about=interview, interview=interview.id, page=page,
                      in_view="yes" if in_view else "no", **({"sighting": "yes"} if came else {}))
    return 204, None


def form_submit(runtime, interview, read_payload, via: str = "browser"):
    """`read_payload()` gives the submitted JSON (or refuses it) once the interview is known to
    be pending: a settled one is told so before its body is read. `via`: ANSWER_VIAS."""
    hub = runtime.hub
    try:
        interview.check_pending()
        return 200, hub.submit(interview, read_payload(), via)
    except InterviewError as error:
        status, body = http_error(error)
        hub.log.event(
            "submit-rejected", about=interview, interview=interview.id, status=status,
            # Cut: a hostile body can make the full text megabytes long.
            error=cut(body["error"], 500),
        )
        return status, body


def form_attach(runtime, interview, name: str, media_type: str, read_length, source):
    """Store one file: `read_length()` gives its size in bytes (or refuses it) once the
    interview is known to be pending, `source` its bytes."""
    hub = runtime.hub
    try:
        interview.check_pending()
    except InterviewError as error:
        return http_error(error)
    length = read_length()
    try:
        entry = interview.add_attachment(name, media_type, length, source)
    except InterviewError as error:
        if isinstance(error, InterviewSettled):  # settled while the file arrived: removed, never named
            hub.log.event("attachment-refused", about=interview, interview=interview.id, reason="settled during the upload")
        return http_error(error)
    hub.log.event("attachment-stored", about=interview, interview=interview.id, attachment=entry["id"],
                  bytes=length, mimeType=media_type)
    return 201, {key: entry[key] for key in ("id", "name", "mimeType", "bytes")}


def form_detach(runtime, interview, attachment_id):
    try:
        interview.remove_attachment(attachment_id)
    except InterviewError as error:
        return http_error(error)
    runtime.hub.log.event("attachment-removed", about=interview, interview=interview.id, attachment=attachment_id)
    return 204, None


def operation_reply(outcome) -> Reply:
    status, body = outcome
    return Reply(status) if body is None else json_reply(status, body)


# -- routes -----------------------------------------------------------------------------------
#
# Each takes the request (its runtime, headers and body readers) and the path's parameters,
# and returns a Reply (or an EventStream), or raises HttpRefusal.


def route_form_page(request, params: dict):
    interview = find_interview(request.runtime.hub, params["token"])
    if interview is None:
        return text_reply(404, NOT_FOUND_TEXT)
    record_page_view(request.runtime, interview, request.headers.get("User-Agent", "")[:200])
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
    return json_reply(200, form_payload(api_interview(request, params)))


def route_state(request, params: dict):
    return json_reply(200, form_state(request.runtime, api_interview(request, params)))


def route_events(request, params: dict):
    return EventStream(api_interview(request, params))


def route_prove(request, params: dict):
    """A page that lost its server asks this before it sends its token again: the server
    proves it knows the token the page names by its SHA-256, which proves nothing to anyone
    who does not hold the token already, for the origin it answers at (proved_origin)."""
    nonce, digest = request_nonce(request), request_token_digest(request)
    interview = request.runtime.hub.find_by_token_digest(bytes.fromhex(digest))
    if interview is None:
        raise HttpRefusal(404, "not found")
    origin = proved_origin(request)
    return json_reply(200, {"proof": origin_proof(interview.token, nonce, origin), "origin": origin})


def origin_proof(secret: str, nonce: str, origin: str) -> str:
    """A proof bound to the origin the page talks to (scheme, host and port): another server
    that passes the question on to us gets a proof for our origin, which the page, at the
    relay's origin, does not take."""
    return proof_of(secret, "%s %s" % (nonce, origin))


def proved_origin(request) -> str:
    """The origin a proof is given for: this listener's own port, under the name the page
    used; the door's port (or the public URL) only while the door is ours, for a question
    the door passed on (its Host is the page's). HttpRefusal 403 for any other: a program
    that holds some port and passes questions on learns nothing it can show."""
    header, name, given = request_host(request)
    port = request.server.server_address[1]
    public = request.runtime.config.public_url
    inbox = request.runtime.inbox
    if names_public_url(header, public):
        # The person's tunnel to the door (`ssh -L 9000:localhost:47615` included).
        if getattr(request.server, "inbox", None) is not None or inbox.door_is_ours():
            return public
    if not given.isdigit() or int(given) == port:
        return "http://%s:%d" % (name, port)
    elif int(given) == inbox.port and inbox.door_is_ours():
        return "http://%s:%d" % (name, inbox.port)
    raise HttpRefusal(403, "this server proves only for its own address")


def route_to_inbox(request, params: dict):
    """The form's "N more waiting" link: a redirect to the inbox with a one-time ticket, so
    that the form never holds the inbox's key. Only a pending form leads there: a link kept
    from a settled one opens nothing."""
    interview = api_interview(request, params)
    url = request.runtime.inbox.entry_url(interview) if interview.is_pending() else None
    if url is None:
        raise HttpRefusal(404, "not found")
    return Reply(303, {"Location": url})


def route_progress(request, params: dict):
    interview = api_interview(request, params)
    require_json_body(request)
    return operation_reply(form_progress(request.runtime, interview, request.read_json(MAX_PROGRESS_BYTES),
                                         request_via(request)))


def route_visibility(request, params: dict):
    interview = api_interview(request, params)
    require_json_body(request)
    return operation_reply(form_visibility(request.runtime, interview, request.read_json(MAX_VISIBILITY_BYTES)))


def route_submit(request, params: dict):
    interview = api_interview(request, params)
    require_json_body(request)
    return operation_reply(form_submit(request.runtime, interview, lambda: request.read_json(MAX_BODY_BYTES),
                                       request_via(request)))


def route_attachment_upload(request, params: dict):
    """The raw body is the file, its name in X-Attachment-Name (percent-encoded): a custom header
    forces a CORS preflight, which is never answered, so another site cannot upload."""
    import urllib.parse

    # A refusal may leave the body unread or cut short; no harm, since the handler speaks
    # HTTP/1.0 and every connection closes after its one request.
    interview = api_interview(request, params)
    encoded = request.headers.get("X-Attachment-Name")
    if encoded is None:
        raise HttpRefusal(400, "the X-Attachment-Name header is required: the file's name, percent-encoded")
    return operation_reply(form_attach(
        request.runtime, interview, urllib.parse.unquote(encoded, errors="replace"),
        attachment_media_type(request.headers.get("Content-Type", "")),
        lambda: request.body_length(ATTACHMENT_MAX_BYTES, ATTACHMENT_TOO_LARGE), request.rfile,
    ))


def route_attachment(request, params: dict):
    """An upload's bytes: images as themselves, for the thumbnails; anything else only as a
    download, so that the browser never renders an uploaded page or script from our origin."""
    entry = api_interview(request, params).attachment(params["id"])
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
    return operation_reply(form_detach(request.runtime, api_interview(request, params), params["id"]))


# (method, path pattern, route). A pattern's `<name>` takes one path segment (not empty),
# `<name*>` the rest of the path; the query string is never part of the match.
ROUTES = (
    ("GET", "/s/<token>", route_form_page),
    ("GET", "/assets/<name*>", route_asset),
    ("GET", "/api/s/<token>", route_interview),
    ("GET", "/api/s/<token>/state", route_state),
    ("GET", "/api/s/<token>/events", route_events),
    ("GET", "/api/s/<token>/inbox", route_to_inbox),
    ("GET", "/api/prove", route_prove),
    ("POST", "/api/s/<token>/progress", route_progress),
    ("POST", "/api/s/<token>/visibility", route_visibility),
    ("POST", "/api/s/<token>/submit", route_submit),
    ("POST", "/api/s/<token>/attachments", route_attachment_upload),
    ("GET", "/api/s/<token>/attachments/<id>", route_attachment),
    ("DELETE", "/api/s/<token>/attachments/<id>", route_attachment_remove),
)


def match_path(pattern: str, path: str):
    """The parameters of `path` under `pattern`, or None when it does not match."""
    return _match_parts(pattern_parts(pattern), path.split("?", 1)[0].split("/"))


_PATTERN_PARTS: dict = {}  # pattern -> its segments: every request tries each route's pattern


def pattern_parts(pattern: str) -> tuple:
    parts = _PATTERN_PARTS.get(pattern)
    if parts is None:
        parts = _PATTERN_PARTS[pattern] = tuple(pattern.split("/"))
    return parts


def _match_parts(wanted: tuple, given: list):
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


def resolve_route(method: str, path: str, routes=ROUTES):
    """(route, params) for a request; HttpRefusal 404 for a path no route has, 405 with an
    Allow header for a path that routes take with other methods only."""
    allowed = []
    given = path.split("?", 1)[0].split("/")
    for route_method, pattern, route in routes:
        wanted = pattern_parts(pattern)
        # Only a pattern with a `<name*>` matches a path of another length.
        if len(wanted) != len(given) and not wanted[-1].endswith("*>"):
            continue
        params = _match_parts(wanted, given)
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


class RepliesInFlight:
    """The replies a form server is still working on. Closing waits for them briefly: a submit
    settles its interview before its reply is written, and demo/ask print the result and exit
    as soon as it settles, so without the wait the page was told the server had gone for
    answers that had been delivered."""

    def __init__(self):
        self._count = 0
        self._settled = threading.Condition()

    def __enter__(self):
        with self._settled:
            self._count += 1

    def __exit__(self, *exc_info):
        with self._settled:
            self._count -= 1
            self._settled.notify_all()

    def wait_done(self, patience: float) -> bool:
        with self._settled:
            return self._settled.wait_for(lambda: self._count == 0, patience)


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
            self.send_reply(json_reply(code, error_body(code, self.responses.get(code, ("error",))[0])))
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
        if self.headers.get(DOOR_KEEP_HEADER) == "keep-alive":
            self.keep_for_door()
        return True

    def keep_for_door(self) -> None:
        """The front door sends its next request on this connection when this one is answered
        (a fresh connection and thread per request cost more than the door's whole hop). The
        body is read whole first, so that what a route leaves unread cannot be taken for the
        next request; a large or short one ends the connection as usual."""
        import io
        import socket

        length = (self.headers.get("Content-Length") or "0").strip()
        if not (length.isascii() and length.isdigit()) or int(length) > ATTACHMENT_CHUNK_BYTES:
            return
        # An answer's head and body are two writes: on a kept connection Nagle's rule would
        # hold the body back until the door's delayed acknowledgement (40 ms).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = self.rfile.read(int(length))
        self.kept_rfile, self.rfile = self.rfile, io.BytesIO(body)
        self.close_connection = len(body) < int(length)

    def handle_one_request(self):
        self.kept_rfile = None
        try:
            super().handle_one_request()
        finally:
            if self.kept_rfile is not None:  # the connection's own reader, for the next request
                self.rfile, self.kept_rfile = self.kept_rfile, None

    def end_headers(self):
        # Said only to the door, which takes it off before the page sees the answer.
        if getattr(self, "kept_rfile", None) is not None and not self.close_connection:
            self.send_header("Connection", "keep-alive")
        super().end_headers()

    def handle_routed(self):
        """Every method the base class knows comes here: the two checks, then the route."""
        with self.server.replies:
            try:
                self.check_host_and_origin()
                route, params = resolve_route(self.command, self.path, self.server.routes)
                reply = route(self, params)
            except HttpRefusal as refusal:
                reply = refusal.reply()
            if isinstance(reply, Reply):
                return self.send_reply(reply)
        # A stream (or a request forwarded by the front door) is not a reply being written: it
        # lasts until the page, the hub or the owner goes.
        return reply.deliver(self)

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
            raise HttpRefusal(403, "forbidden origin", code="forbidden-origin")

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
            raise HttpRefusal(400, "invalid JSON: %s" % error, code="bad-json") from None

    def stream_events(self, interview):
        """Server-Sent Events: the /state JSON at once and on every change."""
        hub = self.runtime.hub
        seen, sent = None, None

        def next_events():
            nonlocal seen, sent
            if not hub.is_live(interview):
                return None
            changed, states, seen = interview.next_states(seen, SSE_PING_SECONDS, lambda: hub.closed)
            if hub.closed:
                return None
            if not changed:
                return []
            fresh = [json.dumps(self.runtime.inbox.beside(interview, state_json(state))) for state in states]
            fresh = [data for previous, data in zip([sent] + fresh, fresh) if data != previous]
            sent = fresh[-1] if fresh else sent
            return [("state", data) for data in fresh]

        interview.record_stream(+1)
        try:
            self.send_event_stream(next_events)
        finally:
            interview.record_stream(-1)

    def send_event_stream(self, next_events) -> None:
        """Server-Sent Events on this connection, kept until the page or the server goes:
        `next_events()` waits up to SSE_PING_SECONDS and returns the (name, JSON text) events to
        send, an empty list when there are none (a ping goes instead, which also finds a page
        that went away), or None to end the stream."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_security_headers()
        self.close_connection = True  # before the headers: it ends when the stream does
        self.end_headers()
        try:
            while True:
                events = next_events()
                if events is None or self.page_gone():
                    return
                chunk = "".join("event: %s\ndata: %s\n\n" % event for event in events) or ": ping\n\n"
                self.wfile.write(chunk.encode("utf-8"))
                self.wfile.flush()
        except OSError:
            pass  # the page went away

    def page_gone(self) -> bool:
        """True once the page closed its end (readable, yet nothing to read). Writing alone
        notices only on the second write after the close, which would leave a reloaded page's
        dead stream holding its thread (and counting as "form open") for up to two pings."""
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


def http_error(error: InterviewError):
    """(status, JSON body) for a change the hub refused, as the form reads them."""
    if isinstance(error, InterviewSettled):
        return 409, error_body(409, "interview already %s" % error.state, "not-pending")
    if isinstance(error, StaleVersion):
        return 409, error_body(409, "new questions were added", "stale-version", version=error.version)
    if isinstance(error, InvalidAnswers):
        body = error_body(422, error.text, "invalid-answers")
        if error.problems is not None:
            body["problems"] = error.problems
        return 422, body
    if isinstance(error, AttachmentRefused):
        status = ATTACHMENT_STATUS[error.code]
        return status, error_body(status, error.text, error.code)
    if isinstance(error, UnknownInterview):
        return 404, error_body(404, NOT_FOUND_TEXT, "not-found")
    if isinstance(error, AnswersNotSaved):
        text = "could not save the answers: %s; they are still in this form, try again" % error.reason
        return 507, error_body(507, text, "not-saved", reason=error.reason)
    return 500, error_body(500, "internal error", "internal-error")


LISTENER_CONNECTIONS_MAX = 512  # connections one listener serves at once (pages, streams, the door's)


def _build_form_server_class():
    """The ThreadingHTTPServer subclass that serves forms, on one address family (a
    LoopbackListener holds one per loopback)."""
    import socket
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class FormRequestHandler(FormRequestPlumbing, BaseHTTPRequestHandler):
        pass

    class FormServer(ThreadingHTTPServer):
        daemon_threads = True
        routes = ROUTES
        allow_reuse_address = True
        # socketserver's listen backlog is 5: a page (or a local client) opening many
        # connections at once fills it, and later connections, the form's own included, lose
        # their SYN and wait 1-3 s for a retry.
        request_queue_size = 256

        def __init__(self, runtime, address, family=socket.AF_INET):
            self.runtime = runtime
            self.replies = RepliesInFlight()
            self.counting = threading.Lock()
            self.connections = 0  # served now, each on its thread
            self.address_family = family
            super().__init__(address, FormRequestHandler)
            # The public URL's host too: the door passes a page's Host on unchanged.
            self.allowed_hosts, self.allowed_origins = allowed_hosts(self.server_address[1],
                                                                     host=runtime.config.public_host,
                                                                     public_url=runtime.config.public_url)

        def process_request(self, request, client_address):
            # Each connection costs a thread: past LISTENER_CONNECTIONS_MAX (a flood from
            # another user) a new one is closed at once, and the listener answers again as soon
            # as they end, instead of working through thousands of dead ones.
            with self.counting:
                full = self.connections >= LISTENER_CONNECTIONS_MAX
                self.connections += 0 if full else 1
            if full:
                self.shutdown_request(request)
                return
            super().process_request(request, client_address)

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                with self.counting:
                    self.connections -= 1

        def handle_error(self, request, client_address):
            # A broken connection is routine for a local form; never print a traceback to
            # stderr with a request in it.
            error = sys.exc_info()[1]
            if not isinstance(error, OSError):
                self.runtime.log.event("http-error", "error", error=repr(error)[:300])

    return FormServer


form_server_class = BuiltOnce(_build_form_server_class)
app_document = BuiltOnce(build_app_document)


# -- both loopbacks ----------------------------------------------------------------------------
#
# URLs say `localhost`, which a browser resolves to [::1] as readily as to 127.0.0.1 (Chromium
# tries [::1] first). A port held on one loopback only leaves the other free for any local user
# to bind, and the page then talks to them. So every listener holds its port on both (see
# tests/README.md, "Another user of this machine").

LOOPBACK_BIND_TRIES = 20  # random ports tried when another program holds one on the other loopback
IPV4_LOOPBACKS = frozenset({"127.0.0.1", "localhost", "0.0.0.0", ""})


def has_ipv6_loopback() -> bool:
    """Whether this machine has [::1] to bind (a kernel or container without IPv6 has none)."""
    import socket

    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def listen_addresses(host: str) -> list:
    """(address, family) for every socket a listener on `host` binds: both loopbacks when it
    covers one of them, else `host` alone."""
    import socket

    if host in IPV4_LOOPBACKS:
        pairs = [(host, socket.AF_INET)]
        return pairs + [("::1", socket.AF_INET6)] if has_ipv6_loopback() else pairs
    if host == "::1":
        return [("::1", socket.AF_INET6), ("127.0.0.1", socket.AF_INET)]
    return [(host, socket.AF_INET6 if ":" in host else socket.AF_INET)]


class LoopbackListener:
    """One port held on every address of listen_addresses(), by one server each, serving alike.
    `make(address, family)` builds one bound, listening server (socketserver's kind)."""

    def __init__(self, servers: list) -> None:
        self.servers = servers
        self.threads: list = []

    @classmethod
    def bind(cls, make, host: str, port: int) -> "LoopbackListener":
        """Every family on `port`, or OSError and nothing held. Port 0: the first family picks a
        free port, and when another program holds it on another family, a new one is tried."""
        addresses = listen_addresses(host)
        for _ in range(LOOPBACK_BIND_TRIES if port == 0 else 1):
            servers: list = []
            try:
                for address, family in addresses:
                    chosen = servers[0].server_address[1] if servers else port
                    servers.append(make((address, chosen), family))
                return cls(servers)
            except OSError:
                for server in servers:
                    server.server_close()
                if port != 0 or not servers:
                    raise
        raise OSError("no port was free on %s" % " and ".join(address for address, _ in addresses))

    @property
    def port(self) -> int:
        return self.servers[0].server_address[1]

    def start(self, name: str, poll_interval: float) -> None:
        for server in self.servers:
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval},
                                      name=name, daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self, patience: float | None = 2.0) -> None:
        for server in self.servers:
            stop_serving(server, patience)

    def close(self) -> None:
        for server in self.servers:
            server.server_close()


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def allowed_hosts(port: int, host: str = "localhost", public_url=None) -> tuple:
    """(Host names, Origins) that a listener on loopback `port` answers; any other is a page
    rebinding its name to us, or another site. The loopback names at that port, `host` (the
    name the form's URLs say, ASK_USER_RICH_PUBLIC_HOST) at that port too, and the host of
    `public_url` (a tunnel that reaches this port from afar) with that origin."""
    names = set(LOOPBACK_NAMES) | {host.lower()}
    origins = {"http://%s:%d" % (name, port) for name in names}
    if public_url:
        names.add(host_name(public_url.split("://", 1)[1]))
        origins.add(public_url)
    return frozenset(names), frozenset(origins)


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


def stop_serving(server, patience: float | None = 2.0) -> None:
    """End a serve_forever loop now. shutdown() alone waits until the loop next wakes, up to
    its poll interval, and a client that sends SIGINT sends SIGTERM 100 ms later. On Linux the
    listening socket, shut down, wakes the loop at once (a connection would not do on the door's
    port, which the kernel may give to any process of ours that holds it); elsewhere a
    connection to it does, and the loop stops without serving it. Returns once the loop
    stopped, or after `patience` seconds (None: only once it stopped)."""
    import socket

    host, port = server.server_address[:2]
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    stopping = threading.Thread(target=server.shutdown, name="ask-user-rich-http-stop", daemon=True)
    stopping.start()
    deadline = None if patience is None else time.monotonic() + patience
    if sys.platform.startswith("linux"):
        try:
            server.socket.shutdown(socket.SHUT_RD)
            stopping.join(patience)
        except OSError:
            pass
    while stopping.is_alive() and (deadline is None or time.monotonic() < deadline):
        try:
            socket.create_connection((host, port), timeout=0.5).close()
        except OSError:
            pass
        stopping.join(0.02)


# The header a door puts on the requests it forwards on a connection it keeps to the owner, so
# that the owner keeps that connection open for the next one.
DOOR_KEEP_HEADER = "X-Ask-User-Rich-Door"


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
WSL_WINDOWS_PATHS = MappingProxyType({
    "explorer.exe": "/mnt/c/Windows/explorer.exe",
    "powershell.exe": "/mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe",
})
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


def _which(name: str, path: str, wsl: bool):
    """The program `name` on `path`; on WSL, also where Windows keeps it."""
    import shutil

    found = shutil.which(name, path=path)
    if found is None and wsl and os.path.isfile(WSL_WINDOWS_PATHS.get(name, "")):
        found = WSL_WINDOWS_PATHS[name]
    return found


def _in_container(env) -> bool:
    return bool(env.get("container")) or os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")


def opener_facts(config: Config, environ=None) -> dict:
    """Everything the opener plan depends on, read from this machine. `plan_openers` is pure;
    tests build these dicts by hand for every platform."""
    env = os.environ if environ is None else environ
    platform = sys.platform
    linux = platform.startswith("linux")
    release = os.uname().release if hasattr(os, "uname") else ""
    wsl = linux and (bool(env.get("WSL_DISTRO_NAME")) or "microsoft" in release.lower())
    path = env.get("PATH", os.defpath)
    names = ("open", "xdg-open", "xdg-mime", "wslview", "explorer.exe", "powershell.exe")
    installed = {name: _which(name, path, wsl) for name in names}
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
        "container": _in_container(env),
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
        entry = read_proc(os.path.join(WSL_INTEROP_DIR, name))
        # Listed but unreadable (None): the entry is there, which is what counts.
        if entry is None or entry.split(b"\n", 1)[0].strip() != b"disabled":
            return True
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
#
# A host that renders our app in its elicitation dialog shows the whole form, and only falls
# back to its own form of the schema where the app cannot run. Then a rank question is a text
# field of the options in order, and an option's text field (textInput) a field
# "<id>__<option id>": a ranking and option texts are not lost, they are typed.

ELICITATION_OTHER_SUFFIX = "__other"


def elicitation_unfit(questions: list, app: bool = False):
    """Why these questions cannot be one native form (one the app renders, when `app`); None
    when they can."""
    names = {question["id"] for question in questions}
    for question in questions:
        if question["kind"] == "rank" and not app:
            return "question %s is a rank question" % quote(question["id"])
        for option in question["options"]:
            if option["textInput"] is None:
                continue
            if not app:
                return "option %s of question %s has a text field (textInput)" % (
                    quote(option["id"]), quote(question["id"]))
            field = option_text_field(question, option)
            if field in names:
                return "field %s, the text of option %s of question %s, is also a question id" % (
                    quote(field), quote(option["id"]), quote(question["id"]))
            names.add(field)
        other = question["id"] + ELICITATION_OTHER_SUFFIX
        if question["options"] and question["allowOther"] and other in names:
            return "question id %s is also the name of the Other field of %s" % (
                quote(other), quote(question["id"]))
    return None


def option_text_field(question: dict, option: dict) -> str:
    return "%s__%s" % (question["id"], option["id"])


def elicitation_message(spec: dict, questions: list) -> str:
    lines = [spec["title"]]
    if spec.get("intro"):
        lines += ["", spec["intro"]]
    lines += ["", "%d question%s. Leave a field empty to skip it." % (
        len(questions), "" if len(questions) == 1 else "s")]
    return "\n".join(lines)


def elicitation_schema(questions: list) -> dict:
    """The requestedSchema: single select a titled `oneOf` with the recommendation as its
    default, multi select an array with titled `items.anyOf`, free text a string, a ranking a
    string of the options in order."""
    properties = {}
    for question in questions:
        recommended = question["recommended"]
        choices = [
            {"const": option["id"],
             "title": option["label"] + (" (recommended)" if option["id"] in recommended else "")}
            for option in question["options"]
        ]
        field = {"type": "string", "title": question["header"], "maxLength": FREE_TEXT_MAX}
        if question["kind"] == "rank":
            field["description"] = _ranking_description(question)
            if recommended:
                field["default"] = ", ".join(recommended)
            properties[question["id"]] = field
            continue
        if choices and question["multiSelect"]:
            field = {"type": "array", "title": question["header"], "items": {"anyOf": choices}}
            if recommended:
                field["default"] = list(recommended)
        elif choices:
            del field["maxLength"]
            field["oneOf"] = choices
            if recommended:
                field["default"] = recommended[0]
        description = _elicitation_description(question)
        if description:
            field["description"] = description
        properties[question["id"]] = field
        for option in question["options"]:
            if option["textInput"] is not None:
                properties[option_text_field(question, option)] = {
                    "type": "string",
                    "title": "%s: %s" % (question["header"], option["label"]),
                    "description": option["textInput"]["placeholder"]
                    or "Your text for this option, if you choose it.",
                    "maxLength": FREE_TEXT_MAX,
                }
        if choices and question["allowOther"]:
            properties[question["id"] + ELICITATION_OTHER_SUFFIX] = {
                "type": "string",
                "title": "%s (Other)" % question["header"],
                "description": "Your own answer, if none of the options fits.",
                "maxLength": FREE_TEXT_MAX,
            }
    return {"type": "object", "properties": properties}


def _ranking_description(question: dict) -> str:
    described = _elicitation_description(question)
    lines = [described] if described else []
    lines.append("Every option, most preferred first, separated by commas (numbers or names):")
    lines += ["%d. %s" % (number, option["label"]) for number, option in enumerate(question["options"], 1)]
    return "\n".join(lines)


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
        if question["kind"] == "rank":
            answers[qid] = _elicited_ranking(question, content.get(qid), ignored)
            continue
        if question["options"]:
            selected, other, texts = _elicited_choice(question, content, asked, ignored)
        else:
            selected, texts = [], {}
            other, bad = _elicited_text(content.get(qid))
            ignored += ["%s=%s" % (qid, bad)] if bad else []
        if selected or other:
            answers[qid] = {"status": "answered", "selected": selected, "optionTexts": texts,
                            "other": other, "ranked": None, "notes": None}
        else:
            answers[qid] = unanswered()
    ignored += ["%s (not asked)" % quote(key) for key in content if key not in asked]
    return answers, ignored


def _elicited_choice(question: dict, content: dict, asked: set, ignored: list) -> tuple:
    """(selected option ids, Other text, option texts) of a question with options."""
    qid = question["id"]
    value = content.get(qid)
    option_ids = [option["id"] for option in question["options"]]
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
    texts = _elicited_option_texts(question, selected, content, asked, ignored)
    other = None
    if question["allowOther"]:
        asked.add(qid + ELICITATION_OTHER_SUFFIX)
        other, bad = _elicited_text(content.get(qid + ELICITATION_OTHER_SUFFIX))
        ignored += ["%s%s=%s" % (qid, ELICITATION_OTHER_SUFFIX, bad)] if bad else []
    return selected, other, texts


def _elicited_option_texts(question: dict, selected: list, content: dict, asked: set, ignored: list) -> dict:
    """The texts typed for the chosen options that have a text field; a text for an option not
    chosen is reported, not kept."""
    texts = {}
    for option in question["options"]:
        if option["textInput"] is None:
            continue
        name = option_text_field(question, option)
        asked.add(name)
        text, bad = _elicited_text(content.get(name))
        if bad:
            ignored.append("%s=%s" % (name, bad))
        if text is None:
            continue
        if option["id"] in selected:
            texts[option["id"]] = text
        else:
            ignored.append("%s (option %s not chosen)" % (name, quote(option["id"])))
    return texts


def _elicited_ranking(question: dict, value, ignored: list) -> dict:
    """A ranking typed as the options in order: ids, labels (any case) or numbers from 1. One
    that does not name every option exactly once is reported and left unanswered: an order
    cannot be guessed."""
    text, bad = _elicited_text(value)
    if bad:
        ignored.append("%s=%s" % (question["id"], bad))
    if not text:
        return unanswered()
    options = question["options"]
    by_label = {option["label"].strip().casefold(): option["id"] for option in options}
    ids = {option["id"] for option in options}
    ranked, parts = [], text
    for separator in ";>\n":
        parts = parts.replace(separator, ",")
    for entry in filter(None, (part.strip() for part in parts.split(","))):
        bare = entry.rstrip(".").strip()  # "1." as a numbered list writes it
        if entry in ids:
            ranked.append(entry)
        elif bare.casefold() in by_label:
            ranked.append(by_label[bare.casefold()])
        elif bare.isdigit() and 1 <= int(bare) <= len(options):
            ranked.append(options[int(bare) - 1]["id"])
        else:
            ranked.append(None)
    if None in ranked or len(ranked) != len(ids) or set(ranked) != ids:
        ignored.append("%s=%s (a ranking names every option once)" % (question["id"], quote(cut(text, 200))))
        return unanswered()
    return {"status": "answered", "selected": [], "optionTexts": {}, "other": None,
            "ranked": ranked, "notes": None}


def _elicited_text(value):
    """(text or None, description of an unusable value or None). A text past FREE_TEXT_MAX,
    which the schema's maxLength forbids, is cut there (and reported) rather than lost whole:
    there is no one to ask again."""
    if value is None or isinstance(value, str):
        text = _clean_text(value)
        if text is not None and len(text) > FREE_TEXT_MAX:
            return text[:FREE_TEXT_MAX], "%d characters, cut to %d" % (len(text), FREE_TEXT_MAX)
        return text, None
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
# Notices: telling the person that an agent is waiting (a desktop notice, a push)
# ============================================================================================
#
# A person running several agents works in other windows: a tab opened in the background, or a
# form on a remote box that opens no tab at all, goes unseen. When a call starts waiting on an
# interview (or follow-ups land on a form nobody looked at since), one scheduler thread per
# process decides when to tell the person (plan_notice, pure), and each notice goes to every
# target (the desktop's notifier, a push URL) on a thread of its own, under a time limit: a
# call, a submit and shutdown never wait on a notifier.

NOTICE_REMINDERS = (600, 3600)  # seconds after the wait began: the reminders while nobody looks
NOTICE_MIN_GAP = 60  # never more than one notice per interview per minute
NOTICE_LIMIT_SECONDS = 5.0  # a notifier, or a push, that takes longer has failed
# notify-send with an action stays until the notice is clicked or closed: how long its click
# may still open the form.
NOTICE_ACTION_SECONDS = 3600.0
NOTICE_TEXT_CHARS = 200  # a title or a folder name longer than this is cut in a notice
# Embeddings and overrides (U+202A-U+202E), isolates (U+2066-U+2069), the marks (U+200E,
# U+200F, U+061C): a notifier shows text as it comes.
DIRECTION_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# The actions' names, as notify-send prints the one clicked: "default" is a click on the notice
# itself, "open" its button.
NOTICE_ACTIONS = ("default", "open")
# Windows accepts toasts only from a registered app id; Windows PowerShell's own always is.
TOAST_APP_ID = "{1AC14E77-02E7-4E5D-B744-2EB1AE5198B7}\\WindowsPowerShell\\v1.0\\powershell.exe"
# -- when: the rules, as a pure function of the facts -------------------------------------

def plan_notice(need: dict, now: float, after: float) -> dict:
    """When to tell the person about one interview.

    `need`: {"since": when the interview began to need the person (a wait, or follow-ups),
    "opened": whether a browser showed the form then (or a form was open for the follow-ups),
    "sent": notices sent for this need, "lastSent": the interview's last notice (None: never),
    "viewed": someone looked at the form since, "pending": not settled}; times in seconds.
    Returns {"send": whether a notice goes out now, "sent": the need's count once it did,
    "next": when to look again (None: never)}. The first notice is due at once when no browser
    was opened, else `after` seconds on; reminders at NOTICE_REMINDERS; at most one a minute.
    When several are overdue (a machine that slept), one notice covers them all."""
    if not need["pending"] or need["viewed"]:
        return {"send": False, "sent": need["sent"], "next": None}
    first = after if need["opened"] else 0
    offsets = [first] + [offset for offset in NOTICE_REMINDERS if offset > first]
    sent = need["sent"]
    if sent >= len(offsets):
        return {"send": False, "sent": sent, "next": None}
    due = need["since"] + offsets[sent]
    if need["lastSent"] is not None:
        due = max(due, need["lastSent"] + NOTICE_MIN_GAP)
    if now < due:
        return {"send": False, "sent": sent, "next": due}
    covered = sent + 1
    while covered < len(offsets) and need["since"] + offsets[covered] <= now:
        covered += 1
    return {"send": True, "sent": covered, "next": None}


# -- what: the notice's words, in the interview's language ---------------------------------

def plural_category(tag: str, count: int) -> str:
    """The CLDR cardinal category of a whole number, as Intl.PluralRules picks it in the form."""
    n = abs(count)
    base = tag.split("-")[0]
    if base in ("ja", "zh", "ko"):
        return "other"
    if base == "ru":
        if n % 10 == 1 and n % 100 != 11:
            return "one"
        return "few" if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14 else "many"
    if base == "ar":
        if n in (0, 1, 2):
            return ("zero", "one", "two")[n]
        return "few" if 3 <= n % 100 <= 10 else "many" if 11 <= n % 100 <= 99 else "other"
    if base in ("fr", "pt") and n in (0, 1) or base not in ("fr", "pt") and n == 1:
        return "one"
    if base in ("es", "fr", "pt") and n and n % 1000000 == 0:
        return "many"
    return "other"


def match_language(tag) -> str | None:
    """One of FORM_LANGUAGES for a language tag, as the form matches the call's `language`
    (assets/js/i18n.js): exact, any case, Chinese by script or region, then the base language."""
    if not isinstance(tag, str) or not tag.strip():
        return None
    want = tag.strip().replace("_", "-").split(".")[0]
    lower = want.lower()
    for language in FORM_LANGUAGES:
        if language.lower() == lower:
            return language
    parts = lower.split("-")
    if parts[0] == "zh":
        return "zh-TW" if any(part in ("hant", "tw", "hk", "mo") for part in parts) else "zh-CN"
    return next((language for language in FORM_LANGUAGES if language.lower().split("-")[0] == parts[0]), None)


def notice_language(requested, environ=None) -> str:
    """The interview's language, else the machine's (LANG and the like), else English: the
    person reads a desktop notice where no browser tells us theirs."""
    env = os.environ if environ is None else environ
    for tag in (requested, env.get("LC_ALL"), env.get("LC_MESSAGES"), env.get("LANG")):
        language = match_language(tag)
        if language is not None:
            return language
    return "en"


def notice_words(language: str, prefix: str = "notice.") -> dict:
    """The strings of assets/i18n whose keys start with `prefix` (the notice's), English where
    one is missing."""
    words = {}
    for tag in ("en", language):
        try:
            table = json.loads(read_asset("i18n/%s.json" % tag).decode("utf-8"))
        except (OSError, ValueError):
            continue
        words.update({key: value for key, value in table.items() if key.startswith(prefix)})
    return words


# Chinese sets a space between Han characters and a Latin word or a number; between its own
# words and an inserted name only where the name's edge is Latin or a digit ("Claude Code 向你",
# "智能体向你"), as the form's t() does (assets/js/i18n.js).
HAN_RANGES = ((0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
              (0xF900, 0xFAFF), (0x20000, 0x3134F))


def is_han(ch: str) -> bool:
    return bool(ch) and any(low <= ord(ch) <= high for low, high in HAN_RANGES)


def is_latin_edge(ch: str) -> bool:
    return (ch.isascii() and ch.isalnum()) or "\u00c0" <= ch <= "\u024f"


def fill_words(language: str, template: str, values: dict) -> str:
    """A string of assets/i18n with its {placeholders} filled, for text that is not laid out in
    a page (a desktop notice): no isolates, and Chinese spacing as in the page."""
    import re

    def one(match):
        name = match.group(1)
        if name not in values:
            return match.group(0)
        text = str(values[name])
        if not language.startswith("zh") or not text:
            return text
        before = template[match.start() - 1:match.start()]
        after = template[match.end():match.end() + 1]
        return ((" " if is_han(before) and is_latin_edge(text[0]) else "") + text
                + (" " if is_han(after) and is_latin_edge(text[-1]) else ""))
    return re.sub(r"\{(\w+)\}", one, template)


def compose_notice(spec: dict, agent, project: str, url: str, environ=None, test=False, permission=None) -> dict:
    """Everything a target says: `heading` ("Claude Code asks 12 questions"), `body` ("<title>
    · <project folder>") and the action's label, in the interview's language, with the facts
    a JSON push carries. A `permission` ask (its inbox row) is told as what the agent wants."""
    if permission is not None:
        return compose_permission_notice(permission, agent, project, url, environ)
    language = notice_language(spec.get("language"), environ)
    words = notice_words(language)
    count = len(spec["questions"])
    key = "notice.heading" if agent else "notice.headingNoAgent"
    forms = words.get(key, {})
    heading = forms.get(plural_category(language, count), forms.get("other", "")) if isinstance(forms, dict) else forms
    heading = fill_words(language, heading, {"agent": agent or "", "count": str(count)})
    folder = os.path.basename(project.rstrip("/\\")) if project else ""
    title = words.get("notice.test", "") if test else spec["title"]
    body = " · ".join(notice_text(part) for part in (title, folder) if notice_text(part))
    return {
        "heading": notice_text(heading),
        "body": body,
        "open": words.get("notice.open", ""),
        "language": language,
        "title": spec["title"],
        "agent": agent,
        "project": project,
        "questions": count,
        "url": url,
    }


def compose_away_notice(spec: dict, agent, project: str, url: str, policy: str, seconds: float) -> dict:
    """The warning that the away policy acts soon: "In 5 minutes, the recommendations will be
    taken for <title>" (or "<title> will be skipped"), naming the agent and the project."""
    notice = compose_notice(spec, agent, project, url)
    language = notice["language"]
    words = notice_words(language)
    minutes = max(1, int(round(seconds / 60.0)))
    forms = words.get("notice.awayRecommended" if policy == "recommended" else "notice.awayDecline", {})
    heading = forms.get(plural_category(language, minutes), forms.get("other", "")) if isinstance(forms, dict) else forms
    folder = os.path.basename(project.rstrip("/\\")) if project else ""
    parts = (agent or "", folder)
    notice["heading"] = notice_text(fill_words(language, heading, {"count": str(minutes), "title": spec["title"]}))
    notice["body"] = " · ".join(notice_text(part) for part in parts if notice_text(part))
    return notice


def compose_permission_notice(asked: dict, agent, project: str, url: str, environ=None) -> dict:
    """A permission ask's notice: its heading (`Claude Code wants to run a command`); a push
    (a third party's service) names only the tool and the project, and only the desktop's own
    notice (`desktopBody`) shows what would run, cut and cleaned."""
    language = notice_language(None, environ)
    words = notice_words(language, "perm.header.")
    heading = fill_words(language, words.get("perm.header." + asked["action"], ""),
                         {"agent": agent or "", "tool": asked["tool"]})
    folder = os.path.basename(project.rstrip("/\\")) if project else ""
    safe = " · ".join(notice_text(part) for part in (asked["tool"], folder) if notice_text(part))
    return {"heading": notice_text(heading), "body": safe, "open": notice_words(language).get("notice.open", ""),
            "desktopBody": " · ".join(notice_text(part) for part in (asked["what"], folder) if notice_text(part)),
            "language": language, "title": notice_text(heading), "agent": agent, "project": project,
            "questions": 1, "url": url}


def notice_text(text: str) -> str:
    """One line a notifier can carry: whitespace runs as one space, control characters, lone
    surrogates and direction controls dropped (an argv cannot hold NUL, XML no control
    character, and a direction control can make a command read as another), at most
    NOTICE_TEXT_CHARS characters."""
    import unicodedata

    kept = "".join(ch if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cs") and ch not in DIRECTION_CONTROLS
                   else "" for ch in text)
    return cut(kept, NOTICE_TEXT_CHARS)


# -- the desktop's notifier: a plan per platform, as argv lists ----------------------------

class NoticeCommand:
    """One desktop notifier to run: its argv (never a shell), and whether it waits for a click
    on its "open the form" action and prints the action's name when there is one."""

    __slots__ = ("name", "argv", "action", "cwd")

    def __init__(self, name: str, argv: list, action: bool = False, cwd=None) -> None:
        self.name = name
        self.argv = argv
        self.action = action
        self.cwd = cwd

    def __repr__(self) -> str:
        return "NoticeCommand(%r, %r, action=%r)" % (self.name, self.argv, self.action)


def desktop_facts(environ=None) -> dict:
    """What the desktop plan depends on, read from this machine: the platform (WSL and its
    interop as the opener reads them), the notifiers installed, the session bus and whether
    notify-send takes actions. `plan_desktop_notice` is pure; tests build these by hand."""
    import shutil
    import subprocess

    env = os.environ if environ is None else environ
    platform = sys.platform
    release = os.uname().release if hasattr(os, "uname") else ""
    wsl = platform.startswith("linux") and (bool(env.get("WSL_DISTRO_NAME")) or "microsoft" in release.lower())
    path = env.get("PATH", os.defpath)
    installed = {name: shutil.which(name, path=path) for name in ("notify-send", "osascript", "powershell.exe")}
    if wsl and installed["powershell.exe"] is None and os.path.isfile(WSL_WINDOWS_PATHS["powershell.exe"]):
        installed["powershell.exe"] = WSL_WINDOWS_PATHS["powershell.exe"]
    runtime_dir = env.get("XDG_RUNTIME_DIR") or ("/run/user/%d" % os.getuid() if hasattr(os, "getuid") else "")
    facts = {
        "platform": platform,
        "wsl": wsl,
        "interop": _wsl_interop() if wsl else None,
        "installed": installed,
        # The user's bus is at $XDG_RUNTIME_DIR/bus when the variable is not passed down to us.
        "session_bus": bool(env.get("DBUS_SESSION_BUS_ADDRESS"))
        or bool(runtime_dir) and os.path.exists(os.path.join(runtime_dir, "bus")),
        "notify_send_actions": False,
        # powershell.exe started from WSL warns about (or fails in) a Linux working folder.
        "windows_root": WSL_WINDOWS_ROOT if wsl and os.path.isdir(WSL_WINDOWS_ROOT) else None,
    }
    if facts["installed"]["notify-send"] and facts["session_bus"]:
        try:
            helped = subprocess.run([facts["installed"]["notify-send"], "--help"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=NOTICE_LIMIT_SECONDS)
            facts["notify_send_actions"] = b"--action" in helped.stdout
        except (OSError, subprocess.SubprocessError):
            pass
    return facts


def plan_desktop_notice(facts: dict, notice: dict):
    """(the NoticeCommand for this machine, None) or (None, why there is none)."""
    installed = facts["installed"]
    platform = facts["platform"]
    windows = platform == "win32" or facts.get("wsl") and facts.get("interop")
    if windows:
        if installed.get("powershell.exe"):
            command = toast_command(installed["powershell.exe"], notice)
            command.cwd = facts.get("windows_root")
            return command, None
        return None, "powershell.exe is not installed"
    if platform == "darwin":
        if installed.get("osascript"):
            return osascript_command(installed["osascript"], notice), None
        return None, "osascript is not installed"
    if not installed.get("notify-send"):
        return None, "notify-send is not installed (Debian and Ubuntu: apt install libnotify-bin)"
    if not facts.get("session_bus"):
        return None, "no session bus (DBUS_SESSION_BUS_ADDRESS is unset), so no desktop shows notices here"
    return notify_send_command(installed["notify-send"], notice, facts.get("notify_send_actions")), None


def notify_send_command(program: str, notice: dict, actions: bool) -> NoticeCommand:
    """notify-send: the summary is plain text, the body markup for most desktops (so & < > are
    escaped there), and "--" ends the options whatever the texts begin with."""
    from xml.sax.saxutils import escape

    argv = [program, "--app-name=%s" % SERVER_NAME, "--urgency=normal"]
    if actions:
        argv += ["--action=%s=%s" % (name, notice["open"]) for name in NOTICE_ACTIONS]
    argv += ["--", notice["heading"], escape(notice["body"])]
    return NoticeCommand("notify-send", argv, action=actions)


def osascript_command(program: str, notice: dict) -> NoticeCommand:
    """osascript: the script is fixed, and the texts reach it as `on run` arguments, never as
    AppleScript. A first argument of our own keeps a text that begins with "-" from being
    read as one of osascript's options."""
    script = [
        "on run argv",
        "display notification (item 3 of argv) with title (item 2 of argv)",
        "end run",
    ]
    argv = [program]
    for line in script:
        argv += ["-e", line]
    return NoticeCommand("osascript", argv + [SERVER_NAME, notice["heading"], notice["body"]])


def toast_command(program: str, notice: dict) -> NoticeCommand:
    """powershell.exe with a fixed script (-EncodedCommand, so no command line re-quoting
    touches it) that shows a toast through Windows.UI.Notifications. The toast's XML, with the
    texts escaped for XML, travels base64-encoded inside the script: PowerShell never reads a
    text as code. Clicking the toast, or its button, opens the form."""
    import base64
    from xml.sax.saxutils import escape, quoteattr

    url = notice["url"]
    launch = ' activationType="protocol" launch=%s' % quoteattr(url) if url else ""
    action = (
        '<actions><action activationType="protocol" content=%s arguments=%s/></actions>'
        % (quoteattr(notice["open"]), quoteattr(url)) if url else ""
    )
    toast = (
        '<toast%s><visual><binding template="ToastGeneric"><text>%s</text><text>%s</text>'
        "</binding></visual>%s</toast>" % (launch, escape(notice["heading"]), escape(notice["body"]), action)
    )
    script = "\n".join([
        "$ErrorActionPreference = 'Stop'",
        "$null = [Windows.UI.Notifications.ToastNotificationManager, Windows.UI.Notifications, ContentType = WindowsRuntime]",
        "$null = [Windows.Data.Xml.Dom.XmlDocument, Windows.Data.Xml.Dom.XmlDocument, ContentType = WindowsRuntime]",
        "$xml = New-Object Windows.Data.Xml.Dom.XmlDocument",
        "$xml.LoadXml([Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('%s')))"
        % base64.b64encode(toast.encode("utf-8")).decode("ascii"),
        "$toast = [Windows.UI.Notifications.ToastNotification]::new($xml)",
        "[Windows.UI.Notifications.ToastNotificationManager]::CreateToastNotifier('%s').Show($toast)" % TOAST_APP_ID,
    ])
    encoded = base64.b64encode(script.encode("utf-16-le")).decode("ascii")
    return NoticeCommand("powershell.exe", [program, "-NoProfile", "-NonInteractive", "-EncodedCommand", encoded])


# -- push: ntfy, Slack, Discord or any URL, as one HTTP request ----------------------------

def push_target_name(url: str) -> str:
    """How logs and doctor name a push target: its kind and host, never the path or topic
    (a webhook's path, an ntfy topic, is its key)."""
    from urllib.parse import urlsplit

    kind = push_target_kind(url)
    host = urlsplit(url[len("ntfy+"):] if url.startswith("ntfy+") else url).netloc
    return "push (%s, %s)" % (kind, host)


def header_text(text: str) -> str:
    """A header value HTTP can carry: one line, and any non-ASCII text as RFC 2047 encoded
    words, which ntfy decodes."""
    import base64

    text = " ".join(text.split())
    if text.isascii():
        return text
    data = text.encode("utf-8")
    words, start = [], 0
    while start < len(data):
        end = min(len(data), start + 45)
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # never split a character
            end -= 1
        words.append("=?UTF-8?B?%s?=" % base64.b64encode(data[start:end]).decode("ascii"))
        start = end
    return " ".join(words)


def plan_push(url: str, token, notice: dict, link):
    """(URL, headers, body) of the push of `notice` to `url`; `link` is the form's URL when it
    may be sent (a public URL, and the link not turned off), else None."""
    kind = push_target_kind(url)
    if url.startswith("ntfy+"):
        url = url[len("ntfy+"):]
    headers = {}
    if token and kind in ("ntfy", "json"):
        headers["Authorization"] = "Bearer %s" % token
    if kind == "ntfy":
        headers.update({"Title": header_text(notice["heading"]), "Tags": "question", "Priority": "high",
                        "Content-Type": "text/plain; charset=utf-8"})
        if link:
            headers["Click"] = header_text(link)
        return url, headers, notice["body"].encode("utf-8")
    headers["Content-Type"] = "application/json"
    lines = [notice["heading"], notice["body"]] + ([link] if link else [])
    if kind == "slack":
        # Slack reads <, > and & as its own markup: a title cannot make a link or a mention.
        text = "\n".join(line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for line in lines)
        payload = {"text": text}
    elif kind == "discord":
        payload = {"content": "\n".join(lines), "allowed_mentions": {"parse": []}}  # no @everyone
    else:
        payload = {
            "title": notice["heading"], "message": notice["body"], "url": link,
            "agent": notice["agent"], "project": notice["project"], "questions": notice["questions"],
        }
    return url, headers, json.dumps(payload, ensure_ascii=False).encode("utf-8")


# -- the targets, and sending one notice to one of them ------------------------------------

class DesktopTarget:
    """The desktop's notifier. `on_click(url)` opens the form when the notice's action is
    clicked; the notifier's process is left running for that and killed at close()."""

    def __init__(self, facts: dict, on_click) -> None:
        self.facts = facts
        self.on_click = on_click
        self.lock = threading.Lock()
        self.running: list = []
        command, self.missing = plan_desktop_notice(facts, {"heading": "", "body": "", "open": "", "url": ""})
        self.name = "desktop (%s)" % (command.name if command else "none")

    def send(self, notice: dict) -> str:
        import subprocess
        import tempfile

        # A desktop notice stays on this machine: it may say what a permission ask would run.
        command, missing = plan_desktop_notice(self.facts, dict(notice, body=notice.get("desktopBody", notice["body"])))
        if command is None:
            raise NoticeFailed(missing)
        with tempfile.TemporaryFile() as errors:
            try:
                process = subprocess.Popen(
                    command.argv, cwd=command.cwd, stdin=subprocess.DEVNULL, stderr=errors, close_fds=True,
                    stdout=subprocess.PIPE if command.action else subprocess.DEVNULL,  # never our stdout
                )
            except OSError as error:
                raise NoticeFailed("%s could not start (%s)" % (command.name, error.strerror or error))
            with self.lock:
                self.running.append(process)
            try:
                code = process.wait(timeout=NOTICE_LIMIT_SECONDS)
            except subprocess.TimeoutExpired:
                if command.action:  # shown, and waiting for a click
                    self._watch(process, notice["url"])
                    return "shown by %s, its action opens the form" % command.name
                self._end(process)
                raise NoticeFailed("%s did not finish within %gs" % (command.name, NOTICE_LIMIT_SECONDS))
            if command.action:
                self._clicked(process, notice["url"])
            self._forget(process)
            if code != 0:
                errors.seek(0)
                said = " ".join(errors.read(2000).decode("utf-8", "replace").split())
                raise NoticeFailed("%s exited with %d%s" % (command.name, code, ": " + cut(said, 160) if said else ""))
        return "shown by %s" % command.name

    def _watch(self, process, url: str) -> None:
        """Read the notifier's answer off-thread: a click opens the form; past
        NOTICE_ACTION_SECONDS the notifier is ended."""
        timer = threading.Timer(NOTICE_ACTION_SECONDS, self._end, (process,))
        timer.daemon = True
        timer.start()

        def watch() -> None:
            self._clicked(process, url)
            timer.cancel()
            self._forget(process)

        threading.Thread(target=watch, name="ask-user-rich-notice-action", daemon=True).start()

    def _clicked(self, process, url: str) -> None:
        said = process.stdout.read(200).decode("utf-8", "replace").split()
        process.wait()
        if set(NOTICE_ACTIONS) & set(said) and url:
            self.on_click(url)

    def _forget(self, process) -> None:
        with self.lock:
            if process in self.running:
                self.running.remove(process)

    def _end(self, process) -> None:
        try:
            process.kill()
        except OSError:
            pass
        self._forget(process)

    def close(self) -> None:
        """Kill the notifiers still running (a notice waiting for a click); never wait."""
        with self.lock:
            running, self.running = self.running, []
        for process in running:
            try:
                process.kill()
            except OSError:
                pass


class PushTarget:
    """ASK_USER_RICH_PUSH_URL: one HTTP request per notice, within NOTICE_LIMIT_SECONDS."""

    def __init__(self, config: Config) -> None:
        self.url = config.push_url
        self.token = config.push_token
        # A phone cannot open a localhost link: the link goes only through a public URL.
        self.public_url = config.public_url if config.push_link else None
        self.name = push_target_name(self.url)

    def send(self, notice: dict) -> str:
        import urllib.error
        import urllib.request

        # The form's URL is the public one only while the front door serves it.
        public = self.public_url and notice["url"].startswith(self.public_url + "/")
        url, headers, body = plan_push(self.url, self.token, notice, notice["url"] if public else None)
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=NOTICE_LIMIT_SECONDS) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            raise NoticeFailed(self._scrub("the push target answered %d %s" % (error.code, error.reason)))
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            raise NoticeFailed(self._scrub("the push target could not be reached (%s)" % reason))
        return "pushed (%d)%s" % (status, "" if public else " without the link")

    def _scrub(self, text: str) -> str:
        """No key in a log: the token and the URL's path (a webhook's secret, a topic) cut."""
        from urllib.parse import urlsplit

        for secret in (self.token, urlsplit(self.url).path.strip("/")):
            if secret and len(secret) > 4:
                text = text.replace(secret, redact(secret))
        return text

    def close(self) -> None:
        pass


def notice_targets(config: Config, facts: dict, on_click) -> tuple:
    """(the targets `config` turns on, notes on those it cannot have)."""
    targets, notes = [], []
    if config.notify in ("desktop", "both"):
        desktop = DesktopTarget(facts, on_click)
        if desktop.missing is None:
            targets.append(desktop)
        else:
            notes.append("desktop: %s" % desktop.missing)
    if config.notify in ("push", "both"):
        if config.push_url:
            targets.append(PushTarget(config))
        else:
            notes.append("push: %s is not set" % ENV_PUSH_URL)
    return targets, notes


def send_to_all(targets: list, notice: dict, log: Log, interview_id=None, done=None) -> None:
    """Send `notice` to each target on a thread of its own; each outcome is logged (one
    `notify-failed` per target that failed) and handed to `done(target, ok, said)`."""

    about = {} if interview_id is None else {"interview": interview_id}

    def send(target) -> None:
        try:
            said, ok = target.send(notice), True
        except NoticeFailed as failure:
            said, ok = str(failure), False
        except Exception as error:  # a notifier must never take the process down
            said, ok = repr(error)[:300], False
        if ok:
            log.event("notice-sent", target=target.name, said=said, **about)
        else:
            log.event("notify-failed", "warning", target=target.name, reason=said, **about)
        if done is not None:
            done(target, ok, said)

    for target in targets:
        threading.Thread(target=send, args=(target,), name="ask-user-rich-notice", daemon=True).start()


# -- the scheduler: one thread per process, asleep until the next notice is due -----------

class NoticeClock:
    """The scheduler's time: `now()`, and `sleep(condition, until)`, called with `condition`
    held, which waits on it until `now()` reaches `until` (None: until notified). A test's clock
    moves when the test says and tells it when the scheduler sleeps again."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, condition: threading.Condition, until) -> None:
        condition.wait(None if until is None else max(0.0, until - self.now()))


class Notices:
    """Every interview that needs the person, and the thread that tells them when due.

    The thread starts with the first need and sleeps on a condition until the next notice is
    due or something changes (a page in view, a settle, follow-ups, close): no polling. A need
    is met by a sighting (Interview.attention), never by a page load alone: a tab the opener put
    in the background loads unseen. Sending happens on threads of their own (send_to_all), so
    nothing here ever waits on a notifier."""

    def __init__(self, config: Config, log: Log, project: str = "", clock=None,
                 facts=None, open_form=None, *, form_url) -> None:
        self.config = config
        self.log = log
        self.project = project
        self.form_url = form_url  # (interview) -> the address a notice links to
        self.clock = clock or NoticeClock()
        self.facts = facts  # the desktop's facts; None: read on the first notice
        self.open_form = open_form or (lambda url: open_browser(url, config, log))
        self.changed = threading.Condition(threading.Lock())
        self.needs: dict = {}  # interview id -> the need (plan_notice's facts, and the interview)
        self.last_sent: dict = {}  # interview id -> the clock when its last notice went out
        self.targets = None
        self.thread = None
        self.closed = False

    @property
    def enabled(self) -> bool:
        return self.config.notify != "off"

    def arm(self, interview: Interview, opened: bool) -> None:
        """A call starts waiting on `interview` (`opened`: a browser showed it). A need already
        there stays as it is: a second call on the same interview changes nothing."""
        facts = interview.attention()
        with self.changed:
            if not self.enabled or self.closed or interview.id in self.needs:
                return
            self._add(interview, "waiting", opened, facts["sightings"])

    def follow_ups(self, interview: Interview) -> None:
        """Follow-ups landed: a need of their own, met at once on a form in view, else by the
        next sighting."""
        facts = interview.attention()
        with self.changed:
            if not self.enabled or self.closed:
                return
            self._add(interview, "follow-ups", facts["streams"] > 0, facts["sightings"])

    def _add(self, interview: Interview, kind: str, opened: bool, sightings: int) -> None:
        # Seen once a page comes into view after this, or while one is in view.
        self.needs[interview.id] = {"interview": interview, "kind": kind, "since": self.clock.now(),
                                    "opened": opened, "sent": 0, "sightings": sightings}
        self.log.event("notices-armed", about=interview, interview=interview.id, reason=kind,
                       first_in=self.config.notify_after if opened else 0)
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="ask-user-rich-notices", daemon=True)
            self.thread.start()
        self.changed.notify_all()

    def observe(self, interview: Interview) -> None:
        """Something changed on an interview (a page in view, a settle): look again now."""
        settled = not interview.is_pending()
        with self.changed:
            if interview.id in self.needs:
                self.changed.notify_all()
            elif settled:
                self.last_sent.pop(interview.id, None)  # nothing more is ever sent for it

    def close(self) -> None:
        """Stop telling; kill notifiers still waiting for a click. Never waits."""
        with self.changed:
            self.closed = True
            targets = self.targets or []
            self.changed.notify_all()
        for target in targets:
            target.close()

    def _run(self) -> None:
        while True:
            with self.changed:
                if self.closed:
                    return
                due, wake = self._plan(self.clock.now())
                if not due:
                    self.clock.sleep(self.changed, wake)
                    continue
            for interview, kind, number in due:
                self._send(interview, kind, number)

    def _plan(self, now: float):
        """With the lock held: the notices due now, and when the next one is."""
        due, wake = [], None
        for interview_id, need in list(self.needs.items()):
            interview = need["interview"]
            facts = interview.attention()
            viewed = facts["sightings"] > need["sightings"] or facts["inView"]
            plan = plan_notice(dict(need, viewed=viewed, pending=facts["pending"],
                                    lastSent=self.last_sent.get(interview_id)), now, self.config.notify_after)
            if plan["send"]:
                need["sent"] = plan["sent"]
                self.last_sent[interview_id] = now
                due.append((interview, need["kind"], plan["sent"]))
                plan = plan_notice(dict(need, viewed=False, pending=True, lastSent=now), now, self.config.notify_after)
            if plan["next"] is None:
                del self.needs[interview_id]
                if not facts["pending"]:
                    self.last_sent.pop(interview_id, None)
                if viewed or not facts["pending"]:
                    self.log.event("notices-stopped", about=interview, interview=interview_id,
                                   why="viewed" if facts["pending"] else "settled")
            else:
                wake = plan["next"] if wake is None else min(wake, plan["next"])
        return due, wake

    def _ready_targets(self) -> list:
        if self.targets is None:
            facts = self.facts if self.facts is not None else desktop_facts()
            targets, notes = notice_targets(self.config, facts, self.open_form)
            with self.changed:
                self.targets = targets
            for note in notes:
                self.log.event("notices-unavailable", note=note)
        return self.targets

    def warn_away(self, interview: Interview, policy: str, seconds: float) -> None:
        """The away policy acts on `interview` in `seconds`: say so, whoever has looked."""
        if not self.enabled or self.closed or not self._ready_targets():
            return
        notice = compose_away_notice(interview.spec, interview.agent, self.project, self.form_url(interview), policy,
                                     seconds)
        self.log.event("notice", about=interview, interview=interview.id, reason="away-" + policy,
                       targets=len(self.targets))
        send_to_all(self.targets, notice, self.log, interview.id)

    def _send(self, interview: Interview, kind: str, number: int) -> None:
        if not self._ready_targets():
            return
        asked = interview.options["permission"]["row"] if interview.options.get("kind") == PERMISSION else None
        notice = compose_notice(interview.spec, interview.agent, self.project, self.form_url(interview),
                                permission=asked)
        self.log.event("notice", about=interview, interview=interview.id, reason=kind, number=number,
                       targets=len(self.targets))
        send_to_all(self.targets, notice, self.log, interview.id)


# ============================================================================================
# The person's away policy: when nobody answers
# ============================================================================================
#
# Off by default (wait). Otherwise, once an interview has had no sign of the person (its
# creation, a sighting, an answer changed in the form) for ASK_USER_RICH_AWAY_AFTER minutes,
# the policy takes the recommendations (the person's own answers kept) or declines, after a
# notice that warns it will. One thread per process, started with the first interview the
# policy watches and asleep until the next warning or act is due: a server whose person never
# chose a policy runs none of this.

AWAY_WARNING_SECONDS = 300.0  # the warning comes this long before the policy acts...
# ...or at half the delay, when that is shorter.


def plan_away(last_sign: float, after_seconds: float, warned_for, now: float) -> dict:
    """What the policy does about one interview now: {"act", "warn", "next"}; `warned_for`
    is the last sign the warning was sent for (None: none sent), since a sign after a warning
    starts the clock, and its warning, over."""
    due = last_sign + after_seconds
    warn_at = due - min(AWAY_WARNING_SECONDS, after_seconds / 2.0)
    if now >= due:
        return {"act": True, "warn": False, "next": None}
    if warned_for != last_sign and now >= warn_at:
        return {"act": False, "warn": True, "next": due}
    return {"act": False, "warn": False, "next": due if warned_for == last_sign else warn_at}


class AwayPolicy:
    """Every pending interview the away policy holds (Interview.away), and its thread."""

    def __init__(self, hub: SessionHub, notices: Notices) -> None:
        self.hub = hub
        self.notices = notices
        self.changed = threading.Condition(threading.Lock())
        # interview id -> [interview, the last sign it was warned for, the last sign on disk]
        self.watched: dict = {}
        self.thread = None
        self.closed = False

    def watch(self, interview: Interview) -> None:
        with self.changed:
            if self.closed or interview.id in self.watched:
                return
            self.watched[interview.id] = [interview, None, None]
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="ask-user-rich-away", daemon=True)
                self.thread.start()
            self.changed.notify_all()

    def observe(self, interview: Interview) -> None:
        """A sign of the person, or a settle: look again now."""
        with self.changed:
            if interview.id in self.watched:
                self.changed.notify_all()

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def _run(self) -> None:
        archive = self.hub.archive
        while True:
            with self.changed:
                if self.closed:
                    return
                # The wall clock, as the last sign is: it is written down for the next server.
                warn, act, wake, save, gone = self._plan(time.time())
                if not (warn or act or save or gone):
                    self.changed.wait(None if wake is None else max(0.0, wake - time.time()))
                    continue
            # On disk whenever its clock moves, gone once settled: a server started after this
            # one ends goes on from there (Runtime.resume_away).
            for interview in save:
                archive.record_away(interview.away_record())
            for interview_id in gone:
                archive.forget_away(interview_id)
            for interview, seconds in warn:
                self.notices.warn_away(interview, interview.away[0], seconds)
            for interview in act:
                self.hub.settle_by_policy(interview)

    def _plan(self, now: float):
        """With the lock held: (warnings due, with the seconds left), the interviews to settle,
        when to look next, the interviews whose clock must be written down, and the ids of
        those settled."""
        warn, act, wake, save, gone = [], [], None, [], []
        for interview_id, entry in list(self.watched.items()):
            interview, warned_for, saved = entry
            if interview.is_closing():  # the server is ending: its record stays for the next one
                del self.watched[interview_id]
                continue
            if not interview.is_pending():
                del self.watched[interview_id]
                gone.append(interview_id)
                continue
            sign, after = interview.last_sign(), interview.away[1] * 60.0
            if sign != saved:
                entry[2] = sign
                save.append(interview)
            plan = plan_away(sign, after, warned_for, now)
            if plan["act"]:  # watched until settled, so that its record is then forgotten
                entry[1] = entry[2] = sign
                act.append(interview)
                continue
            if plan["warn"]:
                entry[1] = sign
                warn.append((interview, sign + after - now))
            wake = plan["next"] if wake is None else min(wake, plan["next"])
        return warn, act, wake, save, gone


# ============================================================================================
# The inbox: every pending interview of every process of this user, on one page
# ============================================================================================
#
# Each process with pending interviews keeps <log dir>/inbox/<pid>.json. Every one that showed
# a door URL holds the well-known inbox port (on Linux all at once, none of the others' users
# able to bind it; elsewhere one, the others trying again every few seconds) and serves the page
# from those files under the key in <log dir>/inbox.key, so that the address outlives any one
# process. A process with nothing pending, that never showed a door URL, does none of this.

INBOX_HOST = "127.0.0.1"  # loopback only, whatever ASK_USER_RICH_HOST says
# Every process of ours holds the door port at once (share_door_port): Linux only, where the
# kernel refuses a port shared this way to any other user. Elsewhere one process holds it and
# the others take over when it exits (tests/README.md, "Another user of this machine").
DOOR_SHARED = sys.platform.startswith("linux")
INBOX_RETRY_SECONDS = 5.0
INBOX_WRITE_SECONDS = 0.25  # the registry file is rewritten at most this often
INBOX_WATCH_SECONDS = 0.5  # how often the registry folder is looked at while anything is pending
INBOX_PROBE_SECONDS = 2.0
INBOX_ENTRY_MAX_BYTES = 1024 * 1024
INBOX_FORMS_MAX = 10000  # token digests one registry file may name
# The front door's patience with an owner: to connect, to begin its answer (a submit is
# archived and fsynced before it answers), and to say anything on a stream (whose ping comes
# every SSE_PING_SECONDS).
DOOR_CONNECT_SECONDS = 2.0
DOOR_ANSWER_SECONDS = 20.0
DOOR_IDLE_SECONDS = 3 * SSE_PING_SECONDS
INBOX_TICKET_SECONDS = 60  # a form's way into the inbox is used within the minute, once
INBOX_SESSION_SECONDS = 8 * 3600  # the session a ticket becomes: a working day
INBOX_SESSION_HEADER = "X-Ask-User-Rich-Session"


def inbox_folder(path: str, create: bool = True) -> None:
    """private_folder() for the inbox: InboxUnavailable saying what is wrong."""
    try:
        private_folder(path, create=create)
    except UntrustedFolder as error:
        raise InboxUnavailable(str(error)) from None
    except OSError as error:
        raise InboxUnavailable("%s cannot be made: %s" % (path, error.strerror or error)) from None


def load_inbox_key(log_dir: str) -> str:
    """The inbox's secret, made once (18 random bytes, base64url, 0600): <log dir>/inbox.key.
    InboxUnavailable when the log folder or the key file is not private."""
    import secrets

    try:
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
    except OSError as error:
        raise InboxUnavailable("%s cannot be made: %s" % (log_dir, error.strerror or error)) from None
    inbox_folder(log_dir, create=False)
    path = os.path.join(log_dir, "inbox.key")
    for _ in range(3):
        try:
            with open_private_file(path) as handle:
                key = handle.read(64).decode("ascii", "replace").strip()
        except FileNotFoundError:
            _make_inbox_key(path, secrets.token_urlsafe(18))
            continue
        except ForeignFile as error:
            raise InboxUnavailable("%s, so it is not private" % error) from None
        except OSError as error:
            raise InboxUnavailable("%s cannot be read: %s" % (path, error.strerror or error)) from None
        if len(key) == 24 and set(key) <= TOKEN_CHARS:
            return key
        if key:
            raise InboxUnavailable("%s does not hold an inbox key; delete it to have a new one made" % path)
        time.sleep(0.05)  # another process is writing it right now (a file system without links)
    raise InboxUnavailable("%s could not be made" % path)


def inbox_key_stamp(log_dir: str):
    """What changes when inbox.key is replaced (or None when there is none): a process reads
    the key again when it changed under it."""
    try:
        status = os.stat(os.path.join(log_dir, "inbox.key"))
    except OSError:
        return None
    return (status.st_ino, status.st_mtime_ns)


def retire_inbox_key(log_dir: str) -> None:
    """Forget the key, so that the next process with an interview makes a new one: an old tab,
    bookmark or captured key then opens nothing."""
    try:
        os.unlink(os.path.join(log_dir, "inbox.key"))
    except OSError:
        pass


def own_temporary(path: str) -> str:
    """The temporary name this thread writes `path` under, and nothing there yet: two runtimes
    of one process (tests) may write it at once, each on its own thread; a file under the name
    is a crashed process's, whose pid this one now has."""
    temporary = "%s.%d.%d.tmp" % (path, os.getpid(), threading.get_ident())
    try:
        os.unlink(temporary)
    except FileNotFoundError:
        pass
    return temporary


def _make_inbox_key(path: str, key: str) -> None:
    """Write the key whole under a temporary name, then link it into place: of two processes
    making it at once, one wins and both read the winner's key."""
    data = key.encode("ascii") + b"\n"

    def link(temporary: str) -> None:
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        except OSError:
            # No hard links here (FAT, some network shares): create the file itself, exclusively.
            try:
                with create_private_file(path) as handle:
                    handle.write(data)
            except FileExistsError:
                pass

    try:
        temporary = own_temporary(path)
        try:
            write_whole(temporary, lambda handle: handle.write(data), link)
        finally:
            try:
                os.unlink(temporary)  # linked, it has two names
            except OSError:
                pass
    except OSError as error:
        raise InboxUnavailable("%s cannot be written: %s" % (path, error.strerror or error)) from None


def inbox_pass(key: str, kind: str, seconds: float) -> str:
    """A signed, expiring value only a holder of the key makes or checks: a "ticket" (the
    form's way in, used once) or a "session" (what it is exchanged for, kept in the page's
    tab). It is not the key and says nothing of it."""
    import secrets

    body = "%d.%s" % (time.time() + seconds, secrets.token_hex(12))
    return "%s.%s" % (body, proof_of(key, "%s:%s" % (kind, body)))


def inbox_pass_nonce(key: str, kind: str, value: str):
    """The nonce of a valid, unexpired pass of that kind, or None."""
    import hmac

    expiry, _, rest = value.partition(".")
    nonce, _, mac = rest.partition(".")
    if not expiry.isdigit() or len(nonce) != 24 or not set(nonce) <= HEX_DIGITS or int(expiry) < time.time():
        return None
    wanted = proof_of(key, "%s:%s.%s" % (kind, expiry, nonce))
    return nonce if hmac.compare_digest(wanted.encode("ascii"), mac.encode("utf-8", "surrogatepass")) else None


def use_ticket_once(folder: str, expiry: str, nonce: str) -> bool:
    """Whether this is the ticket's first use by any process of ours: a marker file made
    exclusively in the private registry folder (<folder>/tickets/<expiry>.<nonce>) says it was
    used, whichever process holding the door redeemed it. Markers of expired tickets go."""
    tickets = os.path.join(folder, "tickets")
    try:
        inbox_folder(folder)
        inbox_folder(tickets)
        now = time.time()
        for name in os.listdir(tickets):
            stamp = name.partition(".")[0]
            if stamp.isdigit() and int(stamp) < now:
                try:
                    os.unlink(os.path.join(tickets, name))
                except OSError:
                    pass
        with create_private_file(os.path.join(tickets, "%s.%s" % (expiry, nonce))):
            pass
    except (OSError, InboxUnavailable):
        return False  # used already, or no private place to say so: it opens nothing
    return True


def page_verifier(key: str, session: str) -> str:
    """What an inbox page opened through a ticket holds to check a server's proof: it never
    sees the key. Bound to the session (its nonce), so that whoever holds another session
    cannot answer for this page."""
    return proof_of(key, "inbox-page:" + session)


def _inbox_row(raw):
    """One interview of a registry file, with every field of the right type, or None."""
    if not isinstance(raw, dict):
        return None
    row = {}
    for name, kind in (("interviewId", str), ("title", str), ("url", str), ("createdAt", str)):
        if not isinstance(raw.get(name), kind):
            return None
        row[name] = raw[name]
    # The page links to it: only a web address, never javascript: or a file.
    if not row["url"].startswith(("http://", "https://")):
        return None
    for name in ("questions", "answered", "followUpsUnseen"):
        value = raw.get(name, 0)
        row[name] = value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
    row["waiting"] = raw.get("waiting") is True
    # When the person's away policy acts on it, if it will.
    if raw.get("away") in AWAY_POLICIES[1:] and isinstance(raw.get("awayAt"), str):
        row["away"], row["awayAt"] = raw["away"], raw["awayAt"]
    asked = raw.get("permission")  # a permission ask's own row: what the agent wants to do
    if isinstance(asked, dict) and asked.get("action") in PERMISSION_ACTIONS and \
            all(isinstance(asked.get(name), str) for name in ("tool", "what")):
        row["permission"] = {"action": asked["action"], "tool": cut(asked["tool"], PERMISSION_ROW_CHARS),
                             "what": cut(asked["what"], PERMISSION_ROW_CHARS)}
    return row


def _inbox_entry(raw, pid: int):
    """A registry file's JSON checked, or None: a damaged file costs only its own rows. `port`
    (the process's own form server) and `forms` (the SHA-256 of every token it serves, settled
    forms included while they stay readable) are what the front door forwards by."""
    if not isinstance(raw, dict) or raw.get("pid") != pid or not isinstance(raw.get("interviews"), list):
        return None
    rows = [row for row in map(_inbox_row, raw["interviews"]) if row is not None]
    port, forms = raw.get("port"), raw.get("forms")
    if not (isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536):
        port = None
    if not isinstance(forms, list) or len(forms) > INBOX_FORMS_MAX:
        forms = []
    return {
        "pid": pid,
        "startedAt": raw.get("startedAt") if isinstance(raw.get("startedAt"), str) else "",
        "agent": raw.get("agent") if isinstance(raw.get("agent"), str) else None,
        "project": raw.get("project") if isinstance(raw.get("project"), str) else "",
        "interviews": rows,
        "port": port,
        "forms": frozenset(digest for digest in forms if isinstance(digest, str) and len(digest) == 64),
        "version": raw.get("version") if isinstance(raw.get("version"), str) else None,
    }


class InboxRegistry:
    """<log dir>/inbox/: this process's entry, written whole or not at all, and the entries of
    every live process, read back. Files of processes that are gone are removed on sight.
    With a `log`, the entry's coming and going and each file removed on sight are logged: what
    another process, or a test, can wait on instead of watching the folder."""

    def __init__(self, log_dir: str, log: Log | None = None, door_port: int = 0) -> None:
        self.log = log
        self.folder = os.path.join(log_dir, "inbox")
        self.index_folder = os.path.join(self.folder, "forms")
        self.door_port = door_port
        self.pid = os.getpid()
        self.path = os.path.join(self.folder, "%d.json" % self.pid)
        self.written = False
        self.indexed = frozenset()  # the token digests the form index names this process for
        self.cache: dict = {}  # file name -> ((mtime_ns, size), entry or None)

    def write(self, entry: dict) -> None:
        """InboxUnavailable when the folder is not private; InboxWriteFailed when the file
        cannot be written now (nothing is left behind)."""
        inbox_folder(self.folder)
        temporary = os.path.join(self.folder, ".%d.json.tmp" % self.pid)
        try:
            try:
                os.unlink(temporary)  # a crashed process's, whose pid this one now has
            except FileNotFoundError:
                pass
            write_whole(temporary, lambda handle: handle.write(json_utf8(entry)),
                        lambda temporary: os.replace(temporary, self.path))
        except OSError as error:
            raise InboxWriteFailed("%s cannot be written: %s" % (self.path, error.strerror or error)) from None
        self._index(frozenset(entry["forms"]))
        if not self.written:
            self.written = True
            self._note("inbox-listed", entry=os.path.basename(self.path))

    def remove(self) -> None:
        self._index(frozenset())
        if not self.written:
            return
        self.written = False
        _unlink_quietly(self.path)
        self._note("inbox-unlisted", entry=os.path.basename(self.path))

    def handoff_path(self, pid: int) -> str:
        """Where process `pid` takes the door's connections for its forms (DoorHandoff). Named
        by the door's port too: another port on the same log folder is another door."""
        return os.path.join(self.folder, "%d-%d.door" % (pid, self.door_port))

    def _index(self, forms: frozenset) -> None:
        """The form index, <inbox>/forms/<digest>: a link whose target is this process's pid,
        one for each form its entry names, made before the form's URL goes out. Any process
        of ours then finds a new form's owner with one readlink, without reading every entry.
        A link that cannot be made costs only that: the entry still names the form."""
        if forms == self.indexed:
            return
        made = set(self.indexed & forms)
        if forms - made:
            try:
                os.mkdir(self.index_folder, 0o700)
            except FileExistsError:
                pass
            except OSError:
                forms = made
        for digest in forms - made:
            link = os.path.join(self.index_folder, digest)
            for _ in range(2):
                try:
                    os.symlink(str(self.pid), link)
                    made.add(digest)
                    break
                except FileExistsError:  # left by a process that had this pid before
                    _unlink_quietly(link)
                except OSError:
                    break
        for digest in self.indexed - forms:
            _unlink_quietly(os.path.join(self.index_folder, digest))
        self.indexed = frozenset(made)

    def form_owner(self, digest: str):
        """The pid of another process of ours that the form index names for `digest`, or None."""
        try:
            target = os.readlink(os.path.join(self.index_folder, digest))
        except OSError:
            return None
        return int(target) if target.isdigit() and int(target) != self.pid else None

    def _drop_leftovers(self, pid: int, entry) -> None:
        """What a process that is gone left besides its entry: its links in the form index and
        its end of the door's handoff."""
        for digest in entry["forms"] if entry is not None else ():
            link = os.path.join(self.index_folder, digest)
            try:
                if os.readlink(link) == str(pid):
                    os.unlink(link)
            except OSError:
                pass
        _unlink_quietly(self.handoff_path(pid))

    def _note(self, event: str, **fields) -> None:
        if self.log is not None:
            self.log.event(event, **fields)

    def folder_stamp(self):
        try:
            return os.stat(self.folder).st_mtime_ns
        except OSError:
            return None

    def scan(self):
        """(stamp, entries): the entries of every other live process, and a value that changes
        whenever any of them may have. Nothing from a folder that another user could write
        into: each entry names the ports the front door forwards to."""
        stamp, entries, seen = [], [], set()
        for name, pid in self._names():
            path = os.path.join(self.folder, name)
            if not pid_alive(pid):
                if not name.startswith("."):
                    cached = self.cache.get(name)
                    self._drop_leftovers(pid, cached[1] if cached is not None else self._read(path, pid))
                try:
                    os.unlink(path)
                    self._note("inbox-entry-dropped", pid=pid, reason="its process is gone")
                except OSError:
                    pass
                continue
            if name.startswith("."):
                continue  # a write in progress
            cached = self._cached(name, pid)
            if cached is None:
                continue
            stamp.append((name, cached[0]))
            seen.add(name)
            if cached[1] is not None:
                entries.append(cached[1])
        for name in set(self.cache) - seen:
            del self.cache[name]
        return tuple(stamp), entries

    def lookup(self, digest: str):
        """The entry of another live process whose forms include `digest`, or None: what
        scan() would find, but reading only the files that changed and checking only the one
        found for life, so the door's way to a form newer than its last scan costs no check
        of every other process."""
        for name, pid in self._names():
            cached = None if name.startswith(".") else self._cached(name, pid)
            entry = cached and cached[1]
            if entry is not None and digest in entry["forms"] and pid_alive(pid):
                return entry
        return None

    def _names(self) -> list:
        """(file name, pid) of every other process's entry and of its writes in progress;
        nothing from a folder that is not ours."""
        try:
            if folder_refusal(self.folder) is not None:
                return []
            names = os.listdir(self.folder)
        except OSError:
            return []
        found = []
        for name in sorted(names):
            stem = name[1:-9] if name.startswith(".") and name.endswith(".json.tmp") else name[:-5]
            if stem.isdigit() and (name.endswith(".json") or name.endswith(".json.tmp")) and int(stem) != self.pid:
                found.append((name, int(stem)))
        return found

    def _cached(self, name: str, pid: int):
        """((mtime_ns, size), entry or None) of one entry, read again only when it changed;
        None when it is gone."""
        path = os.path.join(self.folder, name)
        try:
            status = os.lstat(path)
        except OSError:
            return None
        key = (status.st_mtime_ns, status.st_size)
        cached = self.cache.get(name)
        if cached is None or cached[0] != key:
            cached = (key, self._read(path, pid))
            self.cache[name] = cached
        return cached

    @staticmethod
    def _read(path: str, pid: int):
        try:
            with open_private_file(path, owner_checked=False) as handle:  # scan() checked the folder
                data = handle.read(INBOX_ENTRY_MAX_BYTES + 1)
        except OSError:
            return None
        if len(data) > INBOX_ENTRY_MAX_BYTES:
            return None
        try:
            return _inbox_entry(parse_json(data.decode("utf-8")), pid)
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None


class InboxStream:
    """What the inbox's events route answers: the connection is kept and the listing written to
    it whenever it changes, until the page or the holder goes."""

    __slots__ = ("inbox",)

    def __init__(self, inbox) -> None:
        self.inbox = inbox

    def deliver(self, request) -> None:
        self.inbox.stream(request)


def inbox_from(request, params: dict):
    """The inbox a /inbox/<key> route names, or a 404 (a wrong key is no different)."""
    import hmac

    inbox = request.server.inbox
    given, key = params.get("key", ""), inbox.current_key()
    if key is None or not hmac.compare_digest(key.encode("ascii"), given.encode("utf-8", "surrogatepass")):
        raise HttpRefusal(404, "not found")
    return inbox


def route_inbox_page(request, params: dict):
    inbox_from(request, params)
    return route_asset(request, {"name": "inbox.html"})


def inbox_listing(inbox, request, params: dict):
    return json_reply(200, inbox.fresh_listing())


def inbox_events(inbox, request, params: dict):
    return InboxStream(inbox)


def route_inbox_prove(request, params: dict):
    """Proves the key: `proof` for a holder of the key, and with `session` (a session's nonce,
    not a secret), `pageProof` for the page that session opened; each for the origin this
    listener answers at (origin_proof)."""
    nonce = request_nonce(request)
    key = request.server.inbox.current_key()
    origin = proved_origin(request)
    # `door`: this holder also serves every process's forms, with the assets of this version.
    proved = {"proof": origin_proof(key, nonce, origin), "origin": origin, "door": __version__}
    session = query_value(request, "session")
    if session:
        if len(session) != 24 or not set(session) <= HEX_DIGITS:
            raise HttpRefusal(400, "session must be 24 lower-case hex digits")
        proved["pageProof"] = origin_proof(page_verifier(key, session), nonce, origin)
    return json_reply(200, proved)


def inbox_by_session(request, params: dict):
    """The inbox, for a valid session in the request's X-Ask-User-Rich-Session header, or a
    404, as for a wrong key. The page holds the session in its tab and sends it only after the
    server proved the key for the page's origin: never a cookie, which a browser sends to every
    port of localhost."""
    inbox = request.server.inbox
    given, key = request.headers.get(INBOX_SESSION_HEADER, ""), inbox.current_key()
    if key is None or inbox_pass_nonce(key, "session", given) is None:
        raise HttpRefusal(404, "not found")
    return inbox


def opened_by(find, answer):
    """The route for one of the inbox's answers, `answer(inbox, request, params)`, once `find`
    found the inbox: inbox_from (the key in the path) or inbox_by_session (the page's header).
    Each answer has one route of each kind."""
    return lambda request, params: answer(find(request, params), request, params)


def route_inbox_enter(request, params: dict):
    """A form's ticket, exchanged once (whichever process of ours redeems it) for a session
    and the verifier the page checks later proofs with; the page keeps both in its tab."""
    entered = request.server.inbox.redeem(params["ticket"])
    if entered is None:
        raise HttpRefusal(404, "not found")
    return json_reply(200, entered)


def route_inbox_session_page(request, params: dict):
    """The page a ticket opens, and the same page after a reload: it holds no secret, so it is
    served to anyone; what it shows comes only with a session."""
    return route_asset(request, {"name": "inbox.html"})


def inbox_share(inbox, request, params: dict):
    url = inbox.share_url()
    if url is None:
        raise HttpRefusal(404, "not found")
    return json_reply(200, {"url": url})


# -- the history: what was decided, from the answer archive ---------------------------------
#
# The inbox's "Answered" view and `askrich.py history` read the archive (answers/*.json) newest
# first: settled interviews and permission decisions, who asked, where, and who decided. Read
# only when asked for: nothing of it runs or stays in memory otherwise.

HISTORY_LIMIT = 100


def history_entry(record: dict) -> dict:
    """One line of the history: title, agent, project, when, outcome and who decided."""
    permission = record.get("permission") if record.get("kind") == PERMISSION else None
    away = record.get("away") if isinstance(record.get("away"), dict) else None
    entry = {
        "interviewId": record["interviewId"],
        "kind": PERMISSION if isinstance(permission, dict) else "interview",
        "title": record.get("title") if isinstance(record.get("title"), str) else "",
        "agent": record.get("agent") if isinstance(record.get("agent"), str) else None,
        "project": record.get("project") if isinstance(record.get("project"), str) else "",
        "when": record.get("submittedAt") if isinstance(record.get("submittedAt"), str) else "",
        "outcome": record.get("status") if isinstance(record.get("status"), str) else "",
        "decidedBy": BY_AWAY_POLICY if away else BY_PERSON,
        "counts": record.get("counts") if isinstance(record.get("counts"), dict) else {},
        "archivePath": record.get("archivePath"),
    }
    if isinstance(permission, dict):
        entry["outcome"] = permission.get("decision") if isinstance(permission.get("decision"), str) else ""
        entry["tool"] = permission.get("tool") if isinstance(permission.get("tool"), str) else ""
    return entry


def history_text(record: dict) -> str:
    """Everything a search looks in, case-folded: the title, each question, each answer (its
    labels, Other, option texts, notes), the general notes, a permission's tool and input."""
    def each(value) -> list:  # a list's or an object's values; a damaged record's others are none
        return list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else []

    parts = [record.get("title"), record.get("generalNotes")]
    for row in each(record.get("answers")):
        if isinstance(row, dict):
            parts += [row.get("header"), row.get("other"), row.get("notes")]
            parts += each(row.get("selectedLabels")) + each(row.get("rankedLabels")) + each(row.get("optionTexts"))
    permission = record.get("permission")
    if isinstance(permission, dict):
        parts += [permission.get("tool"), json.dumps(permission.get("input"), ensure_ascii=False)]
    return "\n".join(part for part in parts if isinstance(part, str)).casefold()


def read_history(archive: Archive, query: str = "", limit: int = HISTORY_LIMIT) -> list:
    """The newest `limit` history entries whose text holds every word of `query`."""
    words = query.casefold().split()
    entries = []
    for record in archive.newest_first():
        if len(entries) >= limit:
            break
        text = history_text(record) if words else ""
        if all(word in text for word in words):
            entries.append(history_entry(record))
    return entries


def history_answers(archive: Archive, interview_id: str):
    """What the read-only view of one history entry shows, or None: the entry, its answers
    (question, answer labels, Other, notes, who decided), its general notes and, for a
    permission ask, the decision."""
    record = archive.find(interview_id)
    if record is None:
        return None
    answers = []
    for row in record.get("answers") if isinstance(record.get("answers"), list) else []:
        if not isinstance(row, dict):
            continue
        answers.append({key: row.get(key) for key in (
            "id", "header", "status", "selectedLabels", "rankedLabels", "other", "optionTexts", "notes", "by")})
    view = dict(history_entry(record), answers=answers, generalNotes=record.get("generalNotes"))
    if view["kind"] == PERMISSION:
        view["permission"] = record.get("permission")
    return view


def inbox_history(inbox, request, params: dict):
    try:
        limit = min(HISTORY_LIMIT, max(1, int(query_value(request, "limit") or HISTORY_LIMIT)))
    except ValueError:
        raise HttpRefusal(400, "limit must be a number from 1 to %d" % HISTORY_LIMIT) from None
    return json_reply(200, {"history": read_history(inbox.runtime.archive, query_value(request, "q"), limit)})


def inbox_history_entry(inbox, request, params: dict):
    view = history_answers(inbox.runtime.archive, params["id"])
    if view is None:
        raise HttpRefusal(404, "not found")
    return json_reply(200, view)


# -- the front door: every form of every process, through the inbox's port ------------------
#
# The holder serves each form's page and routes by forwarding the request to the process that
# owns the token, on the loopback port that process wrote in our private registry. The request
# is rebuilt from its checked parts (route, token, upload id, a few headers): nothing the
# request says chooses where it goes. The owner's answer is relayed byte for byte, as it comes.

# The door's kept connections to the owners (OwnerConnections): how long one may stay idle
# (well under the owner's HTTP_IDLE_TIMEOUT_SECONDS), and how many per owner.
DOOR_KEEP_SECONDS = 10.0
DOOR_KEPT_PER_OWNER = 8
# Headers a form's requests need at the owner, besides Host; Origin was checked here.
DOOR_FORWARDED_HEADERS = ("Content-Type", "X-Attachment-Name", "User-Agent", "Accept", "Accept-Language",
                          "Last-Event-ID")
# Bounded here as at the owner, so that the door never passes on what the owner would refuse.
DOOR_BODY_LIMITS = MappingProxyType({
    "/api/s/<token>/submit": (MAX_BODY_BYTES, ""),
    "/api/s/<token>/progress": (MAX_PROGRESS_BYTES, ""),
    "/api/s/<token>/visibility": (MAX_VISIBILITY_BYTES, ""),
    "/api/s/<token>/attachments": (ATTACHMENT_MAX_BYTES, ATTACHMENT_TOO_LARGE),
})
DOOR_FAILURES = MappingProxyType({
    502: ("owner-unreachable", "the ask-user-rich process that serves this form does not answer; it may "
          "have exited. Reload this page in a moment."),
    504: ("owner-timeout", "the ask-user-rich process that serves this form is too slow to answer. "
          "Reload this page in a moment."),
})


class Forward:
    """What a door route answers: the request to send to the owner's own port, and what to
    answer if the owner cannot be reached (a page, or JSON for an API route)."""

    __slots__ = ("port", "method", "path", "limit", "page", "token")

    def __init__(self, port: int, method: str, path: str, limit, page: bool, token: str) -> None:
        self.port, self.method, self.path, self.limit, self.page = port, method, path, limit, page
        self.token = token

    def deliver(self, request) -> None:
        forward_to_owner(request, self)


def served_here(request, digest: str) -> bool:
    """Whether the form is this process's own: the door then answers it itself, with no hop."""
    return request.runtime.hub.find_by_token_digest(bytes.fromhex(digest)) is not None


def door_route(method: str, pattern: str, own_route):
    """The door's route for one of the form's routes (`own_route`, for this process's own
    forms): find the owner by the token, rebuild the path from the pattern, and forward."""
    page = pattern == "/s/<token>"

    def route(request, params: dict):
        token, upload = params["token"], params.get("id")
        digest = token_digest(token) if is_token_shaped(token) else None
        if digest is not None and served_here(request, digest):
            return own_route(request, params)
        port = request.server.inbox.owner_port(digest) if digest is not None else None
        if port is None or (upload is not None and not is_token_shaped(upload)):
            if page:
                return text_reply(404, NOT_FOUND_TEXT)
            raise HttpRefusal(404, "not found")
        path = pattern.replace("<token>", token).replace("<id>", upload or "")
        return Forward(port, method, path, DOOR_BODY_LIMITS.get(pattern), page, token)

    return route


def door_prove(request, params: dict):
    """A page that lost its server proves the new one before it sends its token again: the
    door passes the question to the form's owner, found by the token's digest."""
    nonce, digest = request_nonce(request), request_token_digest(request)
    if served_here(request, digest):
        return route_prove(request, params)
    port = request.server.inbox.owner_port(digest)
    if port is None:
        raise HttpRefusal(404, "not found")
    return Forward(port, "GET", "/api/prove?nonce=%s&token-sha256=%s" % (nonce, digest), None, False, digest)


def door_failure(status: int, forward: Forward) -> Reply:
    code, text = DOOR_FAILURES[status]
    if forward.page:
        return text_reply(status, text[0].upper() + text[1:])
    return json_reply(status, error_body(status, text, code))


def _owner_request(request, forward: Forward, length: int, keep: bool) -> bytes:
    """The request line and headers the owner gets: HTTP/1.0, the page's Host unchanged (checked
    here: the owner tells a request through the door by it, and proves for the door's origin),
    a few of the page's headers (HttpRefusal 400 for one that would split a line), and with
    `keep` the door's ask to keep the connection for its next request."""
    lines = ["%s %s HTTP/1.0" % (forward.method, forward.path)]
    for name in ("Host",) + DOOR_FORWARDED_HEADERS:
        value = request.headers.get(name)
        if value is None:
            continue
        if any(ch in value for ch in "\r\n\0"):
            raise HttpRefusal(400, "malformed header")
        lines.append("%s: %s" % (name, value))
    if forward.limit is not None:
        lines.append("Content-Length: %d" % length)
    if keep:
        lines.append("%s: keep-alive" % DOOR_KEEP_HEADER)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


class OwnerConnections:
    """The door's idle connections to each owner's port, kept for the next request: a request
    through the door then costs no connection and no new thread at the owner. A connection
    idle for DOOR_KEEP_SECONDS is closed (the owner drops it at HTTP_IDLE_TIMEOUT_SECONDS), and
    one the owner has closed is noticed before it is used."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict = {}  # port -> [(socket, when it was given back)]

    def take(self, port: int, keep: bool):
        """(socket, whether it carried a request before): a kept one when `keep` and there is
        one still open, else a new connection to 127.0.0.1 (no name to resolve). OSError when
        the owner cannot be reached."""
        import socket

        now = time.monotonic()
        stale = []
        with self.lock:
            for each in list(self.idle):  # owners gone quiet or gone: their connections go too
                fresh = [(owner, since) for owner, since in self.idle[each] if now - since < DOOR_KEEP_SECONDS]
                stale += [owner for owner, since in self.idle[each] if now - since >= DOOR_KEEP_SECONDS]
                if fresh:
                    self.idle[each] = fresh
                else:
                    del self.idle[each]
            kept = self.idle.get(port, []) if keep else []
            found = None
            while kept and found is None:
                owner = kept.pop()[0]
                if still_open(owner):
                    found = owner
                else:
                    stale.append(owner)
        for owner in stale:
            owner.close()
        if found is not None:
            return found, True
        owner = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            owner.settimeout(DOOR_CONNECT_SECONDS)
            owner.connect((INBOX_HOST, port))
            # Before a byte of the request goes: the owner may have exited and another user's
            # program taken its port (a kept connection was made to our own listener).
            if not listener_is_ours(port):
                raise OSError("port %d is held by a program that is not ours" % port)
            owner.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            owner.close()
            raise
        return owner, False

    def give_back(self, port: int, owner) -> None:
        with self.lock:
            kept = self.idle.setdefault(port, [])
            if len(kept) < DOOR_KEPT_PER_OWNER:
                kept.append((owner, time.monotonic()))
                return
        owner.close()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, {}
        for kept in idle.values():
            for owner, _ in kept:
                owner.close()


def listener_is_ours(port: int) -> bool:
    """Whether every socket listening on `port` belongs to this user, and one does: the
    kernel says whose each listening socket is (Linux: sock_diag over netlink, which lists the
    listening sockets alone, else /proc/net/tcp and tcp6). Where it cannot tell (macOS,
    Windows) the registry's word is all there is (tests/README.md)."""
    try:
        owners = _listener_uids_by_netlink(port)
    except (OSError, AttributeError, ValueError):
        owners = _listener_uids_by_proc(port)
    if owners is None:
        return True
    return bool(owners) and owners <= {os.getuid()}


def _listener_uids_by_netlink(port: int) -> set:
    """The uids of the TCP sockets listening on `port`, from the kernel's sock_diag: one dump
    request per address family (inet_diag_req_v2 for the LISTEN state), read to its end."""
    import socket
    import struct

    uids = set()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4) as diag:  # NETLINK_SOCK_DIAG
        diag.settimeout(DOOR_CONNECT_SECONDS)
        for family in (socket.AF_INET, socket.AF_INET6):
            question = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << 10) + bytes(48)
            # SOCK_DIAG_BY_FAMILY, a request for a dump
            diag.send(struct.pack("=IHHII", 16 + len(question), 20, 0x301, 1, 0) + question)
            done = False
            while not done:
                data, offset = diag.recv(65536), 0
                if not data:
                    raise OSError("sock_diag ended early")
                while offset + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, offset)
                    if kind in (2, 3):  # NLMSG_ERROR, NLMSG_DONE
                        if kind == 2 and struct.unpack_from("=i", data, offset + 16)[0] != 0:
                            raise OSError("sock_diag refused")
                        done = True
                        break
                    if length < 16 + 72:
                        raise ValueError("short sock_diag answer")
                    if struct.unpack_from("!H", data, offset + 20)[0] == port:  # idiag_sport
                        uids.add(struct.unpack_from("=I", data, offset + 80)[0])  # idiag_uid
                    offset += (length + 3) & ~3
    return uids


PROC_TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")  # every TCP socket, its state and its uid


def _listener_uids_by_proc(port: int):
    """The same from /proc/net/tcp and tcp6 (slower: they list every connection too), or None
    where there are none."""
    tables = [name for name in PROC_TCP_TABLES if os.path.exists(name)]
    if not tables:
        return None
    suffix, uids = ":%04X" % port, set()
    for name in tables:
        table = read_proc(name)
        if table is None:
            return {-1}  # unreadable: not known to be ours
        for line in table.decode("ascii", "replace").splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 8 and fields[3] == "0A" and fields[1].endswith(suffix):
                uids.add(int(fields[7]) if fields[7].isdigit() else -1)
    return uids


def still_open(owner) -> bool:
    """Whether a kept connection can carry a request: nothing to read on it (an end, or bytes
    nobody asked for, rule it out)."""
    import socket

    owner.settimeout(0)
    try:
        owner.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def forward_to_owner(request, forward: Forward) -> None:
    """Send the request on to the owner and relay its answer unchanged as it comes (an events
    stream included); 502 when the owner cannot be reached, 504 when it does not begin to
    answer in time. Never waits without a deadline. A small body is read whole first and the
    request goes on a kept connection; an upload goes on its own, passed on as it arrives."""
    try:
        length = request.body_length(*forward.limit) if forward.limit is not None else 0
    except HttpRefusal as refusal:
        return request.send_reply(refusal.reply())
    small, body = length <= ATTACHMENT_CHUNK_BYTES, b""
    if small and length:
        try:
            body = request.rfile.read(length)
        except OSError:
            return None
    keep = small and len(body) == length
    try:
        head = _owner_request(request, forward, length, keep)
    except HttpRefusal as refusal:
        return request.send_reply(refusal.reply())
    for attempt in range(2):
        try:
            status, reused = _forward_once(request, forward, (head, body if small else None, length),
                                           keep, keep and attempt == 0)
        except _PageGone:
            return None
        except _OwnerFailed as failed:
            return _forward_failed(request, forward, failed.status, failed.error)
        # Nothing at all came back on a kept connection: the owner had closed it (it had not
        # read the request), so it goes once more on a new one.
        if not (reused and status == 502):
            break
    if status is not None:
        _forward_failed(request, forward, status, None)
    return None


def _forward_once(request, forward: Forward, sent: tuple, keep: bool, reuse: bool):
    """One try at the owner with `sent` (the head, the small body or None for an upload passed
    on as it comes, the body's length), on a kept connection when `reuse` finds one: (None once
    the answer was relayed, or the status to answer instead; whether the connection was a kept
    one). _OwnerFailed when a new connection failed; _PageGone when the page's side ended."""
    import socket

    inbox = request.server.inbox
    head, body, length = sent
    try:
        owner, reused = inbox.owners.take(forward.port, reuse)
    except OSError as error:
        raise _OwnerFailed(502, error) from None
    kept = []

    def read_whole() -> None:
        # Back for the next request before the page has the answer's last bytes: the page's
        # next request may come at once, and would otherwise find no kept connection.
        kept.append(owner)
        inbox.owners.give_back(forward.port, owner)

    try:
        owner.settimeout(inbox.answer_seconds)
        if body is not None:
            owner.sendall(head + body)
            if not keep:
                owner.shutdown(socket.SHUT_WR)  # cut short: the owner sees the same short body
        else:
            _pass_body(request, owner, head, length)
        status = _relay_answer(request, owner, inbox.answer_seconds, keep and read_whole)
    except OSError as error:
        status = 504 if isinstance(error, socket.timeout) else 502
        if not reused:
            raise _OwnerFailed(status, error) from None
    finally:
        if not kept:
            owner.close()
    return status, reused


def _pass_body(request, owner, head: bytes, length: int) -> None:
    """The request line and headers of an upload to the owner, then its body in chunks as it
    arrives."""
    owner.sendall(head)
    while length > 0:
        try:
            chunk = request.rfile.read(min(ATTACHMENT_CHUNK_BYTES, length))
        except OSError:
            raise _PageGone() from None
        if not chunk:
            # Cut short: the owner sees the same short body and answers as it would directly.
            owner.shutdown(1)
            return
        owner.sendall(chunk)
        length -= len(chunk)


def _kept_answer_head(head: bytes):
    """(the head as the page gets it, the body's length or None, whether the owner keeps the
    connection): the owner's `Connection: keep-alive` is the door's business alone."""
    lines = head.split(b"\r\n")
    kept, length, shown = False, None, []
    for line in lines:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"connection":
            kept = value.strip().lower() == b"keep-alive"
            continue
        if name == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
        shown.append(line)
    return b"\r\n".join(shown), length, kept and length is not None


def _relay_answer(request, owner, patience: float, read_whole):
    """Copy the owner's answer to the page as it comes: None once done, or the status to
    answer instead (502, 504) when the owner said nothing at all. `read_whole` (None when the
    door does not keep the connection) is called once the whole of an answer of known length
    has come: the connection can then carry the next request. An answer of known length is
    read straight (it is not long in coming); one without (an events stream) is relayed while
    the page is watched too."""
    import socket

    if not read_whole:
        return _relay_stream(request, owner, patience, False)
    pending = b""
    try:
        while True:
            chunk = owner.recv(ATTACHMENT_CHUNK_BYTES)
            if not chunk:
                if pending:  # an answer without a whole head: passed on as it came
                    _send_to_page(request, pending)
                return None if pending else 502
            pending += chunk
            end = pending.find(b"\r\n\r\n")
            if end >= 0 or len(pending) > ATTACHMENT_CHUNK_BYTES:
                break
        head, length, kept = _kept_answer_head(pending[:end]) if end >= 0 else (b"", None, False)
        shown = [head + pending[end:] if end >= 0 else pending]
        if not kept:  # a stream, or an owner that ends the connection: as it comes
            if not _send_to_page(request, shown[0]):
                return None
            return _relay_stream(request, owner, patience, True)
        left = length + 4 - (len(pending) - end)  # the blank line after the head, then the body
        _relay_body(request, owner, shown, left, length, read_whole)
        return None
    except socket.timeout:
        return None if pending else 504
    except OSError:
        return None if pending else 502


def _relay_body(request, owner, shown: list, left: int, length: int, read_whole) -> None:
    """The rest of an answer of known length (`left` bytes after `shown`) to the page, and
    read_whole() once all of it came from the owner and nothing more (the connection can then
    carry the next request), before the page gets the last of it."""
    owner.settimeout(DOOR_IDLE_SECONDS)
    while left > 0:
        chunk = owner.recv(min(ATTACHMENT_CHUNK_BYTES, left))
        if not chunk:
            _send_to_page(request, b"".join(shown))
            return
        left -= len(chunk)
        shown.append(chunk)
        # A small answer goes to the page in one write, head and body, as one packet.
        if length > ATTACHMENT_CHUNK_BYTES and left > 0:
            if not _send_to_page(request, b"".join(shown)):
                return
            shown = []
    if left == 0:
        read_whole()
    _send_to_page(request, b"".join(shown))


def _relay_stream(request, owner, patience: float, started: bool):
    """Copy the owner's answer to the page as it comes, flushed per chunk, until either ends:
    None once done, or 502/504 when the owner said nothing at all."""
    import selectors

    with selectors.DefaultSelector() as watch:
        watch.register(owner, selectors.EVENT_READ, "owner")
        watch.register(request.connection, selectors.EVENT_READ, "page")
        while True:
            ready = watch.select(DOOR_IDLE_SECONDS if started else patience)
            if not ready:
                return None if started else 504
            for key, _ in ready:
                if key.data == "page":
                    if request.page_gone():
                        return None  # the page left: so does the forwarded request
                    watch.unregister(request.connection)  # it sent more: not ours to read
                    continue
                try:
                    chunk = owner.recv(ATTACHMENT_CHUNK_BYTES)
                except OSError:
                    chunk = b""
                if not chunk:
                    return None if started else 502
                if not _send_to_page(request, chunk):
                    return None
                started = True


def _send_to_page(request, chunk: bytes) -> bool:
    try:
        request.connection.sendall(chunk)
    except OSError:
        return False
    return True


def _forward_failed(request, forward: Forward, status: int, error) -> None:
    request.server.inbox.log.event("door-failed", "warning", status=status, port=forward.port,
                                   token=redact(forward.token), method=forward.method,
                                   error=str(error or DOOR_FAILURES[status][0]))
    try:
        request.send_reply(door_failure(status, forward))
    except OSError:
        pass


# -- handing a page's connection to its owner ------------------------------------------------
#
# Every process of ours holds the door, so the kernel gives a page's connection to the form's
# owner one time in as many processes. Rather than parse the request and relay it (a second
# parse, a second connection, every byte copied twice), the process that got it reads the
# request line without taking it off the connection, finds the owner in the form index (one
# readlink) and passes the connection itself (SCM_RIGHTS) to the owner's datagram socket in our
# private registry folder, where no other user can bind or send. The owner serves it from the
# first byte as if it had accepted it. Anything else, and any connection that cannot be passed
# now (a stopped or gone owner, a path too long for a socket address), is served here and
# relayed as above.

DOOR_PEEK_BYTES = 2048  # what is looked at for the request line, left on the connection
HANDOFF_MARK = b"c"  # a datagram's bytes: the descriptor is what it carries
HANDOFF_DRAIN_SECONDS = 1.0  # at most, for the connections passed before the end
UNIX_ADDRESS_MAX = 107  # bytes of a socket's path (sun_path less its final zero)
# An owner in these states would hold the page without a word: the relay answers 504 instead.
OWNER_UNFIT_STATES = frozenset((b"T", b"t", b"Z", b"X", b"x"))


def can_hand_over(folder: str) -> bool:
    """Linux, where every process of ours holds the door, and a registry folder whose sockets'
    paths fit an address."""
    import socket

    return (DOOR_SHARED and hasattr(socket, "AF_UNIX") and hasattr(socket, "SCM_RIGHTS")
            and len(os.fsencode(os.path.join(folder, "%d-65535.door" % (2 ** 22)))) <= UNIX_ADDRESS_MAX)


def page_form_digest(head: bytes):
    """The token digest of the form a request line names (/s/<token>, /api/s/<token>/...),
    from the bytes a connection begins with; None for anything else, or a line not yet whole."""
    line, found, _ = head.partition(b"\r\n")
    parts = line.split(b" ")
    if not found or len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return None
    path = parts[1].split(b"?", 1)[0]
    for prefix in (b"/s/", b"/api/s/"):
        if path.startswith(prefix):
            token = path[len(prefix):].split(b"/", 1)[0].decode("ascii", "replace")
            return token_digest(token) if is_token_shaped(token) else None
    return None


def hand_over(server, connection, wait: bool):
    """Pass a page's connection to the process that owns the form it asks for; True once that
    process has it (this one then closes its own descriptor and nothing else). False, with
    nothing taken off the connection, when it is this process's to serve; without `wait`, None
    when the request line has not come yet."""
    import socket

    inbox, handoff = server.inbox, server.inbox.handoff  # the inbox may let it go meanwhile
    if handoff is None:
        return False
    try:
        if wait:
            connection.settimeout(HTTP_IDLE_TIMEOUT_SECONDS)
            head = connection.recv(DOOR_PEEK_BYTES, socket.MSG_PEEK)
        else:
            head = connection.recv(DOOR_PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return None
    except OSError:
        return False
    digest = page_form_digest(head)
    if digest is None:
        return None if not wait and b"\r\n" not in head else False
    pid = inbox.registry.form_owner(digest)  # None for this process's own forms
    fields = proc_stat(pid) if pid is not None else None
    if not fields or fields[0] in OWNER_UNFIT_STATES:
        return False
    descriptor = (socket.SOL_SOCKET, socket.SCM_RIGHTS, connection.fileno().to_bytes(4, sys.byteorder))
    try:
        # Never waits: an owner whose queue is full gets the request relayed instead.
        handoff.sender.sendmsg([HANDOFF_MARK], [descriptor], socket.MSG_DONTWAIT, inbox.registry.handoff_path(pid))
    except OSError:
        return False
    return True


class DoorHandoff:
    """A process's end of the handoff while it holds the door: a datagram socket at
    <inbox>/<pid>-<door port>.door, and one thread that serves each connection passed to it on
    its door server of that family, as if it had accepted it; and the socket it passes pages'
    connections on."""

    def __init__(self, path: str, listener: LoopbackListener) -> None:
        import socket

        self.path, self.listener = path, listener
        self.sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            _unlink_quietly(path)  # a crashed process's, whose pid this one now has
            self.socket.bind(path)
        except OSError:
            self.socket.close()
            self.sender.close()
            raise
        self.thread = threading.Thread(target=self._serve, name="ask-user-rich-door-handoff", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import socket

        room = socket.CMSG_SPACE(4 * 4)
        while True:
            try:
                read, extra, flags, _ = self.socket.recvmsg(len(HANDOFF_MARK), room)
            except OSError:
                return
            if not read and not extra:
                return  # shut down by close(), once every connection sent before is served
            descriptors = []
            for level, kind, data in extra:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    descriptors += [int.from_bytes(data[at:at + 4], sys.byteorder) for at in range(0, len(data) - 3, 4)]
            if len(descriptors) == 1 and not flags & socket.MSG_CTRUNC:
                self._serve_connection(descriptors.pop())
            for descriptor in descriptors:
                os.close(descriptor)

    def _serve_connection(self, descriptor: int) -> None:
        """Only a connection a page made to the door's port is served: whatever else came is
        closed."""
        import socket

        try:
            connection = socket.socket(fileno=descriptor)
        except OSError:
            os.close(descriptor)
            return
        server = next((one for one in self.listener.servers if one.address_family == connection.family), None)
        try:
            if server is None or connection.type != socket.SOCK_STREAM or connection.getsockname()[1] != self.listener.port:
                raise OSError("not a connection to the door")
            peer = connection.getpeername()
        except OSError:
            connection.close()
            return
        server.stays.add(connection)
        server.process_request(connection, peer)

    def close(self) -> None:
        """Called before the door's servers stop: no process finds this socket once its path
        is gone, and each connection already passed to it is served before this returns."""
        import socket

        _unlink_quietly(self.path)
        try:
            self.socket.shutdown(socket.SHUT_RDWR)  # what is queued is still read, then nothing
        except OSError:
            pass
        self.thread.join(HANDOFF_DRAIN_SECONDS)
        self.socket.close()
        self.sender.close()


INBOX_ROUTES = (
    ("GET", "/inbox", route_inbox_session_page),
    ("GET", "/inbox/listing", opened_by(inbox_by_session, inbox_listing)),
    ("GET", "/inbox/events", opened_by(inbox_by_session, inbox_events)),
    ("GET", "/inbox/share", opened_by(inbox_by_session, inbox_share)),
    ("GET", "/inbox/history", opened_by(inbox_by_session, inbox_history)),
    ("GET", "/inbox/history/<id>", opened_by(inbox_by_session, inbox_history_entry)),
    ("GET", "/inbox/enter/<ticket>", route_inbox_session_page),
    ("POST", "/inbox/enter/<ticket>", route_inbox_enter),
    ("GET", "/inbox/<key>", route_inbox_page),
    ("GET", "/assets/<name*>", route_asset),
    ("GET", "/api/inbox/prove", route_inbox_prove),
    ("GET", "/api/inbox/<key>", opened_by(inbox_from, inbox_listing)),
    ("GET", "/api/inbox/<key>/events", opened_by(inbox_from, inbox_events)),
    ("GET", "/api/inbox/<key>/share", opened_by(inbox_from, inbox_share)),
    ("GET", "/api/inbox/<key>/history", opened_by(inbox_from, inbox_history)),
    ("GET", "/api/inbox/<key>/history/<id>", opened_by(inbox_from, inbox_history_entry)),
) + tuple(  # the front door: each form route, forwarded; the assets are the holder's own
    (method, pattern, door_prove if pattern == "/api/prove" else door_route(method, pattern, route))
    for method, pattern, route in ROUTES if pattern != "/assets/<name*>"
)


def _build_inbox_server_class():
    """The form server's class, on the inbox's routes and loopback names only."""
    import socket

    class InboxServer(form_server_class()):
        routes = INBOX_ROUTES
        # On Windows SO_REUSEADDR lets a second socket take a port that is in use, which
        # would make two holders; there an exclusive bind is asked for instead.
        allow_reuse_address = os.name != "nt"

        def __init__(self, inbox, address, family=socket.AF_INET):
            self.inbox = inbox
            # Connections served here whatever form they ask for: passed here by another
            # process of ours, or looked at already.
            self.stays = set()
            super().__init__(inbox.runtime, address, family)
            self.allowed_hosts, self.allowed_origins = allowed_hosts(self.server_address[1],
                                                                     public_url=inbox.runtime.config.public_url)

        def process_request(self, request, client_address):
            # The request line is most often there by the time the connection is accepted:
            # a connection for another process's form is then passed on with no thread here.
            handed = None if request in self.stays else hand_over(self, request, wait=False)
            if handed:
                request.close()  # the owner serves it now: only this process's descriptor goes
                return
            if handed is False:
                self.stays.add(request)
            super().process_request(request, client_address)

        def finish_request(self, request, client_address):
            if request in self.stays or not hand_over(self, request, wait=True):
                super().finish_request(request, client_address)
            else:
                # Closed before shutdown_request, whose shutdown of the connection (which
                # would end it for the owner too) then fails quietly on a closed socket.
                request.close()

        def shutdown_request(self, request):
            self.stays.discard(request)
            super().shutdown_request(request)

        def server_bind(self):
            if os.name == "nt" and hasattr(socket, "SO_EXCLUSIVEADDRUSE"):
                self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
            share_door_port(self.socket)
            super().server_bind()

    return InboxServer


def share_door_port(sock) -> None:
    """Where the kernel lets every socket of one user share a port and refuses it to every
    other user (Linux's SO_REUSEPORT), each process of ours holds the door at once: none
    leaves a gap when it exits, and no other user can bind it while one of ours lives."""
    import socket

    if DOOR_SHARED:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)


inbox_server_class = BuiltOnce(_build_inbox_server_class)


def port_is_free(host: str, port: int) -> bool:
    """Whether `port` can be bound now on every address a listener on `host` holds: bare
    sockets, far cheaper than a server that fails."""
    import socket

    for address, family in listen_addresses(host):
        with socket.socket(family) as probe:
            if os.name != "nt":
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            share_door_port(probe)  # free for us while only our own processes hold it
            try:
                probe.bind((address, port))
            except OSError:
                return False
    return True


def prove_inbox_holder(port: int, key: str, timeout: float = INBOX_PROBE_SECONDS):
    """Ask whoever holds `port` on each loopback to prove it knows the key, without sending the
    key. "ours", "foreign" (something answers on either and cannot prove it) or "free" (nothing
    listens on either)."""
    return probe_inbox_holder(port, key, timeout)[0]


def probe_inbox_holder(port: int, key: str, timeout: float = INBOX_PROBE_SECONDS):
    """(prove_inbox_holder's verdict, whether that holder is also our front door). An older
    ask-user-rich proves the key but serves no door, and one of another version serves its own
    assets, which need not fit our pages: while either holds the port, forms show their own
    port (its answer's `door` is not our version)."""
    verdicts = {_prove_at(address, port, key, timeout) for address, _ in listen_addresses(INBOX_HOST)}
    if "foreign" in verdicts:
        return "foreign", False
    if verdicts & {"ours", "ours-without-door"}:
        return "ours", "ours-without-door" not in verdicts
    return "free", False


def _prove_at(address: str, port: int, key: str, timeout: float) -> str:
    import hmac
    import http.client
    import secrets

    nonce = secrets.token_hex(16)
    host = "[%s]" % address if ":" in address else address
    connection = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        connection.request("GET", "/api/inbox/prove?nonce=" + nonce, headers={"Host": "%s:%d" % (host, port)})
        response = connection.getresponse()
        body = response.read(4096)
    except ConnectionRefusedError:
        return "free"
    except (OSError, http.client.HTTPException):
        return "foreign"
    finally:
        connection.close()
    try:
        answer = json.loads(body.decode("utf-8"))
        proof = answer.get("proof")
    except (UnicodeDecodeError, ValueError, AttributeError):
        return "foreign"
    if response.status != 200 or not isinstance(proof, str):
        return "foreign"
    given = proof.encode("ascii", "replace")
    if hmac.compare_digest(given, origin_proof(key, nonce, "http://%s:%d" % (host, port)).encode("ascii")):
        return "ours" if answer.get("door") == __version__ else "ours-without-door"
    # An older ask-user-rich proves the key for no origin: ours, but never our door.
    if hmac.compare_digest(given, proof_of(key, nonce).encode("ascii")):
        return "ours-without-door"
    return "foreign"


def inbox_url(port: int, key: str) -> str:
    return "http://localhost:%d/inbox/%s" % (port, key)


InboxStep = collections.namedtuple("InboxStep", "finish wait write bind probe scan")


def plan_inbox_step(facts: dict) -> InboxStep:
    """What the inbox's worker does next, from plain facts (times on one monotonic clock):
    finish (nothing left to do), or wait so many seconds, or write the registry entry, try to
    bind the port (and learn who holds it), and read the folder, any of them.

    - Nothing to do (closed, or no readable form, no hold, no page watching): finish.
    - The entry is rewritten at most every INBOX_WRITE_SECONDS once dirty.
    - The folder is read every INBOX_WATCH_SECONDS while a page watches (its change reaches the
      page within a second), every 2 s while a form is open here (its `N more waiting`), else
      with each bind retry.
    - Without the port, a bind is tried every INBOX_RETRY_SECONDS, and at once when a form has
      opened and the holder was not proved lately, or when a URL was shown on a stale proof
      (`reprove`: the caller, maybe holding its own lock, used the last proof and did not
      wait on the network). When the bind fails, whoever holds the port is asked to prove the
      key (is it ours, or a foreign program?) the first time, while a form is open here (only a
      form shows the inbox's address) and when asked to, not at every retry.
    - A settled form stops being readable at `readableUntil`: the worker wakes then to drop it.
    """
    now = facts["now"]
    if facts["closed"] or not facts["active"]:
        return InboxStep(True, 0, False, False, False, False)
    watch = INBOX_WATCH_SECONDS if facts["streams"] else 2.0 if facts["formsOpen"] else INBOX_RETRY_SECONDS
    next_try = facts["nextTry"]
    if not facts["holding"] and (facts["reprove"] or (facts["formsOpen"] and now - facts["probed"] > INBOX_RETRY_SECONDS)):
        next_try = min(next_try, now)
    due = [facts["lastScan"] + watch]
    if facts["dirty"]:
        due.append(facts["lastWrite"] + INBOX_WRITE_SECONDS)
    if not facts["holding"]:
        due.append(next_try)
    if facts["readableUntil"] is not None:
        due.append(facts["readableUntil"])
    wake = min(due)
    if wake > now:
        return InboxStep(False, wake - now, False, False, False, False)
    bind = not facts["holding"] and now >= next_try
    return InboxStep(
        finish=False,
        wait=0,
        write=facts["dirty"] and now >= facts["lastWrite"] + INBOX_WRITE_SECONDS,
        bind=bind,
        probe=bind and (not facts["holderKnown"] or facts["formsOpen"] or facts["reprove"]),
        scan=now >= facts["lastScan"] + watch,
    )


def inbox_row(interview: Interview, url: str):
    """What the inbox lists of a pending interview, its form at `url`; None once settled."""
    now = interview.activity()
    if now["settled"]:
        return None
    return {"interviewId": interview.id, "title": now["title"], "url": url, "questions": now["total"],
            "answered": (now["counts"] or {}).get("answered", 0), "followUpsUnseen": now["followUpsUnseen"],
            "createdAt": iso_utc(interview.created), "waiting": now["waiters"] > 0,
            **({"permission": interview.options["permission"]["row"]} if interview.options.get("kind") == PERMISSION else {}),
            # When the person's away policy acts on it, unless they show up first.
            **({"away": interview.away[0], "awayAt": iso_utc(interview.last_sign() + interview.away[1] * 60)}
               if interview.away is not None else {})}


# -- the inbox's key, tickets and sessions ------------------------------------------------


class InboxKeyRing:
    """The inbox's part that knows the key: loaded (and made anew when no process of ours
    lives), read again when another process replaced it, and the one-time tickets a form's link
    and "Open on another device" hand out, redeemed once by whichever process of ours gets them.
    A part of Inbox, whose __init__ holds the state."""

    def _load_key(self) -> None:
        """The key, a new one when nobody needs the old one: no other live process of ours
        (_nobody_else)."""
        with self.door_lock:  # the worker and a caller about to show a door URL, at once
            log_dir = self.runtime.config.log_dir
            if self.key is None or inbox_key_stamp(log_dir) is None:
                if self._nobody_else():
                    retire_inbox_key(log_dir)
                self.key = load_inbox_key(log_dir)
                self.key_stamp = inbox_key_stamp(log_dir)
            else:
                self._refresh_key()

    def _nobody_else(self) -> bool:
        """No other live process of ours has an entry in the registry (pending or readable
        forms, or a door URL or inbox session handed out). Whatever holds the port does not
        count: a program that is not ours there never keeps the key alive."""
        with self.scan_lock:  # the registry's cache: two scans at once would both prune it
            return not self.registry.scan()[1]

    def current_key(self):
        """The key as its file holds it now, for making or checking a ticket, a session or a
        proof: one stat, and a read when another process replaced it since (two that start at
        once may each retire the other's). None before this process has loaded one."""
        if self.key is not None:
            try:
                self._refresh_key()
            except InboxUnavailable:
                pass  # the file went bad: the key in hand serves until the worker gives up
        return self.key

    def _refresh_key(self) -> bool:
        """Read the key again when the file was replaced or retired under us (two processes
        that started at once may each have made one; the last one to finish retires it); whether
        it changed."""
        log_dir = self.runtime.config.log_dir
        if inbox_key_stamp(log_dir) == self.key_stamp:
            return False
        key = load_inbox_key(log_dir)  # a new one when it was retired
        with self.lock:
            changed, self.key, self.key_stamp = key != self.key, key, inbox_key_stamp(log_dir)
        return changed

    def share_url(self):
        """The inbox on another device: a one-time way in through the person's tunnel, or None
        without a public URL."""
        if not self.runtime.config.public_url or self.key is None:
            return None
        return self.ticket_url()

    def entry_url(self, interview):
        """Where the form's link leads: the inbox with a fresh ticket, while there is one that
        proved it is ours; else None."""
        if self.for_form(interview)["url"] is None:
            return None
        return self.ticket_url()

    def ticket_url(self) -> str:
        """A one-time way into the inbox (a ticket the inbox exchanges for a session), at the
        door's origin."""
        self._handing_out()
        return "%s/inbox/enter/%s" % (self.door_base(), inbox_pass(self.current_key(), "ticket", INBOX_TICKET_SECONDS))

    def redeem(self, ticket: str):
        """{session, verifier} for a valid ticket not used before by any process of ours, or
        None: a session and the page's verifier for it (page_verifier), under one key even if
        another process replaces it meanwhile."""
        key = self.current_key()
        nonce = None if key is None else inbox_pass_nonce(key, "ticket", ticket)
        if nonce is None or not use_ticket_once(self.registry.folder, ticket.partition(".")[0], nonce):
            return None
        self._handing_out()
        session = inbox_pass(key, "session", INBOX_SESSION_SECONDS)
        return {"session": session, "verifier": page_verifier(key, inbox_pass_nonce(key, "session", session))}


# -- holding the door's port --------------------------------------------------------------


class DoorHolding:
    """The inbox's part that holds the door's port: bound by every process of ours that
    showed a door URL (share_door_port), or, where the port cannot be shared, by one, whose
    holder the others prove; the URL a form shows; which port serves a token through the door.
    A part of Inbox, whose __init__ holds the state."""

    def door_origin(self, interview):
        """The front door's origin while it serves `interview`'s form: a process of ours holds
        the port and our registry file names the form (written now if it does not yet). None
        when it cannot: the inbox is off or unavailable, or a foreign program holds the port."""
        if not self.port or self.unavailable is not None or self.closed:
            return None
        # Our registry file names the form before its door URL goes out: any process holding
        # the door may be the one the link reaches.
        if token_digest(interview.token) not in self.published or (self.server is None and self.holder is None):
            if not self._open_door():
                return None
        elif self.server is None and not self._proof_fresh():
            # The caller may hold its own lock (a task's status): it gets the last proof's
            # answer at once, and the worker proves the holder again.
            with self.changed:
                self.reprove = True
                self.changed.notify_all()
        if self.server is None and not (self.holder == "ours" and self.holder_door):
            return None
        self._handing_out()
        return self.door_base()

    def _handing_out(self) -> None:
        with self.changed:
            if not self.handed_out:
                self.handed_out = True  # the entry says this process lives on
                self._entry_changed()

    def _open_door(self) -> bool:
        """A form's first URL: our registry file names it, and, the first time, the port is
        bound or its holder proved. False when there can be no inbox here. The rows are taken
        and the forms told outside the door's lock (an interview's lock is never taken under
        it)."""
        entry = self._own_entry()
        with self.door_lock:
            try:
                self._load_key()
                self._write_entry(entry)
                first = self.server is None and self.holder is None
                if first:
                    self._try_to_hold(True)
            except InboxUnavailable as problem:
                self._give_up(problem)
                return False
        if first:
            self._scan(force=True)  # the form's "N more waiting" is right from its first state
            self._touch_forms()
        return True

    def door_base(self) -> str:
        return self.runtime.config.public_url or "http://localhost:%d" % self.port

    def door_is_ours(self) -> bool:
        """Whether a process of ours holds the door now: this one, or a holder proved lately."""
        return self.server is not None or (self.holder == "ours" and self._proof_fresh())

    def _proof_fresh(self) -> bool:
        # A proof goes stale: the holder may have changed since.
        return time.monotonic() - self.probed <= INBOX_RETRY_SECONDS + INBOX_PROBE_SECONDS

    def owner_port(self, digest: str):
        """The loopback port of the other process that serves the form whose token has this
        digest (token_digest), as it wrote it in our registry beside the digest. None for a
        form nobody serves (the folder's changed files are read first: the form may be new)."""
        with self.lock:
            others = list(self.others)
        entry = next((entry for entry in others if digest in entry["forms"] and entry["port"] not in (None, self.port)),
                     None)
        if entry is None:
            with self.scan_lock:  # the registry's cache is shared with the worker's scans
                entry = self.registry.lookup(digest)
        if entry is None or entry["port"] in (None, self.port):
            return None
        return entry["port"]

    def hold_here(self) -> bool:
        """The `inbox` command: bind the port now and hold it until close(), pending or not;
        False when something holds it already. InboxUnavailable when there can be no inbox."""
        self._load_key()
        if self._try_to_hold(True):
            self._touch_forms()
        if self.server is None:
            return False
        with self.changed:
            self.hold = True  # the entry says this process lives on
            self._entry_changed()
        return True

    def _try_to_hold(self, probe: bool) -> bool:
        """Bind the port; failing that, with `probe`, learn who holds it (plan_inbox_step says
        when). Whether it bound or learned who holds it: the caller then tells the forms, once
        out of the door's lock."""
        if self.server is not None:
            return False  # held already: a second socket of ours would be let in beside it
        try:
            if not port_is_free(INBOX_HOST, self.port):
                raise OSError("address in use")
            server = LoopbackListener.bind(
                lambda address, family: inbox_server_class()(self, address, family), INBOX_HOST, self.port)
        except OSError as error:
            if not probe:
                return False
            # "free" here: the holder exited between the bind and the probe; the next try binds.
            self._refresh_key()
            verdict, door = probe_inbox_holder(self.port, self.key)
            with self.lock:
                self.holder, self.holder_door, self.probed = verdict, door, time.monotonic()
                report = verdict == "foreign" and not self.reported_foreign
                self.reported_foreign = self.reported_foreign or report
            if report:
                self.log.event("inbox-port-taken", "warning", port=self.port, error=str(error),
                               detail="held by a program that is not ask-user-rich; forms work as before")
            return True
        handoff = self._open_handoff(server)
        with self.changed:
            self.server, self.handoff = server, handoff
            self.holder, self.holder_door = "ours", True
        # serve_forever wakes every poll_interval only to see whether it should stop; _release
        # wakes it at once instead (stop_serving), so it need not look often.
        server.start("ask-user-rich-inbox-http", INBOX_RETRY_SECONDS)
        self.log.event("inbox-holding", port=self.port, handoff="yes" if handoff is not None else "no")
        return True

    def _open_handoff(self, server):
        """This process's end of the handoff (DoorHandoff), or None where pages' connections
        are relayed instead."""
        if not can_hand_over(self.registry.folder):
            return None
        try:
            return DoorHandoff(self.registry.handoff_path(os.getpid()), server)
        except OSError as error:
            self.log.event("door-handoff-unavailable", "warning", error=str(error))
            return None

    def _release(self) -> None:
        with self.changed:
            server, self.server = self.server, None
            handoff, self.handoff = self.handoff, None
            self.changed.notify_all()  # the pages' streams end
        if handoff is not None:  # first: every connection passed here is served
            handoff.close()
        if server is not None:
            server.stop(patience=None)  # before the sockets close under the loops
            server.close()
            self.owners.close()
            self.log.event("inbox-released", port=self.port)


# -- what a form and the inbox page show --------------------------------------------------


class InboxListing:
    """The inbox's part that reads the registry and says what waits: a form's `inbox` and
    `share`, the listing and its stream, all from the registry folder and this process's own
    interviews. A part of Inbox, whose __init__ holds the state."""

    def beside(self, interview, state: dict) -> dict:
        """A /state JSON with the form's `inbox` added, while there is an inbox here, and
        `share`, the form's address through the person's tunnel, while the door serves it there
        (the form's "Open on another device")."""
        if not self.port or self.unavailable is not None:
            return state
        state = dict(state, inbox=self.for_form(interview))
        public = self.runtime.config.public_url
        url = self.runtime.form_url(interview)
        if public and url.startswith(public + "/"):
            state["share"] = url
        return state

    def for_form(self, interview) -> dict:
        """The /state JSON's `inbox`: how many other interviews wait anywhere, and the inbox's
        address when whoever holds it proved it is ours (else null: the key goes nowhere else)."""
        with self.lock:
            others = sum(len(entry["interviews"]) for entry in self.others)
            others += len(self.pending) - (1 if interview.id in self.pending else 0)
            ours = self.key is not None and self.door_is_ours()
            return {"waiting": others, "url": "/api/s/%s/inbox" % interview.token if ours else None}

    def listing(self) -> dict:
        """Every pending interview of every live process, oldest first, and who holds the port."""
        own = self._own_entry(agents=True)
        with self.lock:
            entries = [own] + list(self.others)
        rows, door = [], self.door_base()
        for entry in entries:
            for row in entry["interviews"]:
                # The registry names each form's own port; the page opens it through the door,
                # whose assets are this version's: a form of another version, at its own port.
                through = entry["port"] and entry["version"] == __version__
                url = form_url(door, row["url"].rsplit("/s/", 1)[-1]) if through else row["url"]
                rows.append(dict(row, agent=row.pop("agent", entry["agent"]), project=entry["project"],
                                 pid=entry["pid"], url=url))
        rows.sort(key=lambda row: (row["createdAt"], row["pid"], row["interviewId"]))
        listing = {"interviews": rows, "holder": os.getpid() if self.server is not None else None}
        if self.runtime.config.public_url:
            listing["share"] = True  # the page offers "Open on another device"
        return listing

    def _own_entry(self, agents: bool = False) -> dict:
        """This process's registry entry; with `agents`, each row names its own interview's
        agent (the file names one for the process: the newest)."""
        with self.lock:
            interviews = sorted(self.pending.values(), key=lambda interview: interview.created)
            forms = sorted(token_digest(interview.token) for interview in self.forms.values())
        form_server = self.runtime.form_server
        rows, agent = [], None
        for interview in interviews:
            row = inbox_row(interview, self.runtime.own_url(interview))  # the holder lists it at the front door
            if row is not None:
                if agents:
                    row["agent"] = interview.agent
                rows.append(row)
                agent = interview.agent or agent
        return {"pid": os.getpid(), "startedAt": self.started_at, "agent": agent,
                "project": self.project, "interviews": rows, "holds": self.handed_out or self.hold,
                "port": form_server.port if form_server is not None else None, "forms": forms,
                "version": __version__}

    def fresh_listing(self) -> dict:
        """listing(), with another process's entry written a moment ago in it: the folder is
        looked at (one stat) before answering, not only at the worker's next look."""
        self._scan()
        return self.listing()

    def _scan(self, force: bool = False) -> None:
        with self.scan_lock:
            self._scan_now(force)

    def _scan_now(self, force: bool) -> None:
        """Read the other processes' entries again when the folder changed (one stat), when a
        page is watching, when forced, and at least every INBOX_RETRY_SECONDS (for processes
        that died without a word)."""
        folder_stamp = self.registry.folder_stamp()
        now = time.monotonic()
        if not (force or self.streams or folder_stamp != self.folder_stamp
                or now - self.scanned >= INBOX_RETRY_SECONDS):
            return
        self.folder_stamp, self.scanned = folder_stamp, now
        stamp, entries = self.registry.scan()
        with self.changed:
            if stamp != self.stamp:
                self.stamp, self.others = stamp, entries
            # What every form here shows: the interviews pending anywhere.
            total = sum(len(entry["interviews"]) for entry in self.others) + len(self.pending)
            touch, self.total = total != self.total, total
            if self.streams:
                self.revision += 1  # the page's stream compares what it would send
                self.changed.notify_all()
        if touch:
            self._touch_forms()

    def _touch_forms(self) -> None:
        """Let this process's forms' event streams send the new `inbox` count."""
        with self.lock:
            interviews = list(self.pending.values())
        for interview in interviews:
            interview.nudge()

    def stream(self, request) -> None:
        """Server-Sent Events: the listing at once and whenever it changes, a ping every 15 s."""
        sent = None

        def next_events():
            nonlocal sent
            if sent is not None:
                with self.changed:
                    seen = self.revision
                    changed = self.changed.wait_for(
                        lambda: self.revision != seen or self.closed or self.server is None, SSE_PING_SECONDS
                    )
                    if self.closed or self.server is None:
                        return None
                if not changed:
                    return []
            data = json.dumps(self.listing())
            if data == sent:
                return []
            sent = data
            return [("inbox", data)]

        with self.changed:
            self.streams += 1
            self.changed.notify_all()
        try:
            request.send_event_stream(next_events)
        finally:
            with self.changed:
                self.streams -= 1
                self.changed.notify_all()


# -- the inbox's worker -------------------------------------------------------------------


class InboxWorker:
    """The inbox's part that runs: what the hub tells it, and the one worker thread that
    writes the registry entry, binds and reads the folder as plan_inbox_step decides, until
    nothing is left to do or the process exits. A part of Inbox, whose __init__ holds the
    state."""

    def observe(self, interview) -> None:
        """An interview was created, changed what the registry lists, or settled."""
        if not self.port:
            return
        pending = interview.is_pending()
        with self.changed:
            if self.closed:
                return
            if pending:
                self.pending[interview.id] = interview
            elif self.pending.pop(interview.id, None) is None:
                return
            self.forms[interview.id] = interview  # settled, it stays readable for a while
            self._entry_changed()

    def _entry_changed(self) -> None:
        """The registry entry is to be written again: the worker runs, and looks now (call with
        the lock held)."""
        self.dirty = True
        self._start_worker()
        self.changed.notify_all()

    def _start_worker(self) -> None:
        """Call with the lock held."""
        if self.worker is None and self.unavailable is None and self._active():
            self.worker = threading.Thread(target=self._run, name="ask-user-rich-inbox", daemon=True)
            self.worker.start()

    def _active(self) -> bool:
        return bool(self.forms) or self.hold or self.handed_out or (self.server is not None and self.streams > 0)

    def _readable_until(self, now: float):
        """Drop the forms that are no longer readable (call with the lock held); when the next
        of the others stops being readable (None: none will on its own)."""
        until = None
        for interview_id, interview in list(self.forms.items()):
            settled = interview.settled_monotonic
            if settled is None:
                continue
            end = settled + SETTLED_RETENTION_SECONDS
            if end <= now:
                del self.forms[interview_id]
                self.dirty = True
            else:
                until = end if until is None else min(until, end)
        return until

    def _run(self) -> None:
        times = {"lastWrite": float("-inf"), "lastScan": float("-inf"), "nextTry": float("-inf")}
        try:
            self._load_key()
        except InboxUnavailable as problem:
            self._give_up(problem)
            return
        while True:
            with self.lock:
                interviews = list(self.pending.values())
            forms = any(interview.activity()["streams"] > 0 for interview in interviews)
            with self.changed:
                step = plan_inbox_step(dict(times, **self._facts(forms)))
                if step.wait:
                    self.changed.wait(step.wait)
                    continue
                if step.write:
                    self.dirty = False
            if step.finish:
                self._wind_down()
                with self.changed:
                    if self.closed or not self._active():
                        self.worker = None
                        return
                continue
            try:
                self._act(step, times)
            except InboxUnavailable as problem:
                self._give_up(problem)
                return

    def _facts(self, forms: bool) -> dict:
        """What plan_inbox_step decides from (call with the lock held)."""
        now = time.monotonic()
        return {"now": now, "readableUntil": self._readable_until(now), "closed": self.closed,
                "active": self._active(), "streams": self.streams, "formsOpen": forms,
                "holding": self.server is not None, "holderKnown": self.holder is not None,
                "probed": self.probed, "dirty": self.dirty, "reprove": self.reprove}

    def _act(self, step, times: dict) -> None:
        entry = self._own_entry() if step.write else None  # the rows: outside the door's lock
        with self.door_lock:
            if step.write:
                times["lastWrite"] = time.monotonic()
                if not self._write_entry(entry):
                    times["lastWrite"] += INBOX_RETRY_SECONDS  # the disk may have room by then
            if step.bind:
                learned = self._try_to_hold(step.probe)
                times["nextTry"] = time.monotonic() + INBOX_RETRY_SECONDS
                if step.probe:
                    with self.lock:
                        self.reprove = False
            scan = step.scan or step.write
            if scan:
                times["lastScan"] = time.monotonic()
                if self.server is not None:
                    self._refresh_key()  # what it serves under, and checks the pages' proofs with
        # Outside the door's lock: the forms are nudged, and a caller that holds an interview's
        # lock may be waiting on the door's lock for its URL.
        if step.bind and learned:
            self._touch_forms()
        if scan:
            self._scan(force=step.write)

    def _give_up(self, problem: InboxUnavailable) -> None:
        self._release()
        self.registry.remove()
        with self.changed:
            self.unavailable = str(problem)
            self.worker = None
        # Logged once it holds: a form's /state read after this line has no inbox in it.
        self.log.event("inbox-unavailable", "warning", reason=str(problem))

    def _write_entry(self, entry: dict) -> bool:
        """Write `entry` (_own_entry(), taken before the door's lock); whether the entry is as
        it should be now. When it could not be written, it is marked to be written again and
        the failure logged once, until a write succeeds."""
        if not (entry["interviews"] or entry["forms"] or entry["holds"]):
            self.registry.remove()
            self.published = frozenset()
            return True
        try:
            self.registry.write(entry)
        except InboxWriteFailed as problem:
            with self.changed:
                self.dirty = True
            if not self.write_failed:
                self.log.event("inbox-write-failed", "warning", reason=str(problem),
                               effect="tried again every %d s" % INBOX_RETRY_SECONDS)
            self.write_failed = True
            return False
        self.published = frozenset(entry["forms"])
        if self.write_failed:
            self.write_failed = False
            self.log.event("inbox-written-again")
        return True

    def _wind_down(self) -> None:
        """Nothing left to do: the entry goes, and the port with it; and the key, when no other
        process has an interview pending."""
        with self.door_lock:
            self.registry.remove()
            self.published = frozenset()
        self._release()
        if self.key is not None and self._nobody_else():
            retire_inbox_key(self.runtime.config.log_dir)
            self.key = self.key_stamp = None
        with self.lock:
            self.others, self.stamp, self.folder_stamp, self.scanned = [], None, None, float("-inf")

    def close(self) -> None:
        """At exit: the entry goes, and the port with it."""
        with self.changed:
            self.closed = True
            self.changed.notify_all()
            worker = self.worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(INBOX_PROBE_SECONDS + 1)
        self.registry.remove()
        self._release()
        if self.key is not None and self._nobody_else():
            retire_inbox_key(self.runtime.config.log_dir)


# -- the inbox: its parts together --------------------------------------------------------


class Inbox(InboxWorker, InboxListing, DoorHolding, InboxKeyRing):
    """This process's part in the inbox and the front door: its registry entry, the bind
    attempts, and, while it holds the port, the inbox server, which is also the door to every
    form. One worker thread does all of it, and exists only while the process has forms that
    can be read (pending, or settled less than 30 minutes ago), holds the port for a page that
    is open, has shown a door URL or an inbox session (then until it exits: the link may be
    followed later), or runs the `inbox` command. What the worker does next is
    plan_inbox_step's decision. Its parts are under their own banners above: InboxKeyRing,
    DoorHolding, InboxListing, InboxWorker."""

    def __init__(self, runtime, hold: bool = False) -> None:
        self.runtime = runtime
        self.log = runtime.log
        self.port = runtime.config.inbox_port
        self.hold = hold  # the `inbox` command: hold the port until closed, pending or not
        # A door URL or an inbox way in went out: the port is held until this process exits, so
        # that following it later never reaches a program that took the port meanwhile.
        self.handed_out = False
        self.registry = InboxRegistry(runtime.config.log_dir, runtime.log, self.port)
        self.project = working_folder()
        self.started_at = iso_utc(time.time())
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.pending: dict = {}  # interview id -> Interview, this process's pending ones
        self.forms: dict = {}  # interview id -> Interview, every form here the door may serve
        self.published = frozenset()  # the token digests our registry file names now
        # One registry write, scan or bind attempt at a time: the worker's, a door request's
        # (an unknown token: read the folder again) or a caller's about to show a door URL.
        self.door_lock = threading.RLock()
        self.answer_seconds = DOOR_ANSWER_SECONDS  # the door's patience with an owner
        self.owners = OwnerConnections()  # the door's kept connections to them
        self.dirty = False
        self.worker = None
        self.closed = False
        self.key = None
        self.key_stamp = None  # inbox_key_stamp() when the key was read
        self.unavailable = None  # why the inbox cannot be kept here, once found
        self.server = None  # a LoopbackListener while this process holds the port
        self.handoff = None  # DoorHandoff: this process's end, while it holds the port
        self.holder = None  # None: unknown; "ours", "foreign" or "free" as last probed
        self.holder_door = False  # that holder serves the front door (an older one does not)
        self.probed = float("-inf")  # when it was probed last
        self.reprove = False  # a URL was shown on a stale proof: the worker proves it again
        self.reported_foreign = False
        self.write_failed = False  # the last write of the entry failed (a full disk)
        self.scan_lock = threading.Lock()  # the worker and a listing request may both scan
        self.streams = 0
        self.stamp = None  # the other entries' names, times and sizes at the last full scan
        self.others: list = []  # the entries of the other live processes, as last scanned
        self.total = 0  # the interviews pending anywhere, as the forms were last told
        self.folder_stamp = None  # the registry folder's mtime at the last full scan
        self.scanned = float("-inf")
        self.revision = 0  # grows at every look at the folder while a page is watching


# ============================================================================================
# Runtime: the hub, the archive, the log and the lazily started form server, together
# ============================================================================================

class Runtime:
    """What the MCP server, the command line and the tests drive."""

    def __init__(self, config: Config, log: Log | None = None) -> None:
        self.config = config
        self.log = log if log is not None else Log(config.log_dir)
        self.archive = Archive(config.log_dir, self.log)
        swept = sweep_stray_temporaries(config.log_dir)
        if swept:
            self.log.event("temporaries-removed", count=swept, reason="left by a process killed mid-write")
        self.hub = SessionHub(self.log, self.archive, on_change=self._observe)
        self.server_lock = threading.Lock()
        self.form_server = None  # a LoopbackListener once a form needs it
        self.origin = None  # the form server's, once started: kept after it stops
        self.inbox = Inbox(self)
        self.notices = Notices(config, self.log, project=working_folder(), form_url=self.form_url)
        self.away = None  # the AwayPolicy, made for the first interview it holds

    def _observe(self, interview: Interview) -> None:
        self.inbox.observe(interview)
        self.notices.observe(interview)
        if self.away is not None:
            self.away.observe(interview)

    def base_url(self) -> str:
        """Start the form server on first need; its base URL (this process's own, which the
        front door forwards to). FormServerUnavailable if it cannot bind."""
        with self.server_lock:
            if self.form_server is None:
                host, port = self.config.host, self.config.port
                try:
                    listener = LoopbackListener.bind(
                        lambda address, family: form_server_class()(self, address, family), host, port)
                except OSError as error:
                    self.log.event("http-bind-failed", "error", host=host, port=port, error=str(error))
                    raise FormServerUnavailable(host, port, str(error))
                listener.start("ask-user-rich-http", 0.2)
                self.form_server = listener
                self.log.event("http-started", host=host, port=listener.port,
                               addresses=",".join(server.server_address[0] for server in listener.servers))
                self.origin = "http://%s:%d" % (self.config.public_host, listener.port)
            return self.origin

    def own_url(self, interview: Interview) -> str:
        """The form at this process's own form server, which always works (the front door
        forwards to it)."""
        return form_url(self.origin, interview.token)

    def form_url(self, interview: Interview) -> str:
        """The address every result, progress message, status, opener and inbox row shows:
        the front door's while it serves this form, else this process's own."""
        return form_url(self.inbox.door_origin(interview) or self.origin, interview.token)

    def open_interview(self, args, internal=None, **details) -> Interview:
        """The one way to start an interview (the tools, demo/ask, doctor): validate
        `ask_user_rich` arguments (InvalidInterview), start the form server if need be
        (FormServerUnavailable) and open the interview; its call options are in `options`,
        with the `internal` ones that no tool call can set (a permission ask's kind).
        `details` go to SessionHub.create as they are."""
        spec, options = validate_interview(args)
        self.base_url()
        interview = self.hub.create(spec, dict(options, **(internal or {})), away=self._away_setting(), **details)
        self._watch_away(interview)
        return interview

    def _away_setting(self):
        config = self.config
        return None if config.away == AWAY_POLICIES[0] else (config.away, config.away_after)

    def _watch_away(self, interview: Interview) -> None:
        if interview.away is None:
            return
        with self.server_lock:
            if self.away is None:
                self.away = AwayPolicy(self.hub, self.notices)
        self.away.watch(interview)

    def resume_away(self) -> None:
        """Take over the interviews that the away policy held in a server that has ended (the
        client restarted it): each pending again here, under the same id, with its clock and the
        person's answers as they were, so that the policy acts on time and a call that waits for
        it gets its result. Its form has a new address (the old one's token is never written
        down), which the inbox lists."""
        if self._away_setting() is None:
            return
        for entry in self.archive.orphaned_away():
            try:
                spec, created, sign = entry["spec"], float(entry["createdAt"]), float(entry["lastSign"])
                given = {qid: {"answer": value["answer"], "via": value.get("via")}
                         for qid, value in (entry.get("given") or {}).items()}
                if self.hub.get(entry["interviewId"]) is not None or self.archive.find(entry["interviewId"]):
                    continue
                self.base_url()
                interview = self.hub.create(spec, agent=entry.get("agent"), away=self._away_setting(),
                                            interview_id=entry["interviewId"])
            except (KeyError, TypeError, ValueError, AttributeError):
                self.log.event("away-record-unreadable", "warning", interview=entry.get("interviewId"))
                continue
            except FormServerUnavailable:
                return
            interview.resume(created, sign, given)
            self.log.event("away-resumed", about=interview, interview=interview.id)
            self._watch_away(interview)

    def append_questions(self, session_id, questions, note=None) -> dict:
        reply = self.hub.append(session_id, questions, note)
        interview = self.hub.require(session_id)
        self.notices.follow_ups(interview)
        # The URL asks the inbox, whose worker holds its own lock while it nudges this
        # interview: never asked under the interview's lock.
        return dict(reply, url=self.form_url(interview))

    def close(self) -> None:
        self.notices.close()
        if self.away is not None:
            self.away.close()
        self.inbox.close()
        self.hub.close()
        with self.server_lock:
            server, self.form_server = self.form_server, None
        if server is not None:
            server.stop()
            for one in server.servers:
                one.replies.wait_done(REPLY_DRAIN_SECONDS)
            server.close()
            self.log.event("http-stopped")
        self.log.close()


# ============================================================================================
# Tool definitions: instructions, schemas and the results' shapes
# ============================================================================================

def each_of(names: tuple, table: dict) -> dict:
    """`table` in the order of `names`, which must be its keys exactly: a name added to one and
    not the other stops this module from importing, so the two never drift apart."""
    if set(table) != set(names):
        raise ValueError("the table's keys and the names differ: %s" % sorted(set(table) ^ set(names)))
    return {name: table[name] for name in names}


RULES_TEXT = """Rules (a call that breaks one is rejected with every problem listed, and nothing is shown to the user):
- ids (question ids, option ids, recommended and dependsOn entries) match %(id_pattern)s: ASCII only, no spaces or accents ("secao-tabs", not "seção-tabs"). Labels, headers and markdown take any Unicode.
- Question ids are unique in the interview (appends included); option ids are unique in their question.
- recommended names option ids, never labels: a single id, or an array of ids when multiSelect is true. Several ids on a single-select question are rejected.
- kind "rank": the user orders every option. It needs at least 2 options, takes no multiSelect and no textInput (allowOther is ignored there); its recommended is the full order, an array holding every option id exactly once.
- A question with no options and allowOther false cannot be answered and is rejected.
- dependsOn lists ids of earlier questions only (not itself, not a later one).
- Unknown fields are rejected (a typo such as "multiselect" must not silently change the interview).
- timeoutSeconds is an integer from 1 to %(max_timeout)d; delivery is %(deliveries)s.""" % {
    "id_pattern": ID_PATTERN, "max_timeout": MAX_TIMEOUT_SECONDS, "deliveries": spoken_list(DELIVERIES)}

AFTER_TEXT = """After the call:
- status "submitted": read every answer and its notes (notes often change the meaning). "deferred" and "needs-info" are open questions, not consent: do not act as if the recommendation was accepted; answer the needs-info notes and ask again when it matters.
- status "declined": the user chose not to answer now; do not proceed as if they agreed.
- Each answer's by says who decided: "person", or "away-policy" when nobody answered in time and the person's own away policy took your recommendation (the summary's first line and away say so). Go on with it, and tell the user that you went with the recommendation and that they can tell you if they disagree. Mark a question needsPerson: true when only the person may decide it.
- Answers and the general notes may carry attachments (screenshots, logs): read each file at its absolute path with your own file tools.
- status "awaiting": show the url to the user, then call await_user_answers with the sessionId to wait for the submit.
- Follow-up questions while the form is open (or while a call waits): append_questions, not a second interview.
- A task id "<sessionId>.<n>" names its interview: pass it (or the part before the dot) as sessionId."""

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
    "ask-user-rich puts a structured interview to the user in a local web form and returns every "
    "answer. Prefer ask_user_rich over the built-in AskUserQuestion when a round has more than "
    "4 questions or options, long question text, code or layout previews, a recommendation you "
    "want to argue for, or a ranking. Put every question of the round in one call, give each a "
    "recommended option with a rationale, and use markdown in body/rationale/preview. "
    + LANGUAGE_TEXT + " Every rule that rejects a call is in ask_user_rich's description.\n\n"
    + AFTER_TEXT
)

def fields_schema(fields: tuple, properties: dict, **schema) -> dict:
    """An object schema whose properties are the validator's table `fields`, in its order:
    each field the validator takes is one the schema names, and the reverse, or this module
    does not import."""
    return dict({"type": "object", "additionalProperties": False}, **schema, properties=each_of(fields, properties))


_ID = {"type": "string", "pattern": ID_PATTERN}
_MARKDOWN = {"type": "string", "description": "Markdown."}

QUESTION_SCHEMA = fields_schema(
    QUESTION_FIELDS,
    {
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
            "items": fields_schema(
                OPTION_FIELDS,
                {
                    "id": dict(_ID, description="Unique in the question. ASCII."),
                    "label": {"type": "string", "minLength": 1},
                    "description": dict(_MARKDOWN, description="Markdown: what it means, the trade-off."),
                    "preview": dict(
                        _MARKDOWN,
                        description="Markdown shown in a box beside the option, e.g. a fenced code block.",
                    ),
                    "textInput": fields_schema(
                        TEXT_INPUT_FIELDS,
                        {
                            "placeholder": {"type": "string"},
                            "required": {
                                "type": "boolean",
                                "description": "The answer cannot be submitted with this option picked and the field empty.",
                            },
                        },
                        description="A text field shown when this option is picked (not on rank).",
                    ),
                },
                required=["id", "label"],
            ),
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
        "needsPerson": {
            "type": "boolean",
            "default": False,
            "description": "true: only the person may answer it; the person's away policy never takes its recommendation.",
        },
    },
    required=["id", "header"],
)

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
        "status": {"type": "string", "enum": list(ANSWER_COUNT_KEYS)},
        "selected": {"type": "array", "items": {"type": "string"}},
        "selectedLabels": {"type": "array", "items": {"type": "string"}},
        "optionTexts": {"type": "object", "additionalProperties": {"type": "string"}},
        "other": _NULLABLE_TEXT,
        "ranked": {"type": ["array", "null"], "items": {"type": "string"}},
        "rankedLabels": {"type": ["array", "null"], "items": {"type": "string"}},
        "notes": _NULLABLE_TEXT,
        "followedRecommendation": {"type": ["boolean", "null"]},
        "attachments": ATTACHMENTS_SCHEMA,
        # Not required: results archived before they were written lack them.
        "by": {"type": "string", "enum": [BY_PERSON, BY_AWAY_POLICY],
               "description": "Who decided: the person, or their away policy (nobody answered in time)."},
        "via": {"type": ["string", "null"], "enum": list(ANSWER_VIAS) + [None],
                "description": "Where the person gave the answer; null when nobody did."},
    },
}

# A compact result's rows: the same fields, none required but the id and the status, no header;
# `by` and `via` left out mean the person, where the result came.
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
        "status": {"type": "string", "enum": [SUBMITTED, DECLINED, CANCELLED, "awaiting"]},
        "summary": {"type": "string", "description": "One line per question; read it first."},
        "interviewId": {"type": "string"},
        "title": {"type": "string"},
        "via": {"type": "string", "enum": ["browser", "elicitation", "app", VIA_AWAY_POLICY]},
        "submittedAt": {"type": "string"},
        "durationSeconds": {"type": "number"},
        "counts": {
            "type": "object",
            "properties": {
                key: {"type": "integer"} for key in ANSWER_COUNT_KEYS.values()
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
        "away": {
            "type": "object",
            "required": ["policy", "afterMinutes", "decided"],
            "description": "Present when the person's away policy settled it: nobody answered in time.",
            "properties": {
                "policy": {"type": "string", "enum": list(AWAY_POLICIES[1:])},
                "afterMinutes": {"type": "number"},
                "decided": {"type": "array", "items": {"type": "string"},
                            "description": "The questions whose recommendation it took."},
            },
        },
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
    "pattern": SESSION_ID_PATTERN,
    "description": "The sessionId (= interviewId) from ask_user_rich, or a task id \"<sessionId>.<n>\".",
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


DELIVERY_MEANINGS = {
    "browser": "open the form and wait",
    "link": "return the URL at once (then call await_user_answers)",
    "elicitation": "the client's own form for small flat interviews (no rank, no textInput; any interview in a host that shows this form in its dialog); falls back to browser",
}


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
        "inputSchema": fields_schema(
            ASK_FIELDS,
            {
                "title": {"type": "string", "minLength": 1, "description": "The interview's title."},
                "intro": dict(_MARKDOWN, description="Markdown shown on an intro screen before the first question."),
                "questions": {"type": "array", "minItems": 1, "items": QUESTION_SCHEMA},
                "delivery": {
                    "type": "string",
                    "enum": list(DELIVERIES),
                    "default": DELIVERIES[0],
                    "description": " ".join(
                        "%s%s: %s." % (name, " (default)" if name == DELIVERIES[0] else "", meaning)
                        for name, meaning in each_of(DELIVERIES, DELIVERY_MEANINGS).items()
                    ),
                },
                "timeoutSeconds": _TIMEOUT,
                "language": {
                    "type": "string",
                    "description": "The language of the form's own words (buttons, help); default: the browser's.",
                },
            },
            required=["title", "questions"],
        ),
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
        "inputSchema": fields_schema(
            APPEND_FIELDS,
            {
                "sessionId": _SESSION_ID,
                "questions": {"type": "array", "minItems": 1, "items": FOLLOW_UP_SCHEMA},
                "note": dict(_MARKDOWN, description="Markdown shown to the user with the new questions."),
            },
            required=["sessionId", "questions"],
        ),
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
        "inputSchema": fields_schema(
            AWAIT_FIELDS, {"sessionId": _SESSION_ID, "timeoutSeconds": _TIMEOUT}, required=["sessionId"]
        ),
        "outputSchema": RESULT_SCHEMA,
        "annotations": ANNOTATIONS,
        "_meta": claude_code_hints(
            "wait for the user's answers to an open interview; get the answers, collect the result after a link"
        ),
    },
)
TOOL_NAMES = frozenset(tool["name"] for tool in TOOLS)


# -- MCP Apps: the form inside the host ------------------------------------------------------
#
# For a client that declares the io.modelcontextprotocol/ui extension: ask_user_rich names the
# form's resource (the host shows it once the call returns), and five app-only tools give the
# form inside the host what its HTTP routes give the browser form. Hosts hide app-only tools from
# the model; clients that did not declare the extension never see them.

# The form shows images only as data: URLs (the thumbnails of the person's uploads, data: images
# in markdown); a resource that declares no CSP gets `img-src 'none'` from hosts, which refuses
# those too, and blob: URLs as well. So it declares exactly data:, and loads nothing else.
def app_resource_meta() -> dict:
    return {"ui": {"prefersBorder": True, "csp": {"resourceDomains": ["data:"]}}}


APP_RESOURCE = {
    "uri": APP_RESOURCE_URI,
    "name": "ask-user-rich-form",
    "title": "Ask User Rich form",
    "description": "The interview form, shown inside the conversation by hosts that render MCP Apps.",
    "mimeType": APP_MIME_TYPE,
    "_meta": app_resource_meta(),
}
APP_STATUS_META = "ask-user-rich/status"  # an app-only tool's result: the status its route answers
# ask_user_rich's result (and an app-rendered elicitation) hands the app {sessionId, token, key}
# here in `_meta`, which hosts give the app and not the model: the key is what the app-only tools
# require, so that a model that reads the form's link cannot answer in the person's place.
APP_META = "ask-user-rich/app"
_TOKEN = {"type": "string", "description": "The token of the form's URL (/s/<token>) in ask_user_rich's result."}
_APP_KEY = {"type": "string", "description": "The app's key, which the host hands the form; not given to the model."}
_COUNT = {"type": "integer", "minimum": 0}


def app_tool(name: str, title: str, description: str, properties: dict, required=(), read_only=False) -> dict:
    return {
        "name": name,
        "title": title,
        "description": description + " Called by the ask-user-rich form shown in the conversation, not by the model.",
        "inputSchema": {
            "type": "object",
            "required": ["sessionId", "token", "appKey"] + list(required),
            "properties": dict({"sessionId": _SESSION_ID, "token": _TOKEN, "appKey": _APP_KEY}, **properties),
        },
        "annotations": dict(ANNOTATIONS, readOnlyHint=read_only),
        "_meta": {"ui": {"resourceUri": APP_RESOURCE_URI, "visibility": ["app"]}},
    }


APP_TOOLS = (
    app_tool("form_state", "The form's interview and its state",
             "The interview's state (GET /api/s/<token>/state); with full, also its questions "
             "(GET /api/s/<token>).", {"full": {"type": "boolean", "default": False}}, read_only=True),
    app_tool("form_submit", "Submit the form's answers",
             "Submit the answers (POST /api/s/<token>/submit): the same body, checks and error codes.",
             {"answers": {"type": "object"}, "generalNotes": {"type": "string"},
              "specVersion": {"type": "integer"}, "declined": {"type": "boolean"},
              "attachments": {"type": "object"}}, required=("answers",)),
    app_tool("form_progress", "Report the form's answered counts",
             "The counts the form shows and the answers so far (POST /api/s/<token>/progress).",
             {"answered": _COUNT, "deferred": _COUNT, "needsInfo": _COUNT, "open": _COUNT,
              "followUpsUnseen": _COUNT, "answers": {"type": "object"}}),
    app_tool("form_attach", "Upload a file to a note, one chunk at a time",
             "One chunk (at most 512 KiB of base64) of a file (POST /api/s/<token>/attachments). The "
             "first call opens the upload and returns its uploadId; the call that completes size "
             "bytes stores the file and returns {id, name, mimeType, bytes}.",
             {"name": {"type": "string"}, "mimeType": {"type": "string"},
              "size": dict(_COUNT, maximum=ATTACHMENT_MAX_BYTES), "offset": _COUNT,
              "data": {"type": "string", "maxLength": APP_CHUNK_MAX_CHARS, "contentEncoding": "base64"},
              "uploadId": {"type": "string"}}, required=("data",)),
    app_tool("form_detach", "Remove an uploaded file",
             "Remove an upload while the interview is pending (DELETE /api/s/<token>/attachments/<id>).",
             {"id": {"type": "string"}}, required=("id",)),
)
APP_TOOL_NAMES = frozenset(tool["name"] for tool in APP_TOOLS)


APP_AFTER_TEXT = (
    "\n- Here the form is shown in the conversation: the call returns at once (status awaiting, "
    "reason \"%s\"); call await_user_answers when the user says they have answered, or at once "
    "to wait." % APP_SHOWN_REASON
)


def with_app_resource(tool: dict) -> dict:
    """ask_user_rich as a client that renders MCP Apps lists it: naming the form's resource,
    also under the older flat key that some hosts still read, and saying that it returns at once."""
    shown = dict(tool, description=tool["description"] + APP_AFTER_TEXT)
    shown["_meta"] = dict(tool["_meta"], ui={"resourceUri": APP_RESOURCE_URI})
    shown["_meta"]["ui/resourceUri"] = APP_RESOURCE_URI
    return shown


APP_HOST_TOOLS = (with_app_resource(TOOLS[0]),) + TOOLS[1:] + APP_TOOLS


def declares_apps(capabilities) -> bool:
    """Whether a client's capabilities declare MCP Apps with the form's mime type."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    declared = extensions.get(APPS_EXTENSION) if isinstance(extensions, dict) else None
    mime_types = declared.get("mimeTypes") if isinstance(declared, dict) else None
    return isinstance(mime_types, list) and APP_MIME_TYPE in mime_types


def declares_app_elicitation(capabilities) -> bool:
    """Whether a client renders an MCP App in place of its form elicitation (app-rendered
    elicitation): it declared MCP Apps, form elicitation, and `elicitation` in its UI
    extension."""
    if not declares_apps(capabilities) or "form" not in elicitation_modes(capabilities):
        return False
    return isinstance(capabilities["extensions"][APPS_EXTENSION].get("elicitation"), dict)


def apps_extension_for(capabilities) -> dict:
    """What we declare of MCP Apps to a client: app-rendered elicitation where it renders it."""
    return {"elicitation": {}} if declares_app_elicitation(capabilities) else {}


def tools_for(apps: bool) -> list:
    return list(APP_HOST_TOOLS if apps else TOOLS)


def app_tool_result(status: int, body) -> dict:
    """An app-only tool's result: its route's JSON body with the status as `statusCode` (also
    in `_meta`, where older forms read it); a refusal is an error result carrying the same
    body, `code` included."""
    shown = dict(body or {}, statusCode=status)
    result = {
        "content": [{"type": "text", "text": json.dumps(shown)}],
        "structuredContent": shown,
        "_meta": {APP_STATUS_META: status},
    }
    if status >= 400:
        result["isError"] = True
    return result


def shown_in_host_result(interview: Interview, url: str) -> dict:
    """ask_user_rich for a host that shows the form in the conversation: it returns at once,
    since hosts show an app only once its call has returned."""
    text = (
        "%s\nThe user answers the interview %s in the form shown in the conversation (or in a "
        "browser: %s). When the user says they have answered, call await_user_answers with "
        "sessionId %s; or call it now to wait for the submit."
        % (APP_SHOWN_REASON, quote(interview.title), url, quote(interview.id))
    )
    return dict(awaiting_result(interview, url, APP_SHOWN_REASON, text), _meta={APP_META: app_meta(interview)})


def app_meta(interview: Interview) -> dict:
    """What the form inside the host needs to reach its interview, key included."""
    return {"sessionId": interview.id, "token": interview.token, "key": interview.app_key()}


def error_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def answers_result(result: dict, spec: dict) -> dict:
    """A settled interview as the agent receives it: fitted to its context here, where the
    result leaves for the agent, and nowhere else (the form, the archive and the command line
    keep the whole result); the summary, then the JSON without it (fit_result)."""
    result, text = fit_result(result, spec)
    return {
        "content": [
            {"type": "text", "text": result["summary"]},
            {"type": "text", "text": text},
        ],
        "structuredContent": result,
    }


def awaiting_result(interview: Interview, url: str, reason: str, text=None) -> dict:
    """A pending interview's result: its link and why the call returned before the answers;
    `text`, what the agent reads, says to show the link unless given."""
    text = text or (
        "%s\nThe interview %s is waiting at:\n%s\n\nShow this link to the user, then call "
        "await_user_answers with sessionId %s to wait for the submit."
        % (reason, quote(interview.title), url, quote(interview.id))
    )
    structured = {
        "status": "awaiting",
        "sessionId": interview.id,
        "url": url,
        "reason": reason,
        "summary": text,
    }
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


# What an archive record holds beside the result: the interview itself, its tasks, who asked
# and where (the history's), and a permission ask's decision.
ARCHIVE_ONLY_FIELDS = frozenset({"interview", "tasks", "agent", "project", "kind", "permission"})


def archived_result(record: dict) -> dict:
    """A result read back from the archive, with its summary rebuilt."""
    spec = record.get("interview") or {"questions": []}
    result = {"summary": ""}
    # Not what the record keeps for this server and its history alone.
    result.update((key, value) for key, value in record.items() if key not in ARCHIVE_ONLY_FIELDS)
    # Archived before attachments existed: the shape the outputSchema promises all the same.
    result.setdefault("generalAttachments", [])
    for row in result.get("answers") or []:
        if isinstance(row, dict):
            row.setdefault("attachments", [])
    result.setdefault("archivePath", None)
    result["summary"] = summarize(result, spec)
    return result


def archived_answers(record: dict) -> dict:
    """The tool result of an interview found in the archive."""
    return answers_result(archived_result(record), record.get("interview") or {"questions": []})


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


def progress_message(facts: dict, limit=None) -> str:
    """`Waiting for answers to "T": 3 of 12 answered, form open (1:05 elapsed)`. Within `limit`
    characters where it can be: the title gives way first, down to 8 characters; then the end."""
    hours, rest = divmod(facts["elapsedSeconds"], 3600)
    clock = "%d:%02d:%02d" % (hours, rest // 60, rest % 60) if hours else "%d:%02d" % divmod(rest, 60)
    counts = ": %d of %d answered, %s (%s elapsed)" % (facts["answered"], facts["total"], facts["form"], clock)
    prefix = "Waiting for answers to "
    room = CUT_HEADER if limit is None else min(CUT_HEADER, limit - len(prefix) - len(counts) - 2)
    while room >= 8:
        shown = prefix + quote(cut(facts["title"], room)) + counts
        if limit is None or len(shown) <= limit:
            return shown
        room -= 1  # escapes made the quoted title longer than its characters
    return cut(prefix + quote(cut(facts["title"], CUT_HEADER)) + counts, max(limit, 1))


def elicitation_modes(capabilities) -> frozenset:
    """The elicitation modes a client declared: `{}` is form only (2025-06-18)."""
    declared = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(declared, dict):
        return frozenset()
    modes = frozenset(mode for mode in ("form", "url") if isinstance(declared.get(mode), dict))
    return modes or frozenset({"form"})


# ============================================================================================
# Per-call objects and the two protocol eras
# ============================================================================================

class ToolCall:
    """One tools/call as the tools see it: everything a tool may ask of the client for this
    call, declared here with the `initialize` era's behaviour as the default (no retries, no
    tasks: the call blocks in place and answers once). Each era overrides what it does
    differently; the tools never ask which era they are in.

    The call's request id, its cancellation, and progress notifications on its token, counted
    1, 2, 3, … for this call, are the same in both eras. A call holds only what it uses: the
    transport, the log, and, per era, what that era adds."""

    def __init__(self, transport: "JsonRpcStdio", log: Log, request_id, progress_token,
                 cancellation: Cancellation) -> None:
        self.transport = transport
        self.log = log
        self.request_id = request_id
        self.progress_token = progress_token
        self.cancellation = cancellation
        self.progress_count = 0

    @property
    def client_info(self) -> dict:
        """The client's clientInfo (its name and version)."""
        return {}

    @property
    def reports_progress(self) -> bool:
        """Whether progress() reaches anyone, so that a wait builds its messages only then."""
        return self.progress_token is not None

    def elicitation_modes(self) -> frozenset:
        """The elicitation modes ("form", "url") the client declared for this call."""
        return frozenset()

    def shows_apps(self) -> bool:
        """Whether the client declared MCP Apps for this call: it shows the form itself."""
        return False

    def renders_app_elicitation(self) -> bool:
        """Whether the client shows an MCP App in its form elicitation's place."""
        return False

    def resumed_interview(self, hub: SessionHub):
        """The interview a retry of a multi round-trip call continues; None: start afresh."""
        return None

    def retrying(self, key: str) -> bool:
        """Whether this call is the retry that brings the client's answer to input `key`."""
        return False

    def progress(self, facts: dict, url=None) -> None:
        """A progress notification of `facts` (progress_snapshot()); `url` (the form's link)
        ends the message."""
        if self.progress_token is None:
            return
        self.progress_count += 1
        self.transport.notify("notifications/progress", {
            "progressToken": self.progress_token, "progress": self.progress_count,
            "message": progress_message(facts) + (". Form: " + url if url else ""),
        })

    def about_to_block(self, interview: Interview) -> None:
        """The call is about to wait for the user: the place where an era may answer now."""

    def elicit(self, key: str, params: dict, interview: Interview):
        """Ask the client to elicit (`params` of elicitation/create) under `key`; returns
        (outcome, response): "answered" with the response, or "settled" (the web form was
        submitted first), "cancelled" or "shutdown" with None."""
        return "cancelled", None

    def elicitation_finished(self, key: str, interview: Interview) -> None:
        """The elicitation under `key` is over: tell the client, where the era has a way."""

    def input_required(self, needed: InputRequired, tool: str, arguments: dict) -> dict:
        """The result that ends the call asking for `needed`, where the era retries calls;
        finish() sends it as such."""
        raise JsonRpcError(-32603, "Internal error: this protocol era has no multi round-trip requests")

    def finish(self, result, result_type: str = "complete") -> None:
        """The call's response (`result_type`: "complete", or "input_required" for what
        input_required() made); none after a cancellation, which the client expects."""
        if result is not None and not self.cancellation.is_set:
            self.transport.respond(self.request_id, result)


class LegacyCall(ToolCall):
    """A call of the `initialize` era: the capabilities the client declared at initialize,
    and elicitation by sending `elicitation/create` requests and waiting for their
    responses."""

    def __init__(self, transport: "JsonRpcStdio", log: Log, request_id, progress_token,
                 cancellation: Cancellation, handshake) -> None:
        super().__init__(transport, log, request_id, progress_token, cancellation)
        self.handshake = handshake  # () -> what initialize said: {capabilities, clientInfo}
        self.url_elicitations: dict = {}  # our elicitation key -> elicitationId

    @property
    def client_info(self) -> dict:
        return self.handshake()["clientInfo"]

    def elicitation_modes(self) -> frozenset:
        return elicitation_modes(self.handshake()["capabilities"])

    def shows_apps(self) -> bool:
        return declares_apps(self.handshake()["capabilities"])

    def renders_app_elicitation(self) -> bool:
        return declares_app_elicitation(self.handshake()["capabilities"])

    def elicit(self, key: str, params: dict, interview: Interview):
        """Send `elicitation/create` and wait, with no timeout of ours, for the first of: the
        client's response, a submit through the web form, the call's cancellation or
        shutdown. A request still open then is cancelled at the client, so its dialog goes
        away."""
        import uuid

        params = dict(params)
        if params.get("mode") == "url":
            params["elicitationId"] = self.url_elicitations[key] = str(uuid.uuid4())
        responses = []
        answered = threading.Event()

        def on_response(message: dict) -> None:
            responses.append(message)
            answered.set()
            interview.wake()

        request_id = self.transport.request("elicitation/create", params, on_response)
        self.log.event("elicitation-request", about=interview, interview=interview.id, request=request_id,
                       elicitation=params.get("elicitationId"))
        with interview.waiter(self.cancellation) as waiter:
            outcome = waiter.wait(answered=answered.is_set)
        in_app = outcome == "settled" and interview.settled_result()["via"] == "app"
        if in_app:
            # Our form in the host's dialog submitted, and answers the dialog next: its answer
            # closes the dialog as the host expects, rather than our cancellation.
            answered.wait(APP_ANSWER_SECONDS)
        self.transport.forget(request_id)
        if outcome == "answered":
            return outcome, responses[0]
        if outcome == "settled" and responses:
            return outcome, None
        if outcome in ("settled", "cancelled"):
            reason = ("the form was submitted in the %s" % ("conversation" if in_app else "browser")
                      if outcome == "settled" else "the tool call ended")
            self.transport.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})
        return outcome, None

    def elicitation_finished(self, key: str, interview: Interview) -> None:
        """notifications/elicitation/complete for a URL elicitation whose interview settled."""
        elicitation_id = self.url_elicitations.pop(key, None)
        settled = interview.settled_result() is not None
        if elicitation_id is not None and settled:
            self.transport.notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})


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

    def __init__(self, task_id: str, interview_id: str, message: str, cancellation, now: float,
                 interview=None, facts=None, form_url=None) -> None:
        self.id = task_id
        self.interview_id = interview_id
        self.interview = interview  # None for a task recovered from an earlier process
        self.form_url = form_url  # (interview) -> its form's address, with the interview
        self.status = "working"
        self.message = message
        self.facts = facts  # the progress the message reports, if it is one: a short line cuts its title
        self.created = now
        self.updated = now
        self.result = None
        self.error = None
        self.cancellation = cancellation
        self.settled_monotonic = None
        self.seen = None  # what the user had done at the last look, for the poll interval
        self.active_monotonic = time.monotonic()

    def status_message(self) -> str:
        """While working: the progress, how to reach the interview, and the form's link last,
        so that the model and the person can get to the form even when no browser opened.
        Within STATUS_LINE_CHARS, link whole: a longer one names one tool, then shortens the
        title (the counts and the time say more)."""
        if self.status != "working" or self.interview is None:
            return self.message
        session, link = quote(self.interview_id), " Form: " + self.form_url(self.interview)
        message = "%s; sessionId %s (append_questions, await_user_answers).%s" % (self.message, session, link)
        if len(message) <= STATUS_LINE_CHARS:
            return message
        tail = "; sessionId %s (await_user_answers).%s" % (session, link)
        room = STATUS_LINE_CHARS - len(tail)
        return (cut(self.message, max(room, 1)) if self.facts is None else progress_message(self.facts, room)) + tail

    def poll_interval(self, now: float) -> int:
        """2 s while the user is busy or the task is young; then longer, up to 30 s, for every
        minute nothing changes: a person away from the form needs no poll every 2 s."""
        if self.status != "working" or self.interview is None:
            return TASK_POLL_MS
        counts_revision, facts = progress_snapshot(self.interview)
        signature = (counts_revision, facts["answered"], facts["total"], facts["form"])
        if signature != self.seen:
            self.seen = signature
            self.active_monotonic = now
        idle_minutes = int((now - self.active_monotonic) // 60)
        if idle_minutes < 1:
            return TASK_POLL_MS
        return min(TASK_POLL_MAX_MS, TASK_POLL_MS << min(idle_minutes, 8))

    def view(self, now=None) -> dict:
        shown = {
            "taskId": self.id,
            "status": self.status,
            "statusMessage": self.status_message(),
            "createdAt": iso_utc(self.created),
            "lastUpdatedAt": iso_utc(self.updated),
            "ttlMs": None,
            "pollIntervalMs": self.poll_interval(time.monotonic() if now is None else now),
        }
        if self.result is not None:
            shown["result"] = self.result
        if self.error is not None:
            shown["error"] = self.error
        return shown


class TaskRegistry:
    """Every task of this process, and those of an earlier one recovered from the archive."""

    def __init__(self, log: Log, archive: Archive, form_url, clock=time.monotonic, interviews=None) -> None:
        self.log = log
        self.archive = archive
        self.form_url = form_url  # (interview) -> its form's address, for the status line
        self.clock = clock  # the poll interval's minutes, injectable for its tests
        # (interview id) -> the interview here, or None: one taken over from the process that
        # made a task (Runtime.resume_away) goes on being that task's.
        self.interviews = interviews
        self.lock = threading.Lock()
        self.tasks: dict = {}
        self.counter = 0

    def create(self, interview: Interview, message: str, cancellation, facts=None) -> dict:
        """A working task on `interview`; `facts`: the progress `message` reports, if it is one."""
        with self.lock:
            self.counter += 1
            task = Task("%s.%d" % (interview.id, self.counter), interview.id, message, cancellation,
                        time.time(), interview, facts, self.form_url)
            task.active_monotonic = self.clock()
            self.tasks[task.id] = task
            view = task.view(self.clock())
        # On disk before the task is answered.
        interview.add_task(task.id, lambda ids: self.archive.record_tasks(interview.id, ids))
        self.log.event("task-created", about=task.cancellation, task=task.id, interview=interview.id)
        return view

    def update(self, task_id: str, facts: dict) -> None:
        """A working task's progress (progress_snapshot()'s facts)."""
        message = progress_message(facts)
        with self.lock:
            task = self.tasks.get(task_id)
            if task is None or task.status != "working" or task.message == message:
                return
            task.message, task.facts = message, facts
            task.updated = time.time()
        self.log.event("task-updated", "debug", about=task.cancellation, task=task_id)

    def complete(self, task_id: str, result: dict) -> None:
        with self.lock:
            task = self.tasks.get(task_id)
            if task is None or task.status != "working":
                return
            task.status = "completed"
            task.result = result
            summary = (result.get("structuredContent") or {}).get("summary")
            if isinstance(summary, str):
                task.message = summary.split("\n", 1)[0]
            self._settled(task)
        self.log.event("task-completed", about=task.cancellation, task=task_id)

    def cancel(self, task_id) -> None:
        task = self._find(task_id)
        with self.lock:
            if task.status != "working":
                return
            task.status = "cancelled"
            if task.interview is not None:
                task.message = "Cancelled by the client; the form stays open at %s" % task.form_url(task.interview)
            self._settled(task)
        self.log.event("task-cancelled", about=task.cancellation, task=task.id)
        task.cancellation.cancel()

    def get(self, task_id) -> dict:
        task = self._find(task_id)
        with self.lock:
            return task.view(self.clock())

    def _settled(self, task: Task) -> None:
        task.updated = time.time()
        task.settled_monotonic = time.monotonic()

    def _find(self, task_id) -> Task:
        """The task, recovered from the archive if an earlier process made it; else -32602."""
        horizon = time.monotonic() - SETTLED_RETENTION_SECONDS
        with self.lock:
            for key in [key for key, task in self.tasks.items() if self._expired(task, horizon)]:
                del self.tasks[key]
            task = self.tasks.get(task_id)
        if task is None:
            task = self._recover(task_id)
        if task is None:
            raise JsonRpcError(-32602, "unknown task %s" % quote(task_id))
        return task

    @staticmethod
    def _expired(task: Task, horizon: float) -> bool:
        """Settled for the retention time, and so is its interview: a task whose interview is
        still pending here stays what it was (cancelled, timed out), however old."""
        if task.settled_monotonic is None or task.settled_monotonic >= horizon:
            return False
        settled = None if task.interview is None else task.interview.settled_monotonic
        return task.interview is None or (settled is not None and settled < horizon)

    def _recover(self, task_id: str):
        """A task made by a process that is gone, from what it left on disk: the archive entry
        of its interview (completed), or the task index of one still pending when that process
        ended (failed). server.log is never read: it may be off, rotated, or hold any text a
        title or a user agent put there. A task of another live process is not ours to tell."""
        interview_id = task_interview_id(task_id)
        if interview_id is None:
            return None
        record = self.archive.find(interview_id)
        made = record.get("tasks") if record is not None else None
        if not names_task(made, task_id):
            made = self.archive.find_tasks(interview_id)
            if not names_task(made, task_id):
                return None
            if made.get("instance") == self.archive.owner["instance"]:
                return None  # ours, and no longer kept
        if another_live_server(made, self.archive.owner):
            return None
        resumed = self.interviews(interview_id) if self.interviews is not None and record is None else None
        if resumed is not None and resumed.is_pending():
            return self._go_on(task_id, resumed)
        task = Task(task_id, interview_id, "", Cancellation(), time.time())
        if record is not None:
            task.status = "completed"
            task.result = modern_envelope(archived_answers(record))
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


    def _go_on(self, task_id: str, interview: Interview) -> Task:
        """An earlier process's task on an interview taken over here: working until it
        settles, then completed with its result, as if that process had not ended."""
        facts = progress_snapshot(interview)[1]
        task = Task(task_id, interview.id, progress_message(facts), Cancellation(), time.time(), interview, facts,
                    self.form_url)
        with self.lock:
            task = self.tasks.setdefault(task_id, task)

        def settled() -> None:
            interview.wait_until(lambda: None if interview.is_pending() else True)
            result = interview.settled_result()
            if result is not None:
                self.complete(task_id, modern_envelope(answers_result(result, interview.spec)))

        threading.Thread(target=settled, name="ask-user-rich-task-%s" % task_id, daemon=True).start()
        return task


def names_task(entry, task_id: str) -> bool:
    """Whether an archive entry's or a task index's record of tasks names `task_id`."""
    return isinstance(entry, dict) and isinstance(entry.get("ids"), list) and task_id in entry["ids"]


class ModernCall(ToolCall):
    """A call of the 2026-07-28 era, served from that request's own `_meta`: no requests to
    the client (an elicitation ends the call with `input_required`, and the retry brings the
    answer), and, when the request declares the tasks extension, a call about to block
    answers at once with a task that the rest of the call reports into."""

    def __init__(self, transport: "JsonRpcStdio", log: Log, request_id, request: ModernRequest,
                 params: dict, cancellation: Cancellation, resumed, tasks: "TaskRegistry",
                 seal: RequestStateSeal, log_scope: "LogRouting") -> None:
        super().__init__(transport, log, request_id, progress_token(params), cancellation)
        self.tasks = tasks
        self.seal = seal
        self.log_scope = log_scope  # its log messages end where its response or task is sent
        self.request = request
        self.resumed = resumed  # (interview id, input key) from a verified requestState
        responses = params.get("inputResponses")
        self.input_responses = responses if isinstance(responses, dict) else {}
        self.task_id = None
        self.interviews: set = set()  # the interviews it worked on (LogRouting)

    @property
    def client_info(self) -> dict:
        return self.request.client_info

    def owns(self, about) -> bool:
        """Whether an event about `about` belongs to this call: its request, its cancellation
        (its task's too), or an interview it worked on."""
        return about is self.request or about is self.cancellation or about in self.interviews

    @property
    def reports_progress(self) -> bool:
        return self.progress_token is not None or self.task_id is not None

    def elicitation_modes(self) -> frozenset:
        return elicitation_modes(self.request.capabilities)

    def shows_apps(self) -> bool:
        return declares_apps(self.request.capabilities)

    def renders_app_elicitation(self) -> bool:
        return declares_app_elicitation(self.request.capabilities)

    def resumed_interview(self, hub: SessionHub):
        return None if self.resumed is None else hub.require(self.resumed[0])

    def retrying(self, key: str) -> bool:
        return self.resumed is not None and self.resumed[1] == key

    def progress(self, facts: dict, url=None) -> None:
        """Into the task once there is one (the request, answered, has no token left to
        report on); else a progress notification on the request's token."""
        if self.task_id is not None:
            self.tasks.update(self.task_id, facts)
        else:
            super().progress(facts, url)

    def about_to_block(self, interview: Interview) -> None:
        if not self.request.tasks or self.task_id is not None:
            return
        facts = progress_snapshot(interview)[1]
        self.interviews.add(interview)
        view = self.tasks.create(interview, progress_message(facts), self.cancellation, facts)
        self.log_scope.end(self)
        # Answered: from here on only tasks/cancel stops the call, never a late
        # notifications/cancelled for this request id.
        self.transport.end_call(self.request_id, self.cancellation)
        self._answer(view, "task")
        self.task_id = view["taskId"]

    def elicit(self, key: str, params: dict, interview: Interview):
        if self.retrying(key):
            response = self.input_responses.get(key)
            if isinstance(response, dict) and response.get("action") in ("accept", "decline", "cancel"):
                return "answered", {"result": response}
        if interview.settled_result() is not None:
            return "settled", None
        raise InputRequired(interview, {key: {"method": "elicitation/create", "params": params}})

    def input_required(self, needed: InputRequired, tool: str, arguments: dict) -> dict:
        (key,) = needed.requests
        state = self.seal.seal(needed.interview.id, tool, arguments, key)
        self.log.event("input-required", about=needed.interview, interview=needed.interview.id, key=key)
        return {"inputRequests": needed.requests, "requestState": state}

    def finish(self, result, result_type: str = "complete") -> None:
        if result is not None and not (self.task_id is None and self.cancellation.is_set):
            self._answer(result, result_type)

    def _answer(self, result: dict, result_type: str) -> None:
        """The one way out for what the call brings back, in the 2026-07-28 envelope: into its
        task once it has one, else as its response (a task's own view included)."""
        shown = modern_envelope(result, result_type)
        if self.task_id is not None:
            self.tasks.complete(self.task_id, shown)
        else:
            self.transport.respond(self.request_id, shown)


def progress_token(params: dict):
    """The request's `_meta.progressToken` when it is one a notification can carry, else None."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, (str, int, float)):
        return None
    return token


# ============================================================================================
# The tools: ask_user_rich, append_questions, await_user_answers
# ============================================================================================

def form_fields(arguments: dict) -> dict:
    """An app-only tool's arguments as the route's JSON body: all but those naming the interview."""
    return {key: value for key, value in arguments.items() if key not in ("sessionId", "token", "appKey")}


APP_KEY_REQUIRED = (
    "appKey must be the key the host handed the form shown in the conversation: these tools "
    "serve only that form. The form's link is for the person, in a browser."
)


class AppUploads:
    """Files the form inside the host sends one chunk per form_attach call: each upload's bytes
    so far, until the call that completes it stores the file as the upload route does."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.uploads: dict = {}  # upload id -> {interview, name, mimeType, size, data}

    def take(self, runtime, interview, arguments: dict):
        """(status, body): 202 {uploadId, received} while bytes are missing, then the route's."""
        import base64
        import binascii
        import io

        try:
            interview.check_pending()
        except InterviewError as error:
            self.drop(interview)
            return http_error(error)
        data = arguments.get("data")
        if not isinstance(data, str):
            raise HttpRefusal(400, "data must be the chunk's bytes in base64")
        if len(data) > APP_CHUNK_MAX_CHARS:
            raise HttpRefusal(413, "a chunk may be at most 512 KiB of base64")
        try:
            chunk = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise HttpRefusal(400, "data is not base64") from None
        upload = self.opened(interview, arguments)
        with self.lock:
            if arguments.get("offset", len(upload["data"])) != len(upload["data"]):
                raise HttpRefusal(400, "offset must be %d, the bytes received so far" % len(upload["data"]),
                                  code="upload-incomplete")
            upload["data"] += chunk
            if len(upload["data"]) < upload["size"]:
                return 202, {"uploadId": upload["id"], "received": len(upload["data"])}
            del self.uploads[upload["id"]]
        if len(upload["data"]) > upload["size"]:
            raise HttpRefusal(400, "the chunks hold more than size bytes", code="upload-incomplete")
        return form_attach(runtime, interview, upload["name"], upload["mimeType"], lambda: upload["size"],
                           io.BytesIO(bytes(upload["data"])))

    def drop(self, interview) -> None:
        """Forget the unfinished uploads of an interview that takes no more files."""
        with self.lock:
            for upload_id in [key for key, upload in self.uploads.items() if upload["interview"] == interview.id]:
                del self.uploads[upload_id]

    def opened(self, interview, arguments: dict) -> dict:
        """The upload a chunk continues, or the one its first chunk opens."""
        import secrets

        upload_id = arguments.get("uploadId")
        with self.lock:
            if upload_id is not None:
                upload = self.uploads.get(upload_id) if isinstance(upload_id, str) else None
                if upload is None or upload["interview"] != interview.id:
                    raise HttpRefusal(404, "no upload %s is open" % describe(upload_id))
                return upload
            name, size = arguments.get("name"), arguments.get("size")
            if not isinstance(name, str):
                raise HttpRefusal(400, "name is required: the file's name")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise HttpRefusal(400, "size must be the file's size in bytes")
            if size > ATTACHMENT_MAX_BYTES:
                raise HttpRefusal(413, ATTACHMENT_TOO_LARGE)
            if sum(1 for upload in self.uploads.values() if upload["interview"] == interview.id) >= APP_OPEN_UPLOADS:
                # Held in memory until complete: a few at a time (the form sends one after another).
                raise HttpRefusal(413, "at most %d uploads may be open at once" % APP_OPEN_UPLOADS,
                                  code="too-many-files")
            media_type = attachment_media_type(arguments.get("mimeType") if isinstance(arguments.get("mimeType"), str) else "")
            upload = {"id": secrets.token_hex(8), "interview": interview.id, "name": name,
                      "mimeType": media_type, "size": size, "data": bytearray()}
            self.uploads[upload["id"]] = upload
            return upload


class InterviewTools:
    """The three tools and their delivery (browser, link, form and URL elicitation, waiting).
    They talk to the client only through the call's ToolCall, whose interface is declared
    there; so every protocol era serves the same tools."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.log = runtime.log
        self.app_uploads = AppUploads()

    def call(self, name: str, arguments: dict, call):
        """The tools/call result, or None when the call ends without a response."""
        try:
            return TOOL_METHODS[name](self, arguments, call)
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

    def ask_user_rich(self, arguments: dict, call):
        interview = call.resumed_interview(self.runtime.hub) or self.runtime.open_interview(
            arguments, agent=agent_name(call.client_info)
        )
        delivery = interview.options["delivery"]
        if delivery == "link":
            self.runtime.notices.arm(interview, opened=False)
            return awaiting_result(interview, self.runtime.form_url(interview), "Browser opening was skipped (delivery=link).")
        if delivery == "elicitation":
            handled, result = self.deliver_by_elicitation(interview, call)
            if handled:
                return result
        elif call.shows_apps():
            self.log.event("shown-in-host", about=interview, interview=interview.id)
            self.runtime.notices.arm(interview, opened=True)  # as after a browser opened it
            self.watch_for_the_app(interview)
            return shown_in_host_result(interview, self.runtime.form_url(interview))
        return self.deliver_by_browser(interview, call, interview.options["timeoutSeconds"])

    def append_questions(self, arguments: dict, call):
        problems = check_session_arguments(arguments, APPEND_FIELDS)
        if problems.lines:
            raise InvalidInterview(problems.lines, FOLLOW_UP_HEADING)
        interview = self.runtime.hub.require(interview_id_of(arguments["sessionId"]))
        reply = self.runtime.append_questions(interview.id, arguments.get("questions"), arguments.get("note"))
        return appended_result(reply, interview.title)

    def await_user_answers(self, arguments: dict, call):
        problems = check_session_arguments(arguments, AWAIT_FIELDS)
        timeout = check_timeout(arguments.get("timeoutSeconds"), problems)
        if problems.lines:
            raise InvalidInterview(problems.lines, "Invalid arguments:")
        session_id = interview_id_of(arguments["sessionId"])
        interview = self.runtime.hub.get(session_id)
        if interview is None:
            record = self.runtime.archive.find(session_id)
            if record is None:
                raise UnknownInterview(session_id)
            self.log.event("archive-hit", interview=session_id)
            return archived_answers(record)
        return self.wait_for_answers(interview, call, timeout)

    def wait_for_answers(self, interview: Interview, call, timeout):
        """Block until the submit; the result, an awaiting result, or None (no response)."""
        result = interview.settled_result()
        if result is not None:
            return answers_result(result, interview.spec)
        call.about_to_block(interview)
        self.runtime.notices.arm(interview, opened=False)  # after a link: nothing was opened
        report = None
        if call.reports_progress:
            def report(facts: dict, first: bool) -> None:
                # Every report ends with the form's link: a terminal client shows only the
                # latest message, and the person must always have the way to the form.
                call.progress(facts, self.runtime.form_url(interview))

        result, why = self.runtime.hub.wait(
            interview, call.cancellation, timeout, report, self.runtime.config.progress_ms / 1000.0
        )
        if why == "settled":
            return answers_result(result, interview.spec)
        if why == "timeout":
            return awaiting_result(interview, self.runtime.form_url(interview), "Stopped waiting after %ds (timeoutSeconds)." % timeout)
        return None

    # -- the app-only tools: the form inside the host ------------------------------------

    def watch_for_the_app(self, interview: Interview) -> None:
        """Deliver the interview as `browser` would when no app has loaded it within the
        fallback delay: a host may declare MCP Apps and never show the form."""
        config = self.runtime.config

        def fall_back() -> None:
            if interview.wait_for_app(config.app_fallback) or not interview.is_pending():
                return
            self.log.event("app-fallback", "warning", about=interview, interview=interview.id,
                           seconds=config.app_fallback)
            opened, _ = open_browser(self.runtime.form_url(interview), config, self.log)
            self.runtime.notices.arm(interview, opened)

        threading.Thread(target=fall_back, name="ask-user-rich-app-fallback", daemon=True).start()

    def app_operation(self, arguments: dict, operation):
        """An app-only tool: the interview its sessionId, token and app key name, then what
        its route does; a refusal is an error result with the route's body."""
        session_id, token = arguments.get("sessionId"), arguments.get("token")
        try:
            if not (isinstance(session_id, str) and isinstance(token, str)):
                raise HttpRefusal(400, "sessionId and token must be the strings of ask_user_rich's result")
            interview = find_interview(self.runtime.hub, token)
            if interview is None or interview.id != interview_id_of(session_id):
                raise HttpRefusal(404, "not found")
            if not interview.holds_app_key(arguments.get("appKey")):
                raise HttpRefusal(403, APP_KEY_REQUIRED, code="app-key-required")
            return app_tool_result(*operation(interview))
        except HttpRefusal as refusal:
            return app_tool_result(refusal.status, refusal.body)

    def app_state(self, arguments: dict, call):
        def state(interview):
            shown = form_state(self.runtime, interview)
            if arguments.get("full") is not True:
                return 200, shown
            # The app loading the whole interview is its page view, and a sighting: the host
            # shows it in the conversation (it stops the notices, and the browser's fallback).
            interview.record_app_load()
            record_page_view(self.runtime, interview, "app in %s" % (agent_name(call.client_info) or "a host"),
                             seen=True)
            return 200, dict(form_payload(interview), **shown)

        return self.app_operation(arguments, state)

    def app_progress(self, arguments: dict, call):
        return self.app_operation(arguments, lambda interview: form_progress(
            self.runtime, interview, form_fields(arguments), "app"))

    def app_submit(self, arguments: dict, call):
        def submit(interview):
            payload = form_fields(arguments)
            if len(json.dumps(payload)) > MAX_BODY_BYTES:
                raise HttpRefusal(413, "body larger than %d bytes" % MAX_BODY_BYTES)
            status, body = form_submit(self.runtime, interview, lambda: payload, via="app")
            settled = interview.settled_result() if status == 200 else None
            # The app hands the summary to the host's model context.
            return status, dict(body, summary=settled["summary"]) if settled else body

        return self.app_operation(arguments, submit)

    def app_attach(self, arguments: dict, call):
        return self.app_operation(arguments, lambda interview: self.app_uploads.take(self.runtime, interview, arguments))

    def app_detach(self, arguments: dict, call):
        def detach(interview):
            if not isinstance(arguments.get("id"), str):
                raise HttpRefusal(400, "id must be the attachment's id")
            return form_detach(self.runtime, interview, arguments["id"])

        return self.app_operation(arguments, detach)

    # -- delivery -------------------------------------------------------------------------

    def deliver_by_browser(self, interview: Interview, call, timeout):
        """Open the form and wait; else ask the client to open it (URL elicitation); else
        return the link at once with every reason."""
        if call.retrying(URL_ELICITATION_KEY):  # the browser already failed in the first round
            return self.deliver_by_url_elicitation(interview, call, timeout, None)
        config = self.runtime.config
        url = self.runtime.form_url(interview)
        opened, why = open_browser(url, config, self.log)
        self.runtime.notices.arm(interview, opened)
        if opened:
            return self.wait_for_answers(interview, call, timeout)
        if config.open_browser and "url" in call.elicitation_modes():
            return self.deliver_by_url_elicitation(interview, call, timeout, why)
        return awaiting_result(interview, url, "Could not open the browser (%s)." % why)

    def deliver_by_url_elicitation(self, interview: Interview, call, timeout, why: str):
        """A URL-mode elicitation: the client shows the link and opens it with the user's
        consent; then wait as after a browser open. `why` the browser did not open: None in the
        retry of a multi round-trip call, which carries the user's answer to the first round."""
        count = len(interview.spec["questions"])
        params = {
            "mode": "url",
            "url": self.runtime.form_url(interview),
            "message": "Answer %d question%s in the form %s. No browser could be opened from "
            "here, so please open this link." % (count, "" if count == 1 else "s",
                                                 quote(interview.title)),
        }
        self.log.event("url-elicitation", about=interview, interview=interview.id)
        outcome, response = call.elicit(URL_ELICITATION_KEY, params, interview)
        if outcome == "settled":
            call.elicitation_finished(URL_ELICITATION_KEY, interview)
            return answers_result(interview.settled_result(), interview.spec)
        if outcome != "answered":
            return None
        action, detail = elicitation_action(response)
        self.log.event("url-elicitation-answer", about=interview, interview=interview.id,
                       action=action or "error", detail=detail)
        if action != "accept":
            reason = URL_DECLINED_TEXT if why is None else url_refusal_reason(why, action, detail)
            return awaiting_result(interview, self.runtime.form_url(interview), reason)
        result = self.wait_for_answers(interview, call, timeout)
        call.elicitation_finished(URL_ELICITATION_KEY, interview)
        return result

    def deliver_by_elicitation(self, interview: Interview, call):
        """The client's own form (form-mode elicitation): (handled, result). Not handled when
        the client declared no form elicitation, the interview is not flat, or the client
        failed the request: the caller then delivers by browser."""
        questions = interview.spec["questions"]
        in_app = call.renders_app_elicitation()
        if "form" not in call.elicitation_modes():
            unfit = "the client declared no form elicitation"
        else:
            unfit = elicitation_unfit(questions, app=in_app)
        if unfit is not None:
            self.log.event("elicitation-fallback", about=interview, interview=interview.id, why=unfit)
            return False, None
        params = {
            "mode": "form",
            "message": elicitation_message(interview.spec, questions),
            "requestedSchema": elicitation_schema(questions),
        }
        if in_app:
            # The host shows our form in its dialog (notes, attachments and all), and its own
            # form of the schema where the app cannot run. The app submits through form_submit,
            # then answers the dialog; the first settle wins, as with the browser form.
            params["_meta"] = {"ui": {"resourceUri": APP_RESOURCE_URI}, APP_META: app_meta(interview)}
        self.log.event("form-elicitation", about=interview, interview=interview.id, questions=len(questions),
                       app="yes" if "_meta" in params else "no")
        outcome, response = call.elicit(FORM_ELICITATION_KEY, params, interview)
        if outcome == "settled":
            return True, answers_result(interview.settled_result(), interview.spec)
        if outcome != "answered":
            return True, None
        action, detail = elicitation_action(response)
        if action is None:
            self.log.event("elicitation-fallback", about=interview, interview=interview.id,
                           why="the client failed the form elicitation: %s" % detail)
            return False, None
        if action == "accept":
            answers, ignored = answers_from_elicitation(questions, response["result"].get("content"))
            if ignored:
                self.log.event("elicitation-ignored", "warning", about=interview, interview=interview.id,
                               values=cut(", ".join(ignored), 400))
            status = "submitted"
        else:
            answers = {question["id"]: unanswered() for question in questions}
            status = "declined" if action == "decline" else "cancelled"
        self.log.event("form-elicitation-answer", about=interview, interview=interview.id, action=action)
        # None: the web form was submitted first, and its answers stand.
        result = self.runtime.hub.settle_without_form(interview, answers, status, "elicitation")
        return True, answers_result(result if result is not None else interview.settled_result(), interview.spec)


# What each tool runs: tool name -> InterviewTools method (the app's tools only for a host
# that shows apps: McpServer checks the name first).
TOOL_METHODS = MappingProxyType({
    "ask_user_rich": InterviewTools.ask_user_rich,
    "append_questions": InterviewTools.append_questions,
    "await_user_answers": InterviewTools.await_user_answers,
    "form_state": InterviewTools.app_state,
    "form_progress": InterviewTools.app_progress,
    "form_submit": InterviewTools.app_submit,
    "form_attach": InterviewTools.app_attach,
    "form_detach": InterviewTools.app_detach,
})


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


def interview_id_of(session_id: str) -> str:
    """The interview a sessionId names: a task id `<interviewId>.<n>` names its interview,
    since a model that has only the task id will pass that."""
    return task_interview_id(session_id) or session_id


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
# The MCP server: methods of each era, dispatch and shutdown
# ============================================================================================

class LogRouting:
    """Where a log event goes as notifications/message, decided from what it belongs to: the
    tool call whose worker thread logs it, and what it is `about` (Log.event).

    A 2026-07-28 call in flight gets the events that belong to it (its request, its
    cancellation and its task's, an interview it worked on) at or above the logLevel of its own
    `_meta`, until its response or task is sent and unless cancelled. The initialize era's
    logging/setLevel admits every other event, never one of the 2026-07-28 era: its requests,
    calls and tasks, and every interview one of its calls worked on, for as long as the process
    runs. Queued, never written from the logging thread: that may be a form server thread."""

    MODERN_REQUEST = object()  # about: a 2026-07-28 request refused before it was read

    def __init__(self, post) -> None:
        self.post = post  # (method, params): queue a notification
        self.lock = threading.Lock()
        self.legacy_level = None  # what logging/setLevel asked for
        self.calls: dict = {}  # request id -> ModernCall, until its response or task
        self.modern = None  # a WeakSet, at the first 2026-07-28 call: what belongs to that era
        self.worker = threading.local()  # .call: the ToolCall this worker thread runs

    def begin(self, call: ModernCall) -> None:
        """A 2026-07-28 call: its events reach it from now on."""
        import weakref

        with self.lock:
            if self.modern is None:
                self.modern = weakref.WeakSet()
            self.modern.add(call.cancellation)
            self.calls[_hashable(call.request_id)] = call

    def end(self, call) -> None:
        """No log message for a modern call after this: its response or its task comes next."""
        with self.lock:
            if self.calls.get(_hashable(call.request_id)) is call:
                del self.calls[_hashable(call.request_id)]

    def run_as(self, call) -> None:
        """This worker thread runs `call`: what it logs belongs to that call."""
        self.worker.call = call

    def _owners_of(self, about):
        """Under the lock: the 2026-07-28 calls in flight that an event about `about` belongs
        to, and whether it belongs to that era at all."""
        current = getattr(self.worker, "call", None)
        if isinstance(current, ModernCall) and about is not None and not current.owns(about):
            current.interviews.add(about)  # what a call's worker logs about is an interview it works on
            self.modern.add(about)
        owners = [call for call in self.calls.values() if call is current or call.owns(about)]
        return owners, bool(owners) or isinstance(current, ModernCall) or self._is_modern(about)

    def _is_modern(self, about) -> bool:
        return (isinstance(about, ModernRequest) or about is self.MODERN_REQUEST
                or (self.modern is not None and about in self.modern))

    @staticmethod
    def _asks_for(call, rank: int) -> bool:
        """Whether a call in flight asked, with the logLevel of its `_meta`, for an event of this rank."""
        asked = call.request.log_level
        return asked is not None and not call.cancellation.is_set and rank >= LOG_LEVELS.index(asked)

    def forward(self, level: str, event: str, fields: dict, about=None) -> None:
        """The Log's listener: the event as notifications/message, to whoever asked for it."""
        rank = LOG_LEVELS.index(level)
        with self.lock:
            owners, modern = self._owners_of(about)
            wanted = any(self._asks_for(call, rank) for call in owners) or (
                not modern and self.legacy_level is not None and rank >= LOG_LEVELS.index(self.legacy_level))
            if not wanted:
                return
            data = {"event": event}
            data.update((key, value) for key, value in fields.items() if key != "token")
            # Under the lock: once end() returns, nothing more is queued for that call, and
            # what was queued goes out before its response.
            self.post("notifications/message", {"level": level, "logger": SERVER_NAME, "data": data})


class McpServer:
    """The MCP methods over a JsonRpcStdio transport, in both protocol eras: a request whose
    `_meta` names its protocol version is served from that `_meta` alone (2026-07-28), any
    other from what `initialize` said. Each tools/call runs on a worker thread of its own and
    reaches the client through the ToolCall of its era."""

    def __init__(self, runtime: Runtime, reader, writer) -> None:
        self.runtime = runtime
        self.log = runtime.log
        self.transport = JsonRpcStdio(reader, writer, self.log, self)
        self.tools = InterviewTools(runtime)
        self.seal = RequestStateSeal()
        self.tasks = TaskRegistry(self.log, runtime.archive, runtime.form_url, interviews=runtime.hub.get)
        self.modern_enabled = runtime.config.protocol != "legacy"
        self.handshake_lock = threading.Lock()
        self.client_capabilities: dict = {}
        self.client_info: dict = {}
        self.routing = LogRouting(self.transport.post_notification)
        self.log.listener = self.routing.forward

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

    def handshake(self) -> dict:
        """What the `initialize` handshake told us about the client."""
        with self.handshake_lock:
            return {"capabilities": self.client_capabilities, "clientInfo": self.client_info}

    # -- requests -------------------------------------------------------------------------

    def handle_request(self, request_id, method: str, params: dict):
        meta = params.get("_meta")
        modern_meta = self.modern_enabled and isinstance(meta, dict) and META_VERSION in meta
        modern = modern_meta or (self.modern_enabled and method == "server/discover")
        if method == "initialize":
            modern = False
        if not modern:
            self.log.event("request", "debug", method=method, era="legacy")
            return self._serve(LEGACY_METHODS, request_id, method, params, None)
        request = None
        try:
            request = ModernRequest.parse(meta)
        finally:
            self.log.event("request", "debug", about=request or LogRouting.MODERN_REQUEST, method=method, era="modern")
        if request is None:  # a server/discover without the _meta every modern request carries
            raise JsonRpcError(-32602, "Invalid params: %s needs _meta with %s and %s, as every %s request"
                               % (method, quote(META_VERSION), quote(META_CAPABILITIES), MODERN_PROTOCOL))
        result = self._serve(MODERN_METHODS, request_id, method, params, request)
        return None if result is None else modern_envelope(result)

    def _serve(self, methods, request_id, method: str, params: dict, request):
        handler = methods.get(method)
        if handler is None:
            raise JsonRpcError(-32601, "Method not found: %s" % method)
        return handler(self, request_id, params, request)

    # Every method below takes (request_id, params, request): `request` is the ModernRequest
    # of a 2026-07-28 request, None in the initialize era. None returned: answered later.

    def ping(self, request_id, params: dict, request) -> dict:
        return {}

    def list_tools(self, request_id, params: dict, request) -> dict:
        return {"tools": tools_for(self.legacy_apps())}

    def legacy_apps(self) -> bool:
        """Whether the client declared MCP Apps at initialize."""
        return declares_apps(self.handshake()["capabilities"])

    def legacy_tool_call(self, request_id, params: dict, request):
        name, arguments = tool_call_arguments(params, self.legacy_apps())
        cancellation = self.transport.begin_call(request_id)
        call = LegacyCall(self.transport, self.log, request_id, progress_token(params), cancellation, self.handshake)
        return self.start_tool_call(call, name, arguments)

    def set_log_level(self, request_id, params: dict, request) -> dict:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise JsonRpcError(-32602, "Invalid params: level must be one of %s" % ", ".join(LOG_LEVELS))
        self.routing.legacy_level = level
        return {}

    def discover_refused(self, request_id, params: dict, request):
        # Only with the 2026-07-28 era turned off: an immediate "not found" makes the client
        # fall back to initialize at once instead of waiting out its connect timeout.
        raise JsonRpcError(-32601, "Method not found: server/discover (use initialize)")

    def modern_tool_call(self, request_id, params: dict, request: ModernRequest):
        name, arguments = tool_call_arguments(params, declares_apps(request.capabilities))
        resumed = None
        if params.get("requestState") is not None:
            resumed = self.seal.open(params["requestState"], name, arguments)
        cancellation = self.transport.begin_call(request_id)
        call = ModernCall(self.transport, self.log, request_id, request, params, cancellation, resumed,
                          self.tasks, self.seal, self.routing)
        self.routing.begin(call)
        return self.start_tool_call(call, name, arguments)

    def modern_list_tools(self, request_id, params: dict, request: ModernRequest) -> dict:
        one_page(params, "tool")
        # The list never changes while the process runs and holds nothing of the user, but it
        # depends on whether the request declared MCP Apps.
        return dict({"tools": tools_for(declares_apps(request.capabilities))}, **CALLER_CACHE_HINTS)

    # -- the form's resource, for hosts that render MCP Apps -------------------------------

    def list_resources(self, request_id, params: dict, request) -> dict:
        apps = self.legacy_apps() if request is None else declares_apps(request.capabilities)
        return {"resources": [dict(APP_RESOURCE)] if apps else []}

    def modern_list_resources(self, request_id, params: dict, request: ModernRequest) -> dict:
        one_page(params, "resource")
        return dict(self.list_resources(request_id, params, request), **CALLER_CACHE_HINTS)

    def read_resource(self, request_id, params: dict, request) -> dict:
        uri = params.get("uri")
        if uri != APP_RESOURCE_URI:
            raise JsonRpcError(-32002, "Resource not found: %s" % describe(uri), {"uri": uri})
        return {"contents": [{
            "uri": APP_RESOURCE_URI, "mimeType": APP_MIME_TYPE,
            "text": app_document().decode("utf-8"), "_meta": app_resource_meta(),
        }]}

    def list_resource_templates(self, request_id, params: dict, request) -> dict:
        return {"resourceTemplates": []}

    def modern_list_resource_templates(self, request_id, params: dict, request: ModernRequest) -> dict:
        one_page(params, "resource template")
        return dict(self.list_resource_templates(request_id, params, request), **CACHE_HINTS)

    def modern_read_resource(self, request_id, params: dict, request: ModernRequest) -> dict:
        # The same document for every caller while the process runs.
        return dict(self.read_resource(request_id, params, request), **CACHE_HINTS)

    def _task_id(self, params: dict) -> str:
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise JsonRpcError(-32602, "Invalid params: taskId must be a string, not %s" % describe(task_id))
        return task_id

    def get_task(self, request_id, params: dict, request: ModernRequest) -> dict:
        return self.tasks.get(self._task_id(params))

    def cancel_task(self, request_id, params: dict, request: ModernRequest) -> dict:
        self.tasks.cancel(self._task_id(params))
        return {}

    def update_task(self, request_id, params: dict, request: ModernRequest) -> dict:
        self.tasks.get(self._task_id(params))  # our tasks never ask for input: responses are ignored
        return {}

    def discover(self, request_id, params: dict, request) -> dict:
        apps = apps_extension_for(request.capabilities if request is not None else {})
        # The same for every caller but one that renders app elicitation, whose answer no
        # shared cache may hand another.
        hints = CALLER_CACHE_HINTS if apps else CACHE_HINTS
        return {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": {"tools": {}, "logging": {}, "resources": {},
                             "extensions": {TASKS_EXTENSION: {}, APPS_EXTENSION: apps}},
            "ttlMs": hints["ttlMs"],
            "cacheScope": hints["cacheScope"],
            "instructions": SERVER_INSTRUCTIONS,
        }

    def initialize(self, request_id, params: dict, request) -> dict:
        requested = params.get("protocolVersion")
        version = requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        with self.handshake_lock:
            self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
            self.client_info = client_info if isinstance(client_info, dict) else {}
        self.log.event(
            "initialize",
            protocol=version,
            requested=requested if isinstance(requested, str) else None,
            client=self.client_info.get("name"),
            elicitation=json.dumps(self.client_capabilities.get("elicitation")),
            apps=declares_apps(self.client_capabilities),
        )
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "logging": {}, "resources": {},
                             "extensions": {APPS_EXTENSION: apps_extension_for(self.client_capabilities)}},
            "serverInfo": dict(SERVER_INFO),
            "instructions": SERVER_INSTRUCTIONS,
        }

    def handle_notification(self, method: str, params: dict) -> None:
        if method == "notifications/initialized":
            self.log.event("initialized")

    # -- tool calls -----------------------------------------------------------------------

    def start_tool_call(self, call, name: str, arguments: dict):
        """Run the call on a worker of its own."""
        worker = threading.Thread(
            target=self.run_tool_call, args=(call, name, arguments),
            name="ask-user-rich-call", daemon=True,
        )
        worker.start()
        return None

    def run_tool_call(self, call, name: str, arguments: dict) -> None:
        started = time.monotonic()
        self.routing.run_as(call)
        # The app's polls of its state come every few seconds while it is shown: only at debug.
        level = "debug" if name == "form_state" and arguments.get("full") is not True else "info"
        self.log.event("call", level, tool=name, request=str(call.request_id))
        result_type = "complete"
        try:
            result = self.tools.call(name, arguments, call)
        except InputRequired as needed:
            result, result_type = call.input_required(needed, name, arguments), "input_required"
        finally:
            self.transport.end_call(call.request_id, call.cancellation)
        cancelled = call.cancellation.is_set
        outcome = "cancelled" if cancelled or result is None else (
            "error" if result.get("isError") else
            result.get("structuredContent", {}).get("status", "ok" if result_type == "complete" else result_type)
        )
        self.routing.end(call)
        call.finish(result, result_type)
        # Logged once the response is out: the answers reach the agent before the bookkeeping.
        self.log.event("call-end", level, tool=name, request=str(call.request_id), outcome=outcome,
                       ms=int((time.monotonic() - started) * 1000))


# What each era serves: method name -> McpServer method.
LEGACY_METHODS = MappingProxyType({
    "initialize": McpServer.initialize,
    "ping": McpServer.ping,
    "tools/list": McpServer.list_tools,
    "tools/call": McpServer.legacy_tool_call,
    "resources/list": McpServer.list_resources,
    "resources/templates/list": McpServer.list_resource_templates,
    "resources/read": McpServer.read_resource,
    "logging/setLevel": McpServer.set_log_level,
    "server/discover": McpServer.discover_refused,
})
MODERN_METHODS = MappingProxyType({
    "server/discover": McpServer.discover,
    "ping": McpServer.ping,
    "tools/list": McpServer.modern_list_tools,
    "tools/call": McpServer.modern_tool_call,
    "resources/list": McpServer.modern_list_resources,
    "resources/templates/list": McpServer.modern_list_resource_templates,
    "resources/read": McpServer.modern_read_resource,
    "tasks/get": McpServer.get_task,
    "tasks/cancel": McpServer.cancel_task,
    "tasks/update": McpServer.update_task,
})


def one_page(params: dict, what: str) -> None:
    """Our lists are one page each: a `cursor` was never issued (-32602)."""
    cursor = params.get("cursor")
    if cursor is not None:
        raise JsonRpcError(-32602, "Invalid params: cursor %s was never issued: the %s list is one "
                           "page, ask without a cursor" % (describe(cursor), what))


def tool_call_arguments(params: dict, apps: bool = False):
    """(tool name, arguments) of a tools/call, or the protocol error that refuses it. The
    app-only tools exist only for a client that declared MCP Apps."""
    name = params.get("name")
    # isinstance first: a list or object name is unhashable, and `in` a frozenset raised.
    if not isinstance(name, str) or not (name in TOOL_NAMES or (apps and name in APP_TOOL_NAMES)):
        raise JsonRpcError(-32602, "Unknown tool: %s" % describe(name))
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise JsonRpcError(-32602, "Invalid params: arguments must be an object")
    return name, arguments


# ============================================================================================
# The commands: demo, ask, inbox, history and notify --test
# ============================================================================================
#
# What a person runs in a terminal, beside the stdio server that an MCP client runs: each
# serves its interview (or the inbox) as the server does and tells the person only what is
# theirs to read (the log goes to server.log).


HISTORY_USAGE = "history [QUERY] [--json] [--limit N]"


def run_history(args: list) -> int:
    """history: what was decided, newest first, from the archive; QUERY keeps the entries
    whose title, questions or answers hold each of its words."""
    as_json, limit, words = False, HISTORY_LIMIT, []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            as_json = True
        elif arg == "--limit" and rest and rest[0].isdigit() and int(rest[0]) > 0:
            limit = int(rest.pop(0))
        elif arg.startswith("--"):
            return usage_error("usage: askrich.py %s" % HISTORY_USAGE)
        else:
            words.append(arg)
    config, _ = Config.from_env()
    log = Log(config.log_dir)
    try:
        entries = read_history(Archive(config.log_dir, log), " ".join(words), limit)
    finally:
        log.close()
    if as_json:
        sys.stdout.write(json.dumps({"history": entries}, ensure_ascii=False, indent=2) + "\n")
        return 0
    if not entries:
        sys.stdout.write("Nothing decided yet%s.\n" % (" matches %s" % quote(" ".join(words)) if words else ""))
        return 0
    for entry in entries:
        sys.stdout.write(history_line(entry) + "\n")
    return 0


def history_line(entry: dict) -> str:
    """2026-12-06 19:30  submitted, 4 answered  by the person  Claude Code · shop  "Title"."""
    when = entry["when"][:16].replace("T", " ")
    if entry["kind"] == PERMISSION:
        outcome = "%s %s" % (entry["outcome"], entry.get("tool") or "")
    else:
        outcome = "%s, %d answered" % (entry["outcome"], (entry["counts"] or {}).get("answered", 0))
    who = "by the away policy" if entry["decidedBy"] == BY_AWAY_POLICY else "by the person"
    place = " · ".join(part for part in (entry["agent"], os.path.basename(entry["project"].rstrip("/\\"))) if part)
    return "  ".join(part for part in (when, outcome.strip(), who, place, quote(cut(entry["title"], CUT_HEADER))) if part)


def run_page_command(command: str, rest: list) -> int:
    """`inbox`, `demo` and `ask FILE.json`: a page in the browser (not opened with --link or
    --no-open); demo and ask show their log's lines in the terminal only with --verbose."""
    flags = [arg for arg in rest if arg.startswith("--")]
    positional = [arg for arg in rest if not arg.startswith("--") or arg == "-"]
    known = ("--link", "--no-open") if command == "inbox" else ("--link", "--no-open", "--verbose")
    if any(flag not in known for flag in flags) or (command == "inbox" and positional):
        return usage_error("unknown arguments: %s" % " ".join([command] + rest))
    link = any(flag in ("--link", "--no-open") for flag in flags)
    if command == "inbox":
        return run_inbox(open_it=not link)
    if command == "demo" and not positional:
        source = read_asset("demo.json").decode("utf-8")
    elif command == "ask" and len(positional) == 1:
        source = read_interview_file(positional[0])
        if source is None:
            return 2
    else:
        return usage_error("%s takes %s" % (command, "no file" if command == "demo" else "one FILE.json"))
    return run_cli_interview(source, open_it=not link, verbose="--verbose" in flags)


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


def run_cli_interview(source: str, open_it: bool, verbose: bool = False) -> int:
    """demo / ask: one interview in this terminal; the result JSON on stdout. The terminal is a
    person's: it shows the link and what happens to the form, and the log's lines only when
    `verbose` (server.log has them all)."""
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

    def print_result(runtime, interview, result, why) -> int:
        if result is None:
            runtime.log.stderr.say("askrich.py: stopped waiting (%s); the form is closed.\n" % why)
            return 1
        sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
        return 0

    return ask_here(arguments, open_it, print_result, verbose=verbose)


def ask_here(arguments: dict, open_it: bool, finish, agent=None, timeout=None, cancellation=None,
             internal=None, verbose: bool = True, stopped_code: int = 1) -> int:
    """How the command line asks (demo, ask, the hooks): open the interview in this process (its
    link on stderr), open the browser, wait for the submit, `timeout` seconds (else the
    interview's own timeoutSeconds), `cancellation` or a stop signal (why "cancelled"); then
    `finish(runtime, interview, result, why)` returns the exit code while the form is still
    served. The log's lines reach stderr only when `verbose`; a stop that hangs ends the
    process with `stopped_code` (StopSignals). `arguments` were validated; `internal`: see
    Runtime.open_interview."""
    config, warnings = Config.from_env()
    runtime = Runtime(config, Log(config.log_dir, echo=verbose))
    for warning in warnings:
        runtime.log.event("config-warning", "warning", detail=warning)
    cancellation = cancellation if cancellation is not None else Cancellation()
    signals = StopSignals(cancellation.cancel, runtime.log, stopped_code)
    try:
        interview = runtime.open_interview(arguments, internal, agent=agent)
        url = runtime.form_url(interview)
        say = runtime.log.stderr.say  # the person's lines: never waited for (StderrLines)
        say("\nThe interview %s is at:\n  %s\n\n" % (quote(interview.title), url))
        opened = False
        if open_it and interview.options["delivery"] != "link":
            opened, why = open_browser(url, config, runtime.log)
            if not opened:
                say("Could not open the browser (%s).\n" % why)
        runtime.notices.arm(interview, opened)  # a wait on the person starts, as for a tool call

        def report(facts: dict, first: bool) -> None:
            say("[ask-user-rich] %s\n" % progress_message(facts))

        if timeout is None:
            timeout = interview.options["timeoutSeconds"]
        result, why = runtime.hub.wait(interview, cancellation, timeout, report, config.progress_ms / 1000.0)
        return finish(runtime, interview, result, why)
    except FormServerUnavailable as error:
        sys.stderr.write("askrich.py: could not start the form server on %s:%d (%s); free the port "
                         "or set %s to another one.\n" % (error.host, error.port, error.reason, ENV_PORT))
        return 1
    finally:
        runtime.close()
        signals.release()


def run_inbox(open_it: bool) -> int:
    """inbox: open the inbox that some ask-user-rich holds, after it proved it knows the key;
    with no holder, hold it here until Ctrl-C. Never sends the key to a port held by another
    program."""
    config, warnings = Config.from_env()
    for warning in warnings:
        sys.stderr.write("askrich.py: %s\n" % warning)
    port = config.inbox_port
    if not port:
        sys.stderr.write("askrich.py: the inbox is off (%s=0); set it to a port (%d is the usual one).\n"
                         % (ENV_INBOX_PORT, INBOX_PORT))
        return 1
    try:
        key = load_inbox_key(config.log_dir)
    except InboxUnavailable as problem:
        sys.stderr.write("askrich.py: cannot start the inbox: %s.\n" % problem)
        return 1
    runtime = signals = None
    try:
        for _ in range(3):  # the holder may exit, or another process bind, between two looks
            verdict = prove_inbox_holder(port, key)
            if verdict == "foreign":
                sys.stderr.write(
                    "askrich.py: %s:%d is held by a program that cannot prove it is ask-user-rich's "
                    "inbox, so the inbox's address was not opened or shown (the address contains the inbox's key). "
                    "Stop that program, or set %s to a free port for every ask-user-rich.\n"
                    % (INBOX_HOST, port, ENV_INBOX_PORT))
                return 1
            if verdict == "ours":
                _show_inbox(inbox_url(port, key), open_it, config, None)
                return 0
            if runtime is None:
                runtime = Runtime(config)
            if runtime.inbox.hold_here():
                break
        else:
            sys.stderr.write("askrich.py: could not start or reach the inbox on %s:%d.\n" % (INBOX_HOST, port))
            return 1
        stop = threading.Event()
        signals = StopSignals(stop.set, runtime.log)
        sys.stderr.write("Serving the inbox here until Ctrl-C.\n")
        _show_inbox(inbox_url(port, runtime.inbox.key), open_it, config, runtime.log)  # perhaps a new key
        stop.wait()
        return 0
    except InboxUnavailable as problem:
        sys.stderr.write("askrich.py: cannot start the inbox: %s.\n" % problem)
        return 1
    finally:
        if runtime is not None:
            runtime.close()
        if signals is not None:
            signals.release()


def _show_inbox(url: str, open_it: bool, config: Config, log) -> None:
    # --link: the address alone on stdout, for `open "$(askrich.py inbox --link)"`;
    # otherwise on stderr for the person, as demo and ask print their link.
    if not open_it:
        sys.stdout.write(url + "\n")
        sys.stdout.flush()
        return
    sys.stderr.write("The inbox is at:\n  %s\n" % url)
    sys.stderr.flush()
    try:
        way_in = inbox_redirect_file(config.log_dir, url)
    except OSError as error:
        sys.stderr.write("Could not open the browser: %s cannot be written (%s).\n"
                         % (os.path.join(config.log_dir, INBOX_REDIRECT_FILE), error.strerror or error))
        return
    # The inbox command's own log lines stay in server.log.
    own_log = Log(config.log_dir, echo=False) if log is None else None
    try:
        opened, why = open_browser(way_in, config, log if own_log is None else own_log)
    finally:
        if own_log is not None:  # its server.log and its own descriptor onto stderr
            own_log.close()
    if not opened:
        sys.stderr.write("Could not open the browser (%s).\n" % why)


def last_notice_failures(log_dir: str) -> dict:
    """The last `notify-failed` line of each target in server.log: {target: "time: reason"}."""
    import shlex

    failures = {}
    try:
        with open(os.path.join(log_dir, "server.log"), encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if " notify-failed " not in line:
                    continue
                when, _, _, rest = line.rstrip("\n").split(" ", 3)
                try:
                    fields = dict(pair.split("=", 1) for pair in shlex.split(rest) if "=" in pair)
                except ValueError:
                    continue
                failures[fields.get("target", "?")] = "%s: %s" % (when, fields.get("reason", ""))
    except OSError:
        pass
    return failures


def run_notify_test(environ=None, out=None) -> int:
    """`notify --test`: one notice to every target, and what happened with each; 0 when every
    target took it."""
    env = os.environ if environ is None else environ
    out = sys.stdout if out is None else out
    config, warnings = Config.from_env(env)
    for warning in warnings:
        out.write("config warning: %s\n" % warning)
    facts = dict(desktop_facts(env), notify_send_actions=False)  # nothing to open from a test
    targets, notes = notice_targets(config, facts, on_click=None)
    for note in notes:
        out.write("skip  %s\n" % note)
    if not targets:
        out.write("no notice target to try: set %s to desktop, push or both (and %s for push)\n"
                  % (ENV_NOTIFY, ENV_PUSH_URL))
        return 1
    spec = {"title": "", "questions": [None], "language": None}
    notice = compose_notice(spec, SERVER_TITLE, working_folder(), config.public_url or "", env, test=True)
    outcomes = {}
    reported = threading.Condition()

    def done(target, ok, said) -> None:
        with reported:
            outcomes[target.name] = (ok, said)
            reported.notify_all()

    log = Log(config.log_dir)
    try:
        send_to_all(targets, notice, log, done=done)
        with reported:
            reported.wait_for(lambda: len(outcomes) == len(targets), NOTICE_LIMIT_SECONDS * 2)
    finally:
        for target in targets:
            target.close()
        log.close()
    for target in targets:
        ok, said = outcomes.get(target.name, (False, "no answer within %gs" % (NOTICE_LIMIT_SECONDS * 2)))
        out.write("%s  %s: %s\n" % ("ok  " if ok else "FAIL", target.name, said))
    return 0 if all(outcomes.get(target.name, (False,))[0] for target in targets) else 1


USAGE = """usage: askrich.py [demo | ask FILE.json | inbox | history | notify --test | doctor
                   | hook ask-user-question | hook permission-request] [--link | --no-open] [--verbose]

  (no command)         run the stdio MCP server (what an MCP client launches)
  demo                 ask the built-in demo interview and print the result JSON
  ask FILE.json        ask the interview in FILE.json ('-' reads stdin) and print the result
  inbox                open the inbox: every interview waiting for you, from every agent
                       (served by this command until Ctrl-C if no other ask-user-rich
                       process serves it)
  history [QUERY] [--json] [--limit N]
                       what was decided, newest first (100 by default): each settled
                       interview and permission decision, and who decided; QUERY keeps
                       those whose title, questions or answers hold its words
  notify --test        send one test notice to every notice target and say how each went
  doctor               check Python, the log directory, the browser opener, the form server,
                       the inbox, the notice targets and the hooks
  hook ask-user-question [--timeout SECONDS]
                       Claude Code's PreToolUse hook: shows Claude Code's own
                       AskUserQuestion questions in the form
                       (SECONDS: the hook's timeout in Claude Code's config; default 60)
  hook ask-user-question --enable | --disable
                       turn that hook on or off for every session that has it configured
  hook permission-request [--timeout SECONDS | --enable | --disable]
                       Claude Code's and Codex's PermissionRequest hook: "may I run this?"
                       answered in the form too; the first answer, here or there, wins
  --link               with demo/ask/inbox: do not open a browser; print the link
  --no-open            the same as --link
  --verbose            with demo/ask: show the log's lines here too (they are always in
                       server.log, in the log directory that doctor names)
  --version            print the version
  --help               print this help

exit codes: 0 success, 2 usage or bad interview file, 1 anything else
"""


class StopSignals:
    """The stop signals (STOP_SIGNALS), taken without a lock and without a log line.

    A Python signal handler runs on the main thread between two of its bytecodes, perhaps
    while that very thread holds the log's lock or an Event's: a handler that logged or set an
    Event could wait forever on itself, and a second signal would find it there. And a signal
    that comes just before the main thread starts to wait runs its handler only once that wait
    ends. So the signal is taken in C: the interpreter's own handler writes its number to a
    pipe (signal.set_wakeup_fd) the moment it comes, and a thread of ours reads it and does
    the stopping: first `stop()`, then the log line. (Where the wakeup needs a socket, on
    Windows, the Python handler writes the byte instead.) The first signal also arms the last
    resort: a process still running STOP_DEADLINE_SECONDS later exits there with `code` (every
    answer acknowledged by then is on disk: a submit is archived before it is acknowledged).
    Further signals, of either kind, add nothing. Only the main thread may take signals;
    elsewhere (a test driving the command line from a thread) this does nothing.
    """

    def __init__(self, stop, log: Log, code: int = 0, deadline: float = STOP_DEADLINE_SECONDS) -> None:
        import signal

        self.stop, self.log, self.code, self.deadline = stop, log, code, deadline
        self.previous = {}
        self.lock = threading.Lock()  # the watcher's and restore()'s, never the handler's
        self.timer = None
        self.restored = False
        if threading.current_thread() is not threading.main_thread():
            return
        self.read_end, self.write_end = os.pipe()
        self.signals = {getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)}
        try:
            os.set_blocking(self.write_end, False)
            self.previous_wakeup = signal.set_wakeup_fd(self.write_end, warn_on_full_buffer=False)
        except (AttributeError, OSError, ValueError):
            self.previous_wakeup = None
        for signum in self.signals:
            self.previous[signum] = signal.signal(signum, self._on_signal)
        threading.Thread(target=self._watch, name="ask-user-rich-signals", daemon=True).start()

    def _on_signal(self, signum, frame) -> None:
        if self.previous_wakeup is None:
            try:  # the pipe holds thousands of signals before this could wait; the watcher needs one
                os.write(self.write_end, bytes((signum,)))
            except OSError:
                pass

    def _watch(self) -> None:
        got = os.read(self.read_end, 1)
        while got and got[0] not in self.signals:  # another signal with a Python handler
            got = os.read(self.read_end, 1)
        with self.lock:
            if not got or self.restored:  # restore() came first and closed the pipe
                os.close(self.read_end)
                return
            self.timer = threading.Timer(self.deadline, self._give_up)
            self.timer.name, self.timer.daemon = "ask-user-rich-stop-deadline", True
            self.timer.start()
        self.stop()
        self.log.event("signal", signal=got[0])

    def _give_up(self) -> None:
        self.log.last_words("shutdown-forced", after_seconds=self.deadline)
        os._exit(self.code)

    def release(self) -> None:
        """A command is done: with no stop signal, the handlers as they were (main() may run
        again in the same process). After one, the process is ending: further stop signals
        are ignored (the interpreter's teardown puts its own handlers back to the default,
        which would kill it halfway, with the signal's status instead of its exit code), and
        the last resort stays armed."""
        import signal

        with self.lock:
            fired = self.timer is not None
        if not fired:
            return self.restore()
        for signum in self.signals:
            signal.signal(signum, signal.SIG_IGN)
        return None

    def restore(self) -> None:
        """The handlers as they were, the last resort disarmed."""
        import signal

        if not self.previous:
            return
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if self.previous_wakeup is not None:
            signal.set_wakeup_fd(self.previous_wakeup)
        with self.lock:
            self.restored = True
            if self.timer is not None:
                self.timer.cancel()
                os.close(self.read_end)  # the watcher is done with it
        os.close(self.write_end)  # else the watcher wakes to this end and closes its own


INBOX_REDIRECT_FILE = "inbox-open.html"


def inbox_redirect_file(log_dir: str, url: str) -> str:
    """A file:// address that sends the browser on to `url`: a private page (0600, in the
    private log folder, beside the key) that redirects. An opener's command line is readable by
    every user of the machine (/proc/<pid>/cmdline), so the key never goes on one."""
    import html
    import pathlib

    path = os.path.join(log_dir, INBOX_REDIRECT_FILE)
    page = ('<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
            '<meta http-equiv="refresh" content="0;url=%s"><title>ask-user-rich inbox</title>'
            '<a href="%s">ask-user-rich inbox</a>\n' % (html.escape(url), html.escape(url)))
    write_whole(own_temporary(path), lambda handle: handle.write(page.encode("utf-8")),
                lambda temporary: os.replace(temporary, path))
    return pathlib.Path(path).resolve().as_uri()


# ============================================================================================
# The hooks: Claude Code's own questions and its permission asks, in the form
# ============================================================================================
#
# `askrich.py hook ask-user-question` answers Claude Code's AskUserQuestion (a PreToolUse
# hook) and `askrich.py hook permission-request` its PermissionRequest (Codex's too) through an
# interview, served as every other one: the door, the inbox and the notices. Each is off until
# the person turns it on, and anything that goes wrong on our side prints nothing, so that the
# agent's own terminal asks as if the hook were not there.


# -- Claude Code's own questions: a PreToolUse hook on AskUserQuestion -------------------------
#
# Claude Code runs `askrich.py hook ask-user-question` before its built-in AskUserQuestion
# shows anything, with the call as JSON on stdin. The same questions go to the form (and so to
# the door, the inbox and the notices); the person's answers go back as the hook output that
# Claude Code 2.1.328 takes as the person's own answers: it then shows no dialog, and the model
# gets an ordinary AskUserQuestion result. Whatever goes wrong on our side ends with exit 0 and
# no output, which leaves Claude Code to ask in its terminal as if the hook were not there (exit
# 2 would block the tool instead). tests/README.md ("Claude Code's own questions") has the
# shapes as seen in a real session.

HOOK_TOOL = "AskUserQuestion"
HOOK_AGENT = "Claude Code"
# The hook answers only while this file is in the log directory: the plugin ships the hook,
# and the person turns it on and off with --enable / --disable.
HOOK_SWITCH = "hook-ask-user-question.on"
# Claude Code's own limit for a command hook when its config sets none, in seconds.
HOOK_DEFAULT_TIMEOUT = 60
# How long before Claude Code's limit the hook gives up: Claude Code kills a hook at its limit
# and then asks in the terminal anyway, but only a hook that ends by itself can tell the form.
HOOK_MARGIN_SECONDS = 15
HOOK_SAYING = threading.Lock()  # the hook's answer and its deadline's exit, never both at once
# The hook ends this long before Claude Code's limit, however far it got.
HOOK_EXIT_MARGIN_SECONDS = 1.0  # the interpreter's own start, before this module loaded, and the exit


def hook_margin(timeout: int) -> float:
    """How long before the client's limit a hook stops waiting, so that it tells the form and
    the archive before its deadline (HOOK_EXIT_MARGIN_SECONDS) ends the process, however short
    the limit."""
    return min(HOOK_MARGIN_SECONDS, timeout / 4.0 + HOOK_EXIT_MARGIN_SECONDS)


# The built-in tool's convention for the option the model recommends.
RECOMMENDED_SUFFIX = "(Recommended)"
HOOK_SKIPPED = "The person skipped these questions in the ask-user-rich form"
# What the model reads for a question the person did not answer with a choice.
HOOK_OPEN_ANSWERS = {
    "deferred": "(not decided yet: the person deferred this question)",
    "needs-info": "(the person needs more information before deciding; see the notes)",
    "unanswered": "(not answered)",
}
# The note on an answer the person's away policy took, where the model reads the person's notes.
HOOK_AWAY_NOTE = ("Nobody answered within %s: the person's away policy took this recommendation; "
                  "the person did not choose it.")


def interview_from_ask_user_question(tool_input) -> dict:
    """AskUserQuestion's input -> ask_user_rich arguments, its questions in the same order.
    The question text becomes the header, the short `header` chip names the question (its id)
    and, joined, the interview's title; an option's preview is shown as the built-in shows it,
    in monospace, unless it brings its own code fence. Every question keeps its Other field.
    No limit of the built-in (4 questions, 4 options, 12-character chips) applies."""
    questions = tool_input.get("questions") if isinstance(tool_input, dict) else None
    if not isinstance(questions, list) or not questions:
        raise HookInputUnfit("no questions")
    asked, chips, ids, texts = [], [], set(), set()
    for number, question in enumerate(questions, 1):
        if not isinstance(question, dict) or not _is_text(question.get("question")):
            raise HookInputUnfit("question %d has no text" % number)
        # Claude Code keys the answers by the question's text: two alike would lose one answer.
        if question["question"] in texts:
            raise HookInputUnfit("question %d asks the same text as an earlier one" % number)
        texts.add(question["question"])
        chip = question.get("header").strip() if _is_text(question.get("header")) else ""
        options, recommended = _hook_options(question.get("options"), number)
        entry = {"id": _unique_id(slugify(chip) or "q%d" % number, ids), "header": question["question"],
                 "options": options, "multiSelect": question.get("multiSelect") is True}
        if recommended:
            entry["recommended"] = recommended if entry["multiSelect"] else recommended[0]
        asked.append(entry)
        if chip:
            chips.append(chip)
    title = " · ".join(chips) or cut(" ".join(questions[0]["question"].split()), 80)
    return {"title": title, "questions": asked}


def _is_text(value) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _unique_id(wanted: str, taken: set) -> str:
    qid, n = wanted, 2
    while qid in taken:
        qid = "%s-%d" % (wanted, n)
        n += 1
    taken.add(qid)
    return qid


def _hook_options(raw, number: int) -> tuple:
    """An AskUserQuestion question's options -> (our options, the ids labelled recommended)."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise HookInputUnfit("question %d's options are not a list" % number)
    options, recommended = [], []
    for index, option in enumerate(raw, 1):
        if not isinstance(option, dict) or not _is_text(option.get("label")):
            raise HookInputUnfit("question %d, option %d has no label" % (number, index))
        ours = {"id": "o%d" % index, "label": option["label"]}
        if _is_text(option.get("description")):
            ours["description"] = option["description"]
        if _is_text(option.get("preview")):
            ours["preview"] = _monospace(option["preview"])
        if option["label"].rstrip().endswith(RECOMMENDED_SUFFIX):
            recommended.append(ours["id"])
        options.append(ours)
    return options, recommended


def _monospace(preview: str) -> str:
    """The built-in shows a preview (an ASCII mockup, a snippet) in a monospace box: a fenced
    block keeps its lines and spaces, unless the preview is markdown with its own fences."""
    if "```" in preview or "~~~" in preview:
        return preview
    return "```text\n%s\n```" % preview.strip("\n")


def ask_user_question_answer(tool_input: dict, result: dict) -> dict:
    """The hook output for a settled result: the person's answers as AskUserQuestion's own
    (`answers`: labels joined by ", ", an Other text as the answer itself; `annotations`: notes,
    and the preview of a single choice that had one), keyed by question text; or a refusal
    when they skipped."""
    away = result.get("away")
    if result["status"] != SUBMITTED:
        if away:  # nobody skipped them: the person's away policy declined
            reason = away_reason(away["afterMinutes"])[:-1]
        else:
            reason = HOOK_SKIPPED
            if result.get("generalNotes"):
                reason += ", saying: %s" % result["generalNotes"]
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": reason + "."}}
    rows = {row["id"]: row for row in result["answers"]}
    asked = interview_from_ask_user_question(tool_input)["questions"]
    answers, annotations = {}, {}
    for ours, original in zip(asked, tool_input["questions"]):
        text = original["question"]
        row = rows.get(ours["id"], {})
        answers[text], note = _hook_answer(row, ours, original)
        if row.get("by") == BY_AWAY_POLICY:  # the model must know the person did not choose it
            note = dict(note or {}, notes=HOOK_AWAY_NOTE % minutes_text(away["afterMinutes"])
                        + ("\n\n" + note["notes"] if note and note.get("notes") else ""))
        if note:
            annotations[text] = note
    general = result.get("generalNotes")
    if general:
        first = annotations.setdefault(asked[0]["header"], {})
        first["notes"] = ("%s\n\n" % first["notes"] if first.get("notes") else "") + "General notes: " + general
    updated = dict(tool_input, answers=answers, annotations=annotations)
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                   "updatedInput": updated}}


def _hook_answer(row: dict, asked: dict, original: dict) -> tuple:
    """One question's (answer text, annotation or None)."""
    status = row.get("status", "unanswered")
    selected = [oid for oid in row.get("selected") or [] if oid.startswith("o") and oid[1:].isdigit()]
    chosen = [original["options"][int(oid[1:]) - 1] for oid in selected]
    texts = [option["label"] for option in chosen] + ([row["other"]] if row.get("other") else [])
    if status == "answered" and texts:
        text = ", ".join(texts)
    else:
        text = HOOK_OPEN_ANSWERS.get(status, HOOK_OPEN_ANSWERS["unanswered"])
    note = {}
    if len(chosen) == 1 and len(texts) == 1 and _is_text(chosen[0].get("preview")):
        note["preview"] = chosen[0]["preview"]
    if row.get("notes"):
        note["notes"] = row["notes"]
    return text, note or None


def hook_switch_path(config: "Config", switch: str = HOOK_SWITCH) -> str:
    return os.path.join(config.log_dir, switch)


def hook_is_on(config: "Config", switch: str = HOOK_SWITCH) -> bool:
    return os.path.isfile(hook_switch_path(config, switch))


class HookKind:
    """One of the hooks `askrich.py hook NAME` serves: its switch file, what it does with the
    input (`answer(source, timeout)`: the output to print, or None when there is none or it
    printed it itself, the moment it had it), and what it says: when it cannot answer
    (`fallback`), when it is switched on or off, and in the doctor's report (`title`: it is
    on, `doing` that; off, `not_doing`)."""

    def __init__(self, name, switch, answer, fallback, on_words, off_words, title, doing, not_doing) -> None:
        self.name, self.switch, self.answer, self.fallback = name, switch, answer, fallback
        self.usage = "hook %s [--timeout SECONDS | --enable | --disable]" % name
        self.on_words, self.off_words = on_words, off_words
        self.title, self.doing, self.not_doing = title, doing, not_doing


def hook_kinds() -> dict:
    kinds = (
        HookKind(
            "ask-user-question", HOOK_SWITCH, answer_ask_user_question, "Claude Code asks in the terminal",
            "Claude Code's questions (AskUserQuestion) now open in ask-user-rich's form, in every "
            "session with the ask-user-rich plugin (or the hook in your settings).\n",
            "Claude Code's questions (AskUserQuestion) are asked in its terminal again.\n",
            "AskUserQuestion hook", "Claude Code's own questions open in the form",
            "Claude Code asks its own questions in its terminal"),
        HookKind(
            "permission-request", PERMISSION_SWITCH, answer_permission_request, "the terminal decides",
            "Permission asks (may I run this?) now open in ask-user-rich's form as well as in the "
            "terminal, in every session with the ask-user-rich plugin (or the hook in your settings).\n",
            "Permission asks are answered in the terminal only again.\n",
            "Permission hook", "permission asks open in the form too", "permission asks wait in the terminal only"),
    )
    return {kind.name: kind for kind in kinds}


def run_hook(args: list) -> int:
    """`hook ask-user-question` and `hook permission-request`: always 0, and output only when
    the person answered (see above)."""
    config, _ = Config.from_env()
    hook = hook_kinds().get(args[0]) if args else None
    if hook is None:
        return usage_error("the hooks are: %s" % "; ".join(kind.usage for kind in hook_kinds().values()))
    flags = args[1:]
    if flags in (["--enable"], ["--disable"]):
        return switch_hook(config, hook, flags[0] == "--enable")
    timeout = HOOK_DEFAULT_TIMEOUT
    if flags[:1] == ["--timeout"] and len(flags) == 2 and flags[1].isdigit() and int(flags[1]) > 0:
        timeout = int(flags[1])
    elif flags:
        return usage_error("usage: askrich.py %s" % hook.usage)
    # Whatever the input (20,000 questions take long to archive), the hook never runs past its
    # limit: at it, the process ends with no output and the client decides itself.
    left = timeout - HOOK_EXIT_MARGIN_SECONDS - (time.monotonic() - LOADED)
    deadline = threading.Timer(max(0.1, left), _hook_out_of_time, (hook,))
    deadline.daemon = True
    deadline.start()
    try:
        return _run_hook_once(config, hook, timeout)
    finally:
        deadline.cancel()


def _run_hook_once(config: "Config", hook: "HookKind", timeout: int) -> int:
    try:
        source = sys.stdin.read()
        if not hook_is_on(config, hook.switch):
            return 0
        answer = hook.answer(source, timeout)
    except Exception as error:  # anything of ours: the client asks in its terminal
        sys.stderr.write("askrich.py hook: %r; %s.\n" % (error, hook.fallback))
        return 0
    if answer is not None:
        print_hook_output(answer)
    return 0


def print_hook_output(answer: dict) -> None:
    """The hook's one line of JSON on stdout, at once: the client acts the moment it reads it."""
    with HOOK_SAYING:
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _hook_out_of_time(hook: "HookKind") -> None:
    with HOOK_SAYING:  # never in the middle of the answer
        # A full stderr must not hold the exit up: the line goes now or not at all.
        StderrLines(sys.stderr).say("askrich.py hook: out of time; %s.\n" % hook.fallback)
        os._exit(0)


def switch_hook(config: "Config", hook: HookKind, on: bool) -> int:
    path = hook_switch_path(config, hook.switch)
    try:
        if on:
            os.makedirs(config.log_dir, mode=0o700, exist_ok=True)
            write_private_file(config.log_dir, hook.switch, hook.on_words.encode("utf-8"))
        elif os.path.lexists(path):
            os.unlink(path)
    except OSError as error:
        sys.stderr.write("askrich.py: cannot %s %s: %s\n" % ("write" if on else "remove", path, error))
        return 1
    sys.stdout.write(hook.on_words if on else hook.off_words)
    return 0


# How long a hook that gave up keeps serving an open form, so that its event stream, woken by
# the change, tells the page before the process (and with it the form server) ends.
HOOK_GOODBYE_SECONDS = 2.0
HOOK_STOPPED_GOODBYE_SECONDS = STOP_DEADLINE_SECONDS / 3


def say_goodbye(interview: Interview, patience: float) -> None:
    """Return once no page watches the interview, or after `patience` seconds."""
    deadline = time.monotonic() + patience

    def check():
        left = deadline - time.monotonic()
        return True if interview.activity()["streams"] == 0 or left <= 0 else left

    interview.wait_until(check)


def hand_back(runtime: Runtime, interview: Interview, answers: dict, why: str, margin: float, event: str,
              answered_there: bool = False) -> bool:
    """A hook's wait ended with no answer from the form (`why`: its timeout, a stop, or the
    terminal `answered_there`): settle the interview with `answers`, so that the form says where
    the ask went, and serve it until the page heard that. False when a submit came first: its
    result stands."""
    handed_back = why == "timeout" and not answered_there
    if runtime.hub.settle_without_form(interview, answers, CANCELLED, "terminal" if answered_there else "browser",
                                       handed_back=handed_back, answered_there=answered_there) is None:
        return False
    runtime.log.event(event, about=interview, interview=interview.id, why="answered-there" if answered_there else why)
    # Stopped by the client (Esc, its own limit: SIGTERM), the goodbye fits in what a stop may take.
    stopped = why != "timeout" and not answered_there
    say_goodbye(interview, min(HOOK_STOPPED_GOODBYE_SECONDS if stopped else HOOK_GOODBYE_SECONDS, margin / 2))
    return True


def answer_ask_user_question(source: str, timeout: int):
    """The hook output for one PreToolUse call, or None to let Claude Code ask itself."""
    payload = parse_json(source)
    if not isinstance(payload, dict) or payload.get("tool_name") != HOOK_TOOL or \
            payload.get("hook_event_name", "PreToolUse") != "PreToolUse":
        raise HookInputUnfit("not a PreToolUse call of %s" % HOOK_TOOL)
    tool_input = payload.get("tool_input")
    arguments = interview_from_ask_user_question(tool_input)
    validate_interview(arguments)
    folder = payload.get("cwd")
    if isinstance(folder, str) and os.path.isdir(folder):
        os.chdir(folder)  # the project the inbox and the notices name
    margin = hook_margin(timeout)
    outcome = {}

    def finish(runtime, interview, result, why) -> int:
        if result is None:  # the form says where the questions went, before the process ends
            unanswered_all = {question["id"]: unanswered() for question in interview.spec["questions"]}
            if hand_back(runtime, interview, unanswered_all, why, margin, "hook-gave-up"):
                return 0
            result = interview.settled_result()  # a submit that came as the wait ended
        outcome["answer"] = ask_user_question_answer(tool_input, result)
        return 0

    ask_here(arguments, True, finish, agent=HOOK_AGENT, timeout=max(1.0, timeout - margin), stopped_code=0)
    return outcome.get("answer")


# -- Permission asks: a PermissionRequest hook for Claude Code and Codex ----------------------
#
# Claude Code and Codex run `askrich.py hook permission-request` when they would ask the person
# whether a tool may run, and show their own dialog meanwhile. The ask goes to the form (and so
# to the door, the inbox and the notices) as one question, `permission`, showing exactly what
# would happen; the person's choice goes back as the hook's decision. Who answers first wins:
# answered in the terminal, the tool's result appears in the session's transcript, and the hook
# ends its form and exits without output. Nothing of ours ever allows anything on its own: a
# timeout, a failure, a skip or a stop ends with exit 0 and no output, and the terminal decides.
# tests/README.md ("Permission asks") has the shapes as seen in real sessions.

PERMISSION_SWITCH = "hook-permission-request.on"
# A tool input larger than this (JSON characters) is not shown: the terminal asks.
PERMISSION_INPUT_MAX = 256 * 1024
PERMISSION_FOLD_LINES = 40  # a new file's first lines shown; the rest folded
# Where Claude Code keeps a permission it was told to add (`perm.where.<destination>`).
PERMISSION_DESTINATIONS = frozenset({"session", "localSettings", "projectSettings", "userSettings"})
PERMISSION_TOOL_ACTIONS = MappingProxyType({"Bash": "run", "Edit": "edit", "MultiEdit": "edit",
                                            "Write": "write", "WebFetch": "fetch"})
# How often the hook looks at the session's transcript for the tool's result: a stat() and,
# when it grew, a read of what was added.
TRANSCRIPT_POLL_SECONDS = 0.5
TRANSCRIPT_TAIL_BYTES = 1024 * 1024  # the end of a transcript read at start for the tool's call


class PermissionRequest:
    """A PermissionRequest hook's input, checked: HookInputUnfit when it is anything else."""

    def __init__(self, payload) -> None:
        if not isinstance(payload, dict) or payload.get("hook_event_name") != "PermissionRequest":
            raise HookInputUnfit("not a PermissionRequest")
        self.tool = payload.get("tool_name")
        self.input = payload.get("tool_input")
        if not _is_text(self.tool) or not isinstance(self.input, dict):
            raise HookInputUnfit("no tool_name or tool_input")
        if len(json.dumps(self.input)) > PERMISSION_INPUT_MAX:
            raise HookInputUnfit("a tool input over %d characters" % PERMISSION_INPUT_MAX)
        cwd, transcript = payload.get("cwd"), payload.get("transcript_path")
        self.cwd = cwd if isinstance(cwd, str) else ""
        self.transcript = transcript if _is_text(transcript) else None
        # Codex refuses updatedPermissions: no "always" is offered there.
        self.codex = is_codex_request(payload)
        self.agent = "Codex" if self.codex else HOOK_AGENT
        raw = payload.get("permission_suggestions")
        self.suggestions = [] if self.codex or not isinstance(raw, list) else \
            [one for one in raw if isinstance(one, dict) and isinstance(one.get("type"), str)]
        self.action = PERMISSION_TOOL_ACTIONS.get(self.tool, "mcp" if self.tool.startswith("mcp__") else "use")


def is_codex_request(payload: dict) -> bool:
    """Codex's hook input, by the fields only it sends or the place of its transcripts."""
    if "turn_id" in payload or "model" in payload:
        return True
    transcript = payload.get("transcript_path")
    return isinstance(transcript, str) and (
        "%s.codex%s" % (os.sep, os.sep) in transcript or os.path.basename(transcript).startswith("rollout-"))


def fenced(text: str, language: str = "") -> str:
    """`text` as a fenced code block that no run of backticks inside it can end."""
    import re

    longest = max([len(run) for run in re.findall(r"`+", text)] + [2])
    fence = "`" * (longest + 1)
    return "%s%s\n%s\n%s" % (fence, language, text.rstrip("\n"), fence)


def permission_sections(asked: PermissionRequest) -> list:
    """What the ask shows, in order: [{"key": its label in assets/i18n, "markdown"}], plus for a
    long new file {"fold": the rest of it}."""
    tool_input, sections = asked.input, []

    def add(key, markdown, **more):
        sections.append(dict({"key": key, "markdown": markdown}, **more))

    def text_of(name):
        return tool_input.get(name) if isinstance(tool_input.get(name), str) else ""

    if asked.action == "run" and text_of("command"):
        add("perm.command", fenced(text_of("command"), "sh"))
        if text_of("description"):
            add("perm.description", text_of("description"))
    elif asked.action in ("edit", "write") and text_of("file_path"):
        add("perm.file", fenced(text_of("file_path")))
        if asked.action == "write":
            lines = text_of("content").splitlines()
            shown, rest = lines[:PERMISSION_FOLD_LINES], lines[PERMISSION_FOLD_LINES:]
            add("perm.content", fenced("\n".join(shown)), **({"fold": fenced("\n".join(rest))} if rest else {}))
        else:
            add("perm.changes", fenced(edit_diff(tool_input), "diff"))
    elif asked.action == "fetch" and text_of("url"):
        add("perm.url", fenced(text_of("url")))
        if text_of("prompt"):
            add("perm.prompt", fenced(text_of("prompt")))
    else:
        add("perm.tool", fenced(asked.tool))
        add("perm.arguments" if asked.action == "mcp" else "perm.input",
            fenced(json.dumps(tool_input, indent=2, ensure_ascii=False), "json"))
    if asked.cwd:
        add("perm.folder", fenced(asked.cwd))
    return sections


def edit_diff(tool_input: dict) -> str:
    """An Edit's or a MultiEdit's changes as a unified diff of each replaced text."""
    import difflib

    edits = tool_input.get("edits") if isinstance(tool_input.get("edits"), list) else [tool_input]
    path = tool_input.get("file_path") if isinstance(tool_input.get("file_path"), str) else ""
    hunks = []
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        old, new = (edit.get(name) if isinstance(edit.get(name), str) else "" for name in ("old_string", "new_string"))
        lines = difflib.unified_diff(old.splitlines(), new.splitlines(), "a/" + path.lstrip("/"),
                                     "b/" + path.lstrip("/"), n=3, lineterm="")
        hunks.append("\n".join(list(lines)[2 if hunks else 0:]))
    return "\n".join(hunks)


def permission_options(asked: PermissionRequest) -> list:
    """The choices, in order: allow, one `always-<i>` per suggestion, deny; each with the key
    of its label in assets/i18n, the label's values and what it would change (`facts`)."""
    options = [{"id": "allow", "key": "perm.allow"}]
    for index, suggestion in enumerate(asked.suggestions):
        key, values, facts = suggestion_words(suggestion)
        option = {"id": "always-%d" % index, "key": key, "values": values, "facts": facts}
        # A mode lasts for the session whatever the destination; a folder or a rule is kept there.
        if suggestion["type"] != "setMode" and suggestion.get("destination") in PERMISSION_DESTINATIONS:
            option["where"] = "perm.where." + suggestion["destination"]
        options.append(option)
    options.append({"id": "deny", "key": "perm.deny", "about": "perm.denyAbout"})
    return options


def suggestion_words(suggestion: dict) -> tuple:
    """A permission suggestion as (label key, label values, the facts it changes)."""
    kind = suggestion["type"]
    if kind == "setMode":
        mode = str(suggestion.get("mode", ""))
        if mode == "acceptEdits":
            return "perm.always.acceptEdits", {}, ""
        return "perm.always.mode", {"mode": mode}, ""
    if kind == "addDirectories":
        folders = [str(one) for one in suggestion.get("directories") or []]
        return ("perm.always.folder" if len(folders) == 1 else "perm.always.folders"), {}, ", ".join(folders)
    rules = suggestion.get("rules") if isinstance(suggestion.get("rules"), list) else []
    shown = ["%s(%s)" % (rule.get("toolName", ""), rule["ruleContent"]) if rule.get("ruleContent")
             else str(rule.get("toolName", "")) for rule in rules if isinstance(rule, dict)]
    return "perm.always.rules", {}, ", ".join(shown) or json.dumps(suggestion, ensure_ascii=False)


def permission_interview(asked: PermissionRequest) -> tuple:
    """(ask_user_rich arguments, the internal options) of one permission ask. The spec's
    words are English (the archive, the history, a result); the form shows the same ask in the
    person's language from the internal `form` descriptor (assets/js/permission.js)."""
    words = notice_words("en", "perm.")
    agent_values = {"agent": asked.agent, "tool": asked.tool}
    header = fill_words("en", words["perm.header." + asked.action], agent_values)
    sections = permission_sections(asked)
    options = permission_options(asked)
    body = []
    for section in sections:
        body.append("**%s**\n\n%s" % (words[section["key"]], section["markdown"]))
        if "fold" in section:
            body.append("<details><summary>%s</summary>\n\n%s\n\n</details>" % (words["perm.showAll"], section["fold"]))
    asked_options = []
    for option in options:
        about = [option.get("facts", "")] + [words.get(option.get(name, ""), "") for name in ("where", "about")]
        entry = {"id": option["id"], "label": fill_words("en", words[option["key"]], option.get("values", {}))}
        description = fill_words("en", " · ".join(part for part in about if part), agent_values)
        if description:
            entry["description"] = description
        asked_options.append(entry)
    arguments = {"title": header, "questions": [{"id": PERMISSION, "header": header, "body": "\n\n".join(body),
                                                 "options": asked_options, "allowOther": False}]}
    what = {"run": "command", "edit": "file_path", "write": "file_path", "fetch": "url"}.get(asked.action)
    row = {"action": asked.action, "tool": asked.tool,
           "what": cut(str(asked.input.get(what) or asked.tool), PERMISSION_ROW_CHARS)}
    form = {"agent": asked.agent, "action": asked.action, "tool": asked.tool, "sections": sections,
            "options": options}
    return arguments, {"kind": PERMISSION, "permission": {
        "tool": asked.tool, "input": asked.input, "suggestions": asked.suggestions, "form": form, "row": row}}


class TranscriptWatch:
    """Watches a session's transcript (JSON lines, Claude Code's or Codex's) for the result of
    the tool call being asked about, and calls `on_result()` once when it appears: the person
    answered in the terminal. A call is the tool's when its name and input match; when none is
    found (Codex names its tools otherwise), any tool result written after the start counts.
    Costs a stat() every TRANSCRIPT_POLL_SECONDS while the file does not grow."""

    def __init__(self, path: str, tool: str, tool_input: dict, on_result) -> None:
        self.path, self.tool, self.input, self.on_result = path, tool, tool_input, on_result
        self.calls, self.named = set(), set()  # call ids: exact matches, and of the tool's name
        self.stopped = threading.Event()
        self.offset, self.partial = self._size(), b""
        self._read_lines(self._tail(), before=True)
        self.thread = threading.Thread(target=self._run, name="ask-user-rich-transcript", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def _size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except OSError:
            return 0

    def _tail(self) -> bytes:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(max(0, self.offset - TRANSCRIPT_TAIL_BYTES))
                return handle.read(min(self.offset, TRANSCRIPT_TAIL_BYTES))
        except OSError:
            return b""

    def _run(self) -> None:
        while not self.stopped.wait(TRANSCRIPT_POLL_SECONDS):
            size = self._size()
            if size < self.offset:  # a new file in its place: read it from the start
                self.offset, self.partial = 0, b""
            if size == self.offset:
                continue
            try:
                with open(self.path, "rb") as handle:
                    handle.seek(self.offset)
                    added = handle.read(size - self.offset)
            except OSError:
                continue
            self.offset += len(added)
            lines = (self.partial + added).split(b"\n")
            self.partial = lines.pop()
            if self._read_lines(b"\n".join(lines), before=False):
                self.stopped.set()
                self.on_result()

    def _read_lines(self, data: bytes, before: bool) -> bool:
        """Note the tool's calls in `data`; True when a result of one (after the start) is there."""
        for line in data.split(b"\n"):
            try:
                entry = json.loads(line.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            for kind, call_id, name, arguments in transcript_items(entry):
                if kind == "call" and name == self.tool:
                    (self.calls if arguments == self.input else self.named).add(call_id)
                elif kind == "result" and not before:
                    wanted = self.calls or self.named
                    if not wanted or call_id in wanted:
                        return True
        return False


def transcript_items(entry) -> list:
    """A transcript line's tool calls and results as (kind "call"|"result", call id, tool name,
    input): Claude Code's message content blocks, and Codex's response items."""
    items = []
    message = entry.get("message") if isinstance(entry, dict) else None
    blocks = message.get("content") if isinstance(message, dict) else None
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            items.append(("call", block.get("id"), block.get("name"), block.get("input")))
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            items.append(("result", block.get("tool_use_id"), None, None))
    payload = entry.get("payload") if isinstance(entry, dict) else None
    if isinstance(payload, dict) and str(payload.get("type", "")).endswith("_call_output"):
        items.append(("result", payload.get("call_id"), None, None))
    elif isinstance(payload, dict) and str(payload.get("type", "")).endswith("_call"):
        items.append(("call", payload.get("call_id"), payload.get("name"), None))
    return items


def answer_permission_request(source: str, timeout: int) -> None:
    """Ask one PermissionRequest in the form; print the decision the moment the person gives
    it. Prints nothing when anything else ends the ask (the terminal answered first, a stop,
    the timeout, a skip): the terminal decides then."""
    asked = PermissionRequest(parse_json(source))
    arguments, internal = permission_interview(asked)
    validate_interview(arguments)
    if asked.cwd and os.path.isdir(asked.cwd):
        os.chdir(asked.cwd)  # the project the inbox and the notices name
    # The CLI stops a hook (Esc, its own limit, its exit) with SIGTERM: ask_here's StopSignals
    # cancels the same wait as an answer in the terminal does.
    cancellation, heard = Cancellation(), {}

    def answered_in_terminal() -> None:
        heard["terminal"] = True
        cancellation.cancel()

    watch = TranscriptWatch(asked.transcript, asked.tool, asked.input, answered_in_terminal) \
        if asked.transcript else None
    margin = hook_margin(timeout)

    def finish(runtime, interview, result, why) -> int:
        if watch is not None:
            watch.stop()
        if result is None:
            if hand_back(runtime, interview, {PERMISSION: unanswered()}, why, margin, "permission-left-to-terminal",
                         answered_there=bool(heard.get("terminal"))):
                return 0
            result = interview.settled_result()  # a submit that came as the wait ended
        decision = permission_choice(internal["permission"], result)
        if decision is not None:
            print_hook_output({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}})
        return 0

    ask_here(arguments, True, finish, agent=asked.agent, timeout=max(1.0, timeout - margin),
             cancellation=cancellation, internal=internal, stopped_code=0)


# ============================================================================================
# The doctor: what this machine gives the server, said in one report
# ============================================================================================


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
    plan, opens = _doctor_openers(facts, "http://%s:%d/s/TOKEN" % (config.public_host, config.port))
    for text in plan:
        line(text)
    if config.port:
        line("fixed port %d: %s" % (config.port, _doctor_port(config.host, config.port)))
    line(_doctor_inbox(config))
    hooks = [_doctor_hook(config, hook) for hook in hook_kinds().values()]
    for text in _doctor_door(config) + _doctor_notices(config, env) + hooks + [_doctor_away(config), _doctor_app(config)]:
        line(text)
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
        "" if opens else "; no browser opens here, so share the link (see above)"))
    return 0


def _doctor_openers(facts: dict, sample: str) -> tuple:
    """The opener plan's lines for a form at `sample`, and whether a browser opens here."""
    candidates, notes = plan_openers(sample, facts)
    lines = ["browser opener plan (tried in order until one works):"]
    lines += ["  try   %s" % opener.describe(sample) for opener in candidates]
    lines += ["  skip  %s" % note for note in notes]
    if not candidates:
        lines.append("  => no browser can be opened from here: ask_user_rich returns the link at once "
                     "(status awaiting), or asks the client to open it when the client offers URL "
                     "elicitation.")
        if facts["open_enabled"]:
            lines.append("what to do:")
            lines += ["  - %s" % advice for advice in opener_advice(sample, facts)]
    return lines, bool(candidates)


def _doctor_log_dir(log_dir: str):
    """None when the log directory can be created and written, else why not."""
    try:
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
        probe = os.path.join(log_dir, ".doctor-%d" % os.getpid())
        with create_private_file(probe) as handle:
            handle.write(b"ok")
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


def _doctor_inbox(config: Config) -> str:
    """Who holds the inbox's port, and how many interviews wait, in one line."""
    port = config.inbox_port
    if not port:
        return "inbox: off (%s=0)" % ENV_INBOX_PORT
    try:
        key = load_inbox_key(config.log_dir)
    except InboxUnavailable as problem:
        return "inbox: NOT available (%s)" % problem
    _, entries = InboxRegistry(config.log_dir).scan()
    waiting = sum(len(entry["interviews"]) for entry in entries)
    where = "%s:%d" % (INBOX_HOST, port)
    verdict = prove_inbox_holder(port, key)
    if verdict == "foreign":
        return ("inbox: %s is held by a program that is not ask-user-rich: forms work, the inbox does "
                "not; set %s to a free port (%d waiting)" % (where, ENV_INBOX_PORT, waiting))
    if verdict == "free":
        return "inbox: %s free (no ask-user-rich process serves it); %d waiting" % (where, waiting)
    holder = "?"
    try:
        import urllib.request

        fetcher = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with fetcher.open("http://127.0.0.1:%d/api/inbox/%s" % (port, key), timeout=INBOX_PROBE_SECONDS) as response:
            listing = json.loads(response.read().decode("utf-8"))
        holder = listing.get("holder")
        waiting = len(listing.get("interviews") or [])
    except (OSError, ValueError, AttributeError):
        pass
    return "inbox: %s held by ask-user-rich pid %s; %d waiting; open it with: askrich.py inbox" % (where, holder, waiting)


def _doctor_door(config: Config) -> list:
    """Who holds the front door and for how many processes' forms, where forms fall back, and
    whether the public URL reaches it from here."""
    port = config.inbox_port
    if not port:
        return ["front door: off (%s=0); every form is shown at its own process's port" % ENV_INBOX_PORT]
    try:
        key = load_inbox_key(config.log_dir)
    except InboxUnavailable:
        return ["front door: off (no inbox here, see above); every form is shown at its own process's port"]
    _, entries = InboxRegistry(config.log_dir).scan()
    serving = sum(1 for entry in entries if entry["port"] and entry["forms"])
    verdict, ours = probe_inbox_holder(port, key)
    door = "http://localhost:%d" % port
    if verdict == "ours" and not ours:
        verdict = "other"
    lines = {
        "ours": ["front door: %s serves the forms of %d process%s" % (door, serving, "" if serving == 1 else "es")],
        "other": ["front door: %s is held by another version of ask-user-rich: forms of this one are shown "
                  "at their own process's port until it exits" % door],
        "free": ["front door: %s (nobody holds it now: the next process with a form will)" % door],
        "foreign": ["front door: 127.0.0.1:%d is held by a program that is not ask-user-rich" % port],
    }[verdict]
    lines.append("  forms fall back to their own process's port (http://%s:<port>/s/…) only while the door "
                 "cannot serve them (a foreign program or another version on its port, or no inbox)"
                 % config.public_host)
    if config.public_url:
        lines.append("public URL: %s (every URL shown starts with it): %s" % (
            config.public_url, _doctor_public_url(config.public_url, key)))
    return lines


def _doctor_public_url(public_url: str, key: str) -> str:
    """Whether a request to the public URL from this machine reaches our door: the door must
    prove the key, which nothing else can."""
    import secrets
    import urllib.request

    nonce = secrets.token_hex(16)
    fetcher = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with fetcher.open("%s/api/inbox/prove?nonce=%s" % (public_url, nonce), timeout=INBOX_PROBE_SECONDS * 2) as response:
            proof = json.loads(response.read(4096).decode("utf-8")).get("proof")
    except (OSError, ValueError, AttributeError) as error:
        return ("does NOT reach us from here (%s); fine if only the other device can resolve or reach "
                "it, else check the tunnel" % (getattr(error, "reason", None) or error))
    if proof == origin_proof(key, nonce, public_url.rstrip("/")):
        return "reaches our front door from here"
    return "answers from here, but NOT as our front door (it could not prove the inbox key)"


def _doctor_notices(config: Config, environ) -> list:
    """The notice targets, those that cannot be had, and the last failure of each."""
    if config.notify == "off":
        return ["notices: off (%s=off)" % ENV_NOTIFY]
    targets, notes = notice_targets(config, desktop_facts(environ), on_click=None)
    lines = ["notices (%s=%s; the first after %ds unviewed, at once when no browser opened):"
             % (ENV_NOTIFY, config.notify, config.notify_after)]
    for target in targets:
        lines.append("  send  %s%s" % (target.name, _doctor_link(config) if isinstance(target, PushTarget) else ""))
    lines += ["  skip  %s" % note for note in notes]
    failures = last_notice_failures(config.log_dir)
    lines += ["  last failure of %s: %s" % (name, failure) for name, failure in sorted(failures.items())]
    lines.append("  test them with: askrich.py notify --test")
    return lines


def _doctor_link(config: Config) -> str:
    if not config.push_link:
        return ", without the form's link (%s=0)" % ENV_PUSH_LINK
    if not config.public_url:
        return ", without the form's link (no %s: a localhost link opens nothing elsewhere)" % ENV_PUBLIC_URL
    return ", with the form's link at %s (the push service sees it)" % config.public_url


def _doctor_away(config: Config) -> str:
    if config.away == AWAY_POLICIES[0]:
        return ("away policy: wait: nothing is decided for you, however long an agent waits (%s=recommended "
                "or decline to change it)" % ENV_AWAY)
    what = "the recommendations are taken" if config.away == "recommended" else "the interview is declined"
    return ("away policy: %s: %s after %s without a sign of you (%s); never for a permission ask"
            % (config.away, what, minutes_text(config.away_after), ENV_AWAY_AFTER))


def _doctor_app(config: Config) -> str:
    if not config.app_fallback:
        return ("form in an app host: the browser gets it at once as well (%s=0)" % ENV_APP_FALLBACK)
    return ("form in an app host: if the host shows no form within %ds of the call, the browser gets it (%s)"
            % (config.app_fallback, ENV_APP_FALLBACK))


def _doctor_hook(config: Config, hook: HookKind) -> str:
    if hook_is_on(config, hook.switch):
        return ("%s: on (%s): %s where the hook is configured (the plugin ships it); off with: askrich.py hook "
                "%s --disable" % (hook.title, hook_switch_path(config, hook.switch), hook.doing, hook.name))
    return "%s: off: %s; on with: askrich.py hook %s --enable" % (hook.title, hook.not_doing, hook.name)


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
            page = runtime.form_url(interview)
            api = page.replace("/s/", "/api/s/")
            for step, url, body, expected in (
                ("the form page", page, None, "text/html"),
                ("the asset js/main.js", page.split("/s/")[0] + "/assets/js/main.js", None, "text/javascript"),
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
            if interview.state != SUBMITTED:
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


# ============================================================================================
# Start-up and memory: a spawned server answers at once and idles small
# ============================================================================================
#
# Every agent session spawns this server, waits for its handshake and then keeps it idle for
# hours: start-up time and idle memory have budgets, checked by the benchmark's rows (names as
# `python3 tests/bench/run.py --quick --only startup,memory` prints them; tests/bench/README.md).
# The measures, each with its reason and the row it buys:
#
# - Lazy imports. Only json, os, sys, threading, time and signal load before the handshake; the
#   HTTP server, subprocess, unicodedata, difflib, secrets and the like are imported inside the
#   function that first needs them (tests/interview/test_module_shape.py holds import to that).
#   Rows "askrich.py: spawn -> initialize / floor" (budget 2.0x) and ".pyz: spawn -> initialize
#   / floor" (1.3x).
# - os.urandom, not secrets, for the process's random id (process_identity): secrets imports
#   hashlib, hmac and OpenSSL's _hashlib, some 3.5 MB held all day. Rows "askrich.py: idle VmRSS
#   after initialize" (24 MB) and ".pyz: idle VmRSS after initialize" (16 MB).
# - The code cache (build_zipapp.py's __main__.py, ENV_CODE_CACHE): zipimport never writes
#   bytecode, so askrich.pyz keeps this module compiled in a per-user cache instead of compiling
#   it at every start; after a miss it starts over from the cache (ENV_RESTARTED), since
#   compiling leaves some 6 MB behind. Rows ".pyz: spawn -> initialize / floor" (1.3x), ".pyz:
#   first start (code cache miss) -> initialize" and ".pyz: idle VmRSS after initialize" (16 MB).
# - Serving from a thread (serves_from_thread, serve_stdio_detached) and malloc_trim
#   (release_start_up_memory), which only work together: run as a script, CPython keeps this
#   file's syntax tree (some 12 MB) until the script's body returns, so the body returns at once
#   and the stdio server serves from a thread; the freed tree still stays resident in the C
#   heap until glibc is asked to give it back, a second after start. Row "askrich.py: idle
#   VmRSS after initialize" (24 MB; 32.2 MB without them, 19.2 MB with them, on 3.11).

START_UP_TRIM_SECONDS = 1.0  # when the client's first requests are served


def serves_from_thread() -> bool:
    """Whether `python3 askrich.py` serves from a thread and lets the script's body return.
    Only on Linux, where the freed heap is then handed back (release_start_up_memory) and a
    signal still reaches the main thread while it waits for that thread (on Windows that wait
    cannot be interrupted); and not on 3.12.0 to 3.12.2, which refuse to start a thread once
    the main thread has finished."""
    return sys.platform.startswith("linux") and not (3, 12, 0) <= sys.version_info[:3] < (3, 12, 3)


def serve_stdio_detached(server, runtime, protocol_out) -> None:
    """serve_stdio on the serving thread: what the main thread would have printed on a crash,
    with its exit code."""
    try:
        serve_stdio(server, runtime, protocol_out)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        leave_now(1, protocol_out)


def release_start_up_memory() -> None:
    """Hand the C heap's free pages back to the system: glibc keeps them resident unless asked,
    and the server idles for hours. Without glibc or ctypes: nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError):  # no ctypes, or a C library without it (musl)
        return
    trim(0)


def run_stdio_server(detach: bool = False):
    """Serve MCP on stdin and stdout until EOF or a stop signal; 0. With `detach`, the serving
    goes on a thread of its own and this returns None at once: the interpreter waits for that
    thread before it exits, and the signals (which only the main thread may take) still stop it."""
    RunningArchive.hold()
    config, warnings = Config.from_env()
    protocol_out = sys.stdout.buffer
    # stdout belongs to the protocol: a stray print anywhere must land on stderr instead.
    sys.stdout = sys.stderr
    runtime = Runtime(config)
    for warning in warnings:
        runtime.log.event("config-warning", "warning", detail=warning)
    runtime.log.event("start", version=__version__, python=sys.version.split()[0], pid=os.getpid())
    runtime.resume_away()
    server = McpServer(runtime, sys.stdin.buffer, protocol_out)
    StopSignals(server.stop, runtime.log)
    if not detach:
        return serve_stdio(server, runtime, protocol_out)
    threading.Thread(target=serve_stdio_detached, args=(server, runtime, protocol_out),
                     name="ask-user-rich-main").start()
    return None


def serve_stdio(server, runtime: Runtime, protocol_out) -> int:
    """run_stdio_server's serving, until EOF or a stop signal; 0."""
    trimmer = threading.Timer(START_UP_TRIM_SECONDS, release_start_up_memory)
    trimmer.name, trimmer.daemon = "ask-user-rich-trim", True
    trimmer.start()
    try:
        server.serve()
    finally:
        trimmer.cancel()
        runtime.log.event("shutdown")
        runtime.close()
    if server.reader_thread.is_alive():
        # Stopped by a signal: the stdin thread still sits in readline() holding stdin's lock,
        # and interpreter teardown would abort on it ("could not acquire lock for <stdin> at
        # interpreter shutdown", exit -6).
        leave_now(0, protocol_out)
    return 0


def leave_now(code: int, protocol_out) -> None:
    """Exit at once, without interpreter teardown, once stdout and stderr are flushed (the logs
    are closed by then)."""
    for stream in (protocol_out, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


# ============================================================================================
# Command line
# ============================================================================================

def main(argv=None, detach: bool = False):
    """The command line's exit code; None when `detach` put the stdio server on a thread of
    its own (see run_stdio_server)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        return run_stdio_server(detach)
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if args[0] in ("-V", "--version"):
        sys.stdout.write("%s %s\n" % (SERVER_NAME, __version__))
        return 0
    command, rest = args[0], args[1:]
    if command == "hook":
        return run_hook(rest)
    if command == "history":
        return run_history(rest)
    if command == "doctor" and not rest:
        return run_doctor()
    if command == "notify" and rest == ["--test"]:
        return run_notify_test()
    if command in ("inbox", "demo", "ask"):
        return run_page_command(command, rest)
    return usage_error("unknown arguments: %s" % " ".join(args))


if __name__ == "__main__":
    exit_code = main(detach=serves_from_thread())  # see "Start-up and memory"
    if exit_code is not None:
        raise SystemExit(exit_code)
