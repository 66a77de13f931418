#!/usr/bin/env python3
"""What ask-user-rich costs every agent session before it is ever called: the server's
instructions and its tool definitions, as a client receives them over stdio.

    python3 tests/bench/context_cost.py              # from the checkout's askrich.py
    python3 tests/bench/context_cost.py dist/askrich.pyz

Counts characters, characters / 4 (a tokenizer-free estimate), and tokens in the o200k_base
encoding when the `bpe-openai` package is importable (`pip install bpe-openai`: it carries its
vocabulary, so it counts offline). JSON is counted compact. "As the model gets them" is what
Claude Code puts in a request per tool: name, description and input schema; the output schema,
title and annotations stay on the wire.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 30


def served(server):
    """(instructions, tools) as the server at path `server` answers initialize and tools/list."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "context-cost", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    env = dict(os.environ, ASK_USER_RICH_OPEN="0", ASK_USER_RICH_INBOX_PORT="0",
               ASK_USER_RICH_LOG_DIR=os.path.join(ROOT, "tests", ".artifacts", "context-cost"))
    proc = subprocess.run([sys.executable, server], input="".join(json.dumps(m) + "\n" for m in messages),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                          universal_newlines=True, timeout=TIMEOUT)
    replies = {m.get("id"): m for m in map(json.loads, proc.stdout.splitlines())}
    return replies[1]["result"].get("instructions", ""), replies[2]["result"]["tools"]


def counter():
    """A function text -> o200k_base token count, or None when bpe-openai is not installed."""
    try:
        import bpe_openai
    except ImportError:
        return None
    return lambda text, encoding=bpe_openai.get_encoding("o200k_base"): len(encoding.encode(text))


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    server = argv[0] if argv else os.path.join(ROOT, "askrich.py")
    instructions, tools = served(server)
    model_view = [{"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]}
                  for t in tools]
    rows = [("instructions", instructions),
            ("the tools as the model gets them", compact(model_view)),
            ("together", instructions + compact(model_view)),
            ("the whole tools/list result", compact(tools))]
    for tool in tools:
        rows.append(("  %s: description" % tool["name"], tool["description"]))
        rows.append(("  %s: inputSchema" % tool["name"], compact(tool["inputSchema"])))
    tokens = counter()
    print("%-40s %10s %10s %10s" % ("part", "characters", "chars/4", "o200k" if tokens else ""))
    for label, text in rows:
        print("%-40s %10d %10d %10s" % (label, len(text), len(text) // 4, tokens(text) if tokens else ""))
    if tokens is None:
        print("(pip install bpe-openai to count o200k_base tokens too)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
