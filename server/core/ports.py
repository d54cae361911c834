"""A free TCP port on 127.0.0.1 for a server about to be started — outside the kernel's ephemeral range.

Binding port 0 gives a port of the ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by
default), and once released it is free only until any process's next outgoing connection takes it as its local
port. Between picking a port and the server's bind lie seconds (a Locust process imports for 2-10 s); in a test suite
whose load runs open hundreds of connections a second, such a master's bind failed now and then (CI: a worker tried
for 30 s to reach a master that had already exited). Outgoing connections never take a port below the range, so
the ports come from the block below it: each process walks its own slice of that block from a random start
(``PYTEST_XDIST_WORKER`` gwN takes slice N, so the suite's processes never offer each other the same port), and a
port that does not bind now is skipped. Where the range leaves no room below it, port 0 it is.

    port = free_port()
"""

from __future__ import annotations

import itertools
import os
import random
import socket

BLOCK = 12000
"""Ports below the ephemeral range's start that are handed out."""
SLICES = 8
"""Slices of the block: one per test process (xdist worker gwN, N mod SLICES)."""
_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def _ephemeral_low() -> int:
    try:
        with open(_RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _slice() -> range | None:
    low = _ephemeral_low()
    if low - BLOCK < 1024:
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) % SLICES if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = BLOCK // SLICES
    start = low - BLOCK + index * size
    return range(start, start + size)


def _walk():
    ports = _slice()
    if ports is None:
        return None
    first = random.randrange(len(ports))
    return itertools.cycle([*ports[first:], *ports[:first]])


_ports = _walk()


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port no process is bound to now, and one no outgoing connection will take (see the module's text)."""
    if _ports is not None:
        for _ in range(BLOCK // SLICES):
            port = next(_ports)
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
