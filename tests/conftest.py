"""Shared fixtures and the per-test time limit. Integration helpers live in tests/support.py.

Every test has a finite time limit (pytest-timeout): a hang fails with the test's name instead of eating the suite's
budget. A test without a real process gets ``QUICK_TIMEOUT_S``; one marked ``slow`` (it starts real processes) gets
the ``timeout`` of pyproject.toml, which also covers a real-engine start (up to 300 s) inside a fixture. A test that
needs more says so with ``@pytest.mark.timeout(N)``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
