"""padding on real tokenizers: the doubled end token and its fix, cross-checked with transformers 5."""

from __future__ import annotations

import transformers

from tests.tokenizer_checks.helpers import run_json
from tokenizer_checks.commands.padding import Setup, build
from tokenizer_checks.texts import load_texts, shipped
from workload.tokenizers import BOS, EOS, load_tokenizer

LLAMA_BATCH = str(shipped("padding_batch_llama3.jsonl"))
DEEPSEEK_BATCH = str(shipped("padding_batch_deepseek.jsonl"))


def test_doubled_eot_inflation_and_fix_r1_distill_llama(capsys):
    code, d = run_json(capsys, "padding", "--tokenizer", "r1-distill-llama", "--max-length", "2048",
                       "--batch", LLAMA_BATCH, "--add-eos-token")
    assert code == 0
    b, a = d["before"], d["after"]
    assert d["end_token"] == "<|eot_id|>" and d["add_bos_token"] is True
    n, ended = b["sequences"], d["texts_ending_with_end_token"]
    assert n == 48 and ended == 32
    # before: every text gets <|eot_id|>, also the 32 that already end with it; after: only the 16 others
    assert (b["end_added"], b["duplicate_end"]) == (48, 32)
    assert (a["end_added"], a["duplicate_end"]) == (16, 0)
    assert b["bos_added"] == a["bos_added"] == 48  # BOS counted explicitly (transformers 4 and 5 differ)
    assert b["tokens"] - a["tokens"] == 32 == d["inflation"]["tokens"]
    assert b["tokens"] == b["content_tokens"] + 48 + 48
    assert b["slots"] >= a["slots"] and b["waste_rate"] > a["waste_rate"]
    assert any("already end with an end token" in r for r in d["risks"])


def test_deepseek_eos_with_right_padding_is_flagged(capsys):
    code, d = run_json(capsys, "padding", "--tokenizer", "deepseek-v3", "--batch", DEEPSEEK_BATCH,
                       "--add-eos-token", "--padding-side", "right", "--max-duplicate-end", "0")
    assert code == 1  # 32 duplicates > 0
    assert d["end_token"] == "<｜end▁of▁sentence｜>" == d["pad_token"]
    assert d["before"]["duplicate_end"] == 32 and d["after"]["duplicate_end"] == 0
    assert any("padding_side='right'" in r for r in d["risks"])
    code, d = run_json(capsys, "padding", "--tokenizer", "deepseek-v3", "--batch", DEEPSEEK_BATCH,
                       "--add-eos-token", "--padding-side", "left")
    assert code == 0 and not any("padding_side='right'" in r for r in d["risks"])


def test_config_defaults_add_no_end_token(capsys):
    # DeepSeek V3's tokenizer_config has add_eos_token false: nothing appended, nothing doubled
    code, d = run_json(capsys, "padding", "--tokenizer", "deepseek-v3", "--batch", DEEPSEEK_BATCH)
    assert code == 0 and d["add_eos_token"] is False
    assert d["before"] == d["after"] and d["before"]["end_added"] == 0


def test_padding_to_max_length_and_truncation(capsys):
    code, d = run_json(capsys, "padding", "--tokenizer", "deepseek-v3", "--batch", DEEPSEEK_BATCH,
                       "--add-eos-token", "--max-length", "64", "--pad-to", "max_length", "--batch-size", "5")
    b = d["before"]
    assert b["slots"] == 64 * 48 and b["truncated"] > 0
    assert b["tokens"] + b["pad_tokens"] == b["slots"]
    code, d = run_json(capsys, "padding", "--tokenizer", "deepseek-v3", "--batch", DEEPSEEK_BATCH,
                       "--max-padding-rate", "0.01")
    assert code == 1 and d["checks"][0]["name"] == "before.padding_rate"


def test_before_matches_transformers5_add_eos_token():
    """Our 'before' sequences are what transformers 5 builds with add_bos_token/add_eos_token on."""
    tok = load_tokenizer("deepseek-v3")
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=EOS,
                                              add_bos_token=True, add_eos_token=True)
    texts = [t.text for t in load_texts(DEEPSEEK_BATCH)][:12]
    vocab = tok.get_vocab()
    setup = Setup(vocab[BOS], vocab[EOS], frozenset({vocab[EOS]}), 4096, 8, "longest")
    content = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    ours, _ = build(content, setup, fix=False)
    assert ours == hf(texts)["input_ids"]
    fixed, _ = build(content, setup, fix=True)
    assert sum(len(x) for x in ours) - sum(len(x) for x in fixed) == sum(t.endswith(EOS) for t in texts) > 0
