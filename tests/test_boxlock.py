"""The box lock (tests/boxlock.py): shared holders run together, an exclusive one alone, and a shared one that
comes while an exclusive one waits goes after it (writer first)."""

from __future__ import annotations

import gevent

from tests import boxlock


def test_exclusive_waits_for_shared_holders_and_goes_before_later_ones(tmp_path):
    events: list[str] = []

    def shared(name: str, hold_s: float, start_s: float = 0.0) -> None:
        gevent.sleep(start_s)
        with boxlock.hold(tmp_path, exclusive=False):
            events.append(f"{name} in")
            gevent.sleep(hold_s)
            events.append(f"{name} out")

    def alone(start_s: float) -> None:
        gevent.sleep(start_s)
        with boxlock.hold(tmp_path, exclusive=True):
            events.append("X in")
            gevent.sleep(0.2)
            events.append("X out")

    gevent.joinall([gevent.spawn(shared, "A", 0.4), gevent.spawn(shared, "B", 0.3, 0.05),
                    gevent.spawn(alone, 0.1), gevent.spawn(shared, "C", 0.05, 0.2)], timeout=10, raise_error=True)
    # A and B together; X once both left; C (came while X waited) only after X
    assert events[:2] == ["A in", "B in"] and "X in" not in events[:2]
    x_in, x_out = events.index("X in"), events.index("X out")
    assert x_out == x_in + 1  # nobody inside with X
    assert events.index("A out") < x_in and events.index("B out") < x_in
    assert events.index("C in") > x_out


def test_outside_xdist_nothing_is_shared(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert boxlock.sharing() is False
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert boxlock.sharing() is True
