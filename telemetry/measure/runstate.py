"""The run's mutable state: this process's recorder, the merged store and the worker bookkeeping.

Only the telemetry roles (telemetry/plugin.py) and the worker watch (telemetry/measure/distributed.py) write here;
every reader takes a :class:`~telemetry.measure.view.RunView` with :meth:`RunState.view`.

    run = RunState()
    run.configure(options); run.start_run()
    run.recorder.record(result)                 # this process's users
    run.absorb("w1", state)                     # a worker's report (or the local recorder's ``take()``)
    run.mark_lost("w2"); run.mark_back("w2")
    run.end_run(); view = run.view(options=options, host=host, stage_board=board)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from telemetry.measure.recorder import Recorder
from telemetry.measure.scraper import ServerScraper
from telemetry.measure.view import RunView
from telemetry.options import ATTRIBUTION_WINDOW_DEFAULT
from telemetry.slo import SloSet


@dataclass
class WorkerInfo:
    """What the master knows of one reporting process."""

    reports: int = 0
    last_report_wall: float = 0.0
    requests: int = 0
    kv_last: tuple[int, int] | None = None


class RunState:
    """Recorders, worker bookkeeping, the run's clock, model label, server scraper and final summary."""

    def __init__(self, slot_s: float = 1.0) -> None:
        self.slot_s = slot_s
        self.slos = SloSet()
        self.recorder = Recorder(self.slos, slot_s)
        """This process's own results (worker or local run), shipped and reset every report."""
        self.merged = Recorder(self.slos, slot_s)
        """Merged state of every process (master or local run)."""
        self.workers: dict[str, WorkerInfo] = {}
        self.lost_workers: set[str] = set()
        self.models_sent: dict[str, int] = {}
        """Model name -> reports that named it: what the users actually sent (each process's resolved model)."""
        self.model = ""
        """--model, else the first id of the master's own GET /v1/models (a fallback label)."""
        self.attribution_window = ATTRIBUTION_WINDOW_DEFAULT
        self.scraper: ServerScraper | None = None
        self.version_scrapers: dict[str, ServerScraper] = {}
        """With --route-table: one scraper per version's backend (its own /metrics, interval and failures)."""
        self.route_fallback: dict | None = None
        """The --route-fallback rule's state (telemetry/control/routing.py), None without a rule."""
        self.t0_wall = time.time()
        self.t_end_wall: float | None = None
        self.final_summary: dict | None = None
        self.detectors: dict | None = None
        """The live detectors' latest state (written by the summarizing role's check loop)."""

    def configure(self, options) -> None:
        """Read options (at test_start, when workers have them)."""
        self.slos = SloSet.from_options(options) if options is not None else SloSet()
        self.recorder.slos = self.slos
        self.merged.slos = self.slos
        self.attribution_window = float(getattr(options, "attribution_window", None) or ATTRIBUTION_WINDOW_DEFAULT)
        self.model = getattr(options, "model", None) or self.model

    def start_run(self) -> None:
        """A new test starts: forget the previous one's merged numbers and workers."""
        self.merged.reset()
        self.recorder.reset()
        self.workers.clear()
        self.lost_workers.clear()
        self.models_sent.clear()
        self.t0_wall = time.time()
        self.t_end_wall = None
        self.final_summary = None
        self.detectors = None
        self.route_fallback = None

    def end_run(self) -> None:
        if self.t_end_wall is None:
            self.t_end_wall = time.time()

    # ---- merging ---------------------------------------------------------------------------------
    def absorb(self, worker_id: str, state: dict) -> None:
        """Merge one report (a worker's, or the local recorder's) into the merged store."""
        self.merged.merge(state)
        info = self.workers.setdefault(worker_id, WorkerInfo())
        info.reports += 1
        info.last_report_wall = time.time()
        info.requests += sum(sum(c["outcomes"].values()) for c in state["cells"])
        if state.get("model"):
            self.models_sent[str(state["model"])] = self.models_sent.get(str(state["model"]), 0) + 1
        if state.get("kv_last") is not None:
            info.kv_last = (int(state["kv_last"][0]), int(state["kv_last"][1]))

    def mark_lost(self, worker_id: str) -> bool:
        """A worker stopped sending heartbeats; True the first time (its reports stay merged)."""
        if worker_id in self.lost_workers:
            return False
        self.lost_workers.add(worker_id)
        return True

    def mark_back(self, worker_id: str) -> bool:
        """A lost worker sends heartbeats again; True if it was lost."""
        if worker_id not in self.lost_workers:
            return False
        self.lost_workers.discard(worker_id)
        return True

    # ---- reading ---------------------------------------------------------------------------------
    def reported_until(self) -> float | None:
        """Seconds since the run start up to which every live process has reported (None before any report)."""
        walls = [i.last_report_wall for wid, i in self.workers.items() if wid not in self.lost_workers]
        return min(walls) - self.t0_wall if walls else None

    def sent_model(self) -> str:
        """The model(s) the users sent, comma-separated when processes resolved different ones; "" if unknown."""
        return ", ".join(sorted(self.models_sent))

    def client_kv_fill(self) -> float | None:
        """Used / allocated KV slots over the latest in-flight snapshot of every live process."""
        used = allocated = 0
        for wid, info in self.workers.items():
            if info.kv_last is not None and wid not in self.lost_workers:
                used += info.kv_last[0]
                allocated += info.kv_last[1]
        if allocated == 0:
            return 0.0 if any(i.kv_last is not None for i in self.workers.values()) else None
        return used / allocated

    def view(self, options=None, host: str = "", stage_board=None, active_users: int = 0) -> RunView:
        """The run as it stands now, read-only; ``stage_board`` is the master's (history, closed_at, current)."""
        scraper = self.scraper
        history = tuple((st, wall) for st, wall, _perf in (stage_board.history if stage_board else []))
        closed = getattr(stage_board, "closed_at", None)
        return RunView(
            merged=self.merged,
            slos=self.slos,
            options=options,
            host=host or "",
            model=self.sent_model() or self.model,
            t0_wall=self.t0_wall,
            duration_s=(self.t_end_wall or time.time()) - self.t0_wall,
            attribution_window=self.attribution_window,
            worker_count=max(1, len(self.workers)),
            lost_workers=frozenset(self.lost_workers),
            client_kv_fill=self.client_kv_fill(),
            server_series=list(scraper.series) if scraper else [],
            server_latest=scraper.latest if scraper else None,
            scrape_metric_names=scraper.metric_names if scraper else "none",
            scrapes=scraper.successes if scraper else 0,
            scrape_failures=scraper.failures if scraper else 0,
            server_targets=scraper.target_states() if scraper else [],
            stage_history=history,
            stage_closed_wall=closed[0] if closed is not None else None,
            current_stage=stage_board.current if stage_board is not None else None,
            active_users=int(active_users or 0),
            detectors=self.detectors,
            version_servers={v: {"url": sc.url, "series": list(sc.series), "scrapes": sc.successes,
                                 "failures": sc.failures} for v, sc in self.version_scrapers.items()},
            route_fallback=self.route_fallback,
        )
