"""End to end: real ``locust --headless`` processes against the scripted server, whose timing is the truth.

The timing contract: 150 ms to the first token, then a token every 20 ms, 64 concurrent streams ->
TTFT and ITL p50 within 1 ms of the truth, p99 within 2 ms, output tokens equal to the server's usage;
3 tokens per chunk 30 ms apart -> ITL p50 ≈ 10 ms, inter-chunk p50 ≈ 30 ms.

The truth is the script, and also what the server really sent: it starts each request's clock at the
kernel's arrival stamp of the request and reports the first-token delay and per-token gaps it actually
produced (``ttft_sent_ms``, ``itl_sent_ms``); the client's figures must match both. Timing on a shared
2-core box: both processes run at raised priority where allowed, the server above the client
(tests/users/e2e.py), a run that misses a bound is repeated (up to 3 times), and the server's own
lateness (``late_ms``) is reported with every miss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.users.e2e import quantile_ms, run_locust, scripted

pytestmark = [pytest.mark.slow, pytest.mark.exclusive]  # timings to the ms against the script: the box to itself


def _all(rows: list[dict], key: str) -> list[float]:
    return [x for r in rows for x in r[key]]


def _within(name: str, got: float, truth: float, tol: float) -> list[str]:
    return [] if abs(got - truth) <= tol else [f"{name} {got:.2f} ms vs {truth} ± {tol}"]


@dataclass
class Try:
    client: list[str] = field(default_factory=list)
    """Bounds missed against what the server really sent."""
    script: list[str] = field(default_factory=list)
    """Bounds missed against the script."""
    strayed: list[str] = field(default_factory=list)
    """Where the server itself missed its script by more than the bounds (a stalled host)."""
    late_p99: float | None = None
    figures: str = ""

    def passed(self) -> bool:
        # the truth is the script when the server kept to it, else what it sent
        return not self.client and (not self.script or bool(self.strayed))


def _timed(attempt, tries: int = 3) -> None:
    """Run ``attempt() -> Try`` up to ``tries`` times until one passes.

    A client bug (a role chunk counted, ITL not split, Locust's header time, a late stamp) misses what
    the server sent by tens of ms on every try. This VM itself stalls now and then (a real-time process
    sleeping 1 ms wakes more than 2 ms late ~3 times a second here), and a stall that holds the server
    delays the chunks due meanwhile: then the server misses its own script, which its record shows."""
    seen = []
    for _ in range(tries):
        t = attempt()
        missed = t.client + t.script
        print(f"timing try: {t.figures}; server late p99 {t.late_p99} ms; strayed {t.strayed}; missed {missed}")
        if t.passed():
            return
        seen.append(f"server late p99 {t.late_p99} ms, strayed {t.strayed}; missed {t.client + t.script}")
    pytest.fail("timing bounds missed in every try:\n" + "\n".join(seen))


def test_64_streams_ttft_and_itl_match_the_script(tmp_path) -> None:
    _timed(lambda: _run_64(tmp_path))


def _run_64(tmp_path) -> Try:
    with scripted("--ttft-ms", "150", "--itl-ms", "20", "--output-tokens", "32") as (host, stats):
        run = run_locust(
            host,
            # 64 users in four spawn batches of 16 a second apart (Locust starts floor(rate) users at once):
            # four groups of streams whose chunks fall due within a few ms, not all 64 in the same ms
            [
                "-u",
                "64",
                "-r",
                "16",
                "-t",
                "10s",
                "--stop-timeout",
                "5",
                "--input-len",
                "uniform:16:64",
                "StreamingChatUser",
                "StreamingCompletionUser",
            ],
            tmp_path,
        )
        served = stats()
    assert run.rc == 0, run.output[-3000:]
    assert "Traceback" not in run.output
    rows = run.results
    assert len(rows) == served["requests"] > 200  # one Locust event per LLM request, none lost
    assert all(r["has_result"] and r["ok"] for r in rows), [r["exception"] for r in rows if not r["ok"]][:3]
    assert {r["name"] for r in rows} == {"POST /v1/chat/completions [stream]", "POST /v1/completions [stream]"}

    ttft = [r["ttft"] for r in rows]
    itl = _all(rows, "itl")
    # the role-only chat chunk (sent at once) is not a token: TTFT would then be ~0
    assert min(ttft) >= 0.149

    # tokens: every request's count is the server's usage, and the totals agree exactly
    assert {r["output_tokens"] for r in rows} == {32} and {r["source"] for r in rows} == {"usage"}
    assert sum(r["output_tokens"] for r in rows) == served["output_tokens"]
    assert all(r["response_length"] == r["output_tokens"] for r in rows)
    # prompts: the server's usage equals the drawn length (chat template included)
    assert all(r["prompt_tokens"] == r["prompt_tokens_client"] for r in rows)
    assert {r["prompt_tokens"] for r in rows} <= set(range(16, 65))
    # response_time is E2E (150 + 31 x 20 = 770 ms), not Locust's time to headers
    e2e_ms = sorted(r["response_time"] for r in rows)
    assert e2e_ms[0] >= 769.0
    # the summary (telemetry's merged sketches) says the same as the per-request results
    s = run.summary
    assert s is not None and s["requests"]["total"] == s["requests"]["ok"] == len(rows), s["requests"]
    assert s["tokens"]["output"] == served["output_tokens"] and s["tokens"]["source"] == "usage"
    sent_ttft, sent_itl = served["ttft_sent_ms"], served["itl_sent_ms"]
    return Try(
        # against what the server really sent, each request on its own clock: the client's own error
        client=_within("TTFT p50 vs sent", quantile_ms(ttft, 0.5), sent_ttft["p50"], 0.5)
        + _within("TTFT p99 vs sent", quantile_ms(ttft, 0.99), sent_ttft["p99"], 1.0)
        + _within("ITL p50 vs sent", quantile_ms(itl, 0.5), sent_itl["p50"], 0.5)
        + _within("ITL p99 vs sent", quantile_ms(itl, 0.99), sent_itl["p99"], 1.0)
        + _within("summary TTFT p50 vs sent", s["ttft_ms"]["p50"], sent_ttft["p50"], 1.0)
        + _within("summary TTFT p99 vs sent", s["ttft_ms"]["p99"], sent_ttft["p99"], 2.0)
        + _within("summary ITL p50 vs sent", s["itl_ms"]["p50"], sent_itl["p50"], 1.0)
        + _within("summary ITL p99 vs sent", s["itl_ms"]["p99"], sent_itl["p99"], 2.0),
        # against the script, as the issue words it
        script=_within("TTFT p50", quantile_ms(ttft, 0.5), 150.0, 1.0)
        + _within("TTFT p99", quantile_ms(ttft, 0.99), 150.0, 2.0)
        + _within("ITL p50", quantile_ms(itl, 0.5), 20.0, 1.0)
        + _within("ITL p99", quantile_ms(itl, 0.99), 20.0, 2.0)
        + _within("E2E p50", e2e_ms[len(e2e_ms) // 2], 770.0, 2.0)
        + _within("summary TTFT p50", s["ttft_ms"]["p50"], 150.0, 1.0)
        + _within("summary TTFT p99", s["ttft_ms"]["p99"], 150.0, 2.0)
        + _within("summary ITL p50", s["itl_ms"]["p50"], 20.0, 1.0)
        + _within("summary ITL p99", s["itl_ms"]["p99"], 20.0, 2.0),
        strayed=_within("server TTFT p50", sent_ttft["p50"], 150.0, 1.0)
        + _within("server TTFT p99", sent_ttft["p99"], 150.0, 2.0)
        + _within("server ITL p50", sent_itl["p50"], 20.0, 1.0)
        + _within("server ITL p99", sent_itl["p99"], 20.0, 2.0),
        late_p99=served["late_ms"]["p99"],
        figures=f"client TTFT p50/p99 {quantile_ms(ttft, 0.5):.2f}/{quantile_ms(ttft, 0.99):.2f}, ITL "
        f"{quantile_ms(itl, 0.5):.2f}/{quantile_ms(itl, 0.99):.2f}; summary TTFT {s['ttft_ms']['p50']:.2f}/"
        f"{s['ttft_ms']['p99']:.2f}, ITL {s['itl_ms']['p50']:.2f}/{s['itl_ms']['p99']:.2f}; server sent TTFT "
        f"{sent_ttft['p50']:.2f}/{sent_ttft['p99']:.2f}, ITL {sent_itl['p50']:.2f}/{sent_itl['p99']:.2f}",
    )


def test_three_tokens_per_chunk_split_the_gap(tmp_path) -> None:
    _timed(lambda: _run_k3(tmp_path))


def _run_k3(tmp_path) -> Try:
    with scripted("--ttft-ms", "60", "--itl-ms", "10", "--tokens-per-chunk", "3", "--output-tokens", "30") as (
        host,
        stats,
    ):
        run = run_locust(
            host,
            ["-u", "16", "-r", "16", "-t", "5s", "--stop-timeout", "5", "--input-len", "32", "StreamingChatUser"],
            tmp_path,
        )
        served = stats()
    assert run.rc == 0, run.output[-3000:]
    rows = run.results
    assert len(rows) == served["requests"] > 20 and all(r["ok"] for r in rows)
    # k samples of g/k per chunk: 9 chunks after the first, 3 samples each
    assert {len(r["itl"]) for r in rows} == {27} and {len(r["gaps"]) for r in rows} == {9}
    # TPOT = decode span / (tokens - 1) = 9 x 30 / 29 ms
    s = run.summary
    assert s is not None and s["requests"]["ok"] == len(rows)
    return Try(
        script=_within("summary ITL p50", s["itl_ms"]["p50"], 10.0, 1.0)
        + _within("summary inter-chunk p50", s["inter_chunk_ms"]["p50"], 30.0, 1.0)
        + _within("ITL p50", quantile_ms(_all(rows, "itl"), 0.5), 10.0, 1.0)
        + _within("inter-chunk p50", quantile_ms(_all(rows, "gaps"), 0.5), 30.0, 1.0)
        + _within("TPOT p50", quantile_ms([r["tpot"] for r in rows], 0.5), 270.0 / 29, 0.5),
        late_p99=served["late_ms"]["p99"],
    )


def test_batch_user_reports_per_request_latency_and_all_tokens(tmp_path) -> None:
    with scripted("--ttft-ms", "50", "--itl-ms", "5", "--output-tokens", "20") as (host, stats):
        run = run_locust(
            host,
            [
                "-u",
                "4",
                "-r",
                "4",
                "-t",
                "3s",
                "--stop-timeout",
                "5",
                "--batch-size",
                "3",
                "--input-len",
                "24",
                "BatchCompletionUser",
            ],
            tmp_path,
        )
        served = stats()
    assert run.rc == 0, run.output[-3000:]
    rows = run.results
    assert len(rows) == served["requests"] > 4 and all(r["ok"] for r in rows)
    assert {r["name"] for r in rows} == {"POST /v1/completions [batch]"}
    assert {r["batch_size"] for r in rows} == {3} and {r["output_tokens"] for r in rows} == {60}
    assert {r["prompt_tokens"] for r in rows} == {72} == {r["prompt_tokens_client"] for r in rows}
    assert all(r["ttft"] is None for r in rows)  # no stream, no TTFT
    assert min(r["response_time"] for r in rows) >= 145.0  # 50 + 19 x 5 ms: the whole answer
