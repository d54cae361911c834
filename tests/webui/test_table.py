"""webui.table: rows of the LLM tab from the live figures (telemetry/outputs/live.py's shape, via hub.live())."""

from __future__ import annotations

from webui.table import COLUMNS, MISSING, NO_REASONING, NOW, STRUCTURE, llm_rows


def stage(name: str, requests: int, ttft=(None, None), itl=(None, None), tpot=(None, None), tok_s=None, **kw) -> dict:
    d = {"stage": name, "requests": requests, "output_tok_s": tok_s, **kw}
    for m, (p50, p99) in (("ttft", ttft), ("itl", itl), ("tpot", tpot)):
        d[f"{m}_p50_ms"], d[f"{m}_p99_ms"] = p50, p99
    return d


LIVE = {
    "elapsed_s": 30.0,
    "workers": 2,
    "stages": [
        stage("users=1", 12, ttft=(50.04, 61.06), itl=(7.0, 9.0), tpot=(7.1, 7.94), tok_s=120.0, users=1),
        stage("users=16", 30, ttft=(130.0, 412.0), itl=(8.25, 31.5), tpot=(8.2, 12.0), tok_s=1842.04,
              server_kv_usage=0.25, client_kv_block_fill=0.875),
    ],
    "server_kv_usage": 0.4567,
    "client_kv_block_fill": 0.9375,
}


def test_one_row_per_stage_in_run_order_then_now():
    rows = llm_rows(LIVE, users=16)
    assert [r["stage"] for r in rows] == ["users=1", "users=16", NOW]


def test_stage_rows_carry_their_own_figures():
    low, high, _ = llm_rows(LIVE)
    assert (low["users"], low["requests"], low["ttft_p50"], low["ttft_p99"]) == ("1", "12", "50.0", "61.1")
    assert (low["itl_p99"], low["tpot_p99"], low["output_tok_s"]) == ("9.0", "7.9", "120.0")
    assert (high["users"], high["itl_p50"], high["output_tok_s"]) == (MISSING, "8.2", "1,842.0")
    # each stage row has its own KV means; a stage without a sample leaves them empty
    assert (high["server_kv"], high["client_kv"]) == ("25.0%", "87.5%")
    assert low["server_kv"] == low["client_kv"] == MISSING


def test_now_row_adds_counts_but_never_quantiles():
    now = llm_rows(LIVE, users=16)[-1]
    assert (now["users"], now["requests"]) == ("16", "42")
    assert (now["server_kv"], now["client_kv"]) == ("45.7%", "93.8%")
    for m in ("ttft", "itl", "tpot"):
        assert now[f"{m}_p50"] == now[f"{m}_p99"] == MISSING
    assert now["output_tok_s"] == MISSING


def test_missing_values_show_a_dash_not_zero():
    rows = llm_rows({"stages": [stage("main", 0)], "server_kv_usage": None, "client_kv_block_fill": None})
    main, now = rows
    assert main["requests"] == "0" and now["requests"] == "0"
    for key, _ in COLUMNS[3:]:
        assert main[key] == MISSING, key
    assert now["users"] == now["server_kv"] == now["client_kv"] == MISSING


def test_nan_bools_and_strings_are_missing():
    rows = llm_rows({"stages": [stage("main", 3, ttft=(float("nan"), "fast"))], "server_kv_usage": True})
    assert rows[0]["ttft_p50"] == rows[0]["ttft_p99"] == rows[1]["server_kv"] == MISSING


def test_unknown_request_count_leaves_the_total_empty():
    rows = llm_rows({"stages": [stage("a", 3), {"stage": "b"}]})
    assert rows[-1]["requests"] == MISSING


def test_no_live_data_no_rows():
    assert llm_rows({}) == [] and llm_rows(None) == []


def test_every_row_has_every_column():
    keys = {s["key"] for s in STRUCTURE}
    for r in llm_rows(LIVE, users=3):
        assert set(r) == keys


def test_a_fleet_adds_one_row_per_engine_after_now_and_marks_the_imbalanced_one():
    from webui.table import llm_rows

    live = {"stages": [{"stage": "main", "requests": 5}], "server_kv_usage": 0.5,
            "detectors": {"batching": {"judged": True}, "slo": [],
                          "imbalance": {"judged": True, "imbalanced": True, "engine": "1"}},
            "engines": {"0": {"kv_cache_usage": 0.25, "requests_running": 3, "requests_waiting": 0},
                        "1": {"kv_cache_usage": 0.75, "requests_running": 9, "requests_waiting": 4}}}
    rows = llm_rows(live)
    assert [r["stage"] for r in rows] == ["main", "now", "engine 0", "engine 1"]
    assert rows[3]["server_kv"] == "75.0%" and rows[3]["detectors"] == "running 9 · waiting 4 · OFF THE FLEET"
    assert "OFF" not in rows[2]["detectors"] and "IMBALANCED engine 1" in rows[1]["detectors"]
    live["engines"] = {"0": live["engines"]["0"]}  # one engine: the "now" row says it all
    assert [r["stage"] for r in llm_rows(live)] == ["main", "now"]


def test_ttfa_says_no_reasoning_when_nothing_reasoned():
    """TTFA equals TTFT when no request reasoned: its cells say so instead of repeating TTFT's figures."""
    stages = [{**s, "ttfa_p50_ms": s["ttft_p50_ms"], "ttfa_p99_ms": s["ttft_p99_ms"]} for s in LIVE["stages"]]
    plain = llm_rows({**LIVE, "stages": stages, "reasoned": False})
    assert {r["ttfa_p50"] for r in plain[:-1]} == {r["ttfa_p99"] for r in plain[:-1]} == {NO_REASONING}
    assert plain[0]["ttft_p50"] == "50.0"
    thought = llm_rows({**LIVE, "stages": stages, "reasoned": True})
    assert (thought[0]["ttfa_p50"], thought[1]["ttfa_p99"]) == ("50.0", "412.0")
