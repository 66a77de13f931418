"""Helpers for the 2026-07-28 ("modern") era tests: requests that carry their version and
capabilities in `_meta`, checks every modern result must pass, a fake opener that only
records the URL, and waits for tasks and waiters gated on what the server logs (never a sleep)."""

from __future__ import annotations

import json
import os
import shlex
import time

from helpers.support import WAIT, api_url, askrich, http_request

MODERN = "2026-07-28"
SUPPORTED_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
TASKS = "io.modelcontextprotocol/tasks"
KEY_VERSION = "io.modelcontextprotocol/protocolVersion"
KEY_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
KEY_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
KEY_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "ask-user-rich", "title": "Ask User Rich", "version": askrich.__version__}
CLIENT_INFO = {"name": "modern-tests", "title": "Modern Tests", "version": "1"}
DECLINED_URL_REASON = "The user declined to open the form (URL elicitation)."


def modern_meta(capabilities=None, tasks=False, progress_token=None, **extra) -> dict:
    """The `_meta` of one modern request; `tasks` adds the tasks extension to the capabilities."""
    capabilities = dict(capabilities or {})
    if tasks:
        extensions = dict(capabilities.get("extensions") or {})
        extensions[TASKS] = {}
        capabilities["extensions"] = extensions
    meta = {KEY_VERSION: MODERN, KEY_CAPABILITIES: capabilities, KEY_CLIENT_INFO: CLIENT_INFO}
    if progress_token is not None:
        meta["progressToken"] = progress_token
    meta.update(extra)
    return meta


def modern_params(params=None, **meta_options) -> dict:
    params = dict(params or {})
    params["_meta"] = modern_meta(**meta_options)
    return params


def send_modern(peer, method, params=None, **meta_options):
    """Send one modern request without waiting; its id."""
    return peer.request(method, modern_params(params, **meta_options))


def call_modern(peer, method, params=None, timeout: float = WAIT, **meta_options) -> dict:
    """One modern request and its whole response message."""
    return peer.response(send_modern(peer, method, params, **meta_options), timeout)


def tool_modern(peer, name, arguments, timeout: float = WAIT, extra=None, **meta_options) -> dict:
    params = {"name": name, "arguments": arguments}
    params.update(extra or {})
    return call_modern(peer, "tools/call", params, timeout, **meta_options)


def result_of(reply) -> dict:
    assert "result" in reply, reply
    return reply["result"]


def assert_modern_result(result: dict, result_type: str = "complete") -> None:
    """What every modern result carries: its resultType and the server's identity."""
    assert result.get("resultType") == result_type, result
    assert result["_meta"][KEY_SERVER_INFO] == SERVER_INFO, result


def assert_fits_the_2026_schema(method: str, result: dict) -> None:
    """The result passes the 2026-07-28 schema the official SDK validates every modern
    result against (it fails the client's call otherwise)."""
    from mcp_types import methods

    methods.validate_server_result(method, MODERN, result)


SCHEMAS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas")
SCHEMA_PATH = os.path.join(SCHEMAS, "mcp-2026-07-28.json")
# The tasks extension's messages, written for these tests from its specification (the core schema
# has none); its $refs resolve in the core schema's $defs.
TASKS_SCHEMA_PATH = os.path.join(SCHEMAS, "tasks-2026-07-28.json")
_SCHEMA = []


def _schema() -> dict:
    if not _SCHEMA:
        with open(SCHEMA_PATH, encoding="utf-8") as handle:
            schema = json.load(handle)
        with open(TASKS_SCHEMA_PATH, encoding="utf-8") as handle:
            tasks = json.load(handle)["$defs"]
        assert not set(tasks) & set(schema["$defs"]), set(tasks) & set(schema["$defs"])
        schema["$defs"] = dict(schema["$defs"], **tasks)
        _SCHEMA.append(schema)
    return _SCHEMA[0]


def schema_defs() -> dict:
    return _schema()["$defs"]


