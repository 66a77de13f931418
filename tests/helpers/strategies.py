"""Shared Hypothesis strategies: JSON values, JSON-RPC messages and stdin lines, tool arguments
with a wrong type in any field, valid interviews, HTTP requests, and markdown that tries to run
script. Any test module may import them; add new ones here rather than in a test."""

from __future__ import annotations

import json
import string

from hypothesis import strategies as st

# -- JSON -------------------------------------------------------------------------------------

# Text as JSON can carry it: any code point, lone surrogates included ("\ud800" is a legal JSON
# escape, and UTF-8 cannot encode it), line and paragraph separators, NUL.
ODD_TEXT = ("\ud800", "a\udfffb", "\u2028\u2029", "\x00", "\ufeff", "e\u0301", "\U0001f600")
any_text = st.one_of(
    st.text(max_size=24),
    st.text(st.characters(exclude_categories=()), max_size=24),
    st.sampled_from(ODD_TEXT),
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    any_text,
)


def json_values(max_leaves: int = 12):
    """Any JSON value (finite numbers only: NaN is not JSON)."""
    return st.recursive(
        json_scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.text(max_size=12), inner, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def deep_json(min_depth: int = 1, max_depth: int = 20000):
    """Nesting bombs: `[[[…]]]` or `{"a":{"a":…}}`, far deeper than any recursion limit."""
    return st.tuples(st.integers(min_depth, max_depth), st.booleans()).map(
        lambda pair: (b"[" * pair[0] + b"]" * pair[0]) if pair[1]
        else (b'{"a":' * pair[0] + b"1" + b"}" * pair[0])
    )


# -- ids and interviews -----------------------------------------------------------------------

ID_ALPHABET = string.ascii_letters + string.digits + "_.:-"
good_ids = st.text(alphabet=ID_ALPHABET, min_size=1, max_size=16)
markdown = st.one_of(st.text(max_size=80), any_text)


@st.composite
def valid_questions(draw, min_size: int = 1, max_size: int = 5, prefix: str = ""):
    """Questions that validate: unique ids, rank questions with 2+ options, valid recommendations."""
    count = draw(st.integers(min_size, max_size))
    ids = draw(st.lists(good_ids, min_size=count, max_size=count, unique=True))
    questions = []
    for qid in ids:
        rank = draw(st.booleans()) and draw(st.booleans())
        option_ids = draw(st.lists(good_ids, min_size=2 if rank else 0, max_size=4, unique=True))
        question = {"id": prefix + qid, "header": draw(st.text(min_size=1, max_size=40).filter(str.strip))}
        question["options"] = [
            {"id": oid, "label": draw(st.text(min_size=1, max_size=20).filter(str.strip))}
            for oid in option_ids
        ]
        if rank:
            question["kind"] = "rank"
            if draw(st.booleans()):
                question["recommended"] = draw(st.permutations(option_ids))
        else:
            multi = draw(st.booleans())
            question["multiSelect"] = multi
            if option_ids and draw(st.booleans()):
                question["recommended"] = (
                    draw(st.lists(st.sampled_from(option_ids), min_size=1, unique=True))
                    if multi else draw(st.sampled_from(option_ids))
                )
        if draw(st.booleans()):
            question["body"] = draw(markdown)
        questions.append(question)
    return questions


@st.composite
def valid_interviews(draw, delivery: str = "link"):
    return {"title": draw(st.text(min_size=1, max_size=40).filter(str.strip)),
            "questions": draw(valid_questions()), "delivery": delivery}


def _maybe_wrong(good):
    """A field's value: well typed, or any JSON value at all."""
    return st.one_of(good, json_values(6))


def fuzzed_object(fields: dict, unknown: bool = True):
    """An object with any subset of `fields`, each well typed or not, and maybe a stray key."""
    strategy = st.fixed_dictionaries({}, optional={name: _maybe_wrong(good) for name, good in fields.items()})
    if unknown:
        strategy = st.tuples(strategy, st.dictionaries(st.text(max_size=12), json_values(3), max_size=1)).map(
            lambda pair: dict(pair[1], **pair[0])
        )
    return strategy


fuzzed_options = st.lists(
    fuzzed_object({
        "id": good_ids, "label": any_text, "description": markdown, "preview": markdown,
        "textInput": fuzzed_object({"placeholder": st.text(max_size=10), "required": st.booleans()}, False),
    }),
    max_size=3,
)
fuzzed_questions = st.lists(
    fuzzed_object({
        "id": good_ids, "header": any_text, "body": markdown,
        "kind": st.sampled_from(["choice", "rank"]), "options": fuzzed_options,
        "recommended": st.one_of(good_ids, st.lists(good_ids, max_size=3)), "rationale": markdown,
        "multiSelect": st.booleans(), "allowOther": st.booleans(),
        "dependsOn": st.lists(good_ids, max_size=2),
    }),
    max_size=4,
)
session_ids = st.text(alphabet="0123456789abcdef", min_size=12, max_size=12)

# The three tools' arguments, with a wrong type possible in every field. Delivery is never
# "browser" by default here: fuzzing must not open windows (tests also set open_browser off).
TOOL_ARGUMENTS = {
    "ask_user_rich": fuzzed_object({
        "title": any_text, "intro": markdown, "questions": fuzzed_questions,
        "delivery": st.sampled_from(["link", "elicitation", "browser", "mail"]),
        "timeoutSeconds": st.integers(-5, 700000),
    }),
    "append_questions": fuzzed_object({
        "sessionId": session_ids, "questions": fuzzed_questions, "note": markdown,
    }),
    "await_user_answers": fuzzed_object({"sessionId": session_ids, "timeoutSeconds": st.integers(-5, 5)}),
}

# -- JSON-RPC ---------------------------------------------------------------------------------

rpc_ids = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False), any_text,
    st.lists(json_scalars, max_size=2), st.dictionaries(st.text(max_size=4), json_scalars, max_size=2),
)
METHODS = (
    "initialize", "ping", "tools/list", "tools/call", "logging/setLevel", "server/discover",
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "resources/list", "prompts/get", "",
)
tool_call_params = st.one_of(
    st.sampled_from(sorted(TOOL_ARGUMENTS)).flatmap(
        lambda name: st.fixed_dictionaries(
            {"name": st.just(name), "arguments": st.one_of(TOOL_ARGUMENTS[name], json_values(4))},
            optional={"_meta": st.fixed_dictionaries({}, optional={"progressToken": rpc_ids})},
        )
    ),
    fuzzed_object({"name": st.text(max_size=16), "arguments": json_values(4)}),
)


