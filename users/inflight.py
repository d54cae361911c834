"""Live in-flight requests of this process: ``environment.llm_inflight`` (COMMON contract 2).

The client registers the :class:`~users.tally.StreamTally` it already updates per chunk, so keeping
this board costs one set insert and one discard per request, nothing per chunk.

    environment.llm_inflight.snapshot()   # [(prompt_tokens, output_tokens_so_far), ...]
"""

from __future__ import annotations

from typing import Protocol


class _Live(Protocol):
    prompt: int
    out: int


class Inflight:
    def __init__(self) -> None:
        self._live: set[_Live] = set()

    def add(self, item: _Live) -> None:
        self._live.add(item)

    def discard(self, item: _Live) -> None:
        self._live.discard(item)

    def live(self) -> list:
        return list(self._live)

    def __len__(self) -> int:
        return len(self._live)

    def snapshot(self) -> list[tuple[int, int]]:
        return [(x.prompt, x.out) for x in list(self._live)]
