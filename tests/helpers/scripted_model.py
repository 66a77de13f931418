"""A scripted model for real agent sessions: a loopback HTTP server that speaks a provider's
API well enough for a CLI to run its agent loop against it, and records every request.

Each request the CLI sends to the model is handed to `policy(model, request)`, which returns
what the model says this turn: `ToolUse(name, input)` or `Text(text)`. The policy reads the
conversation the CLI sent (tool results included), so a test scripts a session as "search the
tools, call ask_user_rich, then say done once the result arrived" and asserts afterwards what the
model received in each request (`model.requests`).

Three wire formats, one per provider the pinned CLIs speak:
- Anthropic Messages (`POST /v1/messages`, streaming SSE or JSON): Claude Code
  (ANTHROPIC_BASE_URL);
- OpenAI Responses (`POST /v1/responses`, SSE): Codex (a model provider's base_url);
- Gemini generateContent (`POST /v1beta/models/<m>:streamGenerateContent?alt=sse`): Gemini CLI
  (GOOGLE_GEMINI_BASE_URL).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ToolUse:
    """`namespace`: the tool group the name belongs to, where the API has them (Codex offers an
    MCP server's tools as one Responses `namespace` tool, and expects calls to name both).
    `custom`: a Responses custom tool, whose input is free text (`arguments` a string), such as
    the JavaScript Codex's `exec` tool runs."""

    def __init__(self, name, arguments, call_id=None, namespace=None, custom=False):
        self.name = name
        self.arguments = arguments
        self.call_id = call_id
        self.namespace = namespace
        self.custom = custom


class Text:
    def __init__(self, text):
        self.text = text


class Request:
    """One request the CLI sent: its path, headers, JSON body and arrival time."""

    def __init__(self, path, headers, body, arrived):
        self.path = path
        self.headers = headers
        self.body = body
        self.arrived = arrived  # time.monotonic()
        self.answer = None  # what the policy said (None: not a model turn)

    @property
    def text(self):
        """The whole body as JSON text, for "does the model see X" assertions."""
        return json.dumps(self.body, ensure_ascii=False)


class ScriptedModel:
    """`with ScriptedModel(policy) as model:`; `model.url` is the base URL to give the CLI."""

    def __init__(self, policy, model_name="scripted-model"):
        self.policy = policy
        self.model_name = model_name
        self.requests = []
        self.turns = []  # the requests that were model turns, in order
        self.changed = threading.Condition()
        self.errors = []
        self.counter = 0
        handler = type("Handler", (_Handler,), {"model": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def next_id(self, prefix):
        with self.changed:
            self.counter += 1
            return "%s_%04d" % (prefix, self.counter)

    def wait_for(self, predicate, timeout, what="the model request"):
        """The first recorded model turn for which predicate(request) holds; waits for it."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for request in self.turns:
                    if predicate(request):
                        return request
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%s did not arrive within %ss; paths seen: %s"
                                         % (what, timeout, [r.path for r in self.requests]))
                self.changed.wait(left)

    def record(self, request, is_turn):
        with self.changed:
            self.requests.append(request)
            if is_turn:
                self.turns.append(request)
            self.changed.notify_all()


class _Handler(BaseHTTPRequestHandler):
    model = None  # set per server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # the test output is the session's, not ours
        pass

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "gzip":
            import gzip

            raw = gzip.decompress(raw)
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def do_HEAD(self):
        self._reply(200, b"", "text/plain")

    def do_GET(self):
        request = Request(self.path, dict(self.headers), None, time.monotonic())
        self.model.record(request, False)
        if self.path.rstrip("/").endswith("/models"):
            return self._json({"data": [], "models": [], "object": "list"})
        self._json({})

    def do_POST(self):
        body = self._body()
        request = Request(self.path, dict(self.headers), body, time.monotonic())
        path = self.path.split("?", 1)[0]
        try:
            if path.endswith("/v1/messages/count_tokens"):
                self.model.record(request, False)
                return self._json({"input_tokens": 1000})
            if path.endswith("/v1/messages"):
                return self._anthropic(request)
            if path.endswith("/responses"):
                return self._openai_responses(request)
            if ":streamGenerateContent" in path or ":generateContent" in path:
                return self._gemini(request, streaming=":streamGenerateContent" in path)
            if path.endswith(":countTokens"):
                self.model.record(request, False)
                return self._json({"totalTokens": 1000})
        except Exception as error:  # a test must see a policy's failure, not a hung CLI
            self.model.errors.append(repr(error))
            self.model.record(request, False)
            return self._json({"type": "error", "error": {"type": "api_error", "message": repr(error)}}, 500)
        self.model.record(request, False)
        self._json({})

    # -- plumbing ---------------------------------------------------------------------------

    def _reply(self, status, data, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, value, status=200):
        self._reply(status, json.dumps(value).encode("utf-8"), "application/json")

    def _sse(self, events):
        """`events`: (event name or None, data dict or str) pairs, sent as one SSE stream."""
        chunks = []
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            chunks.append(("event: %s\n" % name if name else "") + "data: %s\n\n" % text)
        self._reply(200, "".join(chunks).encode("utf-8"), "text/event-stream")

    def _answer(self, request):
        answer = self.model.policy(self.model, request)
        request.answer = answer
        self.model.record(request, True)
        return answer

    # -- Anthropic Messages -------------------------------------------------------------------

    def _anthropic(self, request):
        body = request.body if isinstance(request.body, dict) else {}
        answer = self._answer(request)
        message_id = self.model.next_id("msg")
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if isinstance(answer, ToolUse):
            block = {"type": "tool_use", "id": answer.call_id or self.model.next_id("toolu"),
                     "name": answer.name, "input": answer.arguments}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": answer.text}
            stop = "end_turn"
        model = body.get("model") or self.model.model_name
        if not body.get("stream"):
            return self._json({"id": message_id, "type": "message", "role": "assistant", "model": model,
                               "content": [block], "stop_reason": stop, "stop_sequence": None,
                               "usage": usage})
        start = dict(block, input={}) if block["type"] == "tool_use" else dict(block, text="")
        if block["type"] == "tool_use":
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            delta = {"type": "text_delta", "text": block["text"]}
        self._sse([
            ("message_start", {"type": "message_start", "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": usage}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 10}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    # -- OpenAI Responses ---------------------------------------------------------------------

    def _openai_responses(self, request):
        answer = self._answer(request)
        response_id = self.model.next_id("resp")
        item_id = self.model.next_id("item")
        if isinstance(answer, ToolUse) and answer.custom:
            item = {"type": "custom_tool_call", "id": item_id, "call_id": answer.call_id or self.model.next_id("call"),
                    "name": answer.name, "input": answer.arguments, "status": "completed"}
            if answer.namespace:
                item["namespace"] = answer.namespace
        elif isinstance(answer, ToolUse):
            item = {"type": "function_call", "id": item_id, "call_id": answer.call_id or self.model.next_id("call"),
                    "name": answer.name, "arguments": json.dumps(answer.arguments), "status": "completed"}
            if answer.namespace:
                item["namespace"] = answer.namespace
        else:
            item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": answer.text, "annotations": []}]}
        base = {"id": response_id, "object": "response", "created_at": int(time.time()),
                "model": self.model.model_name, "status": "in_progress", "output": []}
        done = dict(base, status="completed", output=[item],
                    usage={"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                           "total_tokens": 110})
        events = [("response.created", {"type": "response.created", "response": base}),
                  ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                  "item": dict(item, status="in_progress")})]
        if item["type"] == "message":
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": item_id, "output_index": 0,
                "content_index": 0, "delta": answer.text}))
        events += [("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                  "item": item}),
                   ("response.completed", {"type": "response.completed", "response": done})]
        self._sse(events)

    # -- Gemini -------------------------------------------------------------------------------

    def _gemini(self, request, streaming):
        answer = self._answer(request)
        if isinstance(answer, ToolUse):
            part = {"functionCall": {"name": answer.name, "args": answer.arguments}}
        else:
            part = {"text": answer.text}
        chunk = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP",
                                 "index": 0}],
                 "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
                 "modelVersion": self.model.model_name}
        if streaming:
            return self._sse([(None, chunk)])
        self._json(chunk)
