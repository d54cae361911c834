"""Recorder: ingestion (ITL k samples of g/k, failures counted not timed), take/reset, merge == one process."""

from __future__ import annotations

import math
import time

import msgpack
import numpy as np
import pytest

from telemetry.measure.buckets import SUB_10MS, VLLM_ITL, VLLM_REQUEST, VLLM_TTFT, BucketHistogram
from telemetry.measure.recorder import Recorder
from telemetry.metrics import BOUNDS
from telemetry.slo import SloSet
from tests.telemetry.synthetic import make_result


def _wire(state: dict) -> dict:
    """What a worker's report looks like after Locust's msgpack transport."""
    return msgpack.unpackb(msgpack.packb(state))


def test_itl_takes_k_samples_of_gap_over_k_and_inter_chunk_one_per_chunk():
    r = make_result(ttft=0.2, itl=0.01, chunk_tokens=[1, 1, 3, 1, 4])
    rec = Recorder()
    rec.record(r)
    c = rec.cells[("SynthUser", "main", None)]
    assert c.sketches["itl"].count == 9 == r.output_tokens - 1
    assert c.sketches["inter_chunk"].count == 4
    assert math.isclose(c.sketches["itl"].sum, float(r.itl_samples().sum()), rel_tol=1e-12)
    assert math.isclose(c.sketches["inter_chunk"].max, 0.04, rel_tol=1e-9)  # the 4-token chunk's gap
    assert math.isclose(c.sketches["ttft"].min, 0.2, rel_tol=1e-9)
    assert math.isclose(c.sketches["tpot"].min, r.tpot_s, rel_tol=1e-12)
    assert math.isclose(c.sketches["decode_span"].max, r.decode_span_s, rel_tol=1e-12)
    assert c.hists["itl"].count == 9 and c.outcomes == {"ok": 1} and c.output_tokens == 10


@pytest.mark.parametrize("chunk_tokens", [[1] * 12, [1, 1, 3, 1, 4, 1]])
def test_the_sample_metrics_cell_sketches_equal_their_own_add_many(chunk_tokens):
    """ITL and the inter-chunk gaps are one array when every chunk carries one token: the recorder bins it once for
    both cells' sketches. Each still holds exactly what its own add_many of its samples gives, with zeros (two chunks
    read together) and with multi-token chunks (where the two differ)."""
    itl = np.linspace(0.004, 0.03, len(chunk_tokens) - 1)
    itl[3] = 0.0
    r = make_result(ttft=0.2, itl=itl, chunk_tokens=chunk_tokens)
    rec = Recorder()
    rec.record(r)
    rec.record(r)  # the second time: the same result again
    c = rec.cells[("SynthUser", "main", None)]
    for key, samples in (("itl", r.itl_samples()), ("inter_chunk", r.inter_chunk_samples())):
        ref = type(c.sketches[key])(c.sketches[key].alpha)
        ref.add_many(np.concatenate([samples, samples]))
        got, want = c.sketches[key].to_dict(), ref.to_dict()
        assert got.pop("s") == pytest.approx(want.pop("s"), rel=1e-12), key
        assert got == want, key
    same = len(set(chunk_tokens)) == 1
    assert (c.sketches["itl"].to_dict() == c.sketches["inter_chunk"].to_dict()) is same


def test_failures_are_counted_by_kind_but_not_timed():
    rec = Recorder()
    rec.record(make_result(ok=False, error_kind="timeout"))
    rec.record(make_result(ok=False, error_kind="http_5xx"))
    rec.record(make_result(ok=False, error_kind="http_5xx"))
    rec.record(make_result())
    c = rec.cells[("SynthUser", "main", None)]
    assert c.outcomes == {"timeout": 1, "http_5xx": 2, "ok": 1}
    assert c.sketches["ttft"].count == 1 and c.sketches["e2e"].count == 1
    assert sum(s.errors for s in rec.slots.values()) == 3


def test_cells_are_keyed_by_user_class_stage_and_version():
    rec = Recorder()
    rec.record(make_result(stage="a"))
    rec.record(make_result(stage="b", version="v4"))
    rec.record(make_result(stage="b", version="v4", user_class="Other"))
    assert set(rec.cells) == {("SynthUser", "a", None), ("SynthUser", "b", "v4"), ("Other", "b", "v4")}
    assert len(rec.select(stage="b")) == 2 and len(rec.select(version="v4", user_class="Other")) == 1


