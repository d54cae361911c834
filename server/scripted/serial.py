"""Run a server's per-request work one item per event-loop pass, in due-time order with its timers.

A client that ends 16 streams together sends 16 requests within half a millisecond; counting each
one's prompt tokens takes ~0.3 ms, so handled as they come, the 16 block the loop for ~4 ms and every
chunk falling due meanwhile goes out that late. Queued here, each item is a zero-delay timer: chunks
already due run before it, so a chunk waits for at most one request's work.

    prompt_tokens = await serial.run(count_prompt, body, chat)
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any


class Serial:
    def __init__(self) -> None:
        self._queue: deque[tuple[asyncio.Future, Callable[..., Any], tuple]] = deque()
        self._armed = False

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.append((fut, fn, args))
        if not self._armed:
            self._armed = True
            loop.call_at(loop.time(), self._one)
        return fut

    def _one(self) -> None:
        fut, fn, args = self._queue.popleft()
        if not fut.cancelled():
            try:
                fut.set_result(fn(*args))
            except Exception as e:  # noqa: BLE001  (handed to the awaiting request)
                fut.set_exception(e)
        if self._queue:
            loop = asyncio.get_running_loop()
            loop.call_at(loop.time(), self._one)
        else:
            self._armed = False
