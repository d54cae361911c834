"""The timed engine loop in-process: time scale, metrics in the wall-clock seconds clients see, the batch cap from
simulated second T."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from server.sim.cost import CostModel
from server.sim.engine import Engine
from server.sim.metrics import EngineMetrics
from server.sim.scheduler import Scheduler, SchedulerConfig, SimRequest, TokenIds

IDS = TokenIds(list(range(5000, 5000 + 1024)), eos_id=1)


def _engine(cost: CostModel, scale: float, cap=None, **cfg) -> Engine:
    conf = dict(max_num_seqs=16, max_num_batched_tokens=512, num_gpu_blocks=512, max_model_len=1024)
    conf.update(cfg)
    return Engine(Scheduler(SchedulerConfig(**conf), IDS, np.random.default_rng(0)), cost, EngineMetrics(1024),
                  time_scale=scale, batch_cap_at=cap)


def _request(i: int, out: int, done: dict, events: list | None = None) -> SimRequest:
    def sink(req, new, finished):
        if events is not None:
            events.append((time.perf_counter(), len(new)))
        if finished:
            done[req.rid] = time.perf_counter()
    return SimRequest(rid=f"r{i}", tokens=[100 + i] * 20, num_prompt=20, max_tokens=out, stop_at=out, sink=sink)


async def _run(engine: Engine, reqs: list[SimRequest], done: dict, timeout: float = 20.0) -> float:
    task = asyncio.create_task(engine.run())
    t0 = time.perf_counter()
    for r in reqs:
        engine.submit(r)
    while len(done) < len(reqs):
        assert time.perf_counter() - t0 < timeout, "engine did not finish"
        await asyncio.sleep(0.005)
    engine.stop()
    await task
    return time.perf_counter() - t0


def test_time_scale_runs_the_steps_faster_and_metrics_are_in_wall_seconds():
    # every step costs 20 ms of simulated time; 1 prefill + 29 decode steps = 600 ms simulated, 600/S ms wall
    cost = CostModel(20.0, 0.0, 0.0, 0.0)
    walls = {}
    for scale in (1.0, 10.0):
        done: dict = {}
        engine = _engine(cost, scale)
        walls[scale] = wall = asyncio.run(_run(engine, [_request(0, 30, done)], done))
        assert wall > 0.6 / scale * 0.9, (scale, wall)
        e2e = engine.metrics.e2e  # wall-clock seconds: what the client measured, never more than its wall time
        assert e2e.count == 1 and 0.6 / scale * 0.95 < e2e.sum <= wall, (scale, e2e.sum, wall)
        itl = engine.metrics.itl
        # in wall seconds: not the simulated 20 ms at scale 10. The mean may fall below the step when a loaded box
        # delays the first token and the engine's step clock catches up, so the lower bound is half a step
        assert itl.count == 29 and itl.sum <= e2e.sum, (scale, itl.sum, e2e.sum)
        assert 0.010 / scale < itl.sum / itl.count < 0.026 / scale, (scale, itl.sum / itl.count)
    # each wall within -10 % / +50 % of 600 ms / scale: at scale 10 the same steps take a tenth (60 ms), so a
    # speed-up under ~6.7x fails
    assert walls[1.0] < 0.6 * 1.5 and walls[10.0] < 0.06 * 1.5, walls


def test_steps_are_spaced_by_the_cost_model_without_drift():
    cost = CostModel(10.0, 0.0, 0.0, 0.0)  # 10 ms steps in real time: timer granularity must not add up
    done: dict = {}
    events: list = []
    engine = _engine(cost, 1.0)
    asyncio.run(_run(engine, [_request(0, 100, done, events)], done))
    span = events[-1][0] - events[0][0]
    assert 0.99 * 0.95 < span < 0.99 * 1.25, span  # 99 intervals of 10 ms


def test_batch_cap_from_second_t_limits_running_sequences():
    cost = CostModel(10.0, 0.0, 0.0, 0.0)
    done: dict = {}
    engine = _engine(cost, 10.0, cap=(1.0, 1))  # from simulated second 1 on, one running sequence
    early = [_request(i, 150, done) for i in range(4)]  # 1.5 simulated seconds each, all admitted before T
    late = [_request(10 + i, 5, done) for i in range(3)]
    seen: list[tuple[int, int]] = []  # (running, finished early ones) after T

    async def main():
        task = asyncio.create_task(engine.run())
        for r in early:
            engine.submit(r)
        while len(done) < len(early) + len(late):
            if engine.clock.sim() > 1.05:
                if late[0].arrival == 0.0:
                    for r in late:
                        engine.submit(r)
                seen.append((len(engine.sched.running), sum(r.rid in done for r in early)))
            await asyncio.sleep(0.002)
        engine.stop()
        await task

    asyncio.run(main())
    assert engine.sched.batch_cap == 1
    assert max(run for run, _ in seen) == 4  # running ones are not evicted at T
    assert all(run <= 1 for run, n_done in seen if n_done == 4)  # once they drain, one at a time
    assert all(r.rid in done for r in late) and engine.sched.num_preemptions == 0


def test_batch_cap_after_the_first_request_counts_from_its_arrival():
    """``+T:N``: an engine idle for longer than T before its first request still runs T seconds uncapped after it."""
    cost = CostModel(10.0, 0.0, 0.0, 0.0)
    done: dict = {}
    engine = _engine(cost, 10.0, cap=(0.5, 1, True))  # 0.5 simulated seconds after the first request
    reqs = [_request(i, 200, done) for i in range(3)]  # 2 simulated seconds each
    seen: list[tuple[float, int]] = []

    async def main():
        task = asyncio.create_task(engine.run())
        await asyncio.sleep(0.1)  # 1 simulated second idle: past T from the start, not from the first request
        assert engine.sched.batch_cap is None
        first = engine.clock.sim()
        for r in reqs:
            engine.submit(r)
        while len(done) < len(reqs):
            seen.append((engine.clock.sim() - first, engine.sched.batch_cap))
            await asyncio.sleep(0.002)
        engine.stop()
        await task

    asyncio.run(main())
    assert all(cap is None for t, cap in seen if t < 0.45) and any(t < 0.45 for t, _ in seen)
    assert all(cap == 1 for t, cap in seen if t > 0.6) and any(t > 0.6 for t, _ in seen)