def test_prompt_mismatch_uses_only_usage_results_with_a_client_count():
    rec = Recorder()
    rec.record(make_result(prompt_tokens=100, prompt_tokens_client=103))
    rec.record(make_result(prompt_tokens=200, prompt_tokens_client=190))
    rec.record(make_result(prompt_tokens=50, prompt_tokens_client=60, token_source="tokenizer"))
    rec.record(make_result(prompt_tokens=80))
    assert (rec.mismatch_abs, rec.mismatch_server) == (13, 300)
    assert rec.token_sources == {"usage": 3, "tokenizer": 1}


def test_goodput_counts_requests_meeting_every_slo():
    rec = Recorder(SloSet({"ttft_p99_ms": 150.0, "itl_p95_ms": 30.0}))
    rec.record(make_result(ttft=0.1, itl=0.02))  # good
    rec.record(make_result(ttft=0.2, itl=0.02))  # TTFT too slow
    rec.record(make_result(ttft=0.1, itl=0.05))  # ITL too slow
    rec.record(make_result(ok=False, error_kind="timeout"))
    assert rec.cells[("SynthUser", "main", None)].good == 1


def test_kv_block_fill_uses_blocks_of_16():
    rec = Recorder()
    rec.record_kv_fill("main", [(10, 0)])  # 10 / 16
    rec.record_kv_fill("main", [(16, 1), (32, 0)])  # 49 / (32 + 32)
    rec.record_kv_fill("main", [])  # nothing in flight: no sample
    f = rec.kv_fill["main"]
    assert f.samples == 2 and math.isclose(f.ratio_sum, 10 / 16 + 49 / 64)
    assert rec.kv_last == (0, 0)


def test_take_resets_and_merge_of_parts_equals_one_process():
    rng = np.random.default_rng(5)
    results = [make_result(ttft=float(rng.uniform(0.05, 0.5)), itl=rng.uniform(0.005, 0.05, 39),
                           tokens=40, stage=f"s{i % 2}", ok=bool(i % 7), error_kind=None if i % 7 else "timeout")
               for i in range(300)]
    whole = Recorder()
    for r in results:
        whole.record(r)
    merged = Recorder()
    parts = [Recorder(), Recorder(), Recorder()]
    for i, r in enumerate(results):
        parts[i % 3].record(r)
    for p in parts:
        merged.merge(_wire(p.take()))
        assert not p.cells and not p.slots  # reset after take
    assert set(merged.cells) == set(whole.cells)
    for key, c in whole.cells.items():
        m = merged.cells[key]
        assert m.outcomes == c.outcomes and m.output_tokens == c.output_tokens
        for metric in ("ttft", "itl", "tpot", "e2e", "decode_span"):
            a, b = m.sketches[metric], c.sketches[metric]
            assert a.count == b.count and math.isclose(a.sum, b.sum, rel_tol=1e-9)
            assert [a.quantile(q) for q in (0.5, 0.9, 0.99)] == [b.quantile(q) for q in (0.5, 0.9, 0.99)]
            assert np.array_equal(m.hists[metric].counts, c.hists[metric].counts)
    assert sum(s.requests for s in merged.slots.values()) == 300


def test_windows_slots_follow_wall_clock():
    rec = Recorder(slot_s=1.0)
    now = time.perf_counter()
    rec.record(make_result(ttft=0.1, end=now - 5.0))
    rec.record(make_result(ttft=0.1, end=now))
    slots = sorted(rec.slots)
    assert len([i for i in slots if rec.slots[i].requests]) == 2
    assert slots[-1] - slots[0] >= 4


def test_merge_rejects_foreign_state():
    with pytest.raises(ValueError, match=r"telemetry state version 99 is not"):
        Recorder().merge({"v": 99})
    state = Recorder(slot_s=2.0).to_dict()
    with pytest.raises(ValueError, match=r"slot width 2\.0 differs from 1\.0"):
        Recorder(slot_s=1.0).merge(state)


def test_bucket_boundaries_are_vllms_plus_sub_10ms():
    assert BOUNDS["ttft"][:3] == (0.001, 0.005, 0.01) and BOUNDS["ttft"][-1] == 2560.0 and len(VLLM_TTFT) == 22
    assert BOUNDS["itl"] == SUB_10MS + VLLM_ITL and VLLM_ITL[0] == 0.01 and max(SUB_10MS) < 0.01
    assert BOUNDS["e2e"] == VLLM_REQUEST and VLLM_REQUEST[-1] == 7680.0
    h = BucketHistogram(BOUNDS["itl"])
    h.add_many(np.array([0.0049, 0.005, 0.0051, 100.0]))
    cum = dict(h.cumulative())
    assert cum[0.005] == 2 and cum[0.0075] == 3 and cum[80.0] == 3 and cum[math.inf] == 4  # le is inclusive


