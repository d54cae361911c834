"""``python -m telemetry.compare``: a run against itself exits 0; against the same load on a simulator made slower
(``--time-scale``) ``--fail-on ttft_p99=+10%`` exits 3 naming the figure and the stage; bounds in both directions,
Markdown, directories, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from telemetry.compare import EXIT_BREACH, EXIT_USAGE, fmt_value, main, parse_fail_on
from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http


def _summary(ttft_p99: float, tok_s: float, failed: int = 0) -> dict:
    q = {"count": 10, "mean": ttft_p99 / 2, "p50": ttft_p99 / 2, "p90": ttft_p99, "p95": ttft_p99, "p99": ttft_p99,
         "max": ttft_p99}
    stage = {"name": "u4", "warmup": False, "ttft_ms": q, "output_per_s": tok_s, "server_kv_usage_mean": 0.5,
             "preemptions": 0}
    return {"schema": 2, "requests": {"total": 10, "failed": failed}, "tokens": {"output_per_s": tok_s},
            "ttft_ms": q, "goodput_rps": 1.0, "server": {"kv_cache_usage": {"mean": 0.5}, "preemptions": 0},
            "stages": [{**stage, "name": "u4-warmup", "warmup": True}, stage], "versions": {}}


def _write(tmp_path, name: str, s: dict):
    p = tmp_path / name
    p.write_text(json.dumps(s))
    return str(p)


def test_bounds_fail_only_past_their_limit_in_their_direction(tmp_path, capsys):
    base = _write(tmp_path, "base.json", _summary(100.0, 1000.0))
    assert main([base, _write(tmp_path, "a.json", _summary(109.0, 960.0)),
                 "--fail-on", "ttft_p99=+10%,output_tok_s=-5%"]) == 0
    assert main([base, _write(tmp_path, "b.json", _summary(111.0, 1000.0)), "--fail-on", "ttft_p99=+10%"]) == 3
    out = capsys.readouterr().out
    assert "FAIL ttft_p99 in run: 100.0 -> 111.0 (+11.0%), bound ttft_p99=+10%" in out
    assert "FAIL ttft_p99 in stage u4:" in out and "u4-warmup" not in out
    # a faster run never fails a "+" bound; a throughput drop fails a "-" one
    assert main([base, _write(tmp_path, "c.json", _summary(50.0, 940.0)), "--fail-on", "ttft_p99=+10%"]) == 0
    assert main([base, _write(tmp_path, "d.json", _summary(50.0, 940.0)), "--fail-on", "output_tok_s=-5%"]) == 3
    assert main([base, _write(tmp_path, "e.json", _summary(100.0, 1000.0, failed=3)), "--fail-on", "failed=+2"]) == 3


def test_capacity_delta_and_its_bound(tmp_path, capsys):
    def search(users, status="found"):
        return {**_summary(100.0, 1000.0), "capacity": {"axis": "users", "status": status, "rate": None,
                                                         "users": users if status != "none" else None}}

    base = _write(tmp_path, "base.json", search(10))
    assert main([base, _write(tmp_path, "a.json", search(9)), "--fail-on", "capacity=-10%"]) == 0
    out = capsys.readouterr().out  # the delta is printed: base, new, delta, delta %
    assert re.search(r"^run\s+capacity\s+10\s+9\s+-1\s+-10\.0%$", out, re.M), out
    assert main([base, _write(tmp_path, "b.json", search(8)), "--fail-on", "capacity=-10%"]) == 3
    assert "FAIL capacity in run: 10 -> 8 (-20.0%)" in capsys.readouterr().out
    assert main([base, _write(tmp_path, "c.json", search(None, "none")), "--fail-on", "capacity=-10%"]) == 3
    plain = _write(tmp_path, "plain.json", _summary(100.0, 1000.0))
    assert main([plain, plain, "--fail-on", "capacity=-10%"]) == 3  # not a search: a bound on nothing fails
    assert "FAIL capacity: in neither run" in capsys.readouterr().out


def test_markdown_and_directories(tmp_path, capsys):
    (tmp_path / "b").mkdir()
    (tmp_path / "n").mkdir()
    _write(tmp_path / "b", "x.json", _summary(100.0, 1000.0))
    _write(tmp_path / "n", "x.json", _summary(120.0, 1000.0))
    _write(tmp_path / "b", "only-base.json", _summary(100.0, 1000.0))
    assert main([str(tmp_path / "b"), str(tmp_path / "n"), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "### x.json" in out and "only-base" not in out
    assert "| run | ttft_p99 | 100.0 | 120.0 | 20.0 | +20.0% |" in out


@pytest.mark.parametrize("argv, message", [
    (["--fail-on", "ttft=+10%"], "unknown figure 'ttft'"),
    (["--fail-on", "ttft_p99>10"], "bad bound 'ttft_p99>10'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    base = _write(tmp_path, "base.json", _summary(100.0, 1000.0))
    assert main([base, base, *argv]) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert main([base, str(tmp_path / "missing.json")]) == EXIT_USAGE
    (tmp_path / "junk.json").write_text("{}")
    assert main([base, str(tmp_path / "junk.json")]) == EXIT_USAGE
    assert "not a deepseek-locust summary" in capsys.readouterr().err


def test_parse_fail_on():
    (a, b) = parse_fail_on("ttft_p99=+10%, output_tok_s=-5%")
    assert (a.sign, a.limit, a.percent, b.sign, b.limit) == (1, 10.0, True, -1, 5.0)
    assert not a.breached(100.0, 110.0) and a.breached(100.0, 110.5) and not a.breached(None, 500.0)


def _run(tmp_path, name: str, time_scale: str, *extra: str) -> str:
    port = free_port()
    summary = tmp_path / f"{name}.json"
    with Proc([PY, "-m", "server.sim", "--port", str(port), "--profile", "cpu-tiny", "--time-scale", time_scale],
              name="sim") as sim:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        run = Proc([LOCUST, "-f", "locustfile.py", "--headless", "-u", "4", "-r", "4", "-t", "60s", "--host",
                    f"http://127.0.0.1:{port}", "--num-requests", "60", "--input-len", "fixed:256",
                    "--output-len", "fixed:8", "--only-summary", "--prometheus-port", "0",
                    "--llm-summary-json", str(summary), *extra, "StreamingChatUser"], name=name)
        assert run.wait(90) == 0, run.output()[-2000:]
    return str(summary)


@pytest.mark.slow
def test_a_run_against_itself_passes_and_against_a_slower_server_fails(tmp_path):
    fast = _run(tmp_path, "fast", "1")
    report = tmp_path / "slow.html"
    slow = _run(tmp_path, "slow", "0.1", "--llm-baseline", fast, "--llm-report", str(report))  # 10x slower steps
    # TTFT p99 of 60 requests is nearly their max: one stall of a busy client moves it (at 4x slower steps a
    # loaded box once read the fast run's p99 above the slow run's), so the slow server is 10x slower: its
    # TTFT p50 alone is above any such stall. E2E p50, a median, is gated too
    same = subprocess.run([PY, "-m", "telemetry.compare", fast, fast, "--fail-on", "ttft_p99=+10%,e2e_p50=+10%"],
                          capture_output=True, text=True, cwd=ROOT)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "all 2 bound(s) held" in same.stdout
    worse = subprocess.run([PY, "-m", "telemetry.compare", fast, slow, "--fail-on", "ttft_p99=+10%,e2e_p50=+10%"],
                           capture_output=True, text=True, cwd=ROOT)
    assert worse.returncode == EXIT_BREACH, worse.stdout + worse.stderr
    for figure in ("ttft_p99", "e2e_p50"):
        assert f"FAIL {figure} in run:" in worse.stdout and f"FAIL {figure} in stage main:" in worse.stdout
    base, new = (json.loads(open(p).read()) for p in (fast, slow))
    assert base["requests"]["total"] == new["requests"]["total"] == 60
    assert new["ttft_ms"]["p99"] > 1.1 * base["ttft_ms"]["p99"] and new["e2e_ms"]["p50"] > 1.1 * base["e2e_ms"]["p50"]
    # the slower run's report draws the baseline on the same axes and carries the same compare rows
    html = report.read_text()
    assert 'id="baseline"' in html and "this run p99" in html and "baseline p99" in html
    b99, n99 = fmt_value(base["ttft_ms"]["p99"]), fmt_value(new["ttft_ms"]["p99"])
    row = f"<td>run</td><td>ttft_p99</td><td>{b99}</td><td>{n99}</td>"
    assert row in html


@pytest.mark.slow
def test_a_bad_baseline_stops_locust_at_start(tmp_path):
    (tmp_path / "junk.json").write_text("[1, 2]")
    cases = ((tmp_path / "missing.json", "No such file"), (tmp_path / "junk.json", "not a deepseek-locust"))
    for bad, message in cases:
        run = subprocess.run([LOCUST, "-f", "locustfile.py", "--headless", "-t", "1s", "--llm-baseline", str(bad)],
                             capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert run.returncode == 2 and message in run.stderr, run.stderr[-1000:]
        assert "Traceback" not in run.stderr


def test_a_gated_figure_missing_from_either_run_fails_the_gate_naming_it(tmp_path, capsys):
    base = _write(tmp_path, "base.json", _summary(100.0, 1000.0))
    gone = _summary(100.0, 1000.0)
    del gone["stages"][1]["ttft_ms"]  # the stage ran but measured no TTFT
    assert main([base, _write(tmp_path, "gone.json", gone), "--fail-on", "ttft_p99=+10%"]) == EXIT_BREACH
    out = capsys.readouterr().out
    assert "FAIL ttft_p99 in stage u4: missing in the new run" in out and "1 bound(s) crossed" in out
    # a stage of the baseline absent from the new run is missing too; ungated figures never fail
    absent = _summary(100.0, 1000.0)
    absent["stages"] = absent["stages"][:1]
    assert main([base, _write(tmp_path, "absent.json", absent), "--fail-on", "ttft_p99=+10%"]) == EXIT_BREACH
    assert "FAIL ttft_p99 in stage u4: missing in the new run" in capsys.readouterr().out
    assert main([base, _write(tmp_path, "absent2.json", absent), "--fail-on", "output_tok_s=-5%"]) == EXIT_BREACH
    assert main([_write(tmp_path, "gone2.json", gone), base, "--fail-on", "ttft_p99=+10%"]) == EXIT_BREACH
    assert "missing in the baseline" in capsys.readouterr().out
    # a figure neither run has cannot hold
    neither = _summary(100.0, 1000.0)
    neither.pop("goodput_rps")
    p = _write(tmp_path, "neither.json", neither)
    assert main([p, p, "--fail-on", "goodput_rps=-5%"]) == EXIT_BREACH
    assert "FAIL goodput_rps: in neither run" in capsys.readouterr().out
