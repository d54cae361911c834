"""Arrival processes for open-loop load: gaps between scheduled sends, drawn from a seeded Generator.

Gaps are drawn with mean 1 and then divided by the rate, so a process is just its shape of variation:

    poisson   exponential gaps (CV 1)
    constant  equal gaps (CV 0)
    gamma:CV  gamma gaps with the given coefficient of variation (CV < 1 smoother, > 1 burstier)

    schedule = Schedule(origin=time.perf_counter(), rate=8.0, arrival=("poisson", 1.0), rng=rng)
    t0 = schedule.next()   # absolute send time; the following one is t0 + gap / rate
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_BATCH = 256


def _poisson(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    return rng.exponential(1.0, n)


def _constant(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    return np.ones(n)


def _gamma(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    k = 1.0 / (cv * cv)
    return rng.gamma(k, 1.0 / k, n)


ARRIVALS: dict[str, Callable[[np.random.Generator, float, int], np.ndarray]] = {
    "poisson": _poisson,
    "constant": _constant,
    "gamma": _gamma,
}
"""name -> f(rng, cv, n): n unit-mean gaps."""


class Schedule:
    """Absolute send times at ``rate`` per second: each time is the previous one plus a gap, never "now".

    Because times come from this clock and not from when a send actually happened, a client that falls
    behind keeps the rate: late sends are late (client queue time), not fewer.
    """

    def __init__(self, origin: float, rate: float, arrival: tuple[str, float], rng: np.random.Generator,
                 phase: float = 0.0) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self._draw = ARRIVALS[arrival[0]]
        self._cv = arrival[1]
        self._rng = rng
        self._gaps = np.empty(0)
        self._pos = 0
        self.rate = rate
        self._next = origin + (phase + self._gap()) / rate
        """phase in [0, 1) shifts the whole schedule by part of a mean gap (spreads constant senders)."""

    def _gap(self) -> float:
        if self._pos >= len(self._gaps):
            self._gaps = self._draw(self._rng, self._cv, _BATCH)
            self._pos = 0
        g = float(self._gaps[self._pos])
        self._pos += 1
        return g

    def peek(self) -> float:
        return self._next

    def next(self) -> float:
        t = self._next
        self._next = t + self._gap() / self.rate
        return t

    def next_slot(self) -> tuple[float, None]:
        """The next time and no item (a trace's schedule gives its line: :class:`shapes.trace.TraceSchedule`)."""
        return self.next(), None

    def set_rate(self, rate: float) -> None:
        """Later gaps use the new rate; times already drawn stay (the schedule keeps its backlog)."""
        if not rate > 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.rate = rate

    def count_before(self, t: float, limit: int = 10_000_000) -> int:
        """Consume and count the times < t (slots nobody took); stops at ``limit``."""
        n = 0
        while self._next < t and n < limit:
            self.next()
            n += 1
        return n