def test_itl_split_into_wall_clock_slots_keeps_every_sample():
    rec = Recorder(slot_s=1.0)
    offset = time.time() - time.perf_counter()  # the test's own perf -> wall mapping (same clocks, microseconds apart)
    base = math.floor(time.time()) - 20  # a whole wall-clock second in the past: slot `base` starts there
    itl = np.array([0.3, 0.6, 0.2, 0.9, 0.45, 0.7, 0.3, 0.8, 0.5])  # ~4.75 s of decode: several slots
    # t0 at base + 0.05 s, first token 0.1 s later: chunks arrive at base + 0.15, 0.45, 1.05, 1.25, 2.15, 2.6, 3.3,
    # 3.6, 4.4, 4.9 s, every one >= 50 ms from a second boundary
    e2e = 0.1 + float(itl.sum()) + 0.001
    r = make_result(ttft=0.1, itl=itl, tokens=10, end=base + 0.05 - offset + e2e)
    rec.record(r)
    # each slot holds exactly the gaps of the chunks that arrived in that wall-clock second (gap i ends at chunk i+1)
    expected = {base: [0.3], base + 1: [0.6, 0.2], base + 2: [0.9, 0.45], base + 3: [0.7, 0.3], base + 4: [0.8, 0.5]}
    got = {i: s.sketches["itl"] for i, s in rec.slots.items() if s.sketches["itl"].count}
    assert sorted(got) == sorted(expected)
    for i, gaps in expected.items():
        sk = got[i]
        assert sk.count == len(gaps), i
        assert sk.sum == pytest.approx(sum(gaps)) and sk.min == pytest.approx(min(gaps)), i
        assert sk.max == pytest.approx(max(gaps)), i


def test_zero_gaps_of_chunks_read_together_keep_the_windowed_path_and_count_as_zeros():
    """A busy client reads two chunks at once (one stamp, a 0 s gap): the cell's sketch and each slot's hold the
    same counts, sums, extremes, zeros and buckets as the sketches' own add_many of those values."""
    rec = Recorder(slot_s=1.0)
    offset = time.time() - time.perf_counter()
    base = math.floor(time.time()) - 20
    itl = np.array([0.3, 0.0, 0.6, 0.2, 0.0, 0.9, 0.45, 0.7, 0.0, 0.3])  # chunks arrive 0.15 .. 3.6 s into base
    e2e = 0.1 + float(itl.sum()) + 0.001
    r = make_result(ttft=0.1, itl=itl, tokens=11, end=base + 0.05 - offset + e2e)
    rec.record(r)
    samples = r.itl_samples()  # the gaps as the stamps give them (float differences)
    # gap i ends at chunk i+1: (its slot's gaps, how many of them are zero)
    expected = {base: ([0, 1], 1), base + 1: ([2, 3, 4], 1), base + 2: ([5, 6], 0), base + 3: ([7, 8, 9], 1)}
    got = {i: s.sketches["itl"] for i, s in rec.slots.items() if s.sketches["itl"].count}
    assert sorted(got) == sorted(expected)
    for i, (which, zeros) in expected.items():
        ref = type(got[i])(got[i].alpha)
        ref.add_many(samples[which])
        assert (got[i].count, got[i].zero) == (ref.count, ref.zero) == (len(which), zeros), i
        assert (got[i].sum, got[i].min, got[i].max) == pytest.approx((ref.sum, ref.min, ref.max)), i
        assert [got[i].quantile(q) for q in (0.25, 0.5, 0.9)] == [ref.quantile(q) for q in (0.25, 0.5, 0.9)], i
    cell = next(iter(rec.cells.values())).sketches["itl"]
    ref = type(cell)(cell.alpha)
    ref.add_many(samples)
    assert (cell.count, cell.zero) == (ref.count, ref.zero) == (10, 3)
    assert [cell.quantile(q) for q in (0.2, 0.5, 0.99)] == [ref.quantile(q) for q in (0.2, 0.5, 0.99)]
