"""The design's fixed points: one stdlib-only module that parses on Python 3.8 and does nothing
at import time."""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys

import pytest

import askrich
from helpers.support import MODULE, ROOT
from helpers.zipapp_support import PYENV_VERSIONS


def imported_modules(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_askrich_imports_only_the_standard_library():
    outside = {name for name in imported_modules(MODULE)
               if name not in sys.stdlib_module_names and name != "__future__"}
    assert outside == set()


def test_askrich_parses_and_imports_on_the_oldest_supported_python():
    candidates = sorted(glob.glob(os.path.join(PYENV_VERSIONS, "3.8*", "bin", "python3.8")))
    interpreter = candidates[0] if candidates else None
    if interpreter is None:
        # The version matrix in test_versions.py reports which interpreters ran; here the
        # syntax is still checked against 3.8's grammar by the running interpreter.
        ast.parse(open(MODULE, encoding="utf-8").read(), feature_version=(3, 8))
        return
    subprocess.run([interpreter, "-c", "import askrich"], cwd=ROOT, check=True, timeout=60)


def test_importing_askrich_starts_nothing_and_writes_nothing(tmp_path):
    code = (
        "import threading, sys, os; before = threading.active_count(); "
        "import askrich; "
        "assert threading.active_count() == before; "
        "heavy = {'http.server', 'subprocess', 'unicodedata', 'difflib', 'secrets', 'concurrent.futures', "
        "'logging'} & set(sys.modules); "
        "assert not heavy, heavy; "
        "assert os.listdir(os.environ['HOME']) == []"
    )
    env = dict(os.environ, HOME=str(tmp_path), XDG_STATE_HOME="", PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-S", "-c", code], env=env, check=True, timeout=60)


def test_every_name_of_the_public_api_is_there_and_the_interview_is_a_future():
    # Interview is built on first use (its Future base imports logging): the module still
    # answers for it by name, and `from askrich import *` takes every name __all__ lists.
    from concurrent.futures import Future

    assert issubclass(askrich.Interview, Future)
    assert askrich.Interview.__qualname__ == "Interview"
    assert all(getattr(askrich, name) is not None for name in askrich.__all__)
    with pytest.raises(AttributeError):
        askrich.NoSuchName  # noqa: B018


def test_askrich_has_no_global_statement():
    # Module state lives in the objects that own it (RunningArchive.held, the BuiltOnce server
    # classes), so that no function rebinds a module name behind the reader's back.
    tree = ast.parse(open(MODULE, encoding="utf-8").read())
    assert [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Global)] == []


def test_a_config_is_frozen_and_a_changed_one_is_new(tmp_path):
    config = askrich.Config(log_dir=str(tmp_path), port=0)
    with pytest.raises(AttributeError):
        config.port = 1
    with pytest.raises(AttributeError):
        config.extra = 1
    changed = config.replace(port=8123)
    assert (changed.port, config.port, changed.log_dir) == (8123, 0, str(tmp_path))


def test_the_constant_tables_are_read_only():
    for table in (askrich.ASSET_CONTENT_TYPES, askrich.ANSWER_MODES, askrich.WSL_WINDOWS_PATHS,
                  askrich.ERROR_CODES, askrich.ATTACHMENT_STATUS):
        with pytest.raises(TypeError):
            table["x"] = "y"
    assert isinstance(askrich.__all__, tuple) and isinstance(askrich.ASSET_FILES, frozenset)


def places(predicate):
    """The functions (Class.method for a method) of askrich.py holding a node that matches."""
    tree = ast.parse(open(MODULE, encoding="utf-8").read())
    found = set()

    def visit(node, where):
        for child in ast.iter_child_nodes(node):
            name = where
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                name = child.name if where is None or isinstance(node, ast.Module) else where + "." + child.name
            if predicate(child):
                found.add(where)
            visit(child, name)

    visit(tree, None)
    return found


def calls(module, name):
    return lambda node: (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                         and node.func.attr == name and isinstance(node.func.value, ast.Name)
                         and node.func.value.id == module)


def test_each_private_file_and_process_primitive_is_written_once():
    # A second copy of a private write or read drifts from the first (a missing fsync, a
    # followed symlink, a FIFO that blocks): every file of ours goes through these.
    # (StderrLines._open opens no file of ours: a non-blocking way onto the stderr we were given.)
    assert places(calls("os", "open")) == {
        "create_private_file", "open_private_file", "sync_directory", "Log._open", "StderrLines._open"}
    assert places(calls("os", "fsync")) == {"write_whole", "sync_directory"}
    # /proc paths are named only here (and as the module's WSL_INTEROP_DIR), each read by read_proc.
    assert places(lambda node: isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value.startswith("/proc")) == {"proc_stat", None}
    assert places(lambda node: isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and "text/event-stream" in node.value) == {"FormRequestPlumbing.send_event_stream"}
    origins = [node for node in ast.walk(ast.parse(open(MODULE, encoding="utf-8").read()))
               if isinstance(node, ast.Assign) and "allowed_origins" in ast.dump(node.targets[0])]
    assert origins and all(isinstance(node.value, ast.Call) and node.value.func.id == "allowed_hosts"
                           for node in origins)
