"""Live in-flight requests of this process: ``environment.llm.inflight`` (COMMON contract 2).

Each request the client is reading is one :class:`LiveRequest`: its liveness (the last byte's time,
the greenlet reading it), which the stall watch (:mod:`users.watchdog`) reads, and its progress (prompt
and output tokens so far), read from the chunk tally the client already updates. Keeping this board
costs one set insert and one discard per request; per read, one attribute store (``last``).

    live = LiveRequest(tally, time.perf_counter())   # owner: the calling greenlet
    environment.llm.inflight.add(live)
    environment.llm.inflight.snapshot()              # [(prompt_tokens, output_tokens_so_far), ...]
"""

from __future__ import annotations

from typing import Protocol

import gevent


class _Progress(Protocol):
    prompt: int
    out: int


class LiveRequest:
    """One request being read: what the stall watch and the in-flight board need, nothing per chunk."""

    __slots__ = ("tally", "last", "owner", "live", "stalled")

    def __init__(self, tally: _Progress, last: float = 0.0) -> None:
        self.tally = tally
        """The request's chunk tally (``prompt``, ``out``)."""
        self.last = last
        """When the last byte arrived (set by the client per read; read by users.watchdog)."""
        self.owner = gevent.getcurrent()
        """The greenlet reading this request."""
        self.live = True
        """Still being read (the client clears it when the request ends)."""
        self.stalled = False
        """The stall watch has thrown ``Stalled`` into ``owner``."""

    @property
    def prompt(self) -> int:
        """Prompt tokens (client count), for the in-flight KV estimate."""
        return self.tally.prompt

    @property
    def out(self) -> int:
        """Output tokens so far."""
        return self.tally.out


class Inflight:
    def __init__(self) -> None:
        self._live: set[_Progress] = set()

    def add(self, item: _Progress) -> None:
        self._live.add(item)

    def discard(self, item: _Progress) -> None:
        self._live.discard(item)

    def live(self) -> list:
        return list(self._live)

    def __len__(self) -> int:
        return len(self._live)

    def snapshot(self) -> list[tuple[int, int]]:
        return [(x.prompt, x.out) for x in list(self._live)]
