"""Building blocks of the scheduler tests: a token-id space, requests and a small scheduler."""

from __future__ import annotations

import itertools

import numpy as np

from server.sim.scheduler import Scheduler, SchedulerConfig, SimRequest, TokenIds

IDS = TokenIds(list(range(5000, 5000 + 1024)), eos_id=1)
_n = itertools.count()


def req(prompt_len: int, out: int, prompt: list[int] | None = None, offset: int = 0, **kw) -> SimRequest:
    toks = list(prompt) if prompt is not None else [10_000 + next(_n) * 1000 + i for i in range(prompt_len)]
    return SimRequest(rid=f"r{next(_n)}", tokens=toks, num_prompt=len(toks), max_tokens=out, stop_at=out,
                      id_offset=offset, **kw)


def sched(**kw) -> Scheduler:
    cfg = dict(max_num_seqs=8, max_num_batched_tokens=64, block_size=16, num_gpu_blocks=64, max_model_len=1024)
    cfg.update(kw)
    return Scheduler(SchedulerConfig(**cfg), IDS, np.random.default_rng(0))
