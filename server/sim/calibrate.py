"""Closed-loop load on the scheduler in virtual time: what a profile yields, in milliseconds of CPU.

This runs the same :class:`Scheduler` and :class:`CostModel` as the server, without HTTP or sleeping:
N users start together, each sends its next request ``client_gap_s`` after the previous one ended.
It is how the profiles were fitted (the real-time check over HTTP runs the Locust users:
tests/server/sim/test_seed_scenario.py).

    python -m server.sim.calibrate --profile deepseek-v2-lite-a100 --users 16 --input-len 512 --output-len 256
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
from dataclasses import dataclass

import numpy as np

from server.sim.profiles import Profile, load_profile
from server.sim.scheduler import Scheduler, SchedulerConfig, SimRequest, TokenIds
from workload.argtypes import positive_int, seconds


@dataclass(frozen=True)
class ClosedLoopResult:
    output_tok_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_mean_ms: float
    requests: int
    steps: int
    preemptions: int


def scheduler_config(profile: Profile, **overrides) -> SchedulerConfig:
    fields = {k: v for k, v in profile.engine.items() if k in SchedulerConfig.__dataclass_fields__}
    fields.update(overrides)
    return SchedulerConfig(**fields)


def closed_loop(profile: Profile, users: int = 16, input_len: int = 512, output_len: int = 256,
                duration_s: float = 60.0, client_gap_s: float = 0.001, client_jitter_s: float = 0.0, seed: int = 0,
                **overrides) -> ClosedLoopResult:
    cfg = scheduler_config(profile, **overrides)
    rng = np.random.default_rng(seed)
    sched = Scheduler(cfg, TokenIds(list(range(1000, 1000 + 4096)), eos_id=1), rng)
    arrivals = [(client_jitter_s * float(rng.random()), u) for u in range(users)]
    heapq.heapify(arrivals)
    counter = itertools.count()
    t = 0.0
    ttfts: list[float] = []
    itl_sum, itl_n = 0.0, 0
    tokens = 0
    steps = 0
    live: dict[int, SimRequest] = {}
    while t < duration_s:
        while arrivals and arrivals[0][0] <= t:
            at, user = heapq.heappop(arrivals)
            prompt = rng.integers(2000, 100000, size=input_len).tolist()
            req = SimRequest(rid=str(next(counter)), tokens=prompt, num_prompt=input_len, max_tokens=output_len,
                             stop_at=output_len, id_offset=int(rng.integers(0, 1 << 20)), arrival=at)
            req.sink = user  # the user index rides along
            live[id(req)] = req
            sched.add(req)
        if not sched.has_work():
            t = arrivals[0][0]
            continue
        step = sched.schedule(t)
        if not step.scheduled:
            break
        t += profile.cost.step_seconds(step)
        steps += 1
        for req, new, finished in sched.update(step):
            if t <= duration_s:
                tokens += len(new)
            if req.last_token is None:
                if t <= duration_s:
                    ttfts.append(t - req.arrival)
            else:
                itl_sum += t - req.last_token
                itl_n += 1
            req.last_token = t
            if finished:
                del live[id(req)]
                heapq.heappush(arrivals, (t + client_gap_s + client_jitter_s * float(rng.random()), req.sink))
    ttft = np.asarray(ttfts) * 1000
    return ClosedLoopResult(
        output_tok_s=tokens / duration_s,
        ttft_p50_ms=float(np.percentile(ttft, 50)) if len(ttft) else float("nan"),
        ttft_p99_ms=float(np.percentile(ttft, 99)) if len(ttft) else float("nan"),
        itl_mean_ms=1000 * itl_sum / itl_n if itl_n else float("nan"),
        requests=len(ttfts),
        steps=steps,
        preemptions=sched.num_preemptions,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.sim.calibrate", description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="deepseek-v2-lite-a100")
    p.add_argument("--users", type=positive_int, default=16)
    p.add_argument("--input-len", type=positive_int, default=512)
    p.add_argument("--output-len", type=positive_int, default=256)
    p.add_argument("--duration", type=seconds, default=60.0)
    a = p.parse_args(argv)
    r = closed_loop(load_profile(a.profile), a.users, a.input_len, a.output_len, a.duration)
    print(json.dumps(r.__dict__, indent=1))


if __name__ == "__main__":
    main()
