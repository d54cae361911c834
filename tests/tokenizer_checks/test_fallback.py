"""fallback on real tokenizers: V3 rolled back to V2 over the shipped long inputs, window 4096."""

from __future__ import annotations

from tests.tokenizer_checks.helpers import run_json
from workload.tokenizers import load_tokenizer

BASE = ("fallback", "--primary", "deepseek-v3", "--fallback", "deepseek-v2", "--max-tokens", "4096")


def test_seed_logic_misses_inputs_that_only_the_fallback_sees_as_too_long(capsys):
    code, d = run_json(capsys, *BASE)  # strategy chars (text[:2048]), trigger primary: the classic function
    assert code == 1 and d["all_inside"] is False and d["verdict"].startswith("FAIL")
    rows = {r["id"]: r for r in d["results"]}
    # V2 needs more tokens than V3 on this corpus, so some inputs fit V3 and overflow V2
    assert d["fits_primary_overflows_fallback"] and set(d["outside"]) == set(d["fits_primary_overflows_fallback"])
    for rid in d["outside"]:
        r = rows[rid]
        assert r["primary_tokens"] <= 4096 < r["fallback_tokens"] and not r["truncated"]
    # the char cut keeps 2048 chars and leaves most of the window unused
    cut = [r for r in d["results"] if r["truncated"]]
    assert cut and all(r["kept_chars"] == 2048 and r["final_fallback_tokens"] < 4096 for r in cut)
    assert d["truncated_window_used_mean"] < 0.5


def test_token_cut_on_either_overflow_passes_and_fills_the_window(capsys):
    code, d = run_json(capsys, *BASE, "--strategy", "tokens", "--trigger", "either")
    assert code == 0 and d["all_inside"] and d["verdict"].startswith("PASS")
    v2 = load_tokenizer("deepseek-v2")
    for r in d["results"]:
        assert r["final_fallback_tokens"] <= 4096
        if r["truncated"]:
            assert r["final_fallback_tokens"] >= 4090  # fills the window (BPE edge may cost a token or two)
    assert d["truncated"] == d["overflow_fallback"]
    # the reported count is the real V2 count of the kept prefix
    from tokenizer_checks.texts import load_texts, shipped

    text = {t.id: t.text for t in load_texts(shipped("long_inputs.jsonl"))}
    r = next(r for r in d["results"] if r["truncated"])
    kept = text[r["id"]][: r["kept_chars"]]
    assert len(v2.encode(kept, add_special_tokens=False).ids) == r["final_fallback_tokens"]


def test_reserve_and_no_cut(capsys):
    code, d = run_json(capsys, *BASE, "--strategy", "none", "--trigger", "either", "--reserve", "96")
    assert code == 1 and d["window"] == 4000 and d["truncated"] == d["overflow_fallback"]
    assert len(d["outside"]) == d["overflow_fallback"]
