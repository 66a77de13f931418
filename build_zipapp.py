#!/usr/bin/env python3
"""Build dist/askrich.pyz: one reproducible file that runs the ask-user-rich MCP server.

    python3 build_zipapp.py                 # writes dist/askrich.pyz, runs it once, prints size + SHA-256
    python3 build_zipapp.py -o out.pyz      # another output path
    python3 build_zipapp.py --check FILE    # does FILE hold exactly what this tree builds?
    python3 build_zipapp.py --plugin        # also the Claude Code plugin marketplace (below)

The archive is a `#!/usr/bin/env python3` line followed by a zip holding `__main__.py` (below),
`askrich.py` and every file of `assets/` except `assets/screenshots/` (from which askrich builds
the form as one document for hosts that render MCP Apps; the build checks that it can). It is byte-for-byte
reproducible: entries sorted by name, one fixed timestamp (1980-01-01 00:00:00, or
SOURCE_DATE_EPOCH when set), modes normalized to 0644, no directory entries, no comment, no
extra fields. `python -m zipapp` is not used: it drops main()'s exit code and stamps file times.

`--plugin` also writes dist/ask-user-rich-marketplace/, a Claude Code plugin marketplace holding
one plugin (manifest, `.mcp.json` that runs the `.pyz` beside it, the `.pyz`, one skill, and the
AskUserQuestion and permission hooks, which answer only once the person turns them on), and
the same folder as dist/ask-user-rich-marketplace.zip, built by the same fixed-metadata rules.

Standard library only; runs on Python 3.8 and newer.
"""

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:  # `python3 -I build_zipapp.py` leaves the script's folder out
    sys.path.insert(0, ROOT)

# The names the entry point below shares with askrich.py, imported from the checkout beside this
# file so that it reads as code here; the archive gets the same from the askrich.py it packs.
try:
    from askrich import ENV_CODE_CACHE, ENV_OPEN, ENV_RESTARTED, build_app_document
except (ImportError, SyntaxError) as error:
    raise SystemExit("build_zipapp: the askrich.py beside build_zipapp.py must import and define "
                     "what the archive's entry point uses: %s" % error)

SHEBANG = b"#!/usr/bin/env python3\n"
DEFAULT_OUTPUT = os.path.join("dist", "askrich.pyz")
# The earliest time a zip entry can carry; used when SOURCE_DATE_EPOCH is not set.
DEFAULT_DATE_TIME = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o100644  # regular file, rw-r--r--
# Names that are never shipped, wherever they appear under assets/.
SKIPPED_DIRS = {"__pycache__", "node_modules"}
SKIPPED_SUFFIXES = (".pyc", ".pyo", "~", ".swp", ".tmp", ".orig", ".rej")

# ============================================================================================
# The archive's entry point
# ============================================================================================
#
# __main__.py is the functions of ENTRY_POINT below, after askrich.py's SHARED_CONSTANTS (copied
# from the askrich.py being packed, so that the archive and askrich.py read one set of variable
# names), then one line that runs run_archive(). The builder never calls them, and they run
# before askrich can be imported: keep them to os and sys.
#
# Why a code cache: zipimport never writes bytecode, so a plain `import askrich` from the
# archive compiles the whole module at every start (tens of milliseconds, paid each time a
# client spawns the server). Instead the compiled code is kept in a per-user cache file whose
# name holds the interpreter's cache tag, optimization level and a hash of the archive's bytes,
# and whose header repeats the interpreter's magic number and that hash. Any change to the
# archive or the interpreter gives another name, so stale code is never run. Every copy of the
# same archive shares that file, wherever it is, so nothing in it may stand for a path: askrich
# reads its assets through the loader of the archive that runs, and the code is renamed to that
# archive before it runs. Any problem with the cache (no such directory, not writable, owned
# by someone else, corrupt file) falls back silently to the ordinary import. PYTHONDONTWRITEBYTECODE
# and -B are about __pycache__ folders beside sources and are not consulted: many images set
# it globally, and this cache lives in the user's cache directory instead.
SHARED_CONSTANTS = ("ENV_CODE_CACHE", "ENV_RESTARTED")
MAIN_PY_HEADER = """\
# Entry point of askrich.pyz, written by build_zipapp.py. Exits with askrich.main()'s code.
import os
import sys
"""
MAIN_PY_FOOTER = "sys.exit(run_archive(__loader__))\n"


