"""The per-request join fed by the server's in-band record (vLLM's per-request ``metrics``): with no collector the
slowest requests and the tail's composition come from it; with a collector a request's span wins and only a request
whose span never came falls back to it."""

from __future__ import annotations

import pytest

from telemetry.traces.join import ClientRecord, TraceJoin, client_record
from telemetry.traces.otlp import ServerSpan
from telemetry.traces.tail import traces_section
from tests.telemetry.synthetic import make_result
from users.result import RequestMeta, ServerRecord
from users.tracing import RequestIds


def _records(n: int) -> list[ClientRecord]:
    """n requests; the last one is the slowest, queued 0.9 s at the server."""
    ids, out = RequestIds(worker=0, run=5), []
    for i in range(n):
        slow = i == n - 1
        queue, ttft, gen = (0.9 if slow else 0.01 + i * 1e-4), 0.05, 0.4
        r = make_result(ttft=queue + ttft + 0.02, itl=0.01, tokens=41,
                        server=ServerRecord(queue_s=queue, ttft_s=ttft, generation_s=gen))
        rid, _tp = ids.next()
        rec = client_record(type(r)(**{**{f: getattr(r, f) for f in r.__slots__}, "meta": RequestMeta(
            request_id=rid)}))
        out.append(rec)
    return out


def test_without_a_collector_the_tail_is_composed_from_in_band_records():
    join = TraceJoin()
    join.spans_expected = False
    recs = _records(200)
    for rec in recs:
        join.add_client(rec)
    s = traces_section(join, receiving=False)
    assert (s["source"], s["joined"], s["joined_in_band"], s["spans"]) == ("in_band", 200, 200, 0)
    slowest = s["slowest"]["ttft"][0]
    assert slowest["request_id"] == recs[-1].request_id and slowest["source"] == "in_band"
    assert (slowest["queue_ms"], slowest["prefill_ms"], slowest["server_ttft_ms"]) == (900.0, 50.0, 950.0)
    assert slowest["server_e2e_ms"] == pytest.approx(1350.0)
    tail = s["tail"]["ttft"]
    assert tail["dominant"] == "queue" and tail["requests"] == 2 and tail["negative_parts"] == 0
    assert sum(tail["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert s["server_ttft_over_client"] == 0


def test_a_span_wins_and_the_in_band_record_fills_in_for_a_missing_one():
    join = TraceJoin()
    a, b = _records(2)
    join.add_client(a)
    join.add_client(b)
    span = ServerSpan(trace_id=a.trace_id, span_id="1" * 16, parent_span_id="", request_id=None, ttft_s=0.2,
                      e2e_s=0.7, queue_s=0.1, prefill_s=0.05, decode_s=0.4, inference_s=0.45, prompt_tokens=10,
                      completion_tokens=41, start_ns=0, end_ns=1)
    join.add_spans([span])
    assert join.waiting_ok() == 1
    join.settle_in_band()
    s = traces_section(join)
    by_id = {r["request_id"]: r for r in s["slowest"]["e2e"]}
    assert by_id[a.request_id]["source"] == "span" and by_id[a.request_id]["queue_ms"] == 100.0
    assert by_id[b.request_id]["source"] == "in_band" and by_id[b.request_id]["queue_ms"] == pytest.approx(900.0)
    assert (s["source"], s["joined_in_band"], s["requests_unjoined"]) == ("spans+in_band", 1, 0)


def test_a_request_without_all_three_clocks_is_not_joined_in_band():
    r = make_result(server=ServerRecord(ttft_s=0.05, cached_tokens=3))
    rec = client_record(type(r)(**{**{f: getattr(r, f) for f in r.__slots__}, "meta": RequestMeta(
        request_id=RequestIds(worker=0, run=1).next()[0])}))
    join = TraceJoin()
    join.spans_expected = False
    join.add_client(rec)
    assert rec.in_band is None and join.joined == []
