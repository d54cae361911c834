"""shapes.pacer: slots come from an absolute clock; lateness becomes queue time, not a lower rate."""

from __future__ import annotations

import time

import gevent
import numpy as np
import pytest

from shapes.pacer import Pacer


def _pacer(arrival=("constant", 0.0)):
    return Pacer(arrival, np.random.default_rng(1))


def test_busy_user_gets_past_slots_so_rate_is_kept():
    """One user whose requests take 3 gaps: slots stay on the 20/s grid and lateness grows linearly."""
    pacer = _pacer()
    pacer.start_stage("rate=20", 20.0)
    start = time.perf_counter()
    lateness = []
    slots = []
    for _ in range(8):
        t0 = pacer.wait_slot()
        slots.append(t0)
        lateness.append(time.perf_counter() - t0)
        gevent.sleep(0.15)  # the "request" takes 3 gaps
    gaps = np.diff(slots)
    assert gaps == pytest.approx(np.full(7, 0.05), abs=1e-9)  # schedule, not send times
    assert slots[0] == pytest.approx(start + 0.05, abs=0.02)
    # queue time grows by ~0.1 s per request (0.15 s busy - 0.05 s gap), far beyond timer noise
    assert lateness[-1] > 0.5 and lateness[-1] > lateness[3] + 0.3
    # the first slot is 50 ms ahead when asked for; each later one is already due (the user was busy 3 gaps)
    assert pacer.stats["rate=20"] == {"scheduled": 8, "late": 7, "unsent": 0}


def test_idle_users_wait_for_their_slot():
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


def test_stage_change_restarts_schedule_and_counts_unsent():
    pacer = _pacer()
    pacer.start_stage("rate=100", 100.0)
    pacer.wait_slot()
    gevent.sleep(0.3)  # nobody takes the ~29 slots that fall due
    pacer.start_stage("rate=2", 2.0)
    assert 20 <= pacer.stats["rate=100"]["unsent"] <= 31
    t_change = time.perf_counter()
    t0 = pacer.wait_slot()
    assert t0 == pytest.approx(t_change + 0.5, abs=0.05)  # new stage: first slot one gap after the change
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
