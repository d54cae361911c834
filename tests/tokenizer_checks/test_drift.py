"""drift on the real DeepSeek tokenizers: V2 -> V3 is a BPE change, V3 -> V4 changes only special tokens."""

from __future__ import annotations

from tests.tokenizer_checks.helpers import run_json


def test_v2_to_v3_drift_found(capsys):
    code, d = run_json(capsys, "drift", "--old", "deepseek-v2", "--new", "deepseek-v3")
    assert code == 0
    assert d["texts"] >= 250
    assert d["identical"] / d["texts"] < 0.5  # most texts differ
    assert d["mean_drift"] > 0.1 and d["max_drift"] <= 1.0
    assert d["texts_with_boundary_diffs"] > d["texts"] / 2
    assert d["token_ratio"] < 1.0  # V3 packs Chinese tighter
    assert d["examples"] and d["examples"][0]["drift"] == d["max_drift"]
    span = d["examples"][0]["spans"][0]
    assert span["text"] and span["a"] != span["b"]
    changed = {c["token"]: (c["old_id"], c["new_id"]) for c in d["special_tokens"]["changed"]}
    assert changed["<｜end▁of▁sentence｜>"] == (100001, 1)


def test_v3_to_v4_no_plain_text_drift_but_special_token_changes(capsys):
    code, d = run_json(capsys, "drift", "--old", "deepseek-v3", "--new", "deepseek-v4", "--max-plain-mean-drift", "0")
    assert code == 0, d["checks"]
    assert d["plain"]["texts"] == d["plain"]["identical"] >= 250
    assert d["plain"]["mean_drift"] == 0.0 and d["plain"]["boundary_diffs"] == 0
    added = {a["token"] for a in d["special_tokens"]["added"]}
    assert {"<think>", "</think>"} <= added and len(added) > 100
    assert d["special_tokens"]["removed"] == []
    # the one corpus line that mentions <think> splits differently because V4 made it a special token
    assert d["special_token_texts"] and d["identical"] == d["texts"] - len(d["special_token_texts"])


def test_drift_threshold_exit_codes(capsys, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("订单#123已完成\nAI模型v2.0发布\n", encoding="utf-8")
    code, d = run_json(capsys, "drift", "--old", "deepseek-v2", "--new", "deepseek-v3", "--corpus", str(corpus),
                       "--max-mean-drift", "0.01")
    assert code == 1 and d["passed"] is False and d["checks"][0]["crossed"]
    code, d = run_json(capsys, "drift", "--old", "deepseek-v3", "--new", "deepseek-v4", "--corpus", str(corpus),
                       "--max-mean-drift", "0.01", "--min-identical", "1")
    assert code == 0 and d["identical"] == 2 and all(not c["crossed"] for c in d["checks"])
