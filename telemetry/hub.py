"""The telemetry hub, ``environment.llm_telemetry``: the one place other parts read merged LLM numbers.

It owns this process's :class:`Recorder` (fed by request events), the master's merged store,
the server scraper's series, summary sections from other packages and the end-of-run sinks.

    hub = environment.llm_telemetry
    hub.add_section("saturation", lambda hub: {...})   # fills summary["saturation"]
    hub.on_summary(lambda summary: write_report(summary))
    hub.summary(); hub.live(); hub.server_series; hub.windows(10.0)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from telemetry.recorder import SLOT_ALPHA, WINDOW_METRICS, Recorder
from telemetry.scraper import ServerScraper
from telemetry.sketch import LogSketch
from telemetry.slo import SloSet
from telemetry.summary import build_summary

log = logging.getLogger(__name__)


@dataclass
class Window:
    """Merged client numbers of one time window (``start_s``/``end_s`` relative to the run start)."""

    start_s: float
    end_s: float
    requests: int = 0
    errors: int = 0
    output_tokens: int = 0
    sketches: dict[str, LogSketch] = field(default_factory=lambda: {m: LogSketch(SLOT_ALPHA) for m in WINDOW_METRICS})


@dataclass
class WorkerInfo:
    """What the master knows of one reporting process."""

    reports: int = 0
    last_report_wall: float = 0.0
    requests: int = 0
    kv_last: tuple[int, int] | None = None


class TelemetryHub:
    """Recorder + merged state + sections + sinks for one Locust process."""

    def __init__(self, environment, slot_s: float = 1.0) -> None:
        self.environment = environment
        self.slot_s = slot_s
        self.slos = SloSet()
        self.recorder = Recorder(self.slos, slot_s)
        """This process's own results (worker or local run), shipped and reset every report."""
        self.merged = Recorder(self.slos, slot_s)
        """Merged state of every process (master or local run)."""
        self.sections: dict[str, Callable[[TelemetryHub], object]] = {}
        self.sinks: list[Callable[[dict], None]] = []
        self.scraper: ServerScraper | None = None
        self.workers: dict[str, WorkerInfo] = {}
        self.lost_workers: set[str] = set()
        self.t0_wall = time.time()
        self.t_end_wall: float | None = None
        self.attribution_window = 10.0
        self.model = ""
        """--model, else the first id of the master's own GET /v1/models (a fallback label)."""
        self.models_sent: dict[str, int] = {}
        """Model name -> reports that named it: what the users actually sent (each process's resolved model)."""
        self.final_summary: dict | None = None
        self.plugin = None
        """The process's listener object (set by ``install``)."""

    # ---- configuration -------------------------------------------------------------------------
    @property
    def options(self):
        return self.environment.parsed_options

    def configure(self, options) -> None:
        """Read options (called at test_start, when workers have them)."""
        self.slos = SloSet.from_options(options) if options is not None else SloSet()
        self.recorder.slos = self.slos
        self.merged.slos = self.slos
        self.attribution_window = float(getattr(options, "attribution_window", 10.0) or 10.0)
        self.model = getattr(options, "model", None) or self.model

    def start_run(self) -> None:
        """A new test starts: forget the previous one's merged numbers."""
        self.merged.reset()
        self.recorder.reset()
        self.workers.clear()
        self.lost_workers.clear()
        self.models_sent.clear()
        self.t0_wall = time.time()
        self.t_end_wall = None
        self.final_summary = None

    def end_run(self) -> None:
        if self.t_end_wall is None:
            self.t_end_wall = time.time()

    # ---- the contract of COMMON.md section 2 --------------------------------------------------
    def add_section(self, name: str, fn: Callable[[TelemetryHub], object]) -> None:
        """``fn(hub)`` fills ``summary[name]`` (attribution, saturation, versions...)."""
        self.sections[name] = fn

    def on_summary(self, fn: Callable[[dict], None]) -> None:
        """``fn(summary)`` is called once with the final summary on the master (report writer...)."""
        self.sinks.append(fn)

    def summary(self) -> dict:
        return build_summary(self)

    def stages(self) -> list[dict]:
        """The summary's per-stage rows (DESIGN.md ``stages``), from the merged state."""
        from telemetry.summary import stage_rows

        return stage_rows(self)

    @property
    def server_series(self) -> list[dict]:
        return self.scraper.series if self.scraper else []

    @property
    def duration_s(self) -> float:
        return (self.t_end_wall or time.time()) - self.t0_wall

    @property
    def worker_count(self) -> int:
        return max(1, len(self.workers))

    def run_section(self, name: str, fn: Callable[[TelemetryHub], object]) -> object:
        try:
            return fn(self)
        except Exception as e:  # a broken provider must not lose the rest of the summary
            log.error(f"summary section {name!r} failed: {type(e).__name__}: {e}")
            return {"error": f"{type(e).__name__}: {e}"}

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

    # ---- views -------------------------------------------------------------------------------------
    def windows(self, seconds: float) -> list[Window]:
        """Merged client sketches per ``seconds``-wide window since the run start (empty windows kept)."""
        if seconds <= 0:
            raise ValueError("window length must be positive")
        duration = self.duration_s
        n = max(1, math.ceil(duration / seconds))
        out = [Window(i * seconds, min((i + 1) * seconds, duration)) for i in range(n)]
        for i, slot in sorted(self.merged.slots.items()):
            t = i * self.slot_s - self.t0_wall
            k = math.floor(t / seconds)
            if k < 0:
                k = 0
            while k >= len(out):
                out.append(Window(len(out) * seconds, (len(out) + 1) * seconds))
            w = out[k]
            w.requests += slot.requests
            w.errors += slot.errors
            w.output_tokens += slot.output_tokens
            for m in WINDOW_METRICS:
                w.sketches[m].merge(slot.sketches[m])
        return out

    def live(self) -> dict:
        """Per-stage p50/p99 of TTFT/ITL/TPOT (ms), output tok/s, and the latest server KV usage."""
        from telemetry.summary import stage_spans

        duration = self.duration_s
        latest = self.scraper.latest if self.scraper else None
        stages = []
        for st, start, end in stage_spans(self, duration):
            cells = self.merged.select(stage=st.name)
            row: dict = {"stage": st.name, "requests": sum(c.requests for c in cells)}
            for m in ("ttft", "itl", "tpot"):
                s = Recorder.merged_sketch(cells, m)
                for name, q in (("p50", 0.5), ("p99", 0.99)):
                    v = s.quantile(q)
                    row[f"{m}_{name}_ms"] = None if v is None else v * 1000.0
            span = end - start
            row["output_tok_s"] = sum(c.output_tokens for c in cells) / span if span > 0 else None
            stages.append(row)
        return {
            "elapsed_s": duration,
            "workers": self.worker_count,
            "stages": stages,
            "server_kv_usage": latest.get("kv_cache_usage") if latest else None,
            "client_kv_block_fill": self.client_kv_fill(),
        }
