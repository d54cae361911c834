"""Trace replay's clock (``--trace``, ``--shape trace-replay``): one process's share of a trace as send times.

Line i of the trace (in time order) is sent by the process whose place among the ``workers`` sharing the stage
is ``i % workers``, at ``origin + at_s / speedup`` — the trace's own clock, never "when a user is free": when
every user is busy the line waits in the client and its lateness shows as client queue time (as in a rate
sweep). The schedule hands out each slot with its line, so the user builds that line's prompt before the time.

    schedule = TraceSchedule(time.perf_counter(), trace, speedup=2.0, place=0, workers=2)
    t, record = schedule.next_slot()    # None once this share is sent
"""

from __future__ import annotations

import math

from workload.trace import Trace, TraceRecord

TRACE_TAIL_S = 2.0
"""The trace stage lasts until its last line is due plus this much: a free user takes the last line by then
(Locust's ``--stop-timeout`` lets the answers still streaming finish after the stage)."""


def trace_duration(trace: Trace, speedup: float) -> float:
    """Seconds the trace stage is held: the replayed span plus :data:`TRACE_TAIL_S`."""
    return trace.span_s / speedup + TRACE_TAIL_S


class TraceSchedule:
    """The absolute send times of one process's lines (the pacer's schedule for a trace stage)."""

    def __init__(self, origin: float, trace: Trace, speedup: float, place: int = 0, workers: int = 1) -> None:
        if not speedup > 0:
            raise ValueError(f"speedup must be > 0, got {speedup}")
        workers = max(int(workers), 1)
        self._lines: list[TraceRecord] = [r for i, r in enumerate(trace.records) if i % workers == place % workers]
        self._times = [origin + r.at_s / speedup for r in self._lines]
        self._pos = 0
        self.rate = len(self._lines) / trace_duration(trace, speedup)
        """This process's mean requests/s over the stage (what the pacer reports as its rate)."""

    def __len__(self) -> int:
        return len(self._lines)

    def peek(self) -> float:
        return self._times[self._pos] if self._pos < len(self._times) else math.inf

    def next_slot(self) -> tuple[float, TraceRecord] | None:
        """The next line and its send time, or None when this share is all handed out."""
        if self._pos >= len(self._lines):
            return None
        slot = self._times[self._pos], self._lines[self._pos]
        self._pos += 1
        return slot

    def next(self) -> float:
        slot = self.next_slot()
        return math.inf if slot is None else slot[0]

    def set_rate(self, rate: float) -> None:
        """A trace keeps its own clock: a changed share of workers does not re-deal the lines."""

    def count_before(self, t: float, limit: int = 10_000_000) -> int:
        """Consume and count the lines nobody took (the pacer asks when the stage ends): all of them, ``t``
        aside — every line belongs to the trace's stage, so one not yet due when a run is cut short is unsent
        too, and scheduled + unsent adds up to the lines."""
        n = min(len(self._times) - self._pos, limit)
        self._pos += n
        return n
