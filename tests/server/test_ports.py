"""The one port picker (server/core/ports.py): ports below the kernel's ephemeral range, one slice per test
process, never one that is bound now."""

from __future__ import annotations

import importlib
import os
import socket

from server.core import ports

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
"""This process's own slice, put back after each test (the rest of its tests pick from it)."""


def _fresh(monkeypatch, worker: str | None):
    if worker is None:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    else:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    return importlib.reload(ports)


def test_ports_lie_below_the_ephemeral_range_in_this_process_slice(monkeypatch):
    try:
        low = ports._ephemeral_low()
        a = _fresh(monkeypatch, "gw0")
        got0 = {a.free_port() for _ in range(50)}
        b = _fresh(monkeypatch, "gw2")
        got2 = {b.free_port() for _ in range(50)}
        assert len(got0) == len(got2) == 50  # a walk, not the same port again
        assert all(low - ports.BLOCK <= p < low for p in got0 | got2)
        size = ports.BLOCK // ports.SLICES
        assert all(low - ports.BLOCK <= p < low - ports.BLOCK + size for p in got0)
        assert all(low - ports.BLOCK + 2 * size <= p < low - ports.BLOCK + 3 * size for p in got2)
    finally:
        _fresh(monkeypatch, WORKER)


def test_a_bound_port_is_never_offered(monkeypatch):
    try:
        mod = _fresh(monkeypatch, "gw1")
        taken = mod.free_port()
        with socket.socket() as s:
            s.bind(("127.0.0.1", taken))
            s.listen()
            mod._ports = iter([taken, taken + 1])  # the walk comes back to it
            assert mod.free_port() == taken + 1
    finally:
        _fresh(monkeypatch, WORKER)


def test_without_room_below_the_range_it_is_port_zero(monkeypatch):
    try:
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 5000)
        assert ports._slice() is None
        monkeypatch.setattr(ports, "_ports", None)
        assert ports.free_port() >= 1024
    finally:
        _fresh(monkeypatch, WORKER)
