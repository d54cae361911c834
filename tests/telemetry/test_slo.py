"""SLO options, presets, evaluation on merged sketches, CHECK FAILED lines and the exit code set at the end."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from telemetry.measure.sketch import LogSketch
from telemetry.slo import EXIT_CODE, NO_PRESET, SloSet, failure_lines, verdict_line
from tests.telemetry.helpers import fire, local_env, options
from tests.telemetry.synthetic import make_result


def test_interactive_preset_its_old_name_and_explicit_override():
    s = SloSet.from_options(options(slo_preset="interactive"))
    assert s.thresholds == {"ttft_p99_ms": 800.0, "itl_p95_ms": 120.0, "decode_span_p99_ms": 2500.0,
                            "ttfa_p99_ms": 800.0}
    assert s.when_reasoning == {"ttfa_p99_ms"}  # the TTFT threshold bounds TTFA when the model reasons
    old = SloSet.from_options(options(slo_preset="seed"))  # the preset's old name: the same objectives
    assert (old.thresholds, old.when_reasoning) == (s.thresholds, s.when_reasoning)
    s = SloSet.from_options(options(slo_preset="interactive", slo_ttft_p99_ms=300.0, slo_error_rate=0.01))
    assert s.thresholds["ttft_p99_ms"] == 300.0 and s.thresholds["error_rate"] == 0.01
    assert not SloSet.from_options(options())
    web_form = SloSet.from_options(options(slo_ttft_p99_ms="650", slo_itl_p95_ms=""))  # strings from the web UI
    assert web_form.thresholds == {"ttft_p99_ms": 650.0}
    with pytest.raises(ValueError, match=r"unknown SLO names \['nonsense'\]"):
        SloSet({"nonsense": 1.0})


def test_no_preset_is_the_default_and_a_choice():
    from locust.argument_parser import get_parser

    import locustfile  # noqa: F401  (registers the project's options)

    parsed = get_parser().parse_args(["-f", "locustfile.py"])
    assert parsed.slo_preset == NO_PRESET and not SloSet.from_options(parsed)
    action = next(a for a in get_parser()._actions if a.dest == "slo_preset")
    assert action.choices[0] == NO_PRESET and "seed" in action.choices  # the web UI's select starts at "none"
    assert SloSet.from_options(options(slo_preset=NO_PRESET, slo_itl_p95_ms=90.0)).thresholds == {"itl_p95_ms": 90.0}


def test_verdict_line_names_every_check_and_the_verdict():
    checks = [{"name": "ttft_p99_ms", "threshold": 800.0, "value": 412.3, "passed": True},
              {"name": "error_rate", "threshold": 0.01, "value": None, "passed": False}]
    assert verdict_line({"checks": checks, "passed": False}) == (
        "SLO FAILED: ttft_p99_ms 412.3 <= 800: ok, error_rate - <= 0.01: no")
    assert verdict_line({"checks": checks[:1], "passed": True}).startswith("SLO passed: ttft_p99_ms 412.3")
    assert verdict_line({"checks": [], "passed": True}) is None


def test_evaluate_reads_quantiles_and_error_rate():
    ttft, itl, span = LogSketch(), LogSketch(), LogSketch()
    ttft.add_many(np.linspace(0.1, 1.0, 1000))  # p99 ~ 991 ms
    itl.add_many(np.full(100, 0.05))
    span.add_many(np.full(10, 2.0))
    sk = {"ttft": ttft, "itl": itl, "decode_span": span}
    checks = SloSet({"ttft_p99_ms": 800, "itl_p95_ms": 120, "decode_span_p99_ms": 2500, "error_rate": 0.01}).evaluate(
        sk, 0.02
    )
    by = {c["name"]: c for c in checks}
    assert not by["ttft_p99_ms"]["passed"] and by["ttft_p99_ms"]["value"] == pytest.approx(991, rel=0.01)
    assert by["itl_p95_ms"]["passed"] and by["itl_p95_ms"]["value"] == pytest.approx(50, rel=0.01)
    assert by["decode_span_p99_ms"]["passed"]
    assert not by["error_rate"]["passed"] and by["error_rate"]["value"] == 0.02
    lines = failure_lines(checks)
    assert len(lines) == 2
    assert lines[0].startswith("CHECK FAILED: ttft_p99_ms 99") and lines[0].endswith("> 800 (threshold 800)")
    assert lines[1] == "CHECK FAILED: error_rate 0.02 > 0.01 (threshold 0.01)"


def test_no_data_fails_the_check():
    checks = SloSet({"ttft_p99_ms": 800}).evaluate({"ttft": LogSketch()}, 0.0)
    assert checks[0]["passed"] is False and failure_lines(checks) == [
        "CHECK FAILED: ttft_p99_ms has no data (threshold 800)"
    ]


def _run(threshold_ms: float, caplog) -> tuple[object, dict]:
    env, hub, role = local_env(slo_ttft_p99_ms=threshold_ms)
    role.on_test_start()
    for i in range(100):
        fire(env, make_result(ttft=0.1 + 0.001 * i))  # p99 ~ 199 ms
    with caplog.at_level(logging.ERROR):
        role.on_quitting()
    role.close()
    return env, hub.final_summary


def test_gate_sets_exit_code_3_when_crossed(caplog, capsys):
    env, summary = _run(150.0, caplog)
    assert env.process_exit_code == EXIT_CODE
    assert summary["slo"]["passed"] is False
    assert [r.getMessage() for r in caplog.records if "CHECK FAILED" in r.getMessage()] == [
        f"CHECK FAILED: ttft_p99_ms {summary['ttft_ms']['p99']:.4g} > 150 (threshold 150)"
    ]
    assert "SLO FAILED" in capsys.readouterr().out


def test_gate_leaves_exit_code_alone_when_met(caplog):
    env, summary = _run(400.0, caplog)
    assert env.process_exit_code is None  # Locust then exits 0
    assert summary["slo"]["passed"] is True and summary["slo"]["checks"][0]["value"] < 400
    assert not [r for r in caplog.records if "CHECK FAILED" in r.getMessage()]


def test_each_objective_is_named_after_the_metric_it_reads_and_the_old_option_still_parses():
    from locust.argument_parser import LocustArgumentParser

    from telemetry.metrics import BY_KEY
    from telemetry.options import add_arguments
    from telemetry.slo import SLO_DEFS

    for name, d in SLO_DEFS.items():
        assert d.metric is None or (d.metric in BY_KEY and name.startswith(f"{d.metric}_p"))
    parser = LocustArgumentParser()  # a bare one: Locust's own may already hold the project's options
    add_arguments(parser)
    new = parser.parse_args(["--slo-decode-span-p99-ms", "2000"])
    old = parser.parse_args(["--slo-drift-p99-ms", "2000"])
    assert new.slo_decode_span_p99_ms == old.slo_decode_span_p99_ms == 2000.0
    assert SloSet.from_options(old).thresholds == {"decode_span_p99_ms": 2000.0}
