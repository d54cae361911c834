"""Jaccard drift and offset-based boundary differences, on hand-made offsets and on real tokenizers."""

from __future__ import annotations

from tokenizer_checks.segments import Span, boundary_diffs, jaccard_drift, special_token_diff
from workload.tokenizers import load_tokenizer


def test_jaccard_drift_matches_the_seed_formula():
    assert jaccard_drift(["un", "happy"], ["unh", "appy"]) == 1.0
    assert jaccard_drift(["a", "b"], ["a", "b"]) == 0.0
    assert jaccard_drift(["a", "b"], ["a", "c"]) == 1 - 1 / 3
    assert jaccard_drift(["a", "a", "b"], ["b", "a"]) == 0.0  # set-based
    assert jaccard_drift([], []) == 0.0


def test_boundary_diffs_finds_the_smallest_differing_span():
    assert boundary_diffs("unhappy", [(0, 2), (2, 7)], [(0, 3), (3, 7)]) == [
        Span(0, 7, "unhappy", ["un", "happy"], ["unh", "appy"])
    ]
    text = "a unhappy b"
    spans = boundary_diffs(text, [(0, 1), (1, 4), (4, 9), (9, 11)], [(0, 1), (1, 5), (5, 9), (9, 11)])
    assert [(s.start, s.end, s.text) for s in spans] == [(1, 9, " unhappy")]
    assert boundary_diffs(text, [(0, 1), (1, 11)], [(0, 1), (1, 11)]) == []


def test_byte_split_inside_one_character_counts_as_a_difference():
    # byte-level BPE: two tokens share the offsets of one 3-byte character
    spans = boundary_diffs("x界", [(0, 1), (1, 2), (1, 2)], [(0, 1), (1, 2)])
    assert spans == [Span(1, 2, "界", ["界", "界"], ["界"])]


def test_boundary_diffs_without_text_uses_offsets():
    spans = boundary_diffs(None, [[0, 2], [2, 5]], [[0, 5]])
    assert spans == [Span(0, 5, "", ["0:2", "2:5"], ["0:5"])]


def test_real_v2_v3_split_differs_where_expected():
    text = "繁體中文"
    v2 = load_tokenizer("deepseek-v2").encode(text, add_special_tokens=False)
    v3 = load_tokenizer("deepseek-v3").encode(text, add_special_tokens=False)
    spans = boundary_diffs(text, v2.offsets, v3.offsets)
    # V2 splits 繁 and the bytes of 體 (two tokens share 體's offsets), V3 has one token for 繁體; 中文 is one
    # token in both, so it is no difference
    assert spans == [Span(0, 2, "繁體", ["繁", "體", "體"], ["繁體"])], (v2.tokens, v3.tokens)


def test_special_token_diff_v3_v4_real():
    diff = special_token_diff(load_tokenizer("deepseek-v3"), load_tokenizer("deepseek-v4"))
    added = {d["token"] for d in diff["added"]}
    assert "<think>" in added and "</think>" in added
    assert diff["removed"] == []
    assert {c["token"] for c in diff["changed"]} == {"<|EOT|>"}
    diff2 = special_token_diff(load_tokenizer("deepseek-v2"), load_tokenizer("deepseek-v3"))
    changed = {c["token"]: (c["old_id"], c["new_id"]) for c in diff2["changed"]}
    assert changed["<｜begin▁of▁sentence｜>"] == (100000, 0)
    assert changed["<｜end▁of▁sentence｜>"] == (100001, 1)
