"""shapes.pacer: slots come from an absolute clock; lateness becomes queue time, not a lower rate."""

from __future__ import annotations

import time
from types import SimpleNamespace

import gevent
import numpy as np
import pytest

from shapes import pacer as pacer_module
from shapes.pacer import Pacer


def _pacer(arrival=("constant", 0.0)):
    return Pacer(arrival, np.random.default_rng(1))


class FakeClock:
    """The pacer's injected clock: time moves only when the test, or the pacer's own sleep, moves it."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += max(dt, 0.0)


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    """A fake clock the pacer reads and its sleeps advance (a timer's wait still lets gevent run): schedules are
    checked exactly, whatever the load on the machine."""
    c = FakeClock()

    def sleep(dt: float = 0.0) -> None:
        c.advance(dt)
        gevent.sleep(0)

    monkeypatch.setattr(pacer_module, "gevent", SimpleNamespace(sleep=sleep))
    return c


def test_busy_user_gets_past_slots_so_rate_is_kept(clock):
    """One user whose requests take 3 gaps: slots stay on the 20/s grid and lateness grows linearly."""
    pacer = Pacer(("constant", 0.0), np.random.default_rng(1), clock=clock)
    start = clock()
    pacer.start_stage("rate=20", 20.0)
    lateness = []
    slots = []
    for _ in range(8):
        t0 = pacer.wait_slot()
        slots.append(t0)
        lateness.append(clock() - t0)
        clock.advance(0.15)  # the "request" takes 3 gaps
    assert np.diff(slots) == pytest.approx(np.full(7, 0.05), abs=1e-9)  # schedule, not send times
    assert slots[0] == pytest.approx(start + 0.05, abs=1e-9)
    # queue time grows by 0.1 s per request (0.15 s busy - 0.05 s gap)
    assert lateness == pytest.approx([0.1 * i for i in range(8)], abs=1e-9)
    # the first slot is 50 ms ahead when asked for; each later one is already due (the user was busy 3 gaps)
    assert pacer.stats["rate=20"] == {"scheduled": 8, "late": 7, "unsent": 0}


def test_idle_users_wait_for_their_slot():
    """On the real clock: what an idle user waits for is a gevent timer (with the injected clock several sleeping
    users would move time for each other)."""
    pacer = _pacer()
    pacer.start_stage("rate=50", 50.0)
    sent = []

    def user():
        for _ in range(5):
            t0 = pacer.wait_slot()
            sent.append((t0, time.perf_counter()))

    gevent.joinall([gevent.spawn(user) for _ in range(4)], timeout=5)
    assert len(sent) == 20
    slots = sorted(t for t, _ in sent)
    assert np.diff(slots) == pytest.approx(np.full(19, 0.02), abs=1e-9)
    assert all(now >= t for t, now in sent)  # never handed out early
    assert max(now - t for t, now in sent) < 0.1  # idle users are on time (generous for a busy box)


def test_stage_change_restarts_schedule_and_counts_unsent(clock):
    pacer = Pacer(("constant", 0.0), np.random.default_rng(1), clock=clock)
    pacer.start_stage("rate=100", 100.0)
    pacer.wait_slot()  # the slot at +10 ms
    clock.advance(0.3)  # nobody takes the 30 slots that fall due
    pacer.start_stage("rate=2", 2.0)
    assert pacer.stats["rate=100"]["unsent"] == 30
    t_change = clock()
    t0 = pacer.wait_slot()
    assert t0 == pytest.approx(t_change + 0.5, abs=1e-9)  # new stage: first slot one gap after the change
    assert pacer.stats["rate=2"]["scheduled"] == 1


def test_sleeping_user_moves_to_new_stage():
    pacer = _pacer()
    pacer.start_stage("rate=0.5", 0.5)  # first slot 2 s away
    got = []
    g = gevent.spawn(lambda: got.append(pacer.wait_slot()))
    gevent.sleep(0.05)
    pacer.start_stage("rate=50", 50.0)
    g.join(timeout=1)
    assert got and pacer.stats.get("rate=0.5", {}).get("scheduled", 0) == 0
    assert pacer.stats["rate=50"]["scheduled"] == 1


def test_paused_pacer_blocks_until_a_rate():
    pacer = _pacer()
    g = gevent.spawn(pacer.wait_slot)
    gevent.sleep(0.1)
    assert not g.ready()
    pacer.start_stage("rate=100", 100.0)
    g.join(timeout=1)
    assert g.ready() and g.value > 0


def test_take_stats_resets():
    pacer = _pacer()
    pacer.start_stage("s", 1000.0)
    pacer.wait_slot()
    assert pacer.take_stats()["s"]["scheduled"] == 1
    assert pacer.stats == {}
