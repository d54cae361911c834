"""The console's per-stage table: full stage names, every column, warm-up marked, the saturation line."""

from __future__ import annotations

import re

import pytest

from shapes.stage import Stage
from telemetry.outputs.sinks import console_table, stage_table
from tests.telemetry.helpers import fire, local_env
from tests.telemetry.synthetic import make_result

WARM = "warmup len=uniform:128:1024"
LONG = "len=normal:512:128:16:2048"


def _summary() -> dict:
    env, hub, role = local_env()
    board = env.llm.stage_board
    role.on_test_start()
    board.set(Stage(WARM, index=0, users=16, input_len="uniform:128:1024", warmup=True))
    fire(env, make_result(ttft=5.0, stage=WARM))
    board.set(Stage(LONG, index=1, users=16, input_len="normal:512:128:16:2048"))
    for i in range(50):
        fire(env, make_result(ttft=0.1 + 0.002 * i, itl=0.015, tokens=20, stage=LONG, prompt_tokens=500))
    board.set(Stage("rate=8", index=2, users=32, rate=8.0))
    for i in range(50):
        fire(env, make_result(ttft=0.4, itl=0.03, tokens=10, stage="rate=8", queue=0.2 + 0.01 * i))
    role.pump_local()
    start = {st["name"]: st["start_s"] for st in hub.summary()["stages"]}

    class FakeScraper:
        target_states = staticmethod(list)
        metric_names = "vllm-v1"
        successes, failures = 4, 0
        series = [{"t": start[LONG] + 1e-4, "kv_cache_usage": 0.25, "preemptions_total": 0.0},
                  {"t": start[LONG] + 2e-4, "kv_cache_usage": 0.75, "preemptions_total": 0.0},
                  {"t": start["rate=8"] + 1e-4, "kv_cache_usage": 0.99, "preemptions_total": 7.0}]
        latest = series[-1]

    hub.merger.scraper = FakeScraper()
    hub.hooks.add_section("saturation", lambda _v, _s: {"stage": "rate=8", "reason": "rate=8: output +1.0% over ..."},
                          empty=lambda _v: None)
    s = hub.summary()
    hub.merger.scraper = None
    role.close()
    return s


def test_stage_rows_show_every_column_with_full_names():
    s = _summary()
    text = console_table(s)
    lines = text.splitlines()
    warm = next(i for i, ln in enumerate(lines) if ln.startswith(WARM))
    assert lines[warm].startswith(WARM + " *") and "* = warm-up" in text  # marked, never cut
    row = next(i for i, ln in enumerate(lines) if ln.startswith(LONG + " "))
    first, second = lines[row].split(), lines[row + 1].split()
    assert first[1:] == ["16", "users", "normal:512:128:16:2048", "50", "500.0", first[-1]]
    ttft = s["stages"][1]["ttft_ms"]
    assert second[0] == f"{ttft['p50']:.0f}/{ttft['p99']:.0f}"  # TTFT p50/p99
    assert second[1] == "15.0/15.0" and second[2].startswith("15.")  # ITL, TPOT
    assert second[4] == "50.0%/75.0%" and second[5] == "0"  # server KV mean/max, preemptions
    assert second[6] == "-"  # a closed-loop stage has no client queue
    rate = next(i for i, ln in enumerate(lines) if ln.startswith("rate=8 "))
    assert lines[rate].split()[1:3] == ["8", "req/s"]
    rate2 = lines[rate + 1].split()
    queue = s["stages"][2]["client_queue_ms"]
    assert rate2[-1] == f"{queue['p50']:.0f}/{queue['p99']:.0f}"
    # queue times 200, 210 .. 690 ms: p50 is the 25th (440), p99 the 49th (680), within the sketch's 0.5 %
    assert queue["count"] == 50 and queue["mean"] == pytest.approx(445.0)
    assert queue["p50"] == pytest.approx(440, rel=0.005) and queue["p99"] == pytest.approx(680, rel=0.005)
    assert rate2[4] == "99.0%/99.0%" and rate2[5] == "7"
    assert lines[rate + 2] == "saturation: rate=8 (rate=8: output +1.0% over ...)"


def test_headings_line_up_with_the_values():
    lines = stage_table(_summary()["stages"], None)
    head1, head2 = lines[1], lines[2]
    row = next(ln for ln in lines if ln.startswith(LONG + " "))
    assert row.rindex("normal:512") == head1.index("input")  # the input column starts under its heading
    assert len(row) == len(head1) and len(lines[lines.index(row) + 1]) == len(head2)  # right-aligned numbers
    assert not any(ln.startswith("saturation") for ln in lines)


def test_a_run_without_a_shape_has_no_stage_table():
    s = _summary()
    s["stages"] = [dict(s["stages"][1], name="main")]
    assert "per stage" not in console_table(s) and not re.search(r"^saturation", console_table(s), re.M)


def test_reasoning_rows_only_when_a_request_reasoned_and_the_ttft_split_said_once():
    from telemetry.attribution.bottleneck import verdict
    from telemetry.attribution.console import console_lines

    s = _summary()
    rows = [line.split()[0] for line in console_table(s).splitlines()[2:14]]
    assert "TTFT" in rows and not {"TTFA", "thinking", "answer"} & set(rows)  # nothing reasoned: TTFA == TTFT
    s["tokens"]["reasoning"] = 40
    assert {"TTFA", "thinking", "answer"} <= {line.split()[0] for line in console_table(s).splitlines() if line.strip()}
    said = "client TTFT mean 51 ms = server queue 0 + prefill 11 + other server 0 + network & client 40 ms"
    q = {"count": 9}
    d = {"statement": said, "ttft_client_ms": {**q, "mean": 51.0}, "ttft_server_ms": {**q, "mean": 11.0},
         "queue_ms": {**q, "mean": 0.0}, "prefill_ms": {**q, "mean": 11.0}}
    att = {"window_s": 10, "decomposition": d, "bottleneck": verdict({}, None, d, None)}
    text = "\n".join(console_lines(att))
    assert text.count(said) == 1 and "bottleneck: client — 78 % of the client TTFT is network & client" in text


def test_capacity_line_says_the_answer_and_its_figures():
    from telemetry.outputs.sinks import capacity_line

    found = {"status": "found", "statement": "capacity users=3: the highest load meeting every SLO (passed twice)",
             "goodput_rps": 3.5, "output_per_s": 480.0, "output_per_s_per_gpu": 240.0,
             "usd_per_million_output_tokens": 3.4722}
    assert capacity_line(found) == ("capacity: capacity users=3: the highest load meeting every SLO (passed twice) — "
                                    "at it: goodput 3.50 req/s, output 480 tok/s, 240 tok/s per GPU, "
                                    "$3.47 per million output tokens")
    none = {"status": "none", "statement": "no load in --search-users 1:4 meets the SLOs", "goodput_rps": None,
            "output_per_s": None, "output_per_s_per_gpu": None, "usd_per_million_output_tokens": None}
    assert capacity_line(none) == "capacity: no load in --search-users 1:4 meets the SLOs"
