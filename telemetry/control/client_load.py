"""The client saturation guard: is the client, not the server, the limit of the timings?

Every process with users (a worker, a local run) measures its own gevent event-loop lag — a probe greenlet
sleeps :data:`PROBE_S` and records how late it woke — and its CPU time per wall second (``time.process_time``,
all its threads). A worker ships both with each report (``report_to_master`` under :data:`REPORT_KEY`); the
master (or the local run) folds them per process into a quantile sketch (bounded memory and constant work per
report, however long the run and however many workers: a list of every sample grew by 20 a second per worker and
was re-read at each report). A process is **client-bound** when its
loop lag p99 exceeds :data:`LAG_P99_LIMIT_MS` or its CPU exceeds :data:`CPU_LIMIT` of one core: its greenlets
then read the streams late and every latency it measures includes that wait. The summary's ``client_load``
section records each process; the console (at the end, and once when first seen live — the web UI's Logs tab
shows that line) says so with the sizing rule (:func:`processes_needed`: how many processes, ``--processes N`` or
workers); ``/llm/client-load`` serves the section.

    install(environment)            # from the plugin's init listener (after telemetry's own install)
    summary["client_load"]["workers"]["local"] == {"lag_p99_ms": 0.4, "cpu": 0.31, "samples": 1180, ...}
"""

from __future__ import annotations

import logging
import math
import time

import gevent
import numpy as np
from locust.runners import MasterRunner, WorkerRunner

from run.context import attach
from telemetry.measure.sketch import LogSketch
from workload.argtypes import usable_cores

log = logging.getLogger(__name__)

REPORT_KEY = "llm_client_load"
PROBE_S = 0.05
"""How often the probe greenlet wakes (20 samples a second)."""
LAG_P99_LIMIT_MS = 5.0
"""Loop lag p99 above this: the process reads its streams late."""
CPU_LIMIT = 0.90
"""CPU time per wall second above this share of one core: the process is out of CPU."""
MIN_COVERED_S = 1.0
"""Probe samples covering less time than this (sleeps plus lags) judge nothing."""
LOCAL_ID = "local"
SIZING_CPU = 0.7
"""The sizing rule's headroom (docs/sizing.md): plan each process at most this share of one core, since its loop
lag rises before the core is full."""


cores = usable_cores


def processes_needed(cpu_shares: list[float]) -> int:
    """The sizing rule: processes (workers) to carry the CPU the current ones use at :data:`SIZING_CPU` of a core
    each, and at least one more than now (a process bound by its loop lag at low CPU needs fewer streams too)."""
    return max(len(cpu_shares) + 1, math.ceil(sum(cpu_shares) / SIZING_CPU))


def sizing_advice(needed: int, used: float, procs: int) -> str:
    """The sizing rule as one line: what to run instead."""
    here = cores()
    where = f"--processes {needed}" if needed <= here else f"{needed} worker processes over several machines"
    return (f"{procs} process{'es' if procs > 1 else ''} used {used:.2f} cores: run {where} (<= {SIZING_CPU:.0%} "
            f"of a core each; this machine has {here}, --processes auto runs one per core) so each process runs fewer "
            f"streams")


class LoopProbe:
    """This process's loop lag samples and CPU/wall seconds since the last :meth:`take`."""

    def __init__(self, interval_s: float = PROBE_S) -> None:
        self.interval_s = interval_s
        self._g: gevent.Greenlet | None = None
        self._lags: list[float] = []
        self._cpu0 = self._wall0 = 0.0
        self._end: tuple[float, float] | None = None

    def start(self) -> None:
        if self._g is None:
            self._lags, self._end = [], None
            self._cpu0, self._wall0 = time.process_time(), time.perf_counter()
            self._g = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._g is not None:
            self._g.kill(block=False)
            self._g = None
            self._end = (time.process_time(), time.perf_counter())  # a later take counts no idle time

    def _run(self) -> None:
        perf, sleep, interval = time.perf_counter, gevent.sleep, self.interval_s
        while True:
            t = perf()
            sleep(interval)
            self._lags.append(perf() - t - interval)

    def take(self) -> dict:
        """{"lag_ms": [...], "cpu_s": s, "wall_s": s} since the last take (an empty dict when not running)."""
        if self._g is None and self._end is None:  # not running, the rest already taken
            return {}
        cpu, wall = (time.process_time(), time.perf_counter()) if self._end is None else self._end
        lags, self._lags = self._lags, []
        out = {"lag_ms": [round(x * 1000.0, 3) for x in lags], "cpu_s": cpu - self._cpu0, "wall_s": wall - self._wall0}
        self._cpu0, self._wall0 = cpu, wall
        if self._end is not None:  # stopped: this take had the rest
            self._lags, self._end = [], None
            self._cpu0 = self._wall0 = 0.0
        return out


