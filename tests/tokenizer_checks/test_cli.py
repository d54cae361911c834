"""The CLI as a user runs it: --help, exit codes 0/1/2, one-line errors without tracebacks, --json."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import PY, ROOT
from tests.tokenizer_checks.helpers import run_json
from tokenizer_checks.commands import COMMANDS


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "tokenizer_checks", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_help_lists_every_command():
    res = cli("--help")
    assert res.returncode == 0
    for name in ("drift", "consistency", "padding", "fallback", "difflog", "diff", "fingerprint"):
        assert name in res.stdout and name in COMMANDS
    sub = cli("drift", "--help")
    assert sub.returncode == 0 and "--max-mean-drift" in sub.stdout and "Jaccard" in sub.stdout


@pytest.mark.slow
def test_exit_codes_0_1_2():
    ok = cli("fingerprint", "--model-id", "m", "--input", '"Hello"', "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["fingerprint"] == "m:c25bf945aaff8fe1"
    crossed = cli("drift", "--old", "deepseek-v2", "--new", "deepseek-v3", "--max-mean-drift", "0.05")
    assert crossed.returncode == 1 and "CHECK FAILED: mean_drift" in crossed.stdout


@pytest.mark.parametrize(
    "argv, needle",
    [
        (("drift", "--old", "deepseek-v9", "--new", "deepseek-v3"), "unknown tokenizer 'deepseek-v9'"),
        (("drift", "--old", "deepseek-v2", "--new", "deepseek-v3", "--corpus", "/nonexistent"), "no such file"),
        (("drift", "--old", "deepseek-v2"), "the following arguments are required: --new"),
        (("drift", "--old", "a", "--new", "b", "--max-mean-drift", "2"), "between 0 and 1"),
        (("fingerprint", "--model-id", "m", "--input", "{bad"), "--input is not JSON"),
        (("fingerprint", "--model-id", "m", "--input", '"x"', "--table", "0-50=a"), "51-99 are not covered"),
        (("consistency", "--tokenizers", "deepseek-v3"), "need at least 2 distinct tokenizers"),
        (("padding", "--tokenizer", "deepseek-v3", "--batch", "x", "--max-length", "0"), "positive integer"),
        (("diff", "/nonexistent.jsonl"), "no such log"),
        (("nosuch",), "invalid choice"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_exit_2(argv, needle):
    res = cli(*argv)
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and needle in res.stderr


def test_bad_files_in_process(capsys, tmp_path):
    from tokenizer_checks.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"nope": 1}\n', encoding="utf-8")
    assert main(["consistency", "--tokenizers", "deepseek-v3,qwen2.5", "--cases", str(bad)]) == 2
    assert 'bad.jsonl:2: expected an object with a string "text"' in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not a tokenizer", encoding="utf-8")
    assert main(["drift", "--old", str(broken), "--new", "deepseek-v3"]) == 2
    assert "cannot load tokenizer" in capsys.readouterr().err
    log = tmp_path / "log.jsonl"
    log.write_text('{"ts": 1, "tokenizer": "a", "input_id": "x", "tokens": ["a"]}\n', encoding="utf-8")
    assert main(["diff", str(log)]) == 2
    assert "record lacks offsets" in capsys.readouterr().err


def test_json_is_one_object_per_command(capsys, tmp_path):
    msgs = '[{"role":"user","content":"hi"}]'
    code, d = run_json(capsys, "fingerprint", "--model-id", "deepseek-v4", "--input", msgs)
    assert code == 0 and {"fingerprint", "bucket", "version", "headers"} <= set(d)
