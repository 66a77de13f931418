"""askrich.py reads top to bottom: its banners stand in dependency order (each uses only what the
banners above it define) and the docstring's contents list names them, in that order."""

from __future__ import annotations

import ast
import os

MODULE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "askrich.py")

# Uses of a later banner that stay, each for its reason.
LATER_USES_KEPT = {
    # An HttpRefusal is raised deep in the form's operations and answered by the HTTP layer,
    # whose reply helpers it uses; it stays with every other exception under Errors.
    ("Errors", "Reply"), ("Errors", "error_body"), ("Errors", "json_reply"),
}


def banners(lines: list) -> list:
    """(first line number, short name) of each banner: the name is the title up to its colon."""
    found = []
    for index in range(len(lines) - 2):
        if lines[index].startswith("# ====") and lines[index + 2].startswith("# ===="):
            found.append((index + 1, lines[index + 1][2:].split(":")[0].strip()))
    return found


def contents_list(docstring: str) -> list:
    """The names in the docstring's contents list: the first line's ' · '-separated names, then
    each line's name before its two-space gap."""
    text = docstring.split("Contents", 1)[1].split("\n", 1)[1]
    names = []
    for line in text.split("\n"):
        if not line.startswith("  ") or not line.strip():
            break
        line = line.strip()
        if " · " in line:
            names += [name.strip() for name in line.split(" · ")]
        else:
            names.append(line.split("  ")[0].strip())
    return names


def read_module():
    with open(MODULE, encoding="utf-8") as f:
        source = f.read()
    return source, source.split("\n"), ast.parse(source)


def test_the_contents_list_names_every_banner_in_order():
    source, lines, tree = read_module()
    assert contents_list(ast.get_docstring(tree)) == [name for _, name in banners(lines)]


def _defined_names(node) -> list:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [target.id for target in node.targets if isinstance(target, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _local_names(node) -> set:
    """Parameters and assigned names inside a definition: a local that shares a later
    banner's name is not a use of it."""
    local = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.arg):
            local.add(sub.arg)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub is not node:
            local.add(sub.id)
    return local


def _used_names(node) -> set:
    """Names a definition reads, leaving out annotations (they are never evaluated: the module
    has `from __future__ import annotations`) and its own locals."""
    skipped = set()
    for sub in ast.walk(node):
        for annotation in (getattr(sub, "annotation", None), getattr(sub, "returns", None)):
            if annotation is not None:
                skipped.update(id(part) for part in ast.walk(annotation))
    local = _local_names(node) if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else set()
    return {sub.id for sub in ast.walk(node)
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and id(sub) not in skipped
            and sub.id not in local}


def test_each_banner_uses_only_what_the_banners_above_it_define():
    source, lines, tree = read_module()
    starts = banners(lines)

    def banner_of(line: int):
        inside = [name for start, name in starts if start <= line]
        return inside[-1] if inside else None

    order = {name: number for number, (_, name) in enumerate(starts)}
    owner = {}
    for node in tree.body:
        for name in _defined_names(node):
            owner[name] = banner_of(node.lineno)
    later = set()
    for node in tree.body:
        here = banner_of(node.lineno)
        if here is None:
            continue
        for name in _used_names(node):
            there = owner.get(name)
            if there is not None and order[there] > order[here] and (here, name) not in LATER_USES_KEPT:
                later.add((here, name, there))
    assert sorted(later) == []
