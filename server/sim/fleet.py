"""Data parallel: N engines behind one API server, as ``vllm serve --data-parallel-size N``.

Each engine has its own scheduler, KV pool, step loop and metrics; a request is dealt to the engine with the
lowest ``4 * waiting + running`` (vLLM V1's DP load balancer, ``DPLBAsyncMPClient.get_core_engine_for_request``,
ties to the lowest index) over the balancer's own counts: the engines' counts as the coordinator publishes them
every 100 ms, plus one waiting request per request dealt since (a burst is spread, not piled on one). Every
exported series carries its engine's ``engine`` label, and each engine has its own ``vllm:cache_config_info``
with its own ``num_gpu_blocks`` (tests/contract/fleet/). ``--dp-skew E:F`` makes engine E's steps F times
slower (a straggling rank).

    fleet = Fleet([engine0, engine1])      # quacks like one Engine to the API: submit, abort, tracer, run, stop
    registry = make_registry(FleetCollector([collector0, collector1]))
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from server.sim.engine import Engine
from server.sim.scheduler import SimRequest

WAITING_WEIGHT = 4
"""vLLM's DP balancer scores an engine ``waiting * 4 + running``."""
STATS_INTERVAL_S = 0.1
"""How often vLLM's DP coordinator publishes the engines' request counts to the balancer."""


class Fleet:
    """Several engines as one: requests dealt least-loaded, aborts routed to the request's engine."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines = engines
        self.dealt = [0] * len(engines)
        """Requests dealt to each engine (a test's view of the balancer)."""
        self.counts = [[0, 0] for _ in engines]
        """The balancer's (waiting, running) per engine: the last published counts plus what it dealt since."""
        self._published = -STATS_INTERVAL_S

    @property
    def tracer(self):
        return self.engines[0].tracer

    @tracer.setter
    def tracer(self, tracer) -> None:
        for e in self.engines:
            e.tracer = tracer

    def pick(self) -> int:
        now = time.perf_counter()
        if now - self._published >= STATS_INTERVAL_S:
            self._published = now
            self.counts = [[len(e.sched.waiting), len(e.sched.running)] for e in self.engines]
        scores = [WAITING_WEIGHT * w + r for w, r in self.counts]
        index = scores.index(min(scores))
        self.counts[index][0] += 1
        return index

    def now(self) -> float:
        return self.engines[0].now()

    def submit(self, req: SimRequest, arrival: float | None = None) -> None:
        req.engine = self.pick()
        self.dealt[req.engine] += 1
        self.engines[req.engine].submit(req, arrival)

    def abort(self, req: SimRequest) -> None:
        self.engines[req.engine].abort(req)

    async def run(self) -> None:
        await asyncio.gather(*(e.run() for e in self.engines))

    def stop(self) -> None:
        for e in self.engines:
            e.stop()


class FleetCollector:
    """The engines' collectors as one: a family's samples from every engine under one name, as vLLM exports them."""

    def __init__(self, collectors: list) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator:
        families: dict[str, object] = {}
        for c in self.collectors:
            for fam in c.collect():
                kept = families.get(fam.name)
                if kept is None:
                    families[fam.name] = fam
                else:
                    kept.samples.extend(fam.samples)
        yield from families.values()
