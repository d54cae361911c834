"""difflog / diff round trip on real tokenizers."""

from __future__ import annotations

import json

from tests.tokenizer_checks.helpers import run_json
from tokenizer_checks.texts import shipped

CASES = str(shipped("multilingual_cases.jsonl"))


def test_round_trip_one_log(capsys, tmp_path):
    log = tmp_path / "tok.jsonl"
    code, d = run_json(capsys, "difflog", "--tokenizers", "deepseek-v2,deepseek-v3", "--inputs", CASES,
                       "--out", str(log))
    assert code == 0 and d["records"] == 2 * d["inputs"]
    recs = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    first = recs[0]
    assert {"ts", "tokenizer", "input_id", "tokens", "offsets"} <= set(first)
    assert isinstance(first["ts"], int) and first["ts"] > 1_600_000_000_000  # epoch milliseconds
    assert len(first["tokens"]) == len(first["offsets"])
    code, d = run_json(capsys, "diff", str(log))
    assert code == 0 and (d["a"], d["b"]) == ("deepseek-v2", "deepseek-v3")
    assert d["compared"] == len(recs) // 2 and d["unmatched"] == {"deepseek-v2": [], "deepseek-v3": []}
    rows = {r["input_id"]: r for r in d["results"]}
    assert rows["seed-3"]["spans"] == [{"start": 3, "end": 6, "text": "123", "a": ["1", "2", "3"], "b": ["123"]}]
    assert rows["seed-1"]["same_boundaries"]  # AI模型v2.0发布 splits the same in V2 and V3
    assert 0 < d["with_boundary_diffs"] < d["compared"]


def test_two_logs_without_text_and_unmatched_inputs(capsys, tmp_path):
    inputs = tmp_path / "in.txt"
    inputs.write_text("订单#123已完成\nこんにちはWorld\n", encoding="utf-8")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    run_json(capsys, "difflog", "--tokenizers", "deepseek-v2", "--inputs", str(inputs), "--out", str(a), "--no-text")
    run_json(capsys, "difflog", "--tokenizers", "deepseek-v3", "--inputs", str(inputs), "--out", str(b), "--no-text")
    # drop one input from b: it is reported as unmatched
    b.write_text(b.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    code, d = run_json(capsys, "diff", str(a), str(b), "--max-diff-share", "0.5")
    assert d["compared"] == 1 and d["unmatched"]["deepseek-v2"] == ["L2"]
    assert d["results"][0]["spans"][0]["a"] == ["3:4", "4:5", "5:6"]  # offsets only, no text in the log
    assert code == 1  # 1 of 1 inputs differ > 0.5


def test_identical_tokenizers_have_no_diffs(capsys, tmp_path):
    log = tmp_path / "tok.jsonl"
    run_json(capsys, "difflog", "--tokenizers", "deepseek-v3,deepseek-v4", "--inputs", CASES, "--out", str(log))
    code, d = run_json(capsys, "diff", str(log), "--max-diff-share", "0")
    assert code == 0 and d["with_boundary_diffs"] == 0 and d["same_boundaries"] == d["compared"]
