// A host for the official TypeScript MCP client (@modelcontextprotocol/client, the 2026-07-28
// line) and its tasks extension (@modelcontextprotocol/ext-tasks), steered by a Python test.
//
// The test writes one JSON command a line to stdin: {"id", "op", ...}. Each command runs at once
// (a blocking call does not hold up the next command) and ends with one line on stdout,
// {"reply": id, "ok": value} or {"reply": id, "error": {...}}. Everything else the host sees is an
// event line, {"event": ...}: every JSON-RPC message on the wire ("wire", both directions), each
// progress notification a call's handler received, each elicitation the client's handler
// answered, each task view the tasks extension reported, and every error the SDK raised on its
// own (schema validation included), so that the test can hold all of it to the spec.
//
// ESM resolves packages from this file's folder upward: the test runs a copy of this file in a
// folder whose node_modules points at the pinned install (tests/clients_support.py).

import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import * as tasksV2 from "@modelcontextprotocol/ext-tasks/core/v2";

const CLIENT_INFO = { name: "ts-client-tests", title: "TS Client Tests", version: "1" };

function emit(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

function errorInfo(error) {
  if (!(error instanceof Error)) return { message: String(error) };
  const info = { name: error.name, message: error.message, stack: error.stack };
  if (error.code !== undefined) info.code = error.code;
  if (error.data !== undefined) info.data = error.data;
  if (error.cause !== undefined) info.cause = errorInfo(error.cause);
  return info;
}

// The SDK reports some things it refuses only on the console (a capability the server did not
// declare, a response it could not match): those are events too, so a test sees them.
for (const level of ["warn", "error"]) {
  console[level] = (...args) => emit({ event: "clientWarning", level, text: args.map(String).join(" ") });
}

const state = {
  client: undefined,
  transport: undefined,
  session: undefined,
  capabilities: undefined,
  executions: new Map(), // taskId -> ToolExecution of the tasks extension
  raw: new Map(), // id of a request the host sent itself -> its resolver
  nextRaw: 0,
};

// Watch the transport in both directions without replacing its class: the SDK probes a stdio
// server on a disposable sibling only when the transport is its own StdioClientTransport.
function watch(transport) {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    emit({ event: "wire", dir: "out", message });
    return send(message, options);
  };
  let deliver;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get() {
      return deliver === undefined ? undefined : receive;
    },
    set(handler) {
      deliver = handler;
    },
  });
  function receive(message, extra) {
    emit({ event: "wire", dir: "in", message });
    const pending = message && message.id !== undefined ? state.raw.get(message.id) : undefined;
    if (pending !== undefined && message.method === undefined) {
      state.raw.delete(message.id);
      pending(message);
      return;
    }
    if (deliver !== undefined) deliver(message, extra);
  }
}

// The tasks extension needs a host that sends its 2026-07-28 task traffic itself (the SDK's own
// request codecs do not know the task result shapes): requests on the same pipe, with ids of our
// own that the SDK never issues, answered here before the SDK sees them.
function rawDispatch(request, options = {}) {
  const id = "host-" + ++state.nextRaw;
  return new Promise((resolve, reject) => {
    const signal = options.signal;
    const abort = () => {
      state.raw.delete(id);
      state.transport
        .send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: "aborted" } })
        .catch(() => {});
      reject(signal.reason ?? new Error("aborted"));
    };
    if (signal?.aborted) return abort();
    signal?.addEventListener("abort", abort, { once: true });
    state.raw.set(id, (message) => {
      signal?.removeEventListener("abort", abort);
      if (message.error !== undefined) resolve({ kind: "error", error: message.error });
      else resolve({ kind: "result", result: message.result });
    });
    state.transport.send({ jsonrpc: "2.0", id, ...request }).catch((error) => {
      state.raw.delete(id);
      reject(error);
    });
  });
}

function elicitationAnswer(answers, mode) {
  const answer = answers[mode];
  if (answer === undefined) return { action: "cancel" };
  return answer;
}