@st.composite
def rpc_messages(draw):
    """A JSON-RPC message, well formed or not: every field may be missing or mistyped, ids
    take every JSON type, notifications may carry ids, responses answer requests never sent."""
    message = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0" if draw(st.integers(0, 6)) else draw(json_values(2))
    shape = draw(st.sampled_from(["request", "notification", "response", "anything"]))
    if shape in ("request", "notification", "anything"):
        method = draw(st.one_of(st.sampled_from(METHODS), st.text(max_size=20), json_values(2)))
        message["method"] = method
        if method == "tools/call" and draw(st.integers(0, 4)):
            message["params"] = draw(tool_call_params)
        elif method == "logging/setLevel" and draw(st.booleans()):
            message["params"] = {"level": draw(st.sampled_from(["debug", "error", "loud", 3]))}
        elif method == "notifications/cancelled" and draw(st.booleans()):
            message["params"] = {"requestId": draw(rpc_ids)}
        elif draw(st.booleans()):
            message["params"] = draw(json_values(6))
    if shape in ("request", "response") or draw(st.booleans()):
        message["id"] = draw(st.one_of(rpc_ids, st.sampled_from(["srv-1", "srv-999"])))
    if shape == "response":
        key = draw(st.sampled_from(["result", "error"]))
        message[key] = draw(json_values(4))
    return message


def encode(message) -> bytes:
    return json.dumps(message).encode("utf-8")


# Lines that once broke the server, or that Python's json accepts but JSON does not.
REGRESSION_LINES = (
    b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":-Infinity,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":[1]}}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":{"a":1}}}',
    b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":"\xff\xfe"}}',
    b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":5,"method":"ping"}',  # a UTF-8 byte-order mark
    b'[]',
    b'[[]]',
    b'{"jsonrpc":"2.0","id":"\\u2028\\ud800","method":"ping"}',
)

