"""Preemption in the simulator's scheduler under the settings the shipped profiles use (prefix caching on),
with three or more requests running, and in the middle of a chunked prefill.

Every step is checked against the block pool: each block's reference count is the number of running
requests holding it, the free count is the blocks nobody holds, and a request never holds a block twice.
Every request must still emit exactly its tokens, the ids an unpreempted run emits (recompute, not loss).
"""

from __future__ import annotations

from collections import Counter

import pytest

from server.sim.profiles import available, load_profile
from server.sim.scheduler import FINISHED, RUNNING, WAITING, Scheduler, SimRequest
from tests.server.sim.sched import IDS, req, sched


def _check_pool(s: Scheduler) -> None:
    held = Counter(b for r in s.running for b in r.blocks)
    for r in s.running:
        assert len(set(r.blocks)) == len(r.blocks), f"{r.rid} holds a block twice: {r.blocks}"
    for r in s.waiting:
        assert r.blocks == [] and r.num_computed == 0
    for b in range(s.cfg.num_gpu_blocks):
        assert s.pool.ref_count(b) == held.get(b, 0), (b, s.pool.ref_count(b), held.get(b, 0))
    assert s.pool.num_free == s.cfg.num_gpu_blocks - len(held)


def _apply(s: Scheduler, step, emitted: dict[str, list[int]]) -> None:
    for r, ids, _fin in s.update(step):
        emitted.setdefault(r.rid, []).extend(ids)


def _run(s: Scheduler, reqs: list[SimRequest], emitted: dict[str, list[int]] | None = None,
         max_steps: int = 5000) -> tuple[dict[str, list[int]], list]:
    """Steps until idle, checking the pool after planning and after applying each step. Returns (ids
    emitted per request, added to ``emitted``; per step: (preempted, running before, running after, waiting))."""
    emitted = {r.rid: [] for r in reqs} if emitted is None else emitted
    steps = []
    for _ in range(max_steps):
        if not s.has_work():
            return emitted, steps
        before = [r.rid for r in s.running]
        step = s.schedule()
        assert step.num_tokens <= s.cfg.max_num_batched_tokens
        for r in s.running:
            assert len(r.blocks) * s.cfg.block_size >= r.num_computed + r.sched_tokens
        _check_pool(s)
        steps.append((step.preempted, before, [r.rid for r in s.running], [r.rid for r in s.waiting]))
        _apply(s, step, emitted)
        _check_pool(s)
    raise AssertionError("did not finish")


def _exact(reqs: list[SimRequest], emitted: dict[str, list[int]], s: Scheduler) -> None:
    for r in reqs:
        assert r.status == FINISHED and r.finish_reason == "length"
        assert emitted[r.rid] == IDS.take(r.id_offset, 0, r.stop_at) == r.output_ids, r.rid
    assert s.pool.num_free == s.cfg.num_gpu_blocks and not s.running and not s.waiting


def test_the_shipped_profiles_cache_prefixes():
    # the scenario the tests below build is the one every shipped profile runs in
    assert available() and all(load_profile(n).engine["enable_prefix_caching"] is True for n in available())


def test_preempting_among_four_running_takes_the_newest_first_and_requeues_them_in_order():
    # 4 prompts of 32 tokens (2 blocks each) growing to 32 + 39 computed tokens (5 blocks) in a pool of 12
    s = sched(num_gpu_blocks=12, max_num_batched_tokens=256, enable_prefix_caching=True)
    reqs = [req(32, 40, offset=100 * i) for i in range(4)]
    for r in reqs:
        s.add(r)
    order = [r.rid for r in reqs]
    emitted, steps = _run(s, reqs)
    preempting = [st for st in steps if st[0]]
    assert preempting and any(len(before) >= 3 for _n, before, _after, _w in preempting)
    for n, before, after, waiting in preempting:
        # the oldest stay, the newest go, and the waiting queue starts with them in arrival order
        assert after == before[: len(before) - n]
        assert waiting[:n] == before[len(before) - n :]
        assert sorted(waiting[:n], key=order.index) == waiting[:n]
    assert reqs[0].num_preemptions == 0 and sum(r.num_preemptions for r in reqs) == s.num_preemptions
    assert max(len(before) for _n, before, _a, _w in steps) == 4
    _exact(reqs, emitted, s)
    # distinct prompts: every prefix hit is a preempted request finding its own blocks again
    assert s.prefix_hits > 0


