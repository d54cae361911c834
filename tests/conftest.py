"""Shared fixtures, the per-test time limit and the ``slow`` marker's rule. Integration helpers: tests/support.py.

Every test has a finite time limit (pytest-timeout): a hang fails with the test's name instead of eating the suite's
budget. A test without a real process gets ``QUICK_TIMEOUT_S``; one marked ``slow`` gets the ``timeout`` of
pyproject.toml, which also covers a real-engine start (up to 300 s) inside a fixture. A test that needs more says so
with ``@pytest.mark.timeout(N)``.

A test that starts a real process (its own or a fixture's) must be marked ``slow``: the README's quick loop
(``-m "not slow and not vllm"``) stays quick only so. A test without the mark that starts one fails, naming the
command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gevent.subprocess
import pytest
import pytest_timeout  # noqa: F401  the plugin must be installed: without it a hang would stall the suite

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUICK_TIMEOUT_S = 120
"""A test that starts no real process: seconds of work at most, even on a loaded 2-core box."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.timeout(QUICK_TIMEOUT_S))


QUICK_COMMANDS = {"git"}
"""Commands that are no real process in this sense: the run record's ``git rev-parse`` (milliseconds), which every
summary built in a test runs."""
_POPEN_CLASSES = (subprocess.Popen, gevent.subprocess.Popen)  # locust's monkey-patching swaps in gevent's


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Outside ``slow`` tests (setup, call and teardown, fixtures included) starting a process fails the test."""
    if item.get_closest_marker("slow") is not None:
        yield
        return
    originals = {cls: cls._execute_child for cls in _POPEN_CLASSES}

    def refuse(self, args, *rest, **kw):
        argv = [args] if isinstance(args, str) else [str(a) for a in args]
        if Path(argv[0]).name in QUICK_COMMANDS:
            return originals[type(self)](self, args, *rest, **kw)
        raise pytest.fail.Exception(f"this test starts a real process ({' '.join(argv)[:120]}): mark it slow")

    for cls in _POPEN_CLASSES:
        cls._execute_child = refuse
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls._execute_child = original
