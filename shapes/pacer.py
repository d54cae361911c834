"""Open-loop pacing for one Locust process: ``environment.llm.pacer.wait_slot()``.

Each worker sends its share (total rate / number of workers) of the current stage's rate. A user asks
for the next slot, sleeps until that scheduled time and then times its request from it, so when all
users are busy the slots pile up and their lateness shows as client queue time instead of a lower rate:

    t0 = environment.llm.pacer.wait_slot()   # perf_counter time the request was scheduled for
    ... send; result.t_scheduled = t0; result.t_sent = perf_counter() when actually written ...

Stage changes restart the schedule at the change; slots of the old stage that no user took by then are
counted per stage in :attr:`Pacer.stats` (``unsent``) — reported, never silently dropped.

Trace replay (:mod:`shapes.trace`) hands out each slot with its trace line: the user takes it first, builds that
line's prompt, then sleeps until its time — ``slot = pacer.take(); ...; pacer.sleep_until(slot[0])``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gevent
import numpy as np
from gevent.event import Event

from shapes.arrival import Schedule
from shapes.trace import TraceSchedule


class Pacer:
    def __init__(self, arrival: tuple[str, float], rng: np.random.Generator, phase: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.arrival = arrival
        self._rng = rng
        self._phase = phase
        self._clock = clock
        self._schedule: Schedule | TraceSchedule | None = None
        self._stage: str | None = None
        self._wake = Event()
        self._generation = 0
        self.replaying = False
        """The stage replays a trace (its warm-up included): users take slots with :meth:`take`."""
        self.stats: dict[str, dict[str, int]] = {}
        """stage name -> {"scheduled": slots taken by users, "late": of those already due when taken,
        "unsent": slots still untaken when the stage ended}."""

    @property
    def rate(self) -> float | None:
        """This process's share in requests/s (None: paused, no open-loop stage)."""
        return self._schedule.rate if self._schedule else None

    def now(self) -> float:
        """The pacer's clock (perf_counter unless a test gave another)."""
        return self._clock()

    @property
    def stage(self) -> str | None:
        return self._stage

    def _counters(self, stage: str) -> dict[str, int]:
        return self.stats.setdefault(stage, {"scheduled": 0, "late": 0, "unsent": 0})

    def _interrupt(self) -> None:
        self._generation += 1
        old, self._wake = self._wake, Event()
        old.set()

    def start_stage(self, stage: str, rate: float | None) -> None:
        """Begin ``stage`` at ``rate`` req/s for this process (None pauses); the schedule starts now."""
        now = self._clock()
        if self._schedule is not None and self._stage is not None:
            self._counters(self._stage)["unsent"] += self._schedule.count_before(now)
        self._stage = stage
        self._schedule = Schedule(now, rate, self.arrival, self._rng, self._phase) if rate else None
        self._interrupt()

    def start_schedule(self, stage: str, schedule: TraceSchedule) -> None:
        """Begin ``stage`` on a schedule built by the caller (a trace's share, whose clock starts now)."""
        self.start_stage(stage, None)
        self._schedule = schedule

    def set_rate(self, rate: float | None) -> None:
        """Same stage, new share (a worker joined or left): later gaps use it, the backlog stays."""
        if self._schedule is None or not rate:
            self.start_stage(self._stage or "main", rate)
            return
        self._schedule.set_rate(rate)  # users already sleeping keep their slots

    def stop(self) -> None:
        """End of the run: count what was left and pause."""
        if self._stage is not None:
            self.start_stage(self._stage, None)
        self._stage = None

    def wait_slot(self) -> float:
        """Block (gevent) until this process's next scheduled send time and return it (perf_counter)."""
        while True:
            wake, generation = self._wake, self._generation
            if self._schedule is None:
                wake.wait()
                continue
            t = self._schedule.next()
            delay = t - self._clock()
            if delay > 0:
                wake.wait(timeout=delay)
                if generation != self._generation:
                    continue  # the stage or rate changed while waiting: take a slot of the new schedule
                # a gevent timer can fire a hair early; never hand out a time in the future
                while (rest := t - self._clock()) > 0:
                    gevent.sleep(rest)
            counters = self._counters(self._stage or "main")
            counters["scheduled"] += 1
            if delay <= 0:
                counters["late"] += 1
            return t

    def take(self):
        """The next slot and its item (a trace line), taken now without waiting for its time — counted as
        scheduled, and late when already due; blocks while the pacer is paused (a trace's warm-up); None once
        the schedule is spent (this process's share of the trace is sent)."""
        while True:
            wake = self._wake
            if self._schedule is None:
                wake.wait()
                continue
            slot = self._schedule.next_slot()
            if slot is None:
                return None
            counters = self._counters(self._stage or "main")
            counters["scheduled"] += 1
            if slot[0] <= self._clock():
                counters["late"] += 1
            return slot

    def sleep_until(self, t: float) -> None:
        """Sleep (gevent) until ``t`` (perf_counter); at once when it is past."""
        while (rest := t - self._clock()) > 0:
            gevent.sleep(rest)

    def take_stats(self) -> dict[str, dict[str, int]]:
        """Counters since the last call (for report_to_master), then reset."""
        out, self.stats = self.stats, {}
        return out
