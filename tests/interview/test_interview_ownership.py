"""The Interview owns its state, as concurrent.futures.Future does: proven from the source.

An interview's fields are written, and its lock entered, only by its own methods. Anywhere
else in askrich.py, `<something>.<field> = ...` (or `+=`, `del`, a subscript store or an
in-place method such as `.append()`) on a name that is one of Interview's fields counts as
writing an interview, unless the object is the method's own `self` (then it is that other
class's own field of the same name). The lock and the condition are private and no other code
names them at all.
"""

from __future__ import annotations

import ast

from support import MODULE

# Objects that are not interviews yet share a field name with one: a Task has its own result and
# settled_monotonic.
OTHER_OBJECTS = frozenset({"task"})
# An interview's AttachmentStore guards itself with its own lock: calling its add() is not
# writing the interview.
SELF_GUARDED = frozenset({"attachments"})
MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                      "setdefault", "popitem", "add", "discard", "sort", "reverse"})


def _tree():
    return ast.parse(open(MODULE, encoding="utf-8").read())


def _interview_class(tree) -> ast.ClassDef:
    return next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Interview")


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


def _outside(tree, cls):
    inside = {id(node) for node in ast.walk(cls)}
    return [node for node in ast.walk(tree) if id(node) not in inside]


def _is_self(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _written_attribute(target):
    """The Attribute a store goes into: `x.f = `, `x.f[k] = `, `x.f[k][j] = `."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target if isinstance(target, ast.Attribute) else None


def _writes(node):
    if isinstance(node, ast.Assign):
        yield from node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        yield node.target
    elif isinstance(node, ast.Delete):
        yield from node.targets
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        if not (isinstance(node.func.value, ast.Attribute) and node.func.value.attr in SELF_GUARDED):
            yield node.func.value
    for target in list(getattr(node, "targets", [])):
        if isinstance(target, ast.Tuple):
            yield from target.elts


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


def test_no_code_outside_the_interview_writes_its_fields():
    tree = _tree()
    cls = _interview_class(tree)
    fields = _fields(cls) - {"_lock", "_changed"}
    found = []
    for node in _outside(tree, cls):
        for target in _writes(node):
            attribute = _written_attribute(target)
            if attribute is None or attribute.attr not in fields or _is_self(attribute.value):
                continue
            if isinstance(attribute.value, ast.Name) and attribute.value.id in OTHER_OBJECTS:
                continue
            found.append("line %d: %s" % (node.lineno, ast.unparse(target)))
    assert found == [], "an interview's fields written outside Interview:\n" + "\n".join(found)


def test_no_code_outside_the_interview_enters_or_names_its_lock():
    tree = _tree()
    cls = _interview_class(tree)
    found = []
    for node in _outside(tree, cls):
        if isinstance(node, ast.Attribute) and node.attr in ("_lock", "_changed"):
            found.append("line %d: %s" % (node.lineno, ast.unparse(node)))
        # The old public names: `with interview.lock:` / `with x.interview.changed:`.
        if isinstance(node, ast.With):
            for item in node.items:
                expr = item.context_expr
                if isinstance(expr, ast.Attribute) and expr.attr in ("lock", "changed") and not _is_self(expr.value):
                    found.append("line %d: with %s" % (node.lineno, ast.unparse(expr)))
    assert found == [], "an interview's lock used outside Interview:\n" + "\n".join(found)


def test_the_checks_see_a_write_and_a_lock_outside_the_class():
    """The walk itself works: the same rules flag a planted write and a planted lock."""
    planted = ast.parse(
        "class Interview:\n"
        "    def __init__(self):\n"
        "        self._lock = None\n        self._changed = None\n        self.state = 'pending'\n"
        "        self.states = []\n"
        "def elsewhere(interview):\n"
        "    interview.state = 'submitted'\n"
        "    interview.states.append(1)\n"
        "    with interview._changed:\n        pass\n"
    )
    cls = _interview_class(planted)
    fields = _fields(cls) - {"_lock", "_changed"}
    writes = [ast.unparse(t) for node in _outside(planted, cls) for t in _writes(node)
              if (_written_attribute(t) is not None and _written_attribute(t).attr in fields)]
    assert writes == ["interview.state", "interview.states"]
    locks = [n for n in _outside(planted, cls) if isinstance(n, ast.Attribute) and n.attr == "_changed"]
    assert len(locks) == 1
