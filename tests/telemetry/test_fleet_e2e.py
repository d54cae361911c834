"""Fleets end to end, Locust against simulators: a data-parallel simulator with one slow engine is caught by the
live imbalance detector and named by the summary; a balanced one is never flagged; two simulators as two replicas
in one --server-metrics-url list are two targets, each with its own figures, whose sums are the server's."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import LOCUST, start_sim

pytestmark = pytest.mark.slow

WINDOW_S = 2.0
LOAD = ["--headless", "-u", "16", "-r", "16", "--model", "sim-tiny", "--input-len", "fixed:64", "--output-len",
        "fixed:32", "--server-metrics-interval", "0.5", "--attribution-window", f"{WINDOW_S:g}", "--only-summary"]


def run_locust(tmp_path, host: str, seconds: int, *extra: str) -> dict:
    out = tmp_path / "summary.json"
    proc = subprocess.run([LOCUST, "-f", "locustfile.py", *LOAD, "-t", f"{seconds}s", "--host", host,
                           "--llm-summary-json", str(out), *extra, "StreamingChatUser"],
                          capture_output=True, text=True, timeout=seconds + 60)
    assert out.exists(), proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_a_slow_engine_flips_the_detector_within_three_windows_and_is_named(tmp_path):
    sim, url = start_sim("--data-parallel-size", "4", "--dp-skew", "3:3")
    with sim:
        s = run_locust(tmp_path, url, 20, "--llm-stop-on", "imbalance")
    stop = s["detectors"]["stopped_by"]
    assert stop is not None and stop["detector"] == "imbalance", s["detectors"]
    assert stop["at_s"] <= 3 * WINDOW_S + 1.0, stop  # the second flagged window closes by 2 W; a check a second
    assert "engine 3 " in stop["reason"]
    assert s["attribution"]["bottleneck"]["cause"] == "engine_imbalance"
    assert s["attribution"]["bottleneck"]["engine"] == "3"
    engines = s["server"]["engines"]
    assert [e["engine"] for e in engines] == ["0", "1", "2", "3"]
    assert sum(e["requests_finished"] for e in engines) == s["server"]["requests_succeeded"]
    assert s["server"]["kv_blocks_total"] == sum(e["num_gpu_blocks"] for e in engines) > engines[0]["num_gpu_blocks"]
    print(f"\nDP=4 skew 3:3: stopped at {stop['at_s']:.1f} s: {stop['reason']}")


def _balanced(tmp_path, seconds: int) -> None:
    sim, url = start_sim("--data-parallel-size", "4")
    with sim:
        s = run_locust(tmp_path, url, seconds, "--llm-stop-on", "imbalance")
    assert s["detectors"]["stopped_by"] is None, s["detectors"]["stopped_by"]
    assert s["detectors"]["imbalance"]["judged"] and not s["detectors"]["imbalance"]["imbalanced"]
    assert s["attribution"]["imbalance"] is None and s["attribution"]["bottleneck"]["cause"] != "engine_imbalance"
    finished = [e["requests_finished"] for e in s["server"]["engines"]]
    assert len(finished) == 4 and min(finished) > 0
    print(f"\nDP=4 balanced, {seconds} s: never flagged; finished per engine {finished}")


def test_a_balanced_fleet_is_never_flagged(tmp_path):
    _balanced(tmp_path, 12)


@pytest.mark.long
def test_a_balanced_fleet_is_never_flagged_over_a_minute(tmp_path):
    _balanced(tmp_path, 60)


def test_two_replicas_are_two_targets_whose_sums_are_the_server(tmp_path):
    a, url_a = start_sim("--num-gpu-blocks", "512")
    b, url_b = start_sim("--num-gpu-blocks", "256", "--seed", "1")
    with a, b:
        s = run_locust(tmp_path, url_a, 8, "--server-metrics-url", f"{url_a}/metrics,{url_b}/metrics")
        # the client sent everything to replica a: b's figures stay its own (no request finished there)
    srv = s["server"]
    targets = {t["target"]: t for t in srv["targets"]}
    assert set(targets) == {url_a.split("//")[1], url_b.split("//")[1]}
    assert all(t["scrapes"] > 0 and t["scrape_failures"] == 0 for t in targets.values())
    by_target = {e["target"]: e for e in srv["engines"]}
    ea, eb = by_target[url_a.split("//")[1]], by_target[url_b.split("//")[1]]
    assert (ea["num_gpu_blocks"], eb["num_gpu_blocks"]) == (512, 256) and srv["kv_blocks_total"] == 768
    assert ea["requests_finished"] > 0 and eb["requests_finished"] == 0
    assert srv["requests_succeeded"] == ea["requests_finished"] + eb["requests_finished"]
    assert srv["generation_tokens"] == ea["generation_tokens"] + eb["generation_tokens"]
    assert srv["scrapes"] == targets[url_a.split("//")[1]]["scrapes"] + targets[url_b.split("//")[1]]["scrapes"]
    assert srv["kv_cache_usage"]["max"] <= max(ea["kv_cache_usage"]["max"], eb["kv_cache_usage"]["max"])
    print(f"\ntwo replicas: finished {ea['requests_finished']} + {eb['requests_finished']} = "
          f"{srv['requests_succeeded']}, KV blocks 512 + 256 = {srv['kv_blocks_total']}")


def test_a_prefill_decode_pair_shows_the_kv_transfer_in_the_first_token(tmp_path):
    delay_s = 0.2
    prefill, url_p = start_sim()
    with prefill:
        decode, url_d = start_sim("--kv-transfer-from", url_p, "--kv-transfer-delay", f"{delay_s:g}")
        with decode:
            s = run_locust(tmp_path, url_d, 8, "--server-metrics-url",
                           f"prefill={url_p}/metrics,decode={url_d}/metrics")
    assert {t["target"]: t["role"] for t in s["server"]["targets"]} == {"prefill": "prefill", "decode": "decode"}
    roles = {e["role"]: e for e in s["server"]["engines"]}
    ok = s["requests"]["ok"]
    # every request was prefilled there before it decoded here (the ones the run's end cut in flight too)
    assert ok > 0 and roles["prefill"]["requests_finished"] >= roles["decode"]["requests_finished"] >= ok
    d = s["attribution"]["decomposition"]
    assert d["kv_transfer_ms"]["mean"] == pytest.approx(delay_s * 1000.0, rel=0.10)
    assert "KV transfer" in d["statement"] and "decode first step" in d["statement"]
    # the decode side's TTFT begins with the transfer: its mean is at least the transfer's
    assert d["decode_ttft_server_ms"]["mean"] >= d["kv_transfer_ms"]["mean"]
    # and the client's first token waited for both servers: prefill's TTFT + the transfer, at least
    assert d["ttft_client_ms"]["mean"] >= d["ttft_server_ms"]["mean"] + d["kv_transfer_ms"]["mean"]
    # the network & client remainder is what is left after both servers, not the decode side's whole share
    assert d["remainder_ms"]["network_client"] < d["kv_transfer_ms"]["mean"]
    assert s["attribution"]["bottleneck"]["cause"] != "client"
    print(f"\nprefill/decode pair, 200 ms configured: KV transfer mean {d['kv_transfer_ms']['mean']:.1f} ms; "
          f"{d['statement']}")