def code_cache_dir():
    """The per-user folder for compiled code, or None with no home directory."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or ""
        path = os.path.join(base, "ask-user-rich", "Cache")
    else:
        home = os.path.expanduser("~")
        if home.rstrip("/") == "":  # HOME="" would put the cache at /.cache
            home = "~"
        if sys.platform == "darwin":
            path = os.path.join(home, "Library", "Caches", "ask-user-rich")
        else:
            base = os.environ.get("XDG_CACHE_HOME")
            if not base or not os.path.isabs(base):
                base = os.path.join(home, ".cache")
            path = os.path.join(base, "ask-user-rich")
    return path if os.path.isabs(path) else None  # no home: no cache, never a relative folder


def own_folder(folder: str) -> bool:
    """Whether compiled code in `folder` may be trusted: on POSIX it must be this user's and
    writable by nobody else, or another user could plant code that we would run."""
    if os.name != "posix":
        return True
    status = os.stat(folder)
    return status.st_uid == os.getuid() and not status.st_mode & 0o022


def store_code(folder: str, name: str, blob: bytes, stem: str, keep: int = 4) -> None:
    """Write one compiled-code file into `folder` whole or not at all (0600, through a temporary
    file and a rename, so a concurrent start never reads half of it), then delete all but the
    `keep` newest files whose names start with `stem`: the versions of the code left behind."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, name)
    temporary = "%s.%d.tmp" % (path, os.getpid())
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(blob)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    try:
        older = sorted((other for other in os.listdir(folder) if other.startswith(stem) and other.endswith(".pyc")),
                       key=lambda other: os.stat(os.path.join(folder, other)).st_mtime)
        for other in older[:-keep]:
            os.unlink(os.path.join(folder, other))
    except OSError:
        pass  # another start tidied at the same time


def cached_askrich(archive, loader, may_start_over):
    """askrich's code from the cache, compiled and stored there on a miss; None when the cache
    is turned off or there is no folder for it."""
    import marshal
    import zlib
    from importlib.util import MAGIC_NUMBER

    tag = sys.implementation.cache_tag
    folder = code_cache_dir()
    if tag is None or not folder or os.environ.get(ENV_CODE_CACHE) == "0":
        return None
    with open(archive, "rb") as handle:
        data = handle.read()
    try:
        from _imp import source_hash

        digest = source_hash(0x61736B72, data).hex()
    except Exception:
        digest = "%08x" % zlib.adler32(data)
    key = "%s%08x%x" % (digest, zlib.crc32(data), len(data))
    stem = "askrich-%s-o%d-" % (tag, sys.flags.optimize)
    path = os.path.join(folder, stem + key + ".pyc")
    header = MAGIC_NUMBER + b"ask-user-rich " + key.encode() + b"\n"
    try:
        if not own_folder(folder):
            return None
        with open(path, "rb") as handle:
            blob = handle.read()
        if blob[:len(header)] == header:
            code = marshal.loads(blob[len(header):])
            if type(code) is type(cached_askrich.__code__):
                return code
    except Exception:
        pass  # missing, unreadable or damaged: compiled afresh below
    filename = os.path.join(archive, "askrich.py")
    # Without docstrings (nothing reads them at run time, and the module has no assert):
    # some 100 KB less held all day by every server.
    code = compile(loader.get_data(filename), filename, "exec", dont_inherit=True, optimize=2)
    try:
        store_code(folder, os.path.basename(path), header + marshal.dumps(code), stem)
        if may_start_over:
            start_over()
    except Exception:
        pass
    return code


def renamed_code(code, filename):
    """`code` and the code nested in it, naming `filename` as their source: the path a shared
    cache file was compiled from is any copy's, and tracebacks should name the one running."""
    nested = tuple(renamed_code(const, filename) if type(const) is type(code) else const
                   for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=nested)


def start_over():
    """After a miss, the stdio server starts over from the cache just written: compiling left
    some 6 MB behind that the allocator keeps while the server idles, all day. Nothing has been
    read or written yet; same pid, same pipes."""
    if len(sys.argv) != 1 or os.name != "posix":
        return
    import subprocess

    flags = subprocess._args_from_interpreter_flags()
    environ = dict(os.environ)
    environ[ENV_RESTARTED] = "1"  # once: a cache that cannot be read back must not loop
    os.execve(sys.executable, [sys.executable] + flags + sys.argv, environ)


