"""The sizes of askrich.py's functions and classes, from its syntax tree: lines, branches, and
the offenders against the limits a reader can hold in mind at once.

    python3 tests/interview/module_sizes.py [path/to/askrich.py] [--all]

prints the offenders (every function and class with --all), longest first;
tests/interview/test_module_shape.py holds the module to the limits.
"""

from __future__ import annotations

import ast
import os
import sys

FUNCTION_LINES = 60
FUNCTION_BRANCHES = 20
CLASS_LINES = 300

# What a branch is: each adds a path through the function. A boolean operator adds one per
# extra operand (`a and b and c`: two), as `if a: if b:` would.
BRANCH_NODES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.IfExp, ast.comprehension,
                ast.Assert)


def branches(function: ast.AST) -> int:
    """The branch points of a function, those of the functions defined inside it included
    (a reader of the function reads them too)."""
    count = 0
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, BRANCH_NODES):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        stack.extend(ast.iter_child_nodes(node))
    return count


def lines(node: ast.AST) -> int:
    """Lines from the definition (its decorators included) to its last line."""
    first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])
    return node.end_lineno - first + 1


def measure(source: str) -> list:
    """Every function and class: (kind, qualified name, lines, branches), in source order."""
    found = []

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                found.append(("function", name, lines(child), branches(child)))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                name = prefix + child.name
                found.append(("class", name, lines(child), None))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def offenders(source: str) -> list:
    """The functions over FUNCTION_LINES lines or FUNCTION_BRANCHES branches and the classes
    over CLASS_LINES lines, each as (kind, name, lines, branches)."""
    return [row for row in measure(source)
            if (row[0] == "class" and row[2] > CLASS_LINES)
            or (row[0] == "function" and (row[2] > FUNCTION_LINES or row[3] > FUNCTION_BRANCHES))]


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    every = "--all" in args
    args = [arg for arg in args if arg != "--all"]
    path = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "..", "askrich.py")
    with open(path, encoding="utf-8") as file:
        source = file.read()
    rows = measure(source) if every else offenders(source)
    rows.sort(key=lambda row: (-row[2], row[1]))
    print("%-8s %-55s %6s %8s" % ("kind", "name", "lines", "branches"))
    for kind, name, length, count in rows:
        print("%-8s %-55s %6d %8s" % (kind, name, length, "" if count is None else count))
    classes = [row for row in measure(source) if row[0] == "class"]
    functions = [row for row in measure(source) if row[0] == "function"]
    print("\n%d lines; %d functions (longest %d lines, most branches %d); %d classes (longest %d lines)" % (
        source.count("\n"), len(functions), max(row[2] for row in functions),
        max(row[3] for row in functions), len(classes), max(row[2] for row in classes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