async function connect(command) {
  const elicitation = command.elicitation || {};
  const capabilities = {};
  const modes = {};
  if (elicitation.form !== undefined) modes.form = {};
  if (elicitation.url !== undefined) modes.url = {};
  if (Object.keys(modes).length) capabilities.elicitation = modes;
  state.capabilities = capabilities;
  const mode = command.mode === "auto" ? "auto" : { pin: command.mode };
  const client = new Client(CLIENT_INFO, { capabilities, versionNegotiation: { mode } });
  client.onerror = (error) => emit({ event: "clientError", error: errorInfo(error) });
  if (Object.keys(modes).length) {
    client.setRequestHandler("elicitation/create", async (request) => {
      const params = request.params;
      const answer = elicitationAnswer(elicitation, params.mode === "url" ? "url" : "form");
      emit({ event: "elicitation", params, answer });
      return answer;
    });
  }
  const transport = new StdioClientTransport({
    command: command.command,
    args: command.args,
    env: command.env,
    cwd: command.cwd,
    stderr: "inherit",
  });
  watch(transport);
  state.client = client;
  state.transport = transport;
  await client.connect(transport);
  return {
    era: client.getProtocolEra(),
    protocolVersion: client.getNegotiatedProtocolVersion(),
    serverVersion: client.getServerVersion(),
    serverCapabilities: client.getServerCapabilities(),
    instructions: client.getInstructions(),
    discover: client.getDiscoverResult(),
  };
}

function taskSession() {
  if (state.session === undefined) {
    state.session = createTaskSessionFromClient(state.client, {
      endpointId: "ts-client-tests",
      rawDispatch,
      v2RequestFraming: {
        protocolVersion: state.client.getNegotiatedProtocolVersion(),
        clientInfo: CLIENT_INFO,
        clientCapabilities: state.capabilities,
      },
      onError: (error) => emit({ event: "clientError", error: errorInfo(error) }),
    });
  }
  return state.session;
}

function viewOf(task) {
  return task === undefined ? undefined : { taskId: task.taskId, status: task.status,
    statusMessage: task.statusMessage, suggestedPollIntervalMs: task.suggestedPollIntervalMs,
    raw: task.raw };
}

const OPERATIONS = {
  connect,
  async listTools() {
    return state.client.listTools();
  },
  async callTool(command) {
    const options = { timeout: command.timeoutMs ?? 120000 };
    if (command.progress) {
      options.onprogress = (progress) => emit({ event: "progress", call: command.id, progress });
    }
    return state.client.callTool({ name: command.name, arguments: command.arguments }, options);
  },
  async taskCall(command) {
    const session = taskSession();
    const execution = await session.callTool(command.name, command.arguments, {
      task: { preference: command.preference ?? "prefer" },
      requestTimeoutMs: command.timeoutMs ?? 120000,
    });
    if (execution.kind !== "task") {
      const outcome = await execution.result();
      return { kind: execution.kind, outcome };
    }
    state.executions.set(execution.handle.taskId, execution);
    return { kind: execution.kind, taskId: execution.handle.taskId, capabilities: session.capabilities };
  },
  async taskSettle(command) {
    const execution = state.executions.get(command.taskId);
    const { outcome, lastTask } = await execution.settle({
      onEvent: (event) => {
        if (event.type === "task") emit({ event: "task", taskId: command.taskId, task: viewOf(event.task) });
      },
    });
    const settled = { status: outcome.status, task: viewOf(outcome.task), lastTask: viewOf(lastTask) };
    if (outcome.status === "completed") settled.result = resultFromTaskOutcome(outcome);
    if (outcome.status === "failed") settled.error = errorInfo(outcome.error);
    return settled;
  },
  async taskCancel(command) {
    await state.executions.get(command.taskId).cancel();
    return { cancelled: command.taskId };
  },
  async taskSnapshot(command) {
    return viewOf(await taskSession().task(command.taskId).snapshot());
  },
  // The tasks extension's own wire schemas (Zod, generated from its specification) as a judge
  // of a message the test captured: {schema: "<name>V2Schema", value}.
  async validate(command) {
    const schema = tasksV2[command.schema];
    if (schema === undefined || typeof schema.safeParse !== "function") throw new Error("no schema " + command.schema);
    const parsed = schema.safeParse(command.value);
    return parsed.success ? { valid: true } : { valid: false, issues: parsed.error.issues };
  },
  async close() {
    if (state.session !== undefined) await state.session.close();
    await state.client.close();
    return { closed: true };
  },
};

const input = createInterface({ input: process.stdin });
const running = new Set();
input.on("line", (line) => {
  if (!line.trim()) return;
  const command = JSON.parse(line);
  const operation = OPERATIONS[command.op];
  const work = (async () => {
    if (operation === undefined) throw new Error("unknown op " + command.op);
    return operation(command);
  })().then(
    (value) => emit({ reply: command.id, ok: value === undefined ? null : value }),
    (error) => emit({ reply: command.id, error: errorInfo(error) }),
  );
  running.add(work);
  work.finally(() => running.delete(work));
});
input.on("close", async () => {
  await Promise.allSettled([...running]);
  process.exit(0);
});
