"""The V1-like scheduler: chunked prefill budget, block accounting, preemption + recompute, prefix cache, caps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from server.sim.scheduler import FINISHED, RUNNING, WAITING, Scheduler, SimRequest
from tests.server.sim.sched import IDS, req, sched


@dataclass
class Snap:
    """What one step looked like when it was planned (requests are mutated by later steps)."""

    sched: dict[str, int]
    preempted: int
    prefill: int
    decode: int
    running: int
    waiting: list[str]
    state: dict[str, tuple[int, int, int]]  # rid -> (status, num_computed, blocks) after planning
    out: list[tuple[str, list[int], bool]]


def drain(s: Scheduler, watch: list[SimRequest] = (), max_steps: int = 10_000) -> list[Snap]:
    """Run steps until idle, checking the budget, the sequence limit and block coverage on every step."""
    snaps = []
    for _ in range(max_steps):
        if not s.has_work():
            return snaps
        step = s.schedule()
        assert step.num_tokens <= s.cfg.max_num_batched_tokens
        assert len(s.running) <= s.cfg.max_num_seqs
        for r in s.running:  # every running request holds the blocks for what it computes this step
            assert len(r.blocks) * s.cfg.block_size >= r.num_computed + r.sched_tokens
        snap = Snap({r.rid: r.sched_tokens for r in step.scheduled}, step.preempted, step.prefill_tokens,
                    step.decode_seqs, len(s.running), [r.rid for r in s.waiting],
                    {r.rid: (r.status, r.num_computed, len(r.blocks)) for r in watch}, [])
        snap.out = [(r.rid, ids, fin) for r, ids, fin in s.update(step)]
        snaps.append(snap)
    raise AssertionError("did not finish")


def test_chunked_prefill_respects_the_budget():
    s = sched(max_num_batched_tokens=64)
    a = req(150, 3)
    s.add(a)
    snaps = drain(s)
    # 150 prompt tokens in chunks of 64, 64, 22 (first token after the third), then 2 decode steps
    assert [sn.sched[a.rid] for sn in snaps] == [64, 64, 22, 1, 1]
    assert [sum(len(ids) for _r, ids, _f in sn.out) for sn in snaps] == [0, 0, 1, 1, 1]
    assert a.status == FINISHED and a.num_output == 3 and a.finish_reason == "length"


def test_decode_goes_first_then_the_waiting_prompt_takes_the_rest_of_the_budget():
    s = sched(max_num_batched_tokens=64)
    b, c = req(20, 10), req(200, 2)
    s.add(b)
    s.update(s.schedule())  # b prefilled, first token out
    s.add(c)
    step = s.schedule()
    assert [r.rid for r in step.scheduled] == [b.rid, c.rid]
    assert (b.sched_tokens, c.sched_tokens) == (1, 63)
    assert step.decode_seqs == 1 and step.prefill_tokens == 63
    assert step.context_tokens == (20 + 1) + 63


def test_blocks_follow_the_tokens_and_all_come_back():
    s = sched(num_gpu_blocks=32, max_num_batched_tokens=512)
    a = req(40, 30)  # 40 + 29 tokens go through the model -> 5 blocks at the end
    s.add(a)
    snaps = drain(s, [a])
    blocks = []
    for sn in snaps:
        _status, computed, nblocks = sn.state[a.rid]
        assert nblocks == -(-(computed + sn.sched[a.rid]) // 16)  # exactly what this step's tokens need
        blocks.append(nblocks)
    assert blocks[0] == 3 and blocks[-1] == 5 and blocks == sorted(blocks)
    assert s.pool.num_free == 32 and s.pool.usage == 0.0


def test_preemption_by_recompute_evicts_the_newest_and_everything_still_finishes_exactly():
    # 8 blocks of 16 = 128 token slots; two requests of 48 + 40 = 88 tokens cannot both stay resident
    s = sched(num_gpu_blocks=8, max_num_batched_tokens=256, enable_prefix_caching=False)
    old, new = req(48, 40, offset=0), req(48, 40, offset=500)
    s.add(old)
    s.add(new)
    emitted = {old.rid: [], new.rid: []}
    snaps = drain(s, [old, new])
    preempting = [sn for sn in snaps if sn.preempted]
    assert preempting
    for sn in preempting:
        assert sn.state[new.rid] == (WAITING, 0, 0)  # the newest went back, blocks freed, progress reset
        assert sn.waiting[0] == new.rid and old.rid in sn.sched and new.rid not in sn.sched
    for sn in snaps:
        for rid, ids, _fin in sn.out:
            emitted[rid].extend(ids)
    assert s.num_preemptions == len(preempting) and new.num_preemptions >= 1 and old.num_preemptions == 0
    for r in (old, new):
        assert r.status == FINISHED and r.num_output == 40 and len(emitted[r.rid]) == 40
        # recompute resumes the same sequence: the ids are those an unpreempted run emits
        assert emitted[r.rid] == IDS.take(r.id_offset, 0, 40)
    assert s.pool.num_free == 8


def test_recompute_covers_prompt_and_generated_tokens():
    s = sched(num_gpu_blocks=6, max_num_batched_tokens=1024, enable_prefix_caching=False)
    a, b = req(32, 40), req(32, 40)
    s.add(a)
    s.add(b)
    snaps = drain(s, [a, b])
    was_preempted = False
    resumed = []
    for sn in snaps:
        if sn.preempted:
            was_preempted = True
        elif was_preempted and b.rid in sn.sched and sn.sched[b.rid] > 1:
            resumed.append(sn.sched[b.rid])
    # a resumed request prefills its prompt and what it had generated (more than the 32 prompt tokens)
    assert resumed and resumed[0] > 32
    assert a.num_output == b.num_output == 40


def test_prefix_cache_hits_full_blocks_of_a_shared_prompt():
    s = sched(max_num_batched_tokens=1024)
    shared = list(range(20_000, 20_000 + 70))  # 4 full blocks + 6 tokens
    a = req(0, 2, prompt=shared)
    s.add(a)
    drain(s)
    q0, h0 = s.prefix_queries, s.prefix_hits
    assert (q0, h0) == (70, 0)
    b = req(0, 2, prompt=shared)
    s.add(b)
    step = s.schedule()
    assert b.cached_prompt_tokens == 64 and b.sched_tokens == 6  # 4 blocks hit, 6 tokens computed
    assert (s.prefix_queries - q0, s.prefix_hits - h0) == (70, 64)
    assert step.prefill_tokens == 6
    s.update(step)
    # a prompt that is exactly 4 blocks still computes its last token (at most 3 blocks hit)
    c = req(0, 2, prompt=shared[:64])
    s.add(c)
    s.schedule()
    assert c.cached_prompt_tokens == 48 and c.sched_tokens == 16


def test_prefix_cache_off_hits_nothing():
    s = sched(max_num_batched_tokens=1024, enable_prefix_caching=False)
    p = list(range(30_000, 30_064))
    for _ in range(2):
        s.add(req(0, 1, prompt=p))
        drain(s)
    assert s.prefix_hits == 0 and s.prefix_queries == 0


def test_max_num_seqs_and_batch_cap_limit_running():
    s = sched(max_num_seqs=3, max_num_batched_tokens=4096, num_gpu_blocks=512)
    for _ in range(6):
        s.add(req(16, 5))
    s.schedule()
    assert len(s.running) == 3 and len(s.waiting) == 3
    s = sched(max_num_seqs=8, max_num_batched_tokens=4096, num_gpu_blocks=512)
    for _ in range(6):
        s.add(req(16, 50))
    s.update(s.schedule())
    assert len(s.running) == 6
    s.batch_cap = 2  # running ones are not evicted; no admission until fewer than 2 run
    late = [req(16, 5) for _ in range(4)]
    for r in late:
        s.add(r)
    snaps = drain(s)
    over = [sn for sn in snaps if sn.running > 2]
    assert over and all(len(sn.waiting) == 4 for sn in over)  # nobody admitted while over the cap
    assert max(sn.running for sn in snaps if sn not in over) == 2
    assert s.num_preemptions == 0 and all(r.num_output == 5 for r in late)


def test_tokens_per_chunk_emits_k_per_step_and_stops_exactly():
    s = sched(decode_width=4, max_num_batched_tokens=1024)
    a = req(10, 11)
    s.add(a)
    sizes = [len(ids) for sn in drain(s) for _r, ids, _f in sn.out]
    assert sizes == [1, 4, 4, 2] and a.num_output == 11


def test_speculative_acceptance_emits_between_one_and_width():
    s = sched(decode_width=4, spec_accept_rate=0.5, max_num_batched_tokens=1024)
    a = req(10, 400)
    s.add(a)
    sizes = [len(ids) for sn in drain(s) for _r, ids, _f in sn.out]
    assert sum(sizes) == 400 and a.num_output == 400
    decode = sizes[1:-1]
    assert set(decode) <= {1, 2, 3, 4} and len(set(decode)) >= 3
    # mean emitted per step for p = 0.5 with 3 drafts: 1 + 0.5 + 0.25 + 0.125 = 1.875
    assert 1.6 < np.mean(decode) < 2.2


def test_eos_stop_ends_with_the_eos_id():
    s = sched()
    a = req(8, 100)
    a.stop_at, a.stop_on_eos = 7, True
    s.add(a)
    drain(s)
    assert a.finish_reason == "stop" and a.num_output == 7 and a.output_ids[-1] == IDS.eos_id


def test_abort_frees_blocks_wherever_the_request_is():
    s = sched(max_num_seqs=1, max_num_batched_tokens=1024)
    a, b = req(40, 50), req(40, 50)
    s.add(a)
    s.add(b)
    s.update(s.schedule())
    assert a.status == RUNNING and b.status == WAITING
    assert s.abort(b) and s.abort(a)
    assert not s.abort(a)  # already finished
    assert not s.has_work() and s.pool.num_free == s.cfg.num_gpu_blocks
    assert a.finish_reason == "abort"