def schema_errors(definition: str, value) -> list:
    """What keeps `value` from being valid as `$defs[definition]` (empty when it is)."""
    import jsonschema

    schema = _schema()
    assert definition in schema["$defs"], definition
    wrapper = {"$schema": schema.get("$schema"), "$defs": schema["$defs"], "$ref": "#/$defs/" + definition}
    validator_class = jsonschema.validators.validator_for(wrapper)
    return sorted(validator_class(wrapper).iter_errors(value), key=lambda error: list(error.path))


def assert_fits_the_schema(definition: str, value) -> None:
    """`value` is valid as `$defs[definition]` of the official 2026-07-28 JSON schema (vendored
    in tests/schemas), or of the tasks extension's schema beside it: every required field
    present, every enum respected."""
    errors = schema_errors(definition, value)
    assert not errors, "%s does not fit %s: %s" % (json.dumps(value)[:600], definition,
                                                   "; ".join(error.message[:300] for error in errors[:5]))


TASK_RESULTS = {"tasks/get": "GetTaskResult", "tasks/cancel": "CancelTaskResult", "tasks/update": "UpdateTaskResult"}
CORE_RESULTS = {"server/discover": "DiscoverResult", "tools/list": "ListToolsResult", "ping": "Result",
                "resources/list": "ListResourcesResult", "resources/read": "ReadResourceResult",
                "resources/templates/list": "ListResourceTemplatesResult"}


def result_definition(method: str, result: dict) -> str:
    """The schema definition a modern result of `method` must fit, by its resultType."""
    if method in TASK_RESULTS:
        return TASK_RESULTS[method]
    if method == "tools/call":
        return {"task": "CreateTaskResult", "input_required": "InputRequiredResult"}.get(
            result.get("resultType"), "CallToolResult")
    return CORE_RESULTS[method]


def assert_modern_message_fits(method, message: dict) -> None:
    """One message the server wrote: the response to a modern request of `method` (None for a
    notification) fits the schema, and a complete tool result, listing or discover also passes
    the Python SDK's own 2026-07-28 validators. A task's `result` is a CallToolResult."""
    if "method" in message:
        definition = {"notifications/progress": "ProgressNotification",
                      "notifications/message": "LoggingMessageNotification",
                      "notifications/tasks": "TaskStatusNotification"}.get(message["method"])
        assert definition, "a notification the 2026-07-28 era has no place for: %s" % message
        assert_fits_the_schema(definition, message)
        return
    if "error" in message:
        assert_fits_the_schema("JSONRPCErrorResponse", message)
        return
    assert_fits_the_schema("JSONRPCResultResponse", message)
    result = message["result"]
    definition = result_definition(method, result)
    assert_fits_the_schema(definition, result)
    if definition == "InputRequiredResult":  # a MUST the schema's types cannot say
        assert "inputRequests" in result or "requestState" in result, result
    if definition in ("CallToolResult", "InputRequiredResult", "ListToolsResult", "DiscoverResult"):
        assert_fits_the_2026_schema(method, result)
    if definition == "GetTaskResult" and result.get("status") == "completed":
        assert_fits_the_schema("CallToolResult", result["result"])
        assert_fits_the_2026_schema("tools/call", result["result"])


def modern_requests_sent(peer) -> dict:
    """{id: method} of every modern request `peer` sent (its `_meta` names the version)."""
    return {message["id"]: message["method"] for message in getattr(peer, "sent", [])
            if isinstance(message, dict) and "id" in message and isinstance(message.get("method"), str)
            and isinstance(message.get("params"), dict) and isinstance(message["params"].get("_meta"), dict)
            and KEY_VERSION in message["params"]["_meta"]}


def assert_every_modern_message_fits(peer) -> int:
    """Every response the server wrote to a modern request of `peer`, and every progress, log and
    task notification, fits the 2026-07-28 schema; the number checked. Run on each peer of the
    modern tests as they end, so that no message they capture escapes the schema."""
    modern = modern_requests_sent(peer)
    checked = 0
    for message in written_messages(peer):
        if not isinstance(message, dict):
            continue
        if "method" in message and "id" not in message:
            if message["method"] in ("notifications/progress", "notifications/message", "notifications/tasks"):
                assert_modern_message_fits(None, message)
                checked += 1
        elif "method" not in message and message.get("id") in modern:
            assert_modern_message_fits(modern[message["id"]], message)
            checked += 1
    return checked


