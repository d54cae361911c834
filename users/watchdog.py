"""Stall detection for in-flight requests without a timer per socket read.

gevent arms a timer for every blocking ``recv`` on a socket that has a timeout (about 7 µs per wait
here, a third of the whole cost of a streamed token). The users' sockets therefore block without a
timeout and this one greenlet per process watches the in-flight requests instead: a request whose
last byte (``LiveRequest.last``) is older than ``--request-timeout`` gets :class:`Stalled` thrown into its
greenlet, which the client reports as a ``timeout`` failure.

    watch = StallWatch(environment.llm.inflight, timeout_s=30).start()
    ...
    watch.stop()
"""

from __future__ import annotations

import time

import gevent
from gevent.hub import get_hub

from users.inflight import Inflight


class Stalled(Exception):
    """Thrown into a request's greenlet when nothing arrived for the request timeout."""


class StallWatch:
    def __init__(self, inflight: Inflight, timeout_s: float) -> None:
        self.inflight = inflight
        self.timeout_s = timeout_s
        self.interval_s = min(1.0, max(0.05, timeout_s / 10))
        self._g: gevent.Greenlet | None = None

    def start(self) -> StallWatch:
        if self._g is None:
            self._g = gevent.spawn(self._run)
        return self

    def stop(self) -> None:
        if self._g is not None:
            self._g.kill(block=False)
            self._g = None

    def _run(self) -> None:
        while True:
            gevent.sleep(self.interval_s)
            self.check(time.perf_counter())

    def check(self, now: float) -> int:
        """Throw :class:`Stalled` into every request silent for longer than the timeout; return how many."""
        n = 0
        for t in self.inflight.live():
            if not t.stalled and now - t.last > self.timeout_s and t.owner is not None:
                t.stalled = True
                get_hub().loop.run_callback(_throw, t)
                n += 1
        return n


def _throw(t) -> None:
    # runs in the hub while the request's greenlet is parked at an I/O wait; it may have finished since
    if t.live and t.owner is not None and not t.owner.dead:
        t.owner.throw(Stalled())
