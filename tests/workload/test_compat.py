"""The measured compat level (workload/routing/compat.py): the rule, real tokenizers, the diff command's use of it."""

from __future__ import annotations

import json

import pytest

from tests.tokenizer_checks.helpers import run_json
from workload.routing.compat import TextPair, compat_level, corpus_texts, measure
from workload.tokenizers import load_tokenizer


def test_rule_is_the_strictest_level_every_text_supports() -> None:
    same = TextPair(True, True, 10, 10)
    split_alike = TextPair(False, True, 10, 10)
    shorter = TextPair(False, False, 10, 8)
    longer = TextPair(False, False, 10, 12)
    assert compat_level([same, same]) == "full"
    assert compat_level([same, split_alike]) == "backward"
    assert compat_level([same, split_alike, shorter]) == "forward"
    assert compat_level([same, shorter, longer]) == "none"
    with pytest.raises(ValueError):
        compat_level([])


def test_real_tokenizers_v2_to_v3_drift_and_v3_to_v4_do_not() -> None:
    v2, v3, v4 = (load_tokenizer(n) for n in ("deepseek-v2", "deepseek-v3", "deepseek-v4"))
    up, down = measure(v2, v3), measure(v3, v2)
    assert up["identical_ids"] < up["texts"] and up["level"] in ("forward", "none")
    assert up["mean_token_ratio"] < 1 < down["mean_token_ratio"]  # V3 needs fewer tokens than V2
    assert up["level"] == down["level"] == "none"  # each direction makes some text of the corpus longer
    assert up["texts"] == len(corpus_texts()) > 200  # the drift corpus tokenizer_checks drift defaults to
    v3_v4 = measure(v3, v4)  # one text has <think>, a special token in V4 only: one token instead of several
    assert v3_v4["identical_ids"] == v3_v4["texts"] - 1 and v3_v4["level"] == "forward"
    assert measure(v2, v2)["level"] == "full"
    assert measure(v2, v3, ["hello"])["texts"] == 1


def test_diff_reports_the_same_rule(tmp_path, capsys) -> None:
    log = tmp_path / "tok.jsonl"
    recs = []
    for tok, toks, offs in (("a", ["ab", "c"], [[0, 2], [2, 3]]), ("b", ["a", "bc"], [[0, 1], [1, 3]])):
        recs.append({"ts": 1, "tokenizer": tok, "input_id": "x", "text": "abc", "tokens": toks, "offsets": offs})
    log.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    _rc, d = run_json(capsys, "diff", str(log))
    assert d["compat_level"] == "forward"  # boundaries differ, b is not longer
    log.write_text("\n".join(json.dumps({**r, "tokens": ["a", "b", "c"], "offsets": [[0, 1], [1, 2], [2, 3]]})
                             if r["tokenizer"] == "b" else json.dumps(r) for r in recs) + "\n")
    _rc, d = run_json(capsys, "diff", str(log))
    assert d["compat_level"] == "none"  # b needs more tokens for "abc"
