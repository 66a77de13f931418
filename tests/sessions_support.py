"""What the Codex and Gemini CLI session tests share (tests/test_sessions_codex.py,
tests/test_sessions_gemini.py): the interview the scripted model asks, the answers the test
submits, and the checks on what arrived where."""

from __future__ import annotations

import json

import askrich  # tests/support.py puts the project root on sys.path first

# Markdown, a preview, non-ASCII text and a multi-select: what a CLI could mangle on the way.
ARGS = {"title": "Pick a database", "questions": [
    {"id": "db", "header": "Which database?", "body": "We store **orders**; ünïcødé ✓ survives.",
     "options": [{"id": "pg", "label": "Postgres", "description": "Row store",
                  "preview": "CREATE TABLE orders (id serial);"},
                 {"id": "my", "label": "MySQL"}], "recommended": "pg", "rationale": "We run it already."},
    {"id": "langs", "header": "Which client languages?", "multiSelect": True,
     "options": [{"id": "py", "label": "Python"}, {"id": "go", "label": "Go"}, {"id": "rs", "label": "Rust"}]}]}
NOTE = "Ops knows MySQL better."
ANSWERS = {"db": {"selected": ["my"], "notes": NOTE}, "langs": {"selected": ["py", "rs"]}}
PROMPT = "Ask me which database to use."
SESSION_TIMEOUT = 60


def ended(process):
    """End the CLI (by its own id) if it still runs; everything it printed."""
    if process.poll() is None:
        process.kill()
    out, err = process.communicate()
    return (out or "") + (err or "")


def assert_served_as_sent(spec):
    """The form serves exactly the interview ARGS describes: the call's arguments arrived intact
    (each served question also carries the interview version it arrived in)."""
    served = dict(spec, questions=[{k: v for k, v in q.items() if k != "version"} for q in spec["questions"]])
    assert served == askrich.validate_interview(ARGS)[0], json.dumps(spec, ensure_ascii=False)


def assert_answers(result):
    """The structured result of the submit ANSWERS made."""
    rows = {row["id"]: row for row in result["answers"]}
    assert rows["db"]["selected"] == ["my"] and rows["db"]["notes"] == NOTE, rows["db"]
    assert rows["langs"]["selected"] == ["py", "rs"], rows["langs"]
    assert result["status"] == "submitted" and result.get("archivePath"), result
