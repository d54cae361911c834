"""One 2-core box shared by the suite's processes (pytest-xdist): a test that compares the client's timings with a
real server's own record of the same requests runs with the box to itself.

Under xdist every test with real processes (``slow``) holds the box *shared* while it runs; a test marked
``exclusive`` holds it alone: it waits until the running ones end, and no new one starts until it is done. Writer
first: an exclusive test takes the gate, then the box; a shared one passes the gate (taken and released) before it
takes the box shared, so it queues behind a waiting exclusive test instead of overtaking it. Locks are ``flock``s on
two files in the run's base temporary folder (one per pytest run, shared by its workers); without xdist there is
no one to share with and nothing is locked.

Why: the real engine's API server does Python work (HTTP, chat template, tokenizer, detokenizer, SSE) between the
engine's stamps and the bytes on the wire. With three test processes on two cores it waited for a core, and the
client — measuring the wire truly — read TTFT p50 62-104 ms against an engine median bucket of 20-40 / 60-80 ms,
the first token's way out 17-45 ms longer than the last's: the box, not the client, under test.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def sharing() -> bool:
    """True in an xdist worker (there are other test processes on this box)."""
    return "PYTEST_XDIST_WORKER" in os.environ


POLL_S = 0.02


@contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    """``flock`` polled without blocking: a test process runs gevent (Locust's monkey-patching), whose hub a
    blocking call would stop; ``time.sleep`` yields to it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def hold(folder: Path, exclusive: bool) -> Iterator[None]:
    """Hold the box (shared or alone) for the ``with`` block; ``folder``: the run's shared temporary folder."""
    gate, box = folder / "box.gate", folder / "box.lock"
    if exclusive:
        with _flock(gate, fcntl.LOCK_EX), _flock(box, fcntl.LOCK_EX):
            yield
        return
    with _flock(gate, fcntl.LOCK_EX):
        pass  # queue behind an exclusive test waiting for the box
    with _flock(box, fcntl.LOCK_SH):
        yield