def run_archive(loader):
    """Run askrich.main() from the archive `loader` reads, with askrich's code from the cache
    when it can be had; return main()'s exit code."""
    restarted = os.environ.pop(ENV_RESTARTED, None) is not None
    archive = getattr(loader, "archive", None)
    if archive is None:  # not running from a zip: an unpacked copy
        import askrich

        return askrich.main()
    # Python 3.8 keeps a relative archive path; askrich reads its assets by absolute path.
    absolute = os.path.abspath(archive)
    if sys.path and sys.path[0] == archive:
        sys.path[0] = absolute
    try:
        if archive != absolute:
            import zipimport

            loader = zipimport.zipimporter(absolute)
        code = cached_askrich(absolute, loader, not restarted)
    except Exception:
        code = None
    if code is None:
        import askrich

        return askrich.main()
    from importlib.machinery import ModuleSpec

    filename = os.path.join(absolute, "askrich.py")
    if code.co_filename != filename:
        code = renamed_code(code, filename)
    module = type(sys)("askrich")
    module.__file__ = filename
    module.__loader__ = loader
    module.__spec__ = ModuleSpec("askrich", loader, origin=filename)
    module.__spec__.has_location = True
    sys.modules["askrich"] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop("askrich", None)
        raise
    return module.main()


ENTRY_POINT = (code_cache_dir, own_folder, store_code, cached_askrich, renamed_code, start_over, run_archive)


def main_py(askrich_source: bytes) -> str:
    """The text of __main__.py: ENTRY_POINT, with what it shares from askrich.py's source."""
    import ast
    import inspect

    text = askrich_source.decode("utf-8")
    found = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and getattr(node.targets[0], "id", None) in SHARED_CONSTANTS:
            found[node.targets[0].id] = ast.get_source_segment(text, node)
    missing = [name for name in SHARED_CONSTANTS if name not in found]
    if missing:
        raise SystemExit("build_zipapp: askrich.py does not define %s" % ", ".join(missing))
    parts = [MAIN_PY_HEADER + "\n" + "\n".join(found[name] for name in SHARED_CONSTANTS)]
    parts += [inspect.getsource(function).rstrip("\n") for function in ENTRY_POINT]
    return "\n\n\n".join(parts + [MAIN_PY_FOOTER])


def date_time_from_env(environ=None):
    """The timestamp every entry carries: SOURCE_DATE_EPOCH (UTC) when set, else 1980-01-01."""
    environ = os.environ if environ is None else environ
    raw = environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not raw:
        return DEFAULT_DATE_TIME
    try:
        epoch = int(raw)
    except ValueError:
        raise SystemExit("SOURCE_DATE_EPOCH must be an integer number of seconds, not %r" % raw)
    # A zip entry can only hold 1980-01-01 .. 2107-12-31, in steps of two seconds.
    epoch = max(315532800, min(epoch, 4354819198))
    stamp = time.gmtime(epoch)[:6]
    return stamp[:5] + (stamp[5] - stamp[5] % 2,)


