"""The Interview owns its state, as concurrent.futures.Future does: proven from the source and
from a live interview.

Every field an interview changes is private (a leading underscore) and read through its methods,
each of which takes its lock; no code outside the class names a private field, a private method
or the lock of an interview. A live interview shows nothing public that could change. It holds
the spec, the answers and the state, nothing else: no address, server or runtime, and nothing
of what the wire says of it.
"""

from __future__ import annotations

import ast
import types

import pytest

from helpers.support import MODULE, askrich, choice, interview

# What a public field of a live interview may hold: values that cannot change, and the read-only
# view of its call options.
IMMUTABLE = (str, int, float, bool, type(None), tuple, frozenset, types.MappingProxyType)


def _tree():
    return ast.parse(open(MODULE, encoding="utf-8").read())


def _interview_class(tree) -> ast.ClassDef:
    """Interview with the bodies of its base classes of this module (FormPresence), whose
    fields are the interview's own: one class to the checks below."""
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    interview = classes["Interview"]
    bases = [classes[base.id] for base in interview.bases if isinstance(base, ast.Name) and base.id in classes]
    return ast.ClassDef(name="Interview", bases=[], keywords=[], decorator_list=[],
                        body=interview.body + [node for base in bases for node in base.body])


def _fields(cls: ast.ClassDef) -> set:
    """Every `self.<name>` the class assigns."""
    names = set()
    for node in ast.walk(cls):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                names.add(target.attr)
    return names


def _private_names(cls: ast.ClassDef) -> set:
    """The interview's private fields and methods."""
    methods = {node.name for node in cls.body if isinstance(node, ast.FunctionDef)}
    return {name for name in _fields(cls) | methods
            if name.startswith("_") and not name.startswith("__")}


def _reaches_in(tree, cls) -> list:
    """`x._name` outside the class, for an interview's private name, on anything but `self`
    (which, in another class, is that class's own field of the same name)."""
    inside = {id(node) for node in ast.walk(cls)}
    private = _private_names(cls)
    return ["line %d: %s" % (node.lineno, ast.unparse(node)) for node in ast.walk(tree)
            if id(node) not in inside and isinstance(node, ast.Attribute) and node.attr in private
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")]


def test_the_interview_has_named_states_a_private_lock_and_one_condition_named_once():
    tree = _tree()
    cls = _interview_class(tree)
    fields = _fields(cls)
    assert {"_lock", "_changed"} <= fields
    assert not {"lock", "changed", "condition", "_condition"} & fields
    conditions = [node for node in ast.walk(cls) if isinstance(node, ast.Call)
                  and ast.unparse(node.func) == "threading.Condition"]
    assert [ast.unparse(node) for node in conditions] == ["threading.Condition(self._lock)"]
    # Named once: no second name for the condition or its lock.
    assert [ast.unparse(node) for node in ast.walk(cls) if isinstance(node, ast.Assign)
            and ast.unparse(node.value) in ("self._changed", "self._lock")] == []
    constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)
                 and isinstance(node.value, ast.Constant)}
    assert {name: constants.get(name) for name in ("PENDING", "SUBMITTED", "DECLINED", "CANCELLED")} == {
        "PENDING": "pending", "SUBMITTED": "submitted", "DECLINED": "declined", "CANCELLED": "cancelled"}


def test_every_field_the_interview_changes_is_private():
    cls = _interview_class(_tree())
    changed = set()
    for method in (node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name != "__init__"):
        for node in ast.walk(method):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AugAssign) else [])
            changed.update(target.attr for target in targets if isinstance(target, ast.Attribute)
                           and isinstance(target.value, ast.Name) and target.value.id == "self")
    assert changed and all(name.startswith("_") for name in changed), sorted(changed)


def test_no_code_outside_the_interview_names_its_private_fields_or_its_lock():
    tree = _tree()
    found = _reaches_in(tree, _interview_class(tree))
    assert found == [], "an interview's private fields or lock used outside Interview:\n" + "\n".join(found)


def test_the_check_sees_a_planted_reach_into_an_interview():
    """The walk itself works: it flags a planted read, write and lock, and not another class's
    own field of the same name."""
    planted = ast.parse(
        "class Interview:\n"
        "    def __init__(self):\n"
        "        self._lock = None\n        self._waiting = 0\n"
        "    def _touch(self):\n        pass\n"
        "class Other:\n"
        "    def __init__(self):\n        self._waiting = 1\n"
        "def elsewhere(interview):\n"
        "    interview._waiting += 1\n"
        "    if interview._waiting:\n        interview._touch()\n"
        "    with interview._lock:\n        pass\n"
    )
    found = _reaches_in(planted, _interview_class(planted))
    assert sorted(line.split(": ", 1)[1] for line in found) == [
        "interview._lock", "interview._touch", "interview._waiting", "interview._waiting"]


def test_a_live_interview_shows_no_public_field_that_can_change(runtime):
    held = runtime.open_interview(interview(choice("q", "a", "b")))
    public = {name: value for name, value in vars(held).items() if not name.startswith("_")}
    assert public and all(isinstance(value, IMMUTABLE) for value in public.values()), {
        name: type(value).__name__ for name, value in public.items()}
    # What changes is read through the lock: the state, and a spec that later appends leave alone.
    spec = held.spec
    runtime.append_questions(held.id, [choice("later", "a")])
    assert [q["id"] for q in spec["questions"]] == ["q"]
    assert [q["id"] for q in held.spec["questions"]] == ["q", "later"]
    assert held.state == "pending"


def test_the_interview_knows_no_address_server_or_wire():
    """The form's link is composed by the runtime from the token, and what GET /api/s/<token>
    and its state answer is built by the HTTP layer: nothing of either lives in the class."""
    cls = _interview_class(_tree())
    names = {node.name for node in cls.body if isinstance(node, ast.FunctionDef)} | _fields(cls)
    names |= {arg.arg for node in ast.walk(cls) if isinstance(node, ast.FunctionDef) for arg in node.args.args}
    wire_or_address = {name for name in names if any(
        word in name.lower() for word in ("url", "origin", "door", "inbox", "runtime", "hub", "json", "payload"))}
    assert wire_or_address == set()
    assert not [node.lineno for node in ast.walk(cls) if isinstance(node, ast.Call)
                and ast.unparse(node.func) in ("form_url", "json.dumps", "iso_utc")]


def test_the_interview_settles_once_and_tells_its_one_change_callback(runtime):
    changes = []
    held = askrich.Interview("0123456789ab", "t" * 24, askrich.validate_interview(interview(choice("q", "a", "b")))[0],
                             askrich.AttachmentStore(str(runtime.config.log_dir) + "/attachments/x", runtime.log),
                             on_change=lambda one: changes.append((one, one.state)))
    with held.waiter() as waiter:
        assert waiter.wait(timeout=0) == "timeout"
    assert changes == [(held, "pending"), (held, "pending")]  # a waiter came and went
    assert held.settled_result() is None and held.status() == ("pending", False, 1, False, False)
    result = {"status": "declined", "answers": []}
    assert held.settle(lambda snapshot: result) is result
    assert changes[-1] == (held, "declined") and len(changes) == 3
    assert held.settled_result() is result and held.state == "declined"
    with pytest.raises(askrich.InterviewSettled):
        held.settle(lambda snapshot: {"status": "submitted"})
    assert held.settled_result() is result and len(changes) == 3