stdin_lines = st.one_of(
    rpc_messages().map(encode),
    st.lists(rpc_messages(), max_size=4).map(encode),  # batches, empty ones included
    st.binary(max_size=200).map(lambda data: data.replace(b"\n", b" ")),  # any bytes, bad UTF-8
    deep_json(),
    st.sampled_from(REGRESSION_LINES),
)

# -- HTTP -------------------------------------------------------------------------------------

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT")
http_methods = st.one_of(
    st.sampled_from(HTTP_METHODS),
    st.text(alphabet=string.ascii_letters + "-_", min_size=1, max_size=10),
)
TRAVERSALS = (
    "/assets/../askrich.py", "/assets/..%2faskrich.py", "/assets/%2e%2e/askrich.py",
    "/assets/%2e%2e%2faskrich.py", "/assets/..\\askrich.py", "/assets/..%5caskrich.py",
    "/assets/js/../../askrich.py", "/assets//etc/passwd", "/assets/%252e%252e/askrich.py",
    "/assets/demo.json", "/assets/vendor/README", "/assets/form.html%00.js", "/assets/form.html;.js",
    "/assets/JS/MAIN.JS", "/assets/./form.css", "/assets/", "/assets", "/assets/js/",
    "/askrich.py", "/../askrich.py", "//assets/form.css", "/assets/form.css?../../askrich.py",
    "/assets/..", "/assets/%c0%ae%c0%ae/askrich.py", "/assets/\u2025/askrich.py",
)
# Where the real token goes: `{t}`; the tests substitute the live token or a forgery of it.
ROUTE_TEMPLATES = (
    "/s/{t}", "/api/s/{t}", "/api/s/{t}/state", "/api/s/{t}/progress", "/api/s/{t}/submit",
    "/api/s/{t}/nope", "/api/s/{t}/submit/", "/api/s/{t}//submit", "/s/{t}/", "/s/{t}?x=1",
    "/api/s/{t}/state?{t}", "/S/{t}", "/api/S/{t}", "/s/", "/api/s/", "/", "", "*",
    "/api/s/{t}/attachments", "/api/s/{t}/attachments/0123456789abcdef", "/api/s/{t}/attachments/",
    "http://localhost/s/{t}",
)
forgeries = st.sampled_from(
    ["live", "live", "live", "prefix", "last-char", "longer", "empty", "encoded", "other"]
)
paths = st.one_of(
    st.tuples(st.sampled_from(ROUTE_TEMPLATES), forgeries),
    st.sampled_from(TRAVERSALS).map(lambda p: (p, "live")),
    st.text(alphabet=string.printable.replace("\r", "").replace("\n", "").replace(" ", ""), max_size=60)
    .map(lambda p: ("/" + p, "live")),
)
HOSTS = ("{own}", "{own}", "{own}", "127.0.0.1:{port}", "[::1]:{port}", "localhost", "evil.example",
         "localhost.evil.example:{port}", "127.0.0.1.nip.io:{port}", "", "LOCALHOST:{port}",
         "localhost:{port}:{port}", "[::1", "0.0.0.0:{port}", "localhost\t")
ORIGINS = (None, None, None, "http://localhost:{port}", "null", "http://evil.example",
           "http://localhost:1", "http://127.0.0.1:{port}", "https://localhost:{port}", "")
