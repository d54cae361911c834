"""The real vLLM CPU engine started with ``--otlp-traces-endpoint`` pointing at locust's ``--otlp-receiver``:
every completed request is joined with vLLM's own ``llm_request`` span (the span continues the
request's ``traceparent``), and per request the server's TTFT and E2E never exceed the client's.

The shared server: every server of the pool exports to the pool's OTLP port (tests/vllm/engine.py), lent here
to the receiver for the run.
"""

from __future__ import annotations

import json

import pytest

from tests.vllm.locust_run import run_local

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_every_completed_request_joins_its_vllm_span(engine_pool, vllm_server, tmp_path):
    with engine_pool.otlp_receiver_port() as rx:
        run = run_local(vllm_server.url, tmp_path, "StreamingChatUser", users=4, seconds=10,
                        extra=["--input-len", "fixed:64", "--output-len", "fixed:32", "--otlp-receiver", str(rx),
                               "--otlp-grace", "20"])
    s = run.summary
    t = s["traces"]
    ok = s["requests"]["ok"]
    print(f"\nvLLM trace join: {ok} ok requests, traces {json.dumps({k: t[k] for k in ('spans', 'joined', 'unmatched', 'requests_unjoined', 'remainder_min_ms')})}")  # noqa: E501
    print(f"  tail: {t['tail']['ttft']['statement']}")
    assert ok >= 3 and s["requests"]["failed"] == 0, run.output[-3000:]
    assert t["joined"] == ok and t["requests_unjoined"] == 0, (t, run.output[-3000:])
    assert t["unmatched"] == 0 and t["bad_exports"] == 0, t
    assert t["server_ttft_over_client"] == 0 and t["server_e2e_over_client"] == 0, t
    assert t["remainder_min_ms"]["ttft"] >= 0
    for row in t["slowest"]["ttft"]:
        assert row["server_ttft_ms"] <= row["client_ttft_ms"], row
    print("  slowest:", json.dumps(t["slowest"]["ttft"][0]))
