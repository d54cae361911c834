"""A real RunState filled with synthetic results and scraped server samples, window by window; its view, its hub."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from locust.env import Environment

from telemetry.hub import TelemetryHub
from telemetry.measure.runstate import RunState
from telemetry.measure.scraper import ServerScraper
from telemetry.measure.view import RunView
from users.result import GenerationResult, RequestMeta

LE = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, math.inf]


@dataclass
class Spec:
    """What happens in one window: client TTFT/ITL (s) and the server's gauges and counters."""

    ttft: float = 0.2
    itl: float = 0.02
    requests: int = 8
    running: float = 16
    waiting: float = 0
    kv: float = 0.5
    preemptions: int = 0
    queue: float = 0.02
    prefill: float = 0.15


class _Cum:
    """Cumulative server histograms as the scraper keeps them."""

    def __init__(self) -> None:
        self.cum = {name: np.zeros(len(LE)) for name in ("ttft", "queue", "prefill", "itl")}
        self.sums = dict.fromkeys(self.cum, 0.0)

    def observe(self, name: str, value: float, n: int = 1) -> None:
        i = next(j for j, le in enumerate(LE) if value <= le)
        self.cum[name][i:] += n
        self.sums[name] += value * n

    def snapshot(self) -> dict:
        return {name: {"le": LE, "cum": c.tolist(), "sum": self.sums[name], "count": float(c[-1])}
                for name, c in self.cum.items()}


def merger_from(specs: list[Spec], window_s: float = 10.0, scrape_s: float = 2.0) -> RunState:
    """No Locust environment: the merged store, the scraper's series and the run's clock only."""
    merger = RunState()
    rec = merger.merged
    t0_perf = merger.t0_wall - rec._wall_offset  # perf_counter value at the run start
    cum, preempt = _Cum(), 0
    series = []
    for k, sp in enumerate(specs):
        start = k * window_s
        for j in range(sp.requests):
            t0 = t0_perf + start + (j + 0.5) * window_s / (sp.requests + 1) - sp.ttft
            first = t0 + sp.ttft
            chunks = first + np.arange(5) * sp.itl
            rec.record(GenerationResult(
                RequestMeta(user_class="U", name="n"), ok=True, error_kind=None, error_message=None, t0=t0, t_sent=t0,
                t_end=chunks[-1] + 0.001, chunk_times=chunks, chunk_tokens=np.ones(5, dtype=np.int64),
                output_tokens=5, prompt_tokens=10))
            cum.observe("ttft", sp.ttft * 0.9)
            cum.observe("queue", sp.queue)
            cum.observe("prefill", sp.prefill)
            cum.observe("itl", sp.itl, 4)
        for s in range(int(window_s / scrape_s)):
            preempt += sp.preemptions if s == 0 else 0
            series.append({"t": start + (s + 0.5) * scrape_s, "requests_running": sp.running,
                           "requests_waiting": sp.waiting, "kv_cache_usage": sp.kv, "preemptions_total": preempt,
                           "hist": cum.snapshot()})
    merger.scraper = ServerScraper("http://127.0.0.1:9/metrics", scrape_s)
    merger.scraper.series = series
    merger.t_end_wall = merger.t0_wall + len(specs) * window_s
    return merger


def view_from(specs: list[Spec], window_s: float = 10.0, scrape_s: float = 2.0) -> RunView:
    return merger_from(specs, window_s, scrape_s).view()


def hub_from(specs: list[Spec], window_s: float = 10.0, scrape_s: float = 2.0) -> TelemetryHub:
    """The same state behind ``environment.llm.telemetry`` of a bare Environment (``hub.environment``)."""
    return TelemetryHub(Environment(), merger_from(specs, window_s, scrape_s))
