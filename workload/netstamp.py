"""Kernel receive timestamps: when a read's bytes reached this host, not when the reader got to them.

Linux stamps every received packet; a socket with ``SO_TIMESTAMPNS`` set hands ``recvmsg`` a stamp as ancillary data
(a ``struct timespec`` on CLOCK_REALTIME). On TCP it is the newest segment's the read took bytes from: two segments
sent 50 ms apart and read at once carry the second's stamp (measured here), so chunks read together share the
arrival of the last of them. The client (``users.client``: chunk
arrival times) and the scripted server (``server.core.http``: a request's clock origin) read their sockets this way;
this module is the one place that turns the option on and decodes the stamp. It lives in the bottom layer because
it is the only one both the users and the servers may import.

    enable(sock)                                   # False where the platform cannot stamp: reads keep the clock
    offset = realtime_offset(time.perf_counter)    # CLOCK_REALTIME -> the reader's clock
    data, now, t = read(sock.recvmsg, 16384, time.perf_counter, offset)   # t <= now: the kernel's stamp
    read_once = reader(sock.recvmsg, 16384, time.perf_counter, offset)    # the same, bound for a read loop
"""

from __future__ import annotations

import math
import socket
import struct
import time
from collections.abc import Callable

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
"""Linux's option (SCM_TIMESTAMPNS, the ancillary message's type, has the same value)."""
ANCILLARY_SIZE = 64
"""recvmsg's ancillary buffer: room for one timespec message."""
_timespec = struct.Struct("qq").unpack_from


def enable(sock) -> bool:
    """Ask the kernel to stamp every read of ``sock`` (also a listener: accepted sockets inherit it). False where it
    cannot (another platform, a socket without the option): reads then carry no stamp."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except (OSError, AttributeError):
        return False
    return True


def realtime_offset(clock: Callable[[], float]) -> float:
    """CLOCK_REALTIME minus ``clock`` now: subtract it from a kernel stamp to put the stamp on ``clock``. Take it per
    request or per connection (NTP slews the wall clock by parts per million). The wall clock is read between two
    readings of ``clock`` and the narrowest of a few tries is kept: a reader preempted between the two clocks (a
    loaded box) would otherwise shift every stamp by the pause, and the stamp would be clamped to the read."""
    best_width, offset = math.inf, 0.0
    for _ in range(_OFFSET_TRIES):
        before = clock()
        wall = time.time()
        after = clock()
        if after - before < best_width:
            best_width, offset = after - before, wall - (before + after) / 2
        if best_width < _OFFSET_NARROW_S:
            break
    return offset


_OFFSET_TRIES = 4
_OFFSET_NARROW_S = 50e-6
"""A bracket this narrow is as good as it gets (three clock reads take well under a microsecond): stop there."""


def reader(recvmsg: Callable, size: int, clock: Callable[[], float], offset: float) -> Callable[[], tuple]:
    """:func:`read` with its arguments bound, for a stream's read loop: ``read_once() -> (data, now, arrival)``, one
    call per read and the stamp decoded inline (the client's per-token path)."""
    unpack, anc_size = _timespec, ANCILLARY_SIZE

    def read_once() -> tuple[bytes, float, float]:
        data, ancillary, _flags, _addr = recvmsg(size, anc_size)
        now = clock()
        if ancillary:  # the kernel's stamp on CLOCK_REALTIME, moved onto ``clock``; never after the read
            sec, ns = unpack(ancillary[0][2])
            t = sec + ns * 1e-9 - offset
            return data, now, (t if t < now else now)
        return data, now, now

    return read_once


def read(recvmsg: Callable, size: int, clock: Callable[[], float], offset: float) -> tuple[bytes, float, float]:
    """One stamped read: ``(data, now, arrival)`` — ``now`` when the read returned, ``arrival`` when its bytes reached
    the host (both on ``clock``; ``now`` when the read carries no stamp, and never later than it). ``recvmsg`` is
    the socket's (an OS socket's bound method); its errors propagate."""
    return reader(recvmsg, size, clock, offset)()
