"""``make test`` builds the real engine's venv (``scripts/vllm_env.sh``, ~3 minutes on a fresh clone) beside the
suite's first tests instead of before them. The build says where it is in the file named by ``$VLLM_ENV_STATE``:
``building PID`` while it runs, ``done RC`` when it ended (the Makefile writes ``building`` with its own shell's PID
first, so the file is never missing once the tests start). Its output is in the same file's ``.log`` sibling.

Readers: the xdist scheduler (tests/conftest.py) holds back the work units that use ``.venv-vllm`` while the build is
pending, and ``tests/vllm/engine.missing_reason`` — through which every test that uses ``.venv-vllm`` asks — waits
for it. Without ``$VLLM_ENV_STATE`` (``make test-vllm``, a plain ``pytest``) nothing is pending and nothing waits.
Standard library only: the scheduler imports this in pytest's controller process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STATE_ENV = "VLLM_ENV_STATE"
WAIT_S = 600.0
"""How long a test waits for a pending build at most (a fresh build takes ~3 minutes beside the tests)."""


def _state_file() -> Path | None:
    path = os.environ.get(STATE_ENV)
    return Path(path) if path else None


def _read() -> tuple[str, int | None] | None:
    path = _state_file()
    if path is None:
        return None
    try:
        words = path.read_text().split()
    except OSError:
        return None
    if not words:
        return ("building", None)  # being written
    number = int(words[1]) if len(words) > 1 and words[1].lstrip("-").isdigit() else None
    return (words[0], number)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pending() -> bool:
    """True while make test's engine build runs (a build whose process is gone without a result is not pending)."""
    state = _read()
    if state is None or state[0] != "building":
        return False
    return state[1] is None or _alive(state[1])


def _log_tail(lines: int = 30) -> str:
    path = _state_file()
    log = path.with_suffix(".log") if path else None
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log else ""
    except OSError:
        return f"(no log at {log})"


def wait(timeout_s: float = WAIT_S, poll_s: float = 1.0) -> str | None:
    """Wait while the build is pending; then None, or why the engine's venv will not come (its log's end)."""
    deadline = time.monotonic() + timeout_s
    while pending():
        if time.monotonic() > deadline:
            return f"make test's engine build still running after {timeout_s:.0f} s; its log ends:\n{_log_tail()}"
        time.sleep(poll_s)
    state = _read()
    if state is not None and state[0] == "done" and state[1] != 0:
        return f"make test's engine build failed (exit {state[1]}); its log ends:\n{_log_tail()}"
    if state is not None and state[0] == "building":
        return f"make test's engine build (pid {state[1]}) ended without a result; its log ends:\n{_log_tail()}"
    return None
