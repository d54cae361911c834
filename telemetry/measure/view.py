"""A read-only view of one run: what the summary, live table, exporter, sections and report are functions of.

The :class:`~telemetry.measure.runstate.RunState` takes a view of its state (``merger.view(...)``); the hub hands a
fresh one to whoever reads (``environment.llm.telemetry.view()``). A view is frozen: its fields are the merged store,
the stage history, the server series and scrape counters, the SLO set, options, the run's clock, model, host
and workers. Nothing here writes; build one without any Locust environment for tests or offline use:

    view = RunState().view(options=None, host="http://127.0.0.1:8000")
    build_summary(view, SummaryHooks())
    view.stage_spans(); view.windows(10.0); view.warmup_stages()
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shapes.stage import Stage
from telemetry.measure.recorder import SLOT_ALPHA, WINDOW_METRICS, Recorder
from telemetry.measure.sketch import LogSketch
from telemetry.slo import SloSet


@dataclass
class Window:
    """Merged client numbers of one time window (``start_s``/``end_s`` relative to the run start)."""

    start_s: float
    end_s: float
    requests: int = 0
    errors: int = 0
    output_tokens: int = 0
    sketches: dict[str, LogSketch] = field(default_factory=lambda: {m: LogSketch(SLOT_ALPHA) for m in WINDOW_METRICS})

    def absorb(self, slot) -> None:
        """Add one recorder slot (a wall-clock second of one process, or of one version) to this window."""
        self.requests += slot.requests
        self.errors += slot.errors
        self.output_tokens += slot.output_tokens
        for m in WINDOW_METRICS:
            self.sketches[m].merge(slot.sketches[m])

    def fold(self, later: Window) -> None:
        """Take the ``later`` window in: one window from this start to its end."""
        self.absorb(later)
        self.end_s = later.end_s


@dataclass(frozen=True)
class RunView:
    """One run as read at one instant (``duration_s`` is fixed when the view is taken)."""

    merged: Recorder
    """The merged store of every process (read it; only the merger writes it)."""
    slos: SloSet
    options: object | None
    host: str
    model: str
    """The model(s) the users sent, else --model or the server's first model (a label)."""
    t0_wall: float
    duration_s: float
    attribution_window: float
    worker_count: int = 1
    lost_workers: frozenset[str] = frozenset()
    client_kv_fill: float | None = None
    """Used / allocated KV slots over the latest in-flight snapshot of every live process."""
    server_series: list[dict] = field(default_factory=list)
    """The scraper's samples (``t`` = seconds since the run start), a copy of the list taken with the view."""
    server_latest: dict | None = None
    scrape_metric_names: str = "none"
    scrapes: int = 0
    scrape_failures: int = 0
    server_targets: list[dict] = field(default_factory=list)
    """Per scraped target: ``target`` (its name), ``url``, ``role``, ``scrapes``, ``scrape_failures``."""
    stage_history: tuple[tuple[Stage, float], ...] = ()
    """(stage, wall-clock start) in run order, from the master's stage board."""
    stage_closed_wall: float | None = None
    """When the shape closed the board (its own end), if it did."""
    current_stage: Stage | None = None
    active_users: int = 0
    detectors: dict | None = None
    """The live detectors' latest state (telemetry/control/detectors.py), None before their first check."""
    version_servers: dict[str, dict] = field(default_factory=dict)
    """With --route-table: per version, its backend's scrapes: ``{"url", "series", "scrapes", "failures"}``."""
    route_fallback: dict | None = None
    """The --route-fallback rule's latest state (telemetry/control/routing.py), None without a rule."""

    @property
    def slot_s(self) -> float:
        return self.merged.slot_s

    def warmup_stages(self) -> frozenset[str]:
        """Names of the warm-up stages in the history (left out of the headline figures)."""
        return frozenset(st.name for st, _wall in self.stage_history if getattr(st, "warmup", False))

    def stage_spans(self) -> list[tuple[Stage, float, float]]:
        """[(Stage, start_s, end_s)] from the stage history; one stage per recorded stage name without a shape."""
        history = [(st, max(0.0, wall - self.t0_wall)) for st, wall in self.stage_history]
        if not history:
            names = sorted({k[1] for k in self.merged.cells}) or ["main"]
            return [(Stage(n), 0.0, self.duration_s) for n in names]
        last_end = self.duration_s
        if self.stage_closed_wall is not None:  # the shape's own end, not the end of the stopping
            last_end = min(self.duration_s, max(0.0, self.stage_closed_wall - self.t0_wall))
        spans = []
        for i, (st, start) in enumerate(history):
            end = history[i + 1][1] if i + 1 < len(history) else last_end
            spans.append((st, start, max(end, start)))
        return spans

    def server_kv_usages(self, start_s: float, end_s: float) -> list[float]:
        """The scraped server KV usages (0..1) taken in ``[start_s, end_s)`` (a stage's span)."""
        return [d["kv_cache_usage"] for d in self.server_series
                if start_s <= d["t"] < end_s and d.get("kv_cache_usage") is not None]

    def client_kv_fill_of(self, stage: str) -> float | None:
        """A stage's mean client-side KV block fill (0..1); None before a sample."""
        kv = self.merged.kv_fill.get(stage)
        return kv.ratio_sum / kv.samples if kv and kv.samples else None

    def version_windows(self, version: str, seconds: float, origin_s: float, count: int) -> list[Window]:
        """``count`` windows of one route version from ``origin_s`` on (the per-version slots: requests, errors,
        sent, and the one-value-per-request metrics; a slot counts in the window its start falls in)."""
        out = [Window(origin_s + i * seconds, origin_s + (i + 1) * seconds) for i in range(count)]
        for (v, i), slot in self.merged.version_slots.items():
            if v != version:
                continue
            k = math.floor((i * self.slot_s - self.t0_wall - origin_s) / seconds + 1e-9)
            if 0 <= k < count:
                out[k].absorb(slot)
        return out

    def sent_by_version(self, since_s: float | None = None, until_s: float | None = None) -> dict[str, int]:
        """Requests sent per version in slots that start at/after ``since_s`` and end by ``until_s`` (seconds since
        the run start; None: no bound)."""
        out: dict[str, int] = {}
        for (v, i), slot in self.merged.version_slots.items():
            start = i * self.slot_s - self.t0_wall
            if since_s is not None and start < since_s - 1e-9:
                continue
            if until_s is not None and start + self.slot_s > until_s + 1e-9:
                continue
            out[v] = out.get(v, 0) + slot.sent
        return out

    def delivered_tokens(self, start_s: float, end_s: float) -> float:
        """Output tokens the run delivered in [start_s, end_s): each wall-clock slot's tokens (counted when their
        request ended) pro-rated by its overlap. A stage's throughput is what the server delivered while the stage
        ran, not the tokens of the requests drawn in it: a closed loop draws one extra request per user the stage
        added (its first wave, sent during the ramp) and loses the ones still in flight when it ends, which biased
        a level by the size of its step (users=8 read +9 % over users=4 on a server capped at 2 sequences)."""
        total = 0.0
        for i, slot in self.merged.slots.items():
            a = i * self.slot_s - self.t0_wall
            overlap = min(end_s, a + self.slot_s) - max(start_s, a)
            if overlap > 0:
                total += slot.output_tokens * overlap / self.slot_s
        return total

    def windows(self, seconds: float, origin_s: float = 0.0, fold_tail: bool = False) -> list[Window]:
        """Merged client sketches per ``seconds``-wide window from ``origin_s`` (default: the run start) on,
        empty windows kept; slots before a later origin are left out (the live detectors' trailing windows).

        ``fold_tail``: a last window shorter than half a window is folded into the one before. What it holds came
        in whole slots and whole requests (a request's tokens count when it ends), so over its short span a rate
        is a spike, not a rate (a 0.1 s tail drew 40,836 tok/s beside a ~1,800 tok/s line); the charts' windows."""
        if seconds <= 0:
            raise ValueError("window length must be positive")
        duration = self.duration_s
        n = max(1, math.ceil((duration - origin_s) / seconds))
        out = [Window(origin_s + i * seconds, min(origin_s + (i + 1) * seconds, duration)) for i in range(n)]
        for i, slot in sorted(self.merged.slots.items()):
            t = i * self.slot_s - self.t0_wall - origin_s
            if origin_s > 0 and t < -1e-9:
                continue
            k = max(0, math.floor(t / seconds))
            while k >= len(out):
                out.append(Window(origin_s + len(out) * seconds, origin_s + (len(out) + 1) * seconds))
            out[k].absorb(slot)
        if fold_tail and len(out) > 1 and out[-1].end_s - out[-1].start_s < seconds / 2:
            out[-2].fold(out.pop())
        return out
