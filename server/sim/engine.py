"""The engine loop: plan a step, wait the cost model's step time, apply it, hand tokens to the streams.

Two clocks: with ``--time-scale S`` a step the cost model prices at ``t`` simulated seconds takes ``t / S``
real seconds. Every timestamp the engine keeps (arrival, first scheduled, first and last token) and so every
duration it exports (the latency histograms of /metrics, the spans of --otlp-traces-endpoint) is in wall-clock
seconds since start — the time its clients experience, so a client's TTFT and the server's queue + prefill add
up whatever S is. Only the batch-cap start (``--batch-cap-at T:N``) is read on the simulated clock
(``SimClock.sim()``, S× the wall clock).
Sleeps follow a chain of deadlines, so the event loop's timer granularity (about 1 ms) does not
accumulate across steps.

    engine = Engine(scheduler, cost, metrics, time_scale=1.0, batch_cap_at=(15.0, 1))
    asyncio.create_task(engine.run())
    engine.submit(request)          # request.sink(request, new_ids, finished) is called per step
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from server.sim.cost import CostModel
from server.sim.metrics import EngineMetrics
from server.sim.scheduler import FINISHED, Scheduler, SimRequest

log = logging.getLogger("server.sim")

MIN_SLEEP_S = 0.001  # shorter waits only yield to the event loop
MAX_BURST_S = 0.002  # longest run of back-to-back due steps before yielding to I/O
RESYNC_S = 0.05  # real seconds behind the deadline chain after which it restarts from now (else later steps catch up)


class SimClock:
    """Wall-clock seconds since start (``now``; every exported duration) and simulated ones (``sim``: ``now`` times
    the time scale; the batch-cap start)."""

    __slots__ = ("scale", "t0")

    def __init__(self, scale: float = 1.0):
        self.scale = scale
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def sim(self) -> float:
        return (time.perf_counter() - self.t0) * self.scale


class BatchCap(NamedTuple):
    """``--batch-cap-at``: from simulated second ``at`` (counted from the first request the engine is given when
    ``after_first``, else from the start) admit at most ``running`` sequences."""

    at: float
    running: int
    after_first: bool = False


class Engine:
    def __init__(self, scheduler: Scheduler, cost: CostModel, metrics: EngineMetrics, time_scale: float = 1.0,
                 batch_cap_at: tuple[float, int] | BatchCap | None = None, flush: Callable[[], None] | None = None):
        self.sched = scheduler
        self.flush = flush or (lambda: None)
        """Sends what the sinks queued; called before the loop waits (see :class:`server.core.http.WriteBatcher`)."""
        self.cost = cost
        self.metrics = metrics
        self.clock = SimClock(time_scale)
        self.batch_cap_at = None if batch_cap_at is None else BatchCap(*batch_cap_at)
        self._first_arrival_sim: float | None = None
        """The simulated second of the first request (the anchor of a ``+T`` batch cap)."""
        self.steps = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self.tracer = None
        """A :class:`server.sim.tracing.SimTracer` (``--otlp-traces-endpoint``), else None."""

    # ---- requests ---------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock.now()

    def submit(self, req: SimRequest, arrival: float | None = None) -> None:
        """Queue ``req``; ``arrival``: when it reached the server (default now; earlier when its KV was awaited)."""
        req.arrival = self.clock.now() if arrival is None else arrival
        if self._first_arrival_sim is None:
            self._first_arrival_sim = self.clock.sim()
        self.metrics.request_max_tokens.observe(req.max_tokens)
        self.sched.add(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        if self.sched.abort(req):
            self.metrics.success["abort"] += 1
        if self.tracer is not None:
            self.tracer.abort(req)

    def gauges(self) -> dict:
        s = self.sched
        return {"running": len(s.running), "waiting": len(s.waiting), "kv_usage": s.pool.usage,
                "preemptions": s.num_preemptions, "prefix_queries": s.prefix_queries, "prefix_hits": s.prefix_hits,
                "spec": (s.spec_drafts, s.spec_draft_tokens, s.spec_accepted, s.spec_per_pos) if s.spec_per_pos
                else None}

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    # ---- the loop ---------------------------------------------------------------------------
    def _apply_batch_cap(self) -> None:
        cap = self.batch_cap_at
        if cap is None or self.sched.batch_cap is not None:
            return
        start = self._first_arrival_sim if cap.after_first else 0.0
        if start is not None and self.clock.sim() >= start + cap.at:
            self.sched.batch_cap = cap.running
            log.info("batch cap: at most %d running sequences from t=%.1fs (sim time)", cap.running, start + cap.at)

    async def run(self) -> None:
        sched, clock, cost, flush = self.sched, self.clock, self.cost, self.flush
        scale = clock.scale
        perf = time.perf_counter
        deadline = burst_start = perf()
        while not self._stopping:
            if not sched.has_work():
                flush()
                self._wake.clear()
                await self._wake.wait()
                deadline = burst_start = perf()
                continue
            self._apply_batch_cap()
            step = sched.schedule(clock.now())
            if not step.scheduled:  # nothing fits this instant (e.g. a batch cap of 0 running)
                flush()
                await asyncio.sleep(0.001)
                deadline = burst_start = perf()
                continue
            start = perf()
            if deadline < start - RESYNC_S:
                deadline = start
            deadline += cost.step_seconds(step) / scale
            delay = deadline - start
            if delay > 0 or start - burst_start > MAX_BURST_S:
                # Send what earlier steps produced, then wait out this step (a wait below the selector's 1 ms
                # granularity only yields). Steps already overdue (the loop is behind) run back to back and
                # share one flush, for at most MAX_BURST_S.
                flush()
                await asyncio.sleep(delay if delay > MIN_SLEEP_S else 0)
                burst_start = perf()
            self._finish_step(step, clock.now())

    def _finish_step(self, step, now: float) -> None:
        m = self.metrics
        self.steps += 1
        m.iteration_tokens.observe(step.num_tokens)
        itl = m.itl
        for req, new, finished in self.sched.update(step):
            m.generation_tokens += len(new)
            last = req.last_token
            if last is None:
                req.first_token = now
                m.ttft.observe(now - req.arrival)
                m.prompt_tokens += req.num_prompt
            else:
                itl.observe(now - last)
            req.last_token = now
            if finished:
                self._record_finished(req, now)
            sink = req.sink
            if sink is not None:
                try:
                    sink(req, new, finished)
                except Exception:  # a broken client must not stop the engine
                    log.exception("stream sink failed; aborting request %s", req.rid)
                    if req.status != FINISHED:
                        self.abort(req)

    def _record_finished(self, req: SimRequest, now: float) -> None:
        m = self.metrics
        if self.tracer is not None:
            self.tracer.finished(req, now)
        m.success[req.finish_reason or "length"] += 1
        n_out = req.num_output
        first, sched_t = req.first_token or now, req.first_scheduled or req.arrival
        m.e2e.observe(now - req.arrival)
        m.queue.observe(sched_t - req.arrival)
        m.prefill.observe(first - sched_t)
        m.decode.observe(now - first)
        m.inference.observe(now - sched_t)
        m.request_prompt_tokens.observe(req.num_prompt)
        m.request_generation_tokens.observe(n_out)
        if n_out > 1:
            m.tpot_request.observe((now - first) / (n_out - 1))
