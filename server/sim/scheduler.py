"""One engine step at a time, like vLLM V1's scheduler: running first, then waiting, under a token budget.

Each call to :meth:`Scheduler.schedule` plans one step:

1. Every running request gets its next tokens (a decode token, or the rest of a chunked prefill),
   in order, while the per-step budget ``max_num_batched_tokens`` lasts. When the pool has no
   block for it, the newest running request is preempted (blocks freed, progress reset to zero,
   put back at the front of the waiting queue: recompute) until it fits.
2. If nothing was preempted, waiting requests are admitted in order while the budget, the sequence
   limit (``max_num_seqs``, or a lower batch cap) and the free blocks allow. A new request first
   looks its full prompt blocks up in the prefix cache and only computes the rest.

:meth:`Scheduler.update` then applies the step: chunked prefills advance, requests whose known
tokens are all computed emit new tokens (one after a prefill, ``decode_width`` or the accepted
speculative tokens after a decode), full blocks are registered in the prefix cache, finished
requests free their blocks. Time is not handled here (see :mod:`server.sim.engine`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from server.sim.kv import BlockPool, block_hashes

WAITING, RUNNING, FINISHED = 0, 1, 2


@dataclass(eq=False, slots=True)
class SimRequest:
    """One sequence inside the engine (a batch prompt is several of these)."""

    rid: str
    tokens: list[int]
    """Prompt ids followed by the generated ids (owned by the request)."""
    num_prompt: int
    max_tokens: int
    stop_at: int
    """Generated-token count at which the request finishes (<= max_tokens)."""
    stop_on_eos: bool = False
    """The token at ``stop_at`` is EOS (finish_reason "stop") rather than the length limit."""
    id_offset: int = 0
    sink: Callable | None = None
    """Called as ``sink(request, new_ids, finished)`` after each step that produced tokens."""
    num_computed: int = 0
    blocks: list[int] = field(default_factory=list)
    hashes: list[int] = field(default_factory=list)
    num_cached_blocks: int = 0
    status: int = WAITING
    sched_tokens: int = 0
    arrival: float = 0.0
    first_scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    num_preemptions: int = 0
    cached_prompt_tokens: int = 0
    finish_reason: str | None = None
    spec_hist: list[int] | None = None
    """Speculating: verify steps per accepted draft count j (vLLM's ``acceptance_histogram``); None otherwise."""
    spec_drafted: int = 0
    spec_per_step: list[tuple[int, int]] | None = None
    """(accepted, drafted) of each verify step, in order (``per_step_accepted`` / ``per_step_drafted``)."""
    engine: int = 0
    """The data-parallel engine it was dealt to (server/sim/fleet.py)."""

    @property
    def num_output(self) -> int:
        return len(self.tokens) - self.num_prompt

    @property
    def output_ids(self) -> list[int]:
        return self.tokens[self.num_prompt:]


@dataclass(slots=True)
class Step:
    """What one engine step computes: the scheduled requests and the cost-model inputs."""

    scheduled: list[SimRequest]
    prefill_tokens: int = 0
    decode_seqs: int = 0
    context_tokens: int = 0
    preempted: int = 0

    @property
    def num_tokens(self) -> int:
        return sum(r.sched_tokens for r in self.scheduled)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    block_size: int = 16
    num_gpu_blocks: int = 4096
    max_model_len: int = 4096
    enable_prefix_caching: bool = True
    decode_width: int = 1
    """Tokens scheduled per decode step: --tokens-per-chunk K, or 1 + --num-speculative-tokens."""
    spec_accept_rate: float | None = None
    """When set, each draft token is accepted with this probability (stop at the first rejection)."""
    spec_acceptance: tuple[float, ...] | None = None
    """Per draft position i, the share of verify steps that accept it (non-increasing; vLLM's
    ``accepted_tokens_per_pos / num_drafts``); wins over ``spec_accept_rate`` (which is ``(p, p², p³, ...)``)."""

    @property
    def acceptance(self) -> tuple[float, ...] | None:
        """The per-position acceptance model, None when not speculating."""
        k = self.decode_width - 1
        if k < 1:
            return None
        if self.spec_acceptance is not None:
            return self.spec_acceptance
        if self.spec_accept_rate is None:
            return None
        return tuple(self.spec_accept_rate ** (i + 1) for i in range(k))


class TokenIds:
    """Where generated ids come from: a seeded cyclic pool plus the EOS id."""

    def __init__(self, pool: list[int], eos_id: int):
        if not pool or len(pool) & (len(pool) - 1):
            raise ValueError("the id pool length must be a power of two")
        self.pool = pool
        self.mask = len(pool) - 1
        self.eos_id = eos_id

    def take(self, offset: int, start: int, k: int) -> list[int]:
        pool, mask = self.pool, self.mask
        base = offset + start
        return [pool[(base + i) & mask] for i in range(k)]


class Scheduler:
    """Running/waiting queues over a :class:`BlockPool`; pure and synchronous (no clock, no I/O)."""

    def __init__(self, cfg: SchedulerConfig, ids: TokenIds, rng: np.random.Generator | None = None):
        self.cfg = cfg
        self.ids = ids
        self.pool = BlockPool(cfg.num_gpu_blocks, cfg.enable_prefix_caching)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.batch_cap: int | None = None
        self.num_preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self._accept = self._acceptance_table(cfg, rng or np.random.default_rng(0))
        self._accept_i = 0
        self.spec_drafts = 0
        """Verify steps that checked drafts (``vllm:spec_decode_num_drafts``)."""
        self.spec_draft_tokens = 0
        self.spec_accepted = 0
        self.spec_per_pos = [0] * (cfg.decode_width - 1) if self._accept is not None else []
        self.spec_detailed = False
        """Keep each request's per-step record (``--per-request-spec-decode-metrics detailed``)."""

    # ---- queue management -------------------------------------------------------------------
    def add(self, req: SimRequest) -> None:
        req.status = WAITING
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> bool:
        """Remove a request wherever it is and free its blocks; False when it already finished."""
        if req.status == FINISHED:
            return False
        if req.status == RUNNING:
            self.running.remove(req)
        else:
            try:
                self.waiting.remove(req)
            except ValueError:
                return False
        self._free(req)
        req.status = FINISHED
        req.finish_reason = "abort"
        return True

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def seq_limit(self) -> int:
        cap = self.batch_cap
        return self.cfg.max_num_seqs if cap is None else min(cap, self.cfg.max_num_seqs)

    # ---- one step ---------------------------------------------------------------------------
    def schedule(self, now: float = 0.0) -> Step:
        cfg = self.cfg
        bs = cfg.block_size
        width = cfg.decode_width
        pool = self.pool
        budget = cfg.max_num_batched_tokens
        running = self.running
        step = Step([])
        scheduled = step.scheduled
        prefill = decode = context = 0

        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            nc = req.num_computed
            n_known = len(req.tokens)
            is_decode = nc == n_known - 1
            if is_decode:
                num_new = 1 if width == 1 else min(width, req.stop_at - (n_known - req.num_prompt))
            else:
                num_new = n_known - nc
            if num_new > budget:
                num_new = budget
            need = -(-(nc + num_new) // bs) - len(req.blocks)
            if need > 0:
                got = pool.allocate(need)
                while got is None:
                    victim = running.pop()
                    self._preempt(victim)
                    step.preempted += 1
                    if victim is req:
                        break
                    got = pool.allocate(need)
                if got is None:
                    break
                req.blocks.extend(got)
            req.sched_tokens = num_new
            scheduled.append(req)
            budget -= num_new
            context += nc + num_new
            if is_decode:
                decode += 1
            else:
                prefill += num_new
            i += 1

        if not step.preempted:
            limit = self.seq_limit
            waiting = self.waiting
            while waiting and budget > 0 and len(running) < limit:
                req = waiting[0]
                n_known = len(req.tokens)
                hit_blocks = self._prefix_hits(req) if req.num_computed == 0 else []
                nc = len(hit_blocks) * bs
                num_new = min(n_known - nc, budget)
                need = -(-(nc + num_new) // bs) - len(hit_blocks)
                if need > pool.num_free - pool.num_evictable(hit_blocks):
                    break
                pool.touch(hit_blocks)
                req.blocks = hit_blocks + (pool.allocate(need) or [])
                req.num_cached_blocks = len(hit_blocks)
                req.num_computed = nc
                if req.first_scheduled is None:
                    req.first_scheduled = now
                    req.cached_prompt_tokens = nc
                if self.cfg.enable_prefix_caching:
                    self.prefix_queries += n_known
                    self.prefix_hits += nc
                waiting.popleft()
                req.status = RUNNING
                running.append(req)
                req.sched_tokens = num_new
                scheduled.append(req)
                budget -= num_new
                context += nc + num_new
                prefill += num_new

        step.prefill_tokens, step.decode_seqs, step.context_tokens = prefill, decode, context
        return step

    def update(self, step: Step) -> list[tuple[SimRequest, list[int], bool]]:
        """Apply a planned step; returns ``(request, new_ids, finished)`` for requests that emitted tokens."""
        out: list[tuple[SimRequest, list[int], bool]] = []
        bs = self.cfg.block_size
        any_finished = False
        for req in step.scheduled:
            if req.status != RUNNING:  # aborted while the step ran
                continue
            n = req.sched_tokens
            nc = req.num_computed
            tokens = req.tokens
            n_known = len(tokens)
            if nc + n < n_known:  # a chunk of a (re)computed prefill
                req.num_computed = nc + n
                if (nc + n) // bs > req.num_cached_blocks:
                    self._cache_full_blocks(req)
                continue
            if nc == n_known - 1:
                k = self._accepted(n)
                if n > 1 and self._accept is not None:
                    self._verified(req, n - 1, k - 1)
            else:
                k = 1
            n_out = n_known - req.num_prompt
            left = req.stop_at - n_out
            if k >= left:
                k = left
                finished = True
            else:
                finished = False
            new = self.ids.take(req.id_offset, n_out, k)
            if finished and req.stop_on_eos:
                new[-1] = self.ids.eos_id
            tokens.extend(new)
            req.num_computed = len(tokens) - 1
            if req.num_computed // bs > req.num_cached_blocks:
                self._cache_full_blocks(req)
            if finished:
                req.status = FINISHED
                req.finish_reason = "stop" if req.stop_on_eos else "length"
                self._free(req)
                any_finished = True
            out.append((req, new, finished))
        if any_finished:
            self.running = [r for r in self.running if r.status == RUNNING]
        return out

    # ---- internals --------------------------------------------------------------------------
    def _prefix_hits(self, req: SimRequest) -> list[int]:
        """Cached blocks for the longest cached prefix (at least one token is always computed)."""
        if not self.cfg.enable_prefix_caching:
            return []
        bs = self.cfg.block_size
        n_full = (len(req.tokens) - 1) // bs
        if len(req.hashes) < n_full:
            parent = req.hashes[-1] if req.hashes else None
            req.hashes.extend(block_hashes(req.tokens, bs, n_full - len(req.hashes), len(req.hashes), parent))
        hits: list[int] = []
        lookup = self.pool.lookup
        for h in req.hashes[:n_full]:
            b = lookup(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def _cache_full_blocks(self, req: SimRequest) -> None:
        if not self.cfg.enable_prefix_caching:
            return
        bs = self.cfg.block_size
        n_full = min(req.num_computed // bs, len(req.blocks))
        if len(req.hashes) < n_full:
            parent = req.hashes[-1] if req.hashes else None
            req.hashes.extend(block_hashes(req.tokens, bs, n_full - len(req.hashes), len(req.hashes), parent))
        for i in range(req.num_cached_blocks, n_full):
            self.pool.cache_block(req.blocks[i], req.hashes[i])
        req.num_cached_blocks = max(req.num_cached_blocks, n_full)

    def _preempt(self, req: SimRequest) -> None:
        self._free(req)
        req.num_computed = 0
        req.status = WAITING
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    def _free(self, req: SimRequest) -> None:
        if req.blocks:
            self.pool.release(req.blocks)
            req.blocks = []
        req.num_cached_blocks = 0

    def _verified(self, req: SimRequest, drafted: int, accepted: int) -> None:
        """Count one verify step of ``req``: the engine's counters and the request's own record."""
        self.spec_drafts += 1
        self.spec_draft_tokens += drafted
        self.spec_accepted += accepted
        per = self.spec_per_pos
        for i in range(accepted):
            per[i] += 1
        if req.spec_hist is None:
            req.spec_hist = [0] * (len(per) + 1)
            req.spec_per_step = [] if self.spec_detailed else None
        req.spec_hist[accepted] += 1
        req.spec_drafted += drafted
        if req.spec_per_step is not None:
            req.spec_per_step.append((accepted, drafted))

    @staticmethod
    def _acceptance_table(cfg: SchedulerConfig, rng: np.random.Generator) -> list[int] | None:
        """Pre-drawn emitted-token counts per decode step (1 + accepted drafts) when speculating: draft position i
        is accepted, given every earlier one was, with probability ``a[i] / a[i - 1]``, so the share of steps
        accepting it is ``a[i]`` (:attr:`SchedulerConfig.acceptance`)."""
        a = cfg.acceptance
        if a is None:
            return None
        cond = np.array([a[0], *(a[i] / a[i - 1] if a[i - 1] > 0 else 0.0 for i in range(1, len(a)))])
        drafts = rng.random((4096, len(a))) < cond
        return (1 + np.cumprod(drafts, axis=1).sum(axis=1)).astype(int).tolist()

    def _accepted(self, scheduled: int) -> int:
        table = self._accept
        if table is None:
            return scheduled
        self._accept_i = (self._accept_i + 1) & 4095
        return min(table[self._accept_i], scheduled)
