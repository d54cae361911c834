"""Kernel receive stamps (workload/netstamp.py): the one reader the client and the scripted server share."""

from __future__ import annotations

import socket
import struct
import sys
import time

import pytest

from tests.support import stamped_pair
from workload import netstamp


def test_a_stamp_is_the_kernels_time_on_the_readers_clock_never_after_the_read() -> None:
    offset = 1000.0  # the wall clock runs 1000 s ahead of the reader's
    anc = [(socket.SOL_SOCKET, netstamp.SO_TIMESTAMPNS, struct.pack("qq", 1005, 250_000_000))]

    def read(ancillary, now):
        return netstamp.read(lambda size, anc_size: (b"x", ancillary, 0, None), 16, lambda: now, offset)

    assert read(anc, now=6.0) == (b"x", 6.0, pytest.approx(5.25))  # arrived 0.75 s before the read
    assert read(anc, now=5.0) == (b"x", 5.0, 5.0)  # a stamp "after" the read is clamped to it
    assert read([], now=7.0) == (b"x", 7.0, 7.0)  # no stamp: the read's own time
    bound = netstamp.reader(lambda size, anc_size: (b"y" * size, anc, 0, None), 3, lambda: 6.0, offset)
    assert bound() == (b"yyy", 6.0, pytest.approx(5.25)) and bound() == bound()  # bound once, read many times


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")
def test_a_stamped_read_on_a_real_socket_dates_the_bytes_before_the_reader_got_them() -> None:
    with stamped_pair() as (server, client):
        clock = time.perf_counter
        client.sendall(b"hello")
        sent = clock()
        time.sleep(0.05)  # the bytes wait in the kernel: the stamp says when they came, not when read
        data, now, arrival = netstamp.read(server.recvmsg, 1024, clock, netstamp.realtime_offset(clock))
        assert data == b"hello" and now - sent >= 0.05
        assert arrival <= now and now - arrival >= 0.04 and abs(arrival - sent) < 0.01


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")
def test_a_read_of_two_segments_carries_the_later_ones_arrival() -> None:
    """Chunks read together share one stamp: the newest segment's, not the first byte's."""
    with stamped_pair() as (server, client):
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        clock = time.perf_counter
        client.sendall(b"first")
        first = clock()
        time.sleep(0.05)
        client.sendall(b"second")
        second = clock()
        time.sleep(0.02)
        data, _now, arrival = netstamp.read(server.recvmsg, 1024, clock, netstamp.realtime_offset(clock))
        assert data == b"firstsecond"
        assert abs(arrival - second) < 0.01 and arrival - first >= 0.04, (arrival - first, arrival - second)


def test_enabling_where_the_option_is_missing_says_so() -> None:
    class NoOption:
        def setsockopt(self, *_a):
            raise OSError("not supported")

    assert netstamp.enable(NoOption()) is False
    assert netstamp.enable(None) is False  # no socket (a pooled one taken back)


def test_the_kernel_stamp_is_read_in_one_place() -> None:
    """No other product module names the socket option: the client and the servers go through this module."""
    import ast

    from tests.support import project_modules

    named = set()
    for mod, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr == "SO_TIMESTAMPNS") or (
                    isinstance(node, ast.Constant) and node.value == "SO_TIMESTAMPNS"):
                named.add(mod)
    assert named == {"workload.netstamp"}


def test_the_offset_comes_from_the_narrowest_bracket_of_the_readers_clock(monkeypatch) -> None:
    """A pause between the reader's clock and the wall clock (a preempted reader) must not shift the offset: the
    narrowest of the tries wins."""
    wall = time.time()
    readings = iter([0.0, 0.200, 10.0, 10.000001])  # first try: 200 ms preempted inside; second: 1 µs wide

    def clock() -> float:
        return next(readings)

    walls = iter([wall, wall + 10.1])
    monkeypatch.setattr(netstamp.time, "time", lambda: next(walls))
    offset = netstamp.realtime_offset(clock)
    assert offset == pytest.approx(wall + 10.1 - 10.0000005, abs=1e-9)  # the second try's midpoint