class ClientLoad:
    """Per process: a sketch of the run's lag samples (seconds; exact count, sum and max) and its CPU and wall
    seconds; the verdict."""

    def __init__(self) -> None:
        self.procs: dict[str, dict] = {}
        self._warned: set[str] = set()

    def reset(self) -> None:
        self.procs.clear()
        self._warned.clear()

    def add(self, proc: str, part: dict) -> None:
        if not part:
            return
        p = self.procs.setdefault(proc, {"lag": LogSketch(), "cpu_s": 0.0, "wall_s": 0.0})
        lags = part.get("lag_ms") or ()
        if lags:
            p["lag"].add_many(np.asarray(lags, dtype=np.float64) / 1000.0)
        p["cpu_s"] += float(part.get("cpu_s", 0.0))
        p["wall_s"] += float(part.get("wall_s", 0.0))
        row = self.row(proc)
        if row["client_bound"] and proc not in self._warned:
            self._warned.add(proc)
            log.warning(f"client-bound: {proc} {row['why']} — its timings include the client's own delay; "
                        f"sizing: {self.advice()}")

    def advice(self) -> str:
        """The sizing rule for the processes seen so far (:func:`processes_needed`)."""
        shares = [self.row(p)["cpu"] or 0.0 for p in self.procs]
        return sizing_advice(processes_needed(shares), sum(shares), len(shares))

    def row(self, proc: str) -> dict:
        p = self.procs[proc]
        lag: LogSketch = p["lag"]
        n = lag.count

        def ms(q: float) -> float | None:
            v = lag.quantile(q) if n else None
            return round(v * 1000.0, 3) if v is not None else None

        p99 = ms(0.99)
        cpu = p["cpu_s"] / p["wall_s"] if p["wall_s"] > 0 else None
        judged = n * PROBE_S + lag.sum >= MIN_COVERED_S
        reasons = []
        if judged and p99 is not None and p99 > LAG_P99_LIMIT_MS:
            reasons.append(f"event-loop lag p99 {p99:.1f} ms > {LAG_P99_LIMIT_MS:g} ms")
        if judged and cpu is not None and cpu > CPU_LIMIT:
            reasons.append(f"CPU {cpu:.0%} of a core > {CPU_LIMIT:.0%}")
        return {
            "lag_p50_ms": ms(0.5),
            "lag_p99_ms": p99,
            "lag_max_ms": ms(1.0),
            "cpu": round(cpu, 3) if cpu is not None else None,
            "samples": n,
            "client_bound": bool(reasons),
            "why": "; ".join(reasons) or None,
        }

    def section(self, _view=None, _summary=None) -> dict:
        workers = {proc: self.row(proc) for proc in sorted(self.procs)}
        bound = sorted(p for p, r in workers.items() if r["client_bound"])
        shares = [r["cpu"] or 0.0 for r in workers.values()]
        return {
            "client_bound": bool(bound),
            "bound": bound,
            "advice": sizing_advice(processes_needed(shares), sum(shares), len(shares)) if bound else None,
            "processes_needed": processes_needed(shares) if bound else None,
            "limits": {"lag_p99_ms": LAG_P99_LIMIT_MS, "cpu": CPU_LIMIT},
            "workers": workers,
        }

    def console(self, summary: dict) -> None:
        s = summary.get("client_load") or {}
        for proc in s.get("bound") or ():
            log.warning(f"LLM timings are client-bound on {proc}: {s['workers'][proc]['why']}; sizing: {s['advice']}")


def install(environment) -> ClientLoad | None:
    """Probe this process's loop when it runs users; keep and judge every process's figures where the summary
    is built (the master, a local run); serve them on the web UI."""
    runner = environment.runner
    load = ClientLoad()
    probe = None if isinstance(runner, MasterRunner) else LoopProbe()
    events = environment.events
    ctx = attach(environment)
    ctx.client_load = load

    def on_test_start(**_kw) -> None:
        if not isinstance(runner, WorkerRunner):
            load.reset()
        if probe is not None:
            probe.take()
            probe.start()

    def on_test_stop(**_kw) -> None:
        if probe is not None and not isinstance(runner, WorkerRunner):
            load.add(LOCAL_ID, probe.take())
        if probe is not None:
            probe.stop()

    events.test_start.add_listener(on_test_start)
    events.test_stop.add_listener(on_test_stop)
    if isinstance(runner, WorkerRunner):

        def on_report(client_id=None, data=None, **_kw) -> None:
            if data is not None and probe is not None:
                data[REPORT_KEY] = probe.take()

        events.report_to_master.add_listener(on_report)
        return load
    if isinstance(runner, MasterRunner):
        events.worker_report.add_listener(
            lambda client_id=None, data=None, **_kw: load.add(str(client_id), (data or {}).get(REPORT_KEY) or {})
        )
    else:

        def pump() -> None:  # a local run judges itself live too, every second
            while True:
                gevent.sleep(1.0)
                if probe is not None and probe._g is not None:
                    load.add(LOCAL_ID, probe.take())

        gevent.spawn(pump)
    if ctx.telemetry is not None:
        ctx.hooks.add_section("client_load", load.section, empty=lambda _view: None)
        ctx.hooks.on_summary(load.console)
    return load
