"""Natural synthetic text (``--synthetic-text natural``): runs of the shipped English, Chinese and code text,
completed with pool words, at exactly the drawn token count (chat template included), as pool words alone are."""

from __future__ import annotations

import re

import numpy as np
import pytest

from workload.prompts import NATURAL_TEXT, SyntheticPrompts
from workload.tokenizers import chat_renderer, load_tokenizer

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("name", ["deepseek-v2", "deepseek-v3", "qwen2.5"])
@pytest.mark.parametrize("chat", [False, True])
def test_natural_prompts_have_exact_counts(name, chat):
    tok = load_tokenizer(name)
    src = SyntheticPrompts(tok, chat, verify_every=0, render=chat_renderer(name) if chat else None, text="natural")
    assert src.natural is not None
    rng = np.random.default_rng(3)
    lengths = [int(n) for n in rng.integers(40, 2500, 25)] + [4097 + 700]  # the last one: cached pieces
    for n in lengths:
        p = src.build(rng, n)  # never re-encoded by the builder (verify_every=0): the construction is exact
        assert p.tokens == n
        assert src.count(p.text) == n, (n, p.text[:200])


def test_natural_text_mixes_languages_and_code_and_words_mode_does_not():
    tok = load_tokenizer("deepseek-v2")
    rng = np.random.default_rng(0)
    natural = [SyntheticPrompts(tok, False, text="natural").build(rng, 600).text for _ in range(30)]
    words = [SyntheticPrompts(tok, False, text="words").build(rng, 600).text for _ in range(5)]
    assert sum(bool(CJK.search(t)) for t in natural) >= 5
    assert sum("def " in t or "SELECT" in t or "fn " in t for t in natural) >= 5
    assert sum(" the " in t for t in natural) >= 20
    assert not any(CJK.search(t) or "\n" in t for t in words)
    assert len(set(natural)) == len(natural)  # random places: no two prompts alike
    assert NATURAL_TEXT.is_file()


def test_an_unknown_synthetic_text_is_refused():
    with pytest.raises(ValueError, match="words, natural"):
        SyntheticPrompts(load_tokenizer("deepseek-v2"), False, text="lorem")


def test_natural_prompts_do_not_share_a_first_prefix_cache_block():
    """A few hundred places to start from would give many prompts the same first block: the random head keeps
    the server's prefix cache from serving synthetic prompts to each other."""
    tok = load_tokenizer("deepseek-v2")
    src = SyntheticPrompts(tok, False, text="natural")
    rng = np.random.default_rng(5)
    firsts = {tuple(tok.encode(src.build(rng, 200).text).ids[:16]) for _ in range(400)}
    assert len(firsts) == 400