CACHE_HINTS = ("ttlMs", "cacheScope")  # required by the 2026-07-28 schema on discover and tools/list


def without_cache_hints(result: dict) -> dict:
    if "ttlMs" in result:
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0, result["ttlMs"]
    if "cacheScope" in result:
        assert result["cacheScope"] in ("public", "private"), result["cacheScope"]
    return {key: value for key, value in result.items() if key not in CACHE_HINTS}


def without_envelope(result: dict) -> dict:
    """A result minus the modern envelope, to compare it with its legacy twin."""
    return {key: value for key, value in result.items() if key not in ("resultType", "_meta")}


def written_messages(peer) -> list:
    """Every message the server wrote to stdout so far (batches flattened)."""
    messages = []
    for line in list(peer.reader.raw):
        value = json.loads(line.decode("utf-8"))
        messages.extend(value if isinstance(value, list) else [value])
    return messages


def server_requests(peer) -> list:
    """The JSON-RPC requests (method and id) the server wrote: none may exist in the modern era."""
    return [m for m in written_messages(peer) if isinstance(m, dict) and "method" in m and "id" in m]


def assert_no_server_requests(peer) -> None:
    assert server_requests(peer) == []
    methods = [m.get("method") for m in written_messages(peer) if isinstance(m, dict)]
    assert "notifications/elicitation/complete" not in methods


def form_state(url: str) -> dict:
    return http_request(api_url(url, "state")).json()


def wait_until_waiting(peer, interview_id=None, nth: int = 1) -> None:
    """Until the `nth` wait on the interview (on any, without an id) has begun: the server logs
    wait-start once the wait is counted in /state's `waiting`, so the submit then reaches it."""
    fragments = ("interview=" + interview_id,) if interview_id else ()
    peer.log.wait_for("wait-start", *fragments, nth=nth)


def post_progress(url: str, answered: int, still_open: int) -> None:
    """What the form posts while the user works: its answered and still-open counts."""
    body = {"answered": answered, "deferred": 0, "needsInfo": 0, "open": still_open}
    response = http_request(api_url(url, "progress"), "POST", body)
    assert response.status == 204, (response.status, response.body)


def get_task(peer, task_id: str, tasks: bool = True) -> dict:
    return call_modern(peer, "tasks/get", {"taskId": task_id}, tasks=tasks)


TASK_EVENTS = ("task-updated", "task-completed", "task-cancelled")


def poll_task(peer, task_id: str, predicate, timeout: float = WAIT, what: str = "the task") -> dict:
    """tasks/get until `predicate(result)` holds; the last result. It asks again each time the
    server logs a change to the task (its status message, its end), never on a timer."""
    deadline = time.monotonic() + timeout
    fragment = "task=%s " % task_id
    while True:
        changes = peer.log.count(TASK_EVENTS, fragment)
        result = result_of(get_task(peer, task_id))
        if predicate(result):
            return result
        try:
            peer.log.wait_for(TASK_EVENTS, fragment, nth=changes + 1,
                              timeout=max(0.0, deadline - time.monotonic()))
        except AssertionError as error:
            raise AssertionError("%s never happened; last tasks/get: %s\n%s" % (what, result, error)) from None


def log_events(log_dir, event: str) -> list:
    """The key=value fields of every `event` line in server.log."""
    path = os.path.join(str(log_dir), "server.log")
    found = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                parts = shlex.split(line.strip())
            except ValueError:  # a logged value with an odd quote: the event name still splits
                parts = line.split()
            if len(parts) >= 3 and parts[2] == event:
                fields = dict(part.split("=", 1) for part in parts[3:] if "=" in part)
                found.append(fields)
    return found
