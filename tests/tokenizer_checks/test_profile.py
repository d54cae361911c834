"""profile on the real tokenizers: JSON and text reports, the slowdown check's exit codes, bad input, flame graph.

Runs are short (--seconds 0.002, 3 rounds, two small lengths): the figures are noisy, so the tests assert the
report's structure and its arithmetic, not speeds — except an A/A run (one tokenizer under two names) whose
ratio must be near 1.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from tests.support import PY, ROOT
from tests.tokenizer_checks.helpers import run_json
from tokenizer_checks import flamegraph
from tokenizer_checks.cli import main
from tokenizer_checks.commands import COMMANDS
from tokenizer_checks.texts import load_texts, shipped
from workload.tokenizers import tokenizer_json_bytes

QUICK = ("--seconds", "0.002", "--repeats", "3", "--lengths", "64,256")
NOTE = "the Rust tokenizers library's own heap"
LANGUAGES = list(dict.fromkeys(t.meta["category"] for t in load_texts(shipped("multilingual_cases.jsonl"))))


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "tokenizer_checks", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture
def v3_copy(tmp_path):
    """deepseek-v3's tokenizer.json under a path: the same tokenizer under a second name (an A/A comparison)."""
    path = tmp_path / "tokenizer.json"
    path.write_bytes(tokenizer_json_bytes("deepseek-v3"))
    return str(path)


def cells(d: dict) -> list[tuple[str, dict]]:
    return [(f"{e.get('language', e.get('length'))} {mode}", e) for group in ("by_language", "by_length")
            for e in d[group] for mode in ("single", "batch")]


def test_json_per_language_per_length_single_batch_alloc_and_ratio(capsys):
    code, d = run_json(capsys, "profile", "--tokenizers", "deepseek-v2,deepseek-v3", *QUICK, "--max-slowdown", "0.01")
    assert d["command"] == "profile" and d["tokenizers"] == ["deepseek-v2", "deepseek-v3"]
    assert d["baseline"] == "deepseek-v2" and d["lengths"] == [64, 256]
    assert [e["language"] for e in d["by_language"]] == LANGUAGES
    assert [e["length"] for e in d["by_length"]] == [64, 256]
    assert d["settings"]["timers"] == {"wall": "time.perf_counter_ns", "cpu": "time.process_time_ns"}
    assert d["settings"]["repeats"] == 3 and d["settings"]["tokenizers_parallelism"] == "false"
    for e in d["by_language"] + d["by_length"]:
        for mode in ("single", "batch"):
            for name in d["tokenizers"]:
                f = e[mode][name]
                assert f["tokens"] > 0 and f["us_per_call"] > 0 and f["rounds"] == 3 and f["passes"] >= 3
                assert f["us_per_token"] * f["tokens"] == pytest.approx(f["us_per_call"] * f["calls"], rel=1e-2)
                assert f["tokens_per_s"] == pytest.approx(1e6 / f["us_per_token"], rel=1e-2)
                assert f["cpu_us_per_call"] > 0
                assert isinstance(f["alloc_bytes_per_call"], int) and f["alloc_bytes_per_call"] >= 0
                assert f["alloc_peak_bytes"] >= f["alloc_bytes_per_call"] > 0  # an Encoding wrapper at least
            ratio = e["ratio"][mode]["deepseek-v3"]
            wall = e[mode]["deepseek-v3"]["us_per_call"] / e[mode]["deepseek-v2"]["us_per_call"]
            assert ratio == e["wall_ratio"][mode]["deepseek-v3"] == pytest.approx(wall, rel=1e-2)
    # single = one encode per text, batch = one encode_batch of --batch (16) texts
    chinese = next(e for e in d["by_language"] if e["language"] == "chinese")
    assert chinese["single"]["deepseek-v2"]["calls"] == chinese["single"]["deepseek-v2"]["texts"] == 3
    assert chinese["batch"]["deepseek-v2"]["calls"] == 1 and chinese["batch"]["deepseek-v2"]["texts"] == 16
    # synthetic prompts have the exact length under the baseline; the same text under V3 has its own count
    short = d["by_length"][0]
    assert short["single"]["deepseek-v2"]["tokens"] == 64 and short["batch"]["deepseek-v2"]["tokens"] == 64 * 16
    assert short["single"]["deepseek-v3"]["tokens"] >= 60
    # the overall ratio is the median of the 30 cell ratios
    r = d["ratio"]["by_tokenizer"]["deepseek-v3"]
    values = [e["ratio"][name.split()[-1]]["deepseek-v3"] for name, e in cells(d)]
    assert r["cells"] == len(values) == 2 * (len(LANGUAGES) + 2)
    assert r["overall"] == r["overall_wall"] == pytest.approx(statistics.median(values), abs=1e-3)
    assert r["max"] == max(values) and d["ratio"]["clock"] == "wall" and "median" in d["ratio"]["method"]
    assert d["memory"]["tool"] == "tracemalloc" and NOTE in d["memory"]["note"]
    assert "invisible to tracemalloc" in d["memory"]["note"] and d["memory"]["process_max_rss_kib"] > 0
    # the measured ratio is far above 0.01: the check is crossed
    assert code == 1 and d["passed"] is False
    assert d["checks"] == [{"name": "slowdown deepseek-v3/deepseek-v2", "limit": 0.01, "value": r["overall"],
                            "crossed": True}]
    assert d["flamegraph"] is None


