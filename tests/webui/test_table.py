"""webui.table: rows of the LLM tab from a live() dict (summary-schema shaped)."""

from __future__ import annotations

from webui.table import COLUMNS, MISSING, STRUCTURE, llm_rows


def q(p50: float, p99: float, count: int = 10) -> dict:
    return {"count": count, "mean": p50, "p50": p50, "p90": p99, "p95": p99, "p99": p99, "max": p99}


LIVE = {
    "requests": {"total": 42, "ok": 40, "failed": 2},
    "tokens": {"output_per_s": 1842.04},
    "ttft_ms": q(120.04, 412.06),
    "itl_ms": q(8.25, 31.5),
    "tpot_ms": q(8.0, 12.345),
    "client_kv_block_fill": {"mean": 0.9375},
    "server": {"kv_cache_usage": 0.4567},
    "stages": [
        {"name": "users=1", "users": 1, "requests": 12, "ttft_ms": q(50.0, 61.0), "itl_ms": q(7.0, 9.0),
         "tpot_ms": q(7.1, 7.9), "output_per_s": 120.0, "client_kv_block_fill": 0.5, "server_kv_usage_mean": 0.05},
        {"name": "users=16", "users": 16, "requests": 30, "ttft_ms": q(130.0, 412.0), "itl_ms": q(8.5, 31.0),
         "tpot_ms": q(8.2, 12.0), "output_per_s": 1800.0},
    ],
}


def test_rows_run_totals_first_then_stages_in_order():
    rows = llm_rows(LIVE)
    assert [r["stage"] for r in rows] == ["all", "users=1", "users=16"]
    total = rows[0]
    assert total["requests"] == "42"
    assert (total["ttft_p50"], total["ttft_p99"]) == ("120.0", "412.1")
    assert (total["itl_p50"], total["itl_p99"]) == ("8.2", "31.5")  # 8.25 rounds half-even in format
    assert total["tpot_p99"] == "12.3"
    assert total["output_tok_s"] == "1,842.0"
    assert total["server_kv"] == "45.7%"
    assert total["client_kv"] == "93.8%"


def test_stage_rows_carry_their_own_figures():
    _, low, high = llm_rows(LIVE)
    assert (low["users"], low["requests"], low["ttft_p99"], low["output_tok_s"]) == ("1", "12", "61.0", "120.0")
    assert (low["server_kv"], low["client_kv"]) == ("5.0%", "50.0%")
    assert (high["users"], high["ttft_p50"], high["tpot_p50"]) == ("16", "130.0", "8.2")
    assert high["server_kv"] == MISSING and high["client_kv"] == MISSING


def test_missing_or_empty_quantiles_show_a_dash_not_zero():
    rows = llm_rows({"ttft_ms": {"count": 0, "p50": 0.0, "p99": 0.0}, "stages": [{"name": "main"}]})
    for r in rows:
        for key, _ in COLUMNS[1:]:
            assert r[key] == MISSING, (r["stage"], key, r[key])


def test_nan_and_non_numbers_are_missing():
    rows = llm_rows({"ttft_ms": {"count": 3, "p50": float("nan"), "p99": "fast"}, "server": {"kv_cache_usage": True}})
    assert rows[0]["ttft_p50"] == MISSING and rows[0]["ttft_p99"] == MISSING and rows[0]["server_kv"] == MISSING


def test_server_kv_may_be_a_stats_dict():
    rows = llm_rows({"server": {"kv_cache_usage": {"mean": 0.25, "max": 0.9, "last": 0.5}}})
    assert rows[0]["server_kv"] == "50.0%"
    rows = llm_rows({"server": {"kv_cache_usage": {"mean": 0.25, "max": 0.9}}})
    assert rows[0]["server_kv"] == "25.0%"


def test_no_live_data_no_rows():
    assert llm_rows({}) == [] and llm_rows(None) == []


def test_every_row_has_every_column():
    keys = {s["key"] for s in STRUCTURE}
    for r in llm_rows(LIVE):
        assert set(r) == keys
