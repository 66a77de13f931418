"""The Interview owns its state, as concurrent.futures.Future does: proven from the source and
from a live interview.

Every field an interview changes is private (a leading underscore) and read through its methods,
each of which takes its lock; no code outside the class names a private field, a private method
or the lock of an interview. A live interview shows nothing public that could change.
"""

from __future__ import annotations

import ast
import concurrent.futures
import types

from helpers.support import MODULE, choice, interview

# What a public field of a live interview may hold: values that cannot change, and the read-only
# view of its call options.
IMMUTABLE = (str, int, float, bool, type(None), tuple, frozenset, types.MappingProxyType)


def _tree():
    return ast.parse(open(MODULE, encoding="utf-8").read())


def _interview_class(tree) -> ast.ClassDef:
    """The class that holds every method and field of Interview (which adds only its Future base)."""
    return next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "InterviewBody")


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
    """The interview's private fields and methods, and the future's condition it locks."""
    methods = {node.name for node in cls.body if isinstance(node, ast.FunctionDef)}
    return {name for name in _fields(cls) | methods | {"_condition"}
            if name.startswith("_") and not name.startswith("__")}


def _reaches_in(tree, cls) -> list:
    """`x._name` outside the class, for an interview's private name, on anything but `self`
    (which, in another class, is that class's own field of the same name)."""
    inside = {id(node) for node in ast.walk(cls)}
    private = _private_names(cls)
    return ["line %d: %s" % (node.lineno, ast.unparse(node)) for node in ast.walk(tree)
            if id(node) not in inside and isinstance(node, ast.Attribute) and node.attr in private
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")]


def test_the_interview_has_named_states_and_a_private_lock():
    tree = _tree()
    fields = _fields(_interview_class(tree))
    assert {"_lock", "_changed"} <= fields
    assert not {"lock", "changed", "condition"} & fields
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
        "class InterviewBody:\n"
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


def test_the_interview_is_the_future_of_its_result(runtime):
    held = runtime.open_interview(interview(choice("q", "a", "b")))
    assert isinstance(held, concurrent.futures.Future)
    done = []
    held.add_done_callback(lambda future: done.append((future, future.state_json()["state"])))
    # Running from its creation: the Future's cancel() cannot end it, settle() does.
    assert held.cancel() is False and held.running() and not held.done()
    try:
        held.result(timeout=0)
        raise AssertionError("a pending interview has no result")
    except concurrent.futures.TimeoutError:
        pass
    reply = runtime.hub.submit(held, {"answers": {"q": {"selected": ["a"]}}})
    assert reply["ok"] is True and held.done()
    result = held.result(timeout=0)
    assert result is held.settled_result() and result["status"] == "submitted"
    assert done == [(held, "submitted")]

