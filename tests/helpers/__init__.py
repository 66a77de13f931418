"""What the tests share: the server in-process and as a subprocess, raw HTTP and events
(support), each area's helpers (*_support), Hypothesis's strategies and profiles, the scripted
model of the session tests, another user of this machine, and the leftover-process check.

A package, imported as `helpers.<module>` with no sys.path insert: pytest imports
tests/conftest.py from a folder without __init__.py, so it puts tests/ itself on sys.path
first (the "rootdir/conftest" rule of its default `prepend` import mode) before any test module
is imported. A script run on its own (python3 tests/browser/screenshots.py) puts tests/ there
itself.
"""
