"""Skip-or-fail for tests that need something outside the Python venv (a system tool, the real vLLM engine).

    exe = require_tool("promtool", "prometheus")   # path, or skip / fail
    require(missing_reason(), VLLM)                # None = available

Locally a missing tool or engine skips the test. The Makefile sets the switch (``REQUIRE_SYSTEM_TOOLS=1`` for the
Debian tools, ``REQUIRE_VLLM=1`` for the engine venv and model) wherever it installs them, and under a switch the
same absence is a failure: CI cannot pass with these tests silently skipped. Every such test goes through here.
"""

from __future__ import annotations

import os
import shutil

import pytest

SYSTEM_TOOLS = "REQUIRE_SYSTEM_TOOLS"  # Debian packages from `make system-deps`: docker-compose, prometheus, chromium
VLLM = "REQUIRE_VLLM"  # .venv-vllm and .cache/tiny-deepseek from `make vllm-env`


def require(reason: str | None, switch: str) -> None:
    """Return when ``reason`` is None; else fail the test if ``$switch`` is "1", skip it otherwise."""
    if reason is None:
        return
    if os.environ.get(switch) == "1":
        pytest.fail(f"{switch}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_tool(name: str, package: str) -> str:
    """The path of system tool ``name`` (Debian package ``package``), or skip / fail under ``REQUIRE_SYSTEM_TOOLS``."""
    exe = shutil.which(name)
    require(None if exe else f"{name} missing: install Debian's {package} (make system-deps)", SYSTEM_TOOLS)
    return exe
