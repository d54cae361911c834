"""TTFT decomposition: client vs server TTFT, queue and prefill, and the stated remainders."""

from __future__ import annotations

import math

import pytest

from telemetry.attribution.decompose import decompose
from telemetry.attribution.histogram import CumulativeHistogram


def _h(buckets: dict, total: float) -> CumulativeHistogram:
    return CumulativeHistogram.from_buckets({**buckets, math.inf: max(buckets.values())}, total_sum=total)


def test_means_add_up_and_remainders_are_stated():
    server = {
        "ttft": _h({0.25: 10, 0.5: 100}, total=35.0),  # mean 350 ms
        "queue": _h({0.1: 60, 0.25: 100}, total=8.0),  # mean 80 ms
        "prefill": _h({0.25: 70, 0.5: 100}, total=25.0),  # mean 250 ms
        "itl": _h({0.025: 9000, 0.05: 10000}, total=220.0),  # mean 22 ms
    }
    ttft_client = {"count": 100, "mean": 412.0, "p50": 390.0, "p90": 470.0, "p95": 490.0, "p99": 520.0, "max": 530.0}
    itl_client = {"count": 10000, "mean": 23.5, "p50": 22.0, "p90": 30.0, "p95": 33.0, "p99": 40.0, "max": 60.0}
    d = decompose(ttft_client, itl_client, server)
    assert d["ttft_client_ms"]["p99"] == 520.0
    assert d["ttft_server_ms"]["mean"] == pytest.approx(350.0)
    assert d["queue_ms"]["mean"] == pytest.approx(80.0) and d["prefill_ms"]["mean"] == pytest.approx(250.0)
    assert d["decode_itl_server_ms"]["count"] == 10000
    assert d["remainder_ms"]["network_client"] == pytest.approx(62.0)
    assert d["remainder_ms"]["server_other"] == pytest.approx(20.0)
    assert d["statement"] == (
        "client TTFT mean 412 ms = server queue 80 + prefill 250 + other server 20 + network & client 62 ms"
        "; ITL mean client 23.5 ms vs server 22.0 ms"
    )
    assert d["decode_ms"] is None  # no decode-time histogram given


def test_the_tokenizer_layer_stands_next_to_the_parts():
    """The client's request building (before t0) is its own entry and clause; it is not taken out of TTFT."""
    ttft = {"count": 10, "mean": 100.0, "p50": 90.0, "p90": 120.0, "p95": 130.0, "p99": 140.0, "max": 150.0}
    build = {"count": 10, "mean": 0.84, "p50": 0.8, "p90": 1.0, "p95": 1.1, "p99": 1.26, "max": 1.3}
    server = {"ttft": _h({0.1: 10}, total=0.9), "queue": _h({0.1: 10}, total=0.1), "prefill": _h({0.1: 10}, total=0.5)}
    d = decompose(ttft, None, server, build)
    assert d["prompt_build_client_ms"] == build
    assert d["remainder_ms"]["network_client"] == pytest.approx(10.0)  # 100 - 90: TTFT unchanged by the layer
    assert d["statement"] == (
        "client TTFT mean 100 ms = server queue 10 + prefill 50 + other server 30 + network & client 10 ms"
        "; before t0 the client built each request (prompt synthesis + tokenizer + body, on the users' event loop, "
        "outside TTFT) in mean 0.84 ms, p99 1.26 ms"
    )
    empty = {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None, "p99": None, "max": None}
    assert decompose(ttft, None, server, empty)["prompt_build_client_ms"] is None
    assert "before t0" not in decompose(ttft, None, server)["statement"]


def test_without_server_histograms():
    q = {"count": 5, "mean": 100.0, "p50": 90.0, "p90": 120.0, "p95": 130.0, "p99": 140.0, "max": 150.0}
    d = decompose(q, None, {})
    assert d["ttft_server_ms"] is None and d["queue_ms"] is None
    assert d["remainder_ms"] == {"network_client": None, "server_other": None}
    assert "no server histograms" in d["statement"]


def test_a_tiny_negative_remainder_reads_as_zero():
    server = {"ttft": _h({0.1: 10}, total=0.5), "queue": _h({0.1: 10}, total=0.2),
              "prefill": _h({0.1: 10}, total=0.303)}
    q = {"count": 10, "mean": 60.0, "p50": 55.0, "p90": 70.0, "p95": 75.0, "p99": 80.0, "max": 90.0}
    d = decompose(q, None, server)
    assert d["remainder_ms"]["server_other"] == 0.0
    assert d["remainder_ms"]["excess_ms"] == {"server_other": pytest.approx(0.3)}
    assert "other server 0 + network & client 10 ms" in d["statement"]


def test_a_negative_mean_remainder_is_never_printed():
    # the server's TTFT mean (68 ms) over the client's (60 ms): a measured "network & client -8 ms"
    server = {"ttft": _h({0.1: 10}, total=0.68), "queue": _h({0.1: 10}, total=0.3),
              "prefill": _h({0.1: 10}, total=0.2)}
    q = {"count": 10, "mean": 60.0, "p50": 55.0, "p90": 70.0, "p95": 75.0, "p99": 80.0, "max": 90.0}
    d = decompose(q, None, server)
    assert d["remainder_ms"]["network_client"] == 0.0
    assert d["remainder_ms"]["excess_ms"] == {"network_client": pytest.approx(8.0)}
    assert "network & client 0 ms" in d["statement"] and "-" not in d["statement"]
    assert "exceed the client's by 8 ms in network & client" in d["statement"]
