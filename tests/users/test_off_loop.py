"""A run's start-up work (tokenizer load, prompt pool) runs off the event loop, so a worker keeps sending Locust's
heartbeats while it works: on the loop, seconds of CPU there made the master drop the worker as missing."""

from __future__ import annotations

import time

import gevent

from users.plugin import off_loop


def _ticks_during(call) -> tuple[int, object]:
    ticks = 0

    def ticker():
        nonlocal ticks
        while True:
            gevent.sleep(0.01)
            ticks += 1

    g = gevent.spawn(ticker)
    gevent.sleep(0)  # the ticker is waiting on its first timer
    try:
        return_value = call()
        gevent.sleep(0)
        return ticks, return_value
    finally:
        g.kill()


def _busy(seconds: float) -> str:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return "done"


def test_the_loop_keeps_running_while_off_loop_work_runs():
    ticks, value = _ticks_during(lambda: off_loop(_busy, 0.4))
    assert value == "done"
    assert ticks >= 5, ticks  # a tick every 10 ms of 400: the loop ran beside the work (GIL switches every 5 ms)
    blocked, _ = _ticks_during(lambda: _busy(0.4))
    assert blocked <= 1, blocked  # the same work on the loop: no greenlet runs until it ends


def test_off_loop_raises_the_callers_exception():
    def bad():
        raise ValueError("bad tokenizer option")

    try:
        off_loop(bad)
    except ValueError as e:
        assert "bad tokenizer option" in str(e)
    else:
        raise AssertionError("off_loop swallowed the exception")