def test_text_report(capsys):
    code = main(["profile", "--tokenizers", "deepseek-v2,deepseek-v3", *QUICK])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("profile deepseek-v2, deepseek-v3 (baseline deepseek-v2): encode cost over 13 "
                               "languages") and lines[0].endswith("and 2 synthetic lengths")
    assert lines[2].startswith("  ratio deepseek-v3/deepseek-v2: ") and "median over cells" in lines[2]
    assert "  by language:" in lines and "  by length (tokens):" in lines
    for language in LANGUAGES:
        assert any(ln.split()[:2] == [language, "single"] for ln in lines), language
        assert any(ln.split()[:2] == [language, "batch"] for ln in lines), language
    assert any(ln.split()[:2] == ["256", "batch"] for ln in lines)
    assert "µs/token   tok/s" in out and "allocation seen by tracemalloc" in out
    assert NOTE in out and "invisible to tracemalloc" in out and "CHECK FAILED" not in out


def test_max_slowdown_exit_codes_on_an_a_a_run(capsys, v3_copy):
    args = ("profile", "--tokenizers", f"deepseek-v3,{v3_copy}", *QUICK, "--clock", "cpu")
    code, d = run_json(capsys, *args, "--max-slowdown", "0.5")
    ratio = d["ratio"]["by_tokenizer"][v3_copy]
    assert 0.5 < ratio["overall"] == ratio["overall_cpu"] < 2.0  # the same tokenizer: about 1
    assert code == 1 and d["checks"][0]["crossed"] and d["checks"][0]["limit"] == 0.5
    code, d = run_json(capsys, *args, "--max-slowdown", "100")
    assert code == 0 and d["passed"] and d["checks"][0]["crossed"] is False
    # identical tokenizers produce identical counts
    assert all(e[m]["deepseek-v3"]["tokens"] == e[m][v3_copy]["tokens"]
               for _, e in cells(d) for m in ("single", "batch"))
    code = main([*args, "--max-slowdown", "0.5"])
    assert code == 1 and "CHECK FAILED: slowdown " in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (("--tokenizers", "deepseek-v2,deepseek-v9"), "unknown tokenizer 'deepseek-v9'"),
        (("--tokenizers", "deepseek-v3"), "need at least 2 distinct tokenizers"),
        (("--tokenizers", "deepseek-v3,deepseek-v3"), "need at least 2 distinct tokenizers"),
        (("--tokenizers", "deepseek-v2,deepseek-v3", "--lengths", "64,0"), "comma-separated token counts"),
        (("--tokenizers", "deepseek-v2,deepseek-v3", "--seconds", "0"), "a number of seconds > 0"),
        (("--tokenizers", "deepseek-v2,deepseek-v3", "--max-slowdown", "-1"), "expected a number > 0"),
        (("--tokenizers", "deepseek-v2,deepseek-v3", "--cases", "/nonexistent"), "no such file"),
        (("--max-slowdown", "1.2",), "the following arguments are required: --tokenizers"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_exit_2(argv, needle):
    res = cli("profile", *argv)
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and needle in res.stderr, res.stderr


@pytest.mark.slow
def test_help_names_the_command_and_its_options():
    assert "profile" in COMMANDS
    res = cli("profile", "--help")
    assert res.returncode == 0
    for option in ("--tokenizers", "--lengths", "--seconds", "--repeats", "--max-slowdown", "--flamegraph", "--clock"):
        assert option in res.stdout
    assert "tracemalloc" in res.stdout and "py-spy" in res.stdout


@pytest.mark.slow
def test_flamegraph_written_or_one_clear_line(capsys, tmp_path):
    out = tmp_path / "fg" / "profile.svg"
    code = main(["profile", "--tokenizers", "deepseek-v2,deepseek-v3", *QUICK, "--lengths", "1024",
                 "--flamegraph", str(out), "--json"])
    captured = capsys.readouterr()
    d = json.loads(captured.out)
    fg = d["flamegraph"]
    assert code == 0 and d["by_language"] and d["by_length"]  # the profile is there either way
    assert fg["path"] == str(out) and fg["tool"] == "py-spy"
    # one machine shows one branch: say which ran (the other is covered with a fake py-spy below)
    print(f"\nflame graph branch: {'recorded (ptrace allowed)' if fg['recorded'] else 'ptrace denied, one line'}")
    if fg["recorded"]:  # this machine lets py-spy read the process (root, CAP_SYS_PTRACE)
        assert fg["error"] is None and captured.err == ""
        svg = out.read_text(encoding="utf-8")
        assert svg.startswith("<?xml") and "<svg" in svg and "</svg>" in svg
    else:  # ptrace denied: exactly one line naming py-spy's error, no file
        assert not out.exists() and fg["error"].startswith("py-spy exited with code ")
        assert captured.err == f"tokenizer_checks profile: flame graph NOT recorded ({out}): {fg['error']}\n"


PTRACE_DENIED = """Error: Failed to open process - check if it is running.

Caused by:
    Permission denied (os error 1)
"""


@pytest.mark.slow
def test_flamegraph_not_permitted_says_so_and_keeps_the_exit_code(capsys, tmp_path, monkeypatch):
    fake = tmp_path / "py-spy"  # a py-spy that fails the way it does where ptrace is denied
    fake.write_text(f"#!{sys.executable}\nimport sys\nsys.stderr.write({PTRACE_DENIED!r})\nsys.exit(1)\n")
    fake.chmod(0o755)
    monkeypatch.setattr(flamegraph, "py_spy_path", lambda: str(fake))
    out = tmp_path / "profile.svg"
    code = main(["profile", "--tokenizers", "deepseek-v2,deepseek-v3", *QUICK, "--lengths", "none",
                 "--flamegraph", str(out), "--max-slowdown", "0.01"])
    captured = capsys.readouterr()
    error = "py-spy exited with code 1: Error: Failed to open process - check if it is running. " \
            "(Permission denied (os error 1))"
    assert captured.err == f"tokenizer_checks profile: flame graph NOT recorded ({out}): {error}\n"
    assert code == 1  # the slowdown check decides, not the flame graph
    assert "CHECK FAILED: slowdown deepseek-v3/deepseek-v2" in captured.out and "  by language:" in captured.out
    assert f"  flame graph NOT recorded ({out}): {error}" in captured.out.splitlines()
    assert not out.exists()


def test_first_error_line_of_a_real_py_spy_error():
    real = ("Error: Failed to get process executable name. Check that the process is running.\n\nCaused by:\n"
            "    0: No such file or directory (os error 2)\n    1: No such file or directory (os error 2)\n\n"
            "Stack backtrace:\n   0: <E as anyhow::context::ext::StdError>::ext_context\n")
    assert flamegraph.first_error_line(real) == ("Error: Failed to get process executable name. Check that the "
                                                 "process is running. (No such file or directory (os error 2))")
    assert flamegraph.first_error_line("") == "no message"


def test_flamegraph_without_py_spy(tmp_path, monkeypatch):
    monkeypatch.setattr(flamegraph, "py_spy_path", lambda: None)
    with flamegraph.FlameGraph(tmp_path / "y.svg") as fg:
        pass
    assert fg.recorded is False and fg.error == "py-spy not found (pip install -r requirements.txt)"
    assert fg.line() == f"flame graph NOT recorded ({tmp_path / 'y.svg'}): {fg.error}"