def collect_files(root=ROOT):
    """Return [(archive name, bytes)] for everything the archive ships, sorted by name."""
    main_path = os.path.join(root, "askrich.py")
    if not os.path.isfile(main_path):
        raise SystemExit("build_zipapp: %s not found" % main_path)
    assets_root = os.path.join(root, "assets")
    if not os.path.isdir(assets_root):
        raise SystemExit("build_zipapp: %s not found" % assets_root)
    with open(main_path, "rb") as f:
        source = f.read()
    files = [("__main__.py", main_py(source).encode("utf-8")), ("askrich.py", source)]
    for folder, dirs, names in os.walk(assets_root):
        rel = os.path.relpath(folder, assets_root)
        keep = []
        for d in dirs:
            if d in SKIPPED_DIRS or d.startswith("."):
                continue
            if rel == "." and d == "screenshots":
                continue
            keep.append(d)
        dirs[:] = sorted(keep)
        for name in names:
            if name.startswith(".") or name.endswith(SKIPPED_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            arcname = "assets/" + os.path.relpath(path, assets_root).replace(os.sep, "/")
            with open(path, "rb") as f:
                data = f.read()
            if arcname.startswith("assets/i18n/") and arcname.endswith(".json"):
                data = compact_json(data)
            files.append((arcname, data))
    # The form as one document for hosts that render MCP Apps: askrich builds it from these
    # files at its first resources/read. Built here once from what the archive ships, so that
    # a form the builder cannot inline fails the build, not a host. Not stored: the archive
    # would carry every form file twice (a third more than its size budget).
    shipped = dict(files)
    build_app_document(lambda name: shipped["assets/" + name])
    files.sort(key=lambda item: item[0])
    return files


def compact_json(data):
    """A translation file without the indentation that keeps it readable in the checkout.

    The form parses it, so the words and their order are all that matter; eleven files of
    indented keys cost the archive almost a kilobyte even compressed."""
    value = json.loads(data.decode("utf-8"))
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def build_bytes(files, date_time=DEFAULT_DATE_TIME, shebang=SHEBANG):
    """The archive as bytes: shebang, then a zip whose every entry has the same fixed metadata."""
    buffer = io.BytesIO()
    buffer.write(shebang)
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, whatever system builds it, so the modes mean the same
            info.external_attr = FILE_MODE << 16
            archive.writestr(info, data, compresslevel=9)
    return buffer.getvalue()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


# The Claude Code plugin. The marketplace and the plugin share the product's name, so users
# install `ask-user-rich@ask-user-rich`. The skill's description is what every session pays for
# (the body is read only when the skill is used), so it names the situations and nothing else;
# the body is judgment (when to interview, how to ask well), leaving what a valid call looks
# like to the tool descriptions.
PLUGIN_NAME = "ask-user-rich"
MARKETPLACE_DIR = os.path.join("dist", "ask-user-rich-marketplace")
PLUGIN_DESCRIPTION = ("Ask the user many questions at once in a local web form (options, "
                      "recommendations, rankings, notes) and get every answer back, structured.")
MARKETPLACE_DESCRIPTION = ("The ask-user-rich plugin: the MCP server that interviews the user "
                           "in a local web form, and a skill on when and how to ask.")
PLUGIN_AUTHOR = "The ask-user-rich authors"
PLUGIN_LICENSE = "MIT"
# Where the project lives; the release workflow passes its own repository with --homepage.
DEFAULT_HOMEPAGE = "https://github.com/ask-user-rich/ask-user-rich"
# Claude Code's hard limit for one tool call, in ms: an interview may wait on a person for hours.
TOOL_TIMEOUT_MS = 4 * 3600 * 1000
# The hook that asks Claude Code's own AskUserQuestion in the form. It answers only once the
# person turned it on (`askrich.pyz hook ask-user-question --enable`), and gives the questions
# back to the terminal shortly before this limit (seconds), which it is told.
HOOK_TIMEOUT_SECONDS = 3600
# The hooks the plugin ships, as (Claude Code's event, its matcher, `askrich.pyz hook` NAME): the
# AskUserQuestion hook, and the permission asks of every tool (`hook permission-request
# --enable`), which the terminal still answers too.
PLUGIN_HOOKS = (("PreToolUse", "AskUserQuestion", "ask-user-question"),
                ("PermissionRequest", "*", "permission-request"))
SKILL_MD = """\
---
name: ask-user-rich
description: Interview the user through the ask_user_rich form when you need their decisions on several things at once, on real trade-offs, a plan to approve, or an order of priorities.
---

# Asking the user well

Reach for `ask_user_rich` instead of the built-in question tool when a decision needs more
than a line of chat: several questions, options worth describing or previewing, a
recommendation you want to argue for, or a ranking. For one quick yes/no, just ask.

- One round: gather everything you need to decide now into a single call, ordered as the user
  would think it through, rather than a trickle of questions.
- Every question gets concrete options, a `recommended` one, and a `rationale` that says why
  in a sentence or two, so the user can agree in one click or see what they disagree with.
- Set `language` to the user's language (a BCP 47 tag such as `de` or `pt-BR`) and write the
  questions in it too.
- An answer that is deferred or needs info is still open: do not act on your recommendation;
  answer the notes and ask again when it matters.
- Follow-ups go into the same interview through `append_questions` while its form is open.
- When the call comes back with a link (`awaiting`), show the link to the user, then call
  `await_user_answers` with its `sessionId`.
"""


def module_version(askrich_source: bytes) -> str:
    """askrich.py's __version__, read without importing it."""
    import ast

    for node in ast.parse(askrich_source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "__version__"
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    raise SystemExit("build_zipapp: askrich.py has no __version__ = \"...\"")


def _json_bytes(value):
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def plugin_files(pyz, version, homepage):
    """Return [(path in the marketplace folder, bytes)], sorted by path."""
    plugin = {
        "name": PLUGIN_NAME,
        "version": version,
        "description": PLUGIN_DESCRIPTION,
        "author": {"name": PLUGIN_AUTHOR},
        "license": PLUGIN_LICENSE,
        "homepage": homepage,
    }
    marketplace = {
        "name": PLUGIN_NAME,
        "description": MARKETPLACE_DESCRIPTION,
        "owner": {"name": PLUGIN_AUTHOR},
        "plugins": [{"name": PLUGIN_NAME, "source": "./" + PLUGIN_NAME,
                     "description": PLUGIN_DESCRIPTION, "version": version}],
    }
    servers = {"mcpServers": {PLUGIN_NAME: {
        "type": "stdio",
        "command": "python3",
        "args": ["${CLAUDE_PLUGIN_ROOT}/askrich.pyz"],
        "timeout": TOOL_TIMEOUT_MS,
    }}}
    hooks = {"hooks": {name: [{"matcher": matcher, "hooks": [{
        "type": "command",
        "command": 'python3 "${CLAUDE_PLUGIN_ROOT}/askrich.pyz" hook %s --timeout %d' % (hook, HOOK_TIMEOUT_SECONDS),
        "timeout": HOOK_TIMEOUT_SECONDS,
    }]}] for name, matcher, hook in PLUGIN_HOOKS}}
    files = [
        (".claude-plugin/marketplace.json", _json_bytes(marketplace)),
        (PLUGIN_NAME + "/hooks/hooks.json", _json_bytes(hooks)),
        (PLUGIN_NAME + "/.claude-plugin/plugin.json", _json_bytes(plugin)),
        (PLUGIN_NAME + "/.mcp.json", _json_bytes(servers)),
        (PLUGIN_NAME + "/askrich.pyz", pyz),
        (PLUGIN_NAME + "/skills/ask-user-rich/SKILL.md", SKILL_MD.encode("utf-8")),
    ]
    files.sort(key=lambda item: item[0])
    return files


def write_folder(path, files):
    """Replace the folder at `path` with exactly `files` (0644 each), never leaving half of one."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    staging = "%s.%d.tmp" % (path, os.getpid())
    retired = "%s.%d.old" % (path, os.getpid())
    shutil.rmtree(staging, ignore_errors=True)
    for name, data in files:
        target = os.path.join(staging, *name.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
        os.chmod(target, FILE_MODE & 0o777)
    if os.path.lexists(path):
        os.replace(path, retired)
    os.replace(staging, path)
    shutil.rmtree(retired, ignore_errors=True)


def build_plugin(pyz, version, homepage, output, date_time=DEFAULT_DATE_TIME):
    """Write the marketplace folder `output` and `output`.zip (one top folder of that name);
    return the zip's bytes."""
    files = plugin_files(pyz, version, homepage)
    top = os.path.basename(os.path.normpath(output))
    archive = build_bytes([(top + "/" + name, data) for name, data in files], date_time, shebang=b"")
    write_folder(output, files)
    write_atomically(output.rstrip(os.sep) + ".zip", archive, mode=FILE_MODE & 0o777)
    return archive


def write_atomically(path, data, mode=0o755):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def smoke_run(path, python=None):
    """Run the archive once (`--version`) to prove it imports and runs; return what it printed."""
    env = dict(os.environ)
    env[ENV_CODE_CACHE] = "0"  # prove the plain import path; leave no cache behind
    env[ENV_OPEN] = "0"
    proc = subprocess.run(
        [python or sys.executable, os.path.abspath(path), "--version"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=60, env=env, cwd=os.path.dirname(os.path.abspath(path)),
    )
    out = proc.stdout.decode("utf-8", "replace").strip()
    if proc.returncode != 0 or not out.startswith("ask-user-rich "):
        raise SystemExit(
            "build_zipapp: the archive does not run (exit %d)\nstdout: %s\nstderr: %s"
            % (proc.returncode, out, proc.stderr.decode("utf-8", "replace").strip()))
    return out


def describe_differences(expected, actual):
    """Human-readable differences between two archives (as bytes), entry by entry."""
    problems = []
    if not actual.startswith(SHEBANG):
        problems.append("first line is not %r" % SHEBANG.decode().strip())
    try:
        with zipfile.ZipFile(io.BytesIO(actual)) as theirs:
            their_infos = {i.filename: i for i in theirs.infolist()}
            their_data = {n: theirs.read(n) for n in their_infos}
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return problems + ["not a readable zip archive (%s)" % exc]
    with zipfile.ZipFile(io.BytesIO(expected)) as ours:
        our_order = [i.filename for i in ours.infolist()]
        our_infos = {i.filename: i for i in ours.infolist()}
        our_data = {n: ours.read(n) for n in our_infos}
    for name in sorted(set(our_infos) - set(their_infos)):
        problems.append("missing entry %s" % name)
    for name in sorted(set(their_infos) - set(our_infos)):
        problems.append("unexpected entry %s" % name)
    for name in sorted(set(our_infos) & set(their_infos)):
        if our_data[name] != their_data[name]:
            problems.append("%s: content differs (%d bytes expected, %d found)"
                            % (name, len(our_data[name]), len(their_data[name])))
            continue
        a, b = our_infos[name], their_infos[name]
        for field in ("date_time", "external_attr", "compress_type"):
            if getattr(a, field) != getattr(b, field):
                problems.append("%s: %s is %r, expected %r"
                                % (name, field, getattr(b, field), getattr(a, field)))
    stamps = [p for p in problems if ": date_time is " in p]
    if len(stamps) > 1 and len(stamps) == len(problems) and len({p.split(": ", 1)[1] for p in stamps}) == 1:
        problems = ["every entry: " + stamps[0].split(": ", 1)[1]
                    + " (was SOURCE_DATE_EPOCH set differently?)"]
    if not problems and our_order != list(their_infos):
        problems.append("entries are in another order")
    if not problems:
        problems.append("same entries and contents, but the zip bytes differ "
                        "(another zlib version or zip writer?)")
    return problems


def uncommitted_changes(root=ROOT):
    """Shipped paths that differ from git's HEAD (a release should be built from a clean tree)."""
    if not os.path.isdir(os.path.join(root, ".git")):
        return []
    try:
        proc = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", "askrich.py", "assets"],
            cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    lines = proc.stdout.decode("utf-8", "replace").splitlines() if proc.returncode == 0 else []
    return [line for line in lines if "assets/screenshots/" not in line]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="build_zipapp.py",
        description="Build the reproducible single-file askrich.pyz, or check one.")
    parser.add_argument("-o", "--output", default=None,
                        help="where to write the archive (default: dist/askrich.pyz in the checkout)")
    parser.add_argument("--check", metavar="FILE",
                        help="verify that FILE is byte-for-byte what this tree builds; write nothing")
    parser.add_argument("--no-run", action="store_true",
                        help="do not run the built archive once to prove it works")
    parser.add_argument("--plugin", action="store_true",
                        help="also write the Claude Code plugin marketplace (folder and .zip) "
                             "to dist/ask-user-rich-marketplace")
    parser.add_argument("--homepage", default=DEFAULT_HOMEPAGE,
                        help="the plugin's homepage (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.check and args.plugin:
        parser.error("--check compares one archive; build the plugin without it")

    date_time = date_time_from_env()
    files = collect_files()
    data = build_bytes(files, date_time)

    if args.check:
        try:
            with open(args.check, "rb") as f:
                actual = f.read()
        except OSError as exc:
            print("build_zipapp: cannot read %s: %s" % (args.check, exc), file=sys.stderr)
            return 2
        if actual == data:
            print("OK %s matches this tree (%d bytes, sha256 %s)" % (args.check, len(data), sha256(data)))
            return 0
        print("MISMATCH %s does not match this tree:" % args.check)
        for problem in describe_differences(data, actual):
            print("  - " + problem)
        print("  expected sha256 %s, found %s" % (sha256(data), sha256(actual)))
        if "SOURCE_DATE_EPOCH" not in os.environ:
            print("  (built with the default timestamp; set SOURCE_DATE_EPOCH if the release used one)")
        return 1

    output = args.output or os.path.join(ROOT, DEFAULT_OUTPUT)
    changes = uncommitted_changes()
    if changes:
        print("build_zipapp: warning: building from uncommitted files (fine for testing, not for "
              "a release):\n  " + "\n  ".join(changes[:20]), file=sys.stderr)
    write_atomically(output, data)
    if not args.no_run:
        version = smoke_run(output)
        print("ran: %s" % version)
    print("path: %s" % os.path.abspath(output))
    print("size: %d bytes" % len(data))
    print("sha256: %s" % sha256(data))
    if args.plugin:
        version = module_version(dict(files)["askrich.py"])
        folder = os.path.join(ROOT, MARKETPLACE_DIR)
        archive = build_plugin(data, version, args.homepage, folder, date_time)
        print("plugin: %s (%s %s)" % (folder, PLUGIN_NAME, version))
        print("plugin zip: %s.zip" % folder)
        print("plugin zip size: %d bytes" % len(archive))
        print("plugin zip sha256: %s" % sha256(archive))
    return 0


if __name__ == "__main__":
    sys.exit(main())