def test_prefix_cache_on_recomputes_less_than_off_and_emits_the_same():
    def run(caching: bool):
        s = sched(num_gpu_blocks=12, max_num_batched_tokens=256, enable_prefix_caching=caching)
        reqs = [req(32, 40, prompt=[7_000 + 100 * i + j for j in range(32)], offset=100 * i) for i in range(4)]
        for r in reqs:
            s.add(r)
        emitted, steps = _run(s, reqs)
        _exact(reqs, emitted, s)
        return s, [emitted[r.rid] for r in reqs]

    on, ids_on = run(True)
    off, ids_off = run(False)
    assert ids_on == ids_off
    assert on.num_preemptions > 0 and off.num_preemptions > 0
    assert on.prefix_hits > 0 and off.prefix_hits == 0


def test_preempted_mid_chunked_prefill_resumes_from_its_cached_blocks():
    # A: 30-token prompt, decoding; C: a 120-token prompt prefilled 15 tokens a step (budget 16, A's decode
    # takes 1). Pool: 8 blocks. A holds 3; C reaches 77 computed tokens in 5 blocks, then needs a 6th.
    s = sched(num_gpu_blocks=8, max_num_batched_tokens=16, enable_prefix_caching=True)
    a = req(30, 20, offset=0)
    s.add(a)
    emitted: dict[str, list[int]] = {}
    _apply(s, s.schedule(), emitted)  # A's first 16 prompt tokens
    c = req(120, 3, offset=300)
    s.add(c)
    computed = []
    while c.num_preemptions == 0:
        computed.append(c.num_computed)
        step = s.schedule()
        _check_pool(s)
        _apply(s, step, emitted)
    # preempted in the middle of its prefill: 77 of 120 prompt tokens done (2, then 15 a step)
    assert computed[-1] == 77 and c.num_computed == 0 and c.blocks == [] and c.status == WAITING
    assert s.waiting[0] is c and a.status == RUNNING and a.num_preemptions == 0
    assert step.preempted == 1 and [r.rid for r in step.scheduled] == [a.rid]  # nobody admitted that step
    hits = s.prefix_hits
    step = s.schedule()
    _check_pool(s)
    # back in: its 4 full computed blocks (64 tokens) are found in the cache, only the rest is computed
    assert c.status == RUNNING and c.num_computed == 64 and s.prefix_hits - hits == 64
    assert c.sched_tokens == 15 and step.prefill_tokens == 15
    _apply(s, step, emitted)
    _run(s, [a, c], emitted)
    _exact([a, c], emitted, s)


@pytest.mark.parametrize("victim_shares", [True, False])
def test_preempting_a_request_that_shares_prefix_blocks_keeps_them_for_the_others(victim_shares):
    # requests with one 48-token prefix (3 full blocks), admitted one step after the first so they hit it
    prefix = list(range(40_000, 40_048))
    s = sched(num_gpu_blocks=14, max_num_batched_tokens=512, enable_prefix_caching=True)
    first = req(0, 40, prompt=[*prefix, 1, 2, 3, 4], offset=0)
    s.add(first)
    emitted: dict[str, list[int]] = {}
    _apply(s, s.schedule(), emitted)
    tail = (lambda i: [*prefix, 50 + i]) if victim_shares else (lambda i: [60_000 + 100 * i + j for j in range(49)])
    rest = [req(0, 40, prompt=tail(i), offset=100 * (i + 1)) for i in range(3)]
    for r in rest:
        s.add(r)
    step = s.schedule()
    _check_pool(s)
    if victim_shares:
        assert all(r.cached_prompt_tokens == 48 for r in rest)
        assert all(s.pool.ref_count(b) == 4 for b in first.blocks[:3])  # one prefix, four holders
    _apply(s, step, emitted)
    reqs = [first, *rest]
    _emitted, steps = _run(s, reqs, emitted)
    assert s.num_preemptions > 0 and max(len(before) for n, before, _a, _w in steps if n) >= 3
    _exact(reqs, emitted, s)