CONTENT_TYPES = (None, "application/json", "application/json; charset=utf-8", "text/plain",
                 "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "APPLICATION/JSON", "application/json-patch+json", "application/jsonx", "")
http_headers = st.dictionaries(
    st.one_of(st.just("X-Attachment-Name"), st.text(alphabet=string.ascii_letters + "-", min_size=1, max_size=12)),
    st.text(alphabet=string.printable.replace("\r", "").replace("\n", ""), max_size=30),
    max_size=4,
)
http_bodies = st.one_of(
    st.just(b""),
    st.binary(max_size=300),
    json_values(10).map(encode),
    st.fixed_dictionaries(
        {"answers": st.one_of(st.dictionaries(st.text(max_size=6), json_values(4), max_size=3), json_values(3))},
        optional={"generalNotes": json_values(2), "specVersion": json_values(1)},
    ).map(encode),
    deep_json(max_depth=5000),
)

# -- markdown that tries to run script ----------------------------------------------------------

# Each sets window.__pwned (or navigates away) if the form ever runs it.
SCRIPT_MARKDOWN = (
    "<script>window.__pwned = 'script'</script>",
    '<img src="x" onerror="window.__pwned = \'img\'">',
    "<svg onload=\"window.__pwned='svg'\"><circle r=1 /></svg>",
    "[click me](javascript:window.__pwned='link')",
    "[click me](JaVaScRiPt:window.__pwned='link2')",
    "[entity](&#106;avascript:window.__pwned='entity')",
    "![pic](x\" onerror=\"window.__pwned='alt')",
    "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\"></iframe>",
    "<a href=\"javascript:window.__pwned='a'\">a</a>",
    "<details open ontoggle=\"window.__pwned='details'\"><summary>x</summary></details>",
    "<input autofocus onfocus=\"window.__pwned='focus'\">",
    "<math><mtext><table><mglyph><style><img src=x onerror=\"window.__pwned='mxss'\">",
    "<form action=\"javascript:window.__pwned='form'\"><button>go</button></form>",
    "<meta http-equiv=\"refresh\" content=\"0;url=javascript:window.__pwned='meta'\">",
    "<object data=\"javascript:window.__pwned='object'\"></object>",
    "<embed src=\"javascript:window.__pwned='embed'\">",
    "<base href=\"javascript:window.__pwned='base'//\">",
    "<video><source onerror=\"window.__pwned='video'\"></video>",
    "<style>@import 'javascript:window.__pwned=1'</style><div style=\"background:url(javascript:window.__pwned='css')\">x</div>",
    "[data](data:text/html,<script>window.__pwned='data'</script>)",
    "```html\n<script>window.__pwned='fence'</script>\n```",
    "<noscript><p title=\"</noscript><img src=x onerror=window.__pwned='noscript'>\">",
    "<a id=\"__pwned\" name=\"__pwned\">clobber</a>",
    "<scr<script>ipt>window.__pwned='nested'</script>",
)

# -- the 2026-07-28 era's per-request _meta -----------------------------------------------------

MODERN_VERSION = "2026-07-28"
KEY_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
KEY_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
MISSING = object()  # a key (or the whole _meta) left out of the request

huge_text = st.one_of(
    st.integers(10_000, 300_000).map(lambda n: "v" * n),
    st.integers(1_000, 20_000).map(lambda n: "\U0001f600\u2028" * n),
)
protocol_versions = st.one_of(
    st.just(MODERN_VERSION),
    st.sampled_from(["2025-11-25", "2024-11-05", "2026-07-29", "2099-01-01", "", "2026-07-28 ", "2026-7-28"]),
    any_text, huge_text, json_values(3),
)
client_capabilities = st.one_of(
    st.sampled_from([
        {}, {"elicitation": {}}, {"elicitation": {"form": {}, "url": {}}},
        {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        {"roots": {"listChanged": True}, "elicitation": {"form": {}}},
    ]),
    st.fixed_dictionaries({}, optional={
        "elicitation": json_values(4), "extensions": json_values(4), "roots": json_values(2),
        "sampling": json_values(2),
    }),
    json_values(4),
    huge_text,
)
junk_meta_values = st.one_of(json_values(6), huge_text, deep_json(1, 200).map(json.loads))
_meta_dicts = st.fixed_dictionaries({}, optional={
    KEY_PROTOCOL_VERSION: protocol_versions,
    KEY_CLIENT_CAPABILITIES: client_capabilities,
    "io.modelcontextprotocol/clientInfo": st.one_of(
        st.fixed_dictionaries({"name": any_text}, optional={"title": json_values(1), "version": json_values(1)}),
        junk_meta_values),
    "io.modelcontextprotocol/logLevel": st.one_of(
        st.sampled_from(["debug", "info", "warning", "error", "loud"]), json_values(2)),
    "progressToken": st.one_of(any_text, st.integers(), json_values(2)),
}).flatmap(lambda meta: st.dictionaries(st.text(max_size=40), junk_meta_values, max_size=3).map(
    lambda junk: dict(junk, **meta)))
# Any _meta a client could send: none at all, not an object, or an object holding anything.
request_metas = st.one_of(st.just(MISSING), _meta_dicts, junk_meta_values)
