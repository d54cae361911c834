"""Synthetic window sequences for the attribution unit tests."""

from __future__ import annotations

from telemetry.attribution.window import ClientWindow, Window


def win(
    i: int,
    ttft_p99: float | None = 400.0,
    running: float | None = 16.0,
    *,
    requests: int = 20,
    itl_p99: float | None = 30.0,
    waiting: float | None = 0.0,
    kv: float | None = 0.5,
    preemptions: float | None = 0.0,
    width: float = 10.0,
) -> Window:
    """Window i spanning [i*width, (i+1)*width)."""
    cw = ClientWindow(i * width, (i + 1) * width, requests, ttft_p50_ms=None if ttft_p99 is None else ttft_p99 / 2,
                      ttft_p99_ms=ttft_p99, itl_p50_ms=None if itl_p99 is None else itl_p99 / 2, itl_p99_ms=itl_p99)
    return Window(index=i, client=cw, samples=10, running_median=running, waiting_max=waiting, kv_usage_max=kv,
                  preemptions=preemptions)


def steady(n: int, **kw) -> list[Window]:
    return [win(i, **kw) for i in range(n)]
