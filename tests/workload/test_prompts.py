"""Synthetic prompts hit the drawn token count exactly, chat template included; datasets load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workload.datasets import load_prompt_file
from workload.prompts import FilePrompts, SyntheticPrompts
from workload.tokenizers import NAMES, chat_renderer, load_tokenizer, render_chat

TOK = load_tokenizer("deepseek-v4")


def server_count(text: str, chat: bool) -> int:
    """How vLLM counts: chat renders the template and encodes without adding specials."""
    if chat:
        return len(TOK.encode(render_chat([{"role": "user", "content": text}]), add_special_tokens=False).ids)
    return len(TOK.encode(text).ids)


@pytest.mark.parametrize("chat", [True, False])
def test_exact_counts_over_many_lengths(chat: bool) -> None:
    src = SyntheticPrompts(TOK, chat)
    rng = np.random.default_rng(0)
    for n in [4, 5, 17, 128, 511, 512, 2048]:
        p = src.build(rng, n)
        assert p.tokens == n == server_count(p.text, chat), (chat, n)


@pytest.mark.parametrize("name", NAMES)
def test_chat_prompts_count_exactly_with_every_bundled_tokenizers_own_template(name: str) -> None:
    """Every bundled tokenizer (the served models' too), with its own chat template: the drawn length is what
    the template-rendered prompt encodes to, on the sampled verification's first prompts and long ones alike."""
    tok, render = load_tokenizer(name), chat_renderer(name)
    src = SyntheticPrompts(tok, chat=True, render=render)
    rng = np.random.default_rng(0)
    for n in [40, 41, 300, 4700]:
        p = src.build(rng, n)
        counted = len(tok.encode(render([{"role": "user", "content": p.text}]), add_special_tokens=False).ids)
        assert p.tokens == n == counted, (name, n, p.tokens, counted, src.count.overhead)
        # behind a shared system prompt of 100 pool words: 100 + the template's system overhead more
        system = [{"role": "system", "content": src.words(rng, 100)}, {"role": "user", "content": p.text}]
        counted = len(tok.encode(render(system), add_special_tokens=False).ids)
        assert counted == n + 100 + src.count.system_overhead, (name, n, counted, src.count.system_overhead)
    assert src.mismatches == 0


def test_prompts_differ_between_requests_and_repeat_with_the_seed() -> None:
    src = SyntheticPrompts(TOK, chat=True)
    a = [src.build(np.random.default_rng(3), 64).text for _ in range(2)]
    b = src.build(np.random.default_rng(4), 64).text
    rng = np.random.default_rng(3)
    c, d = src.build(rng, 64).text, src.build(rng, 64).text
    assert a[0] == a[1] == c and b != c and c != d


def test_short_runs_of_words_come_from_indices_drawn_ahead_from_their_own_rng() -> None:
    """words() serves short runs from DRAWN indices drawn at once: the first run from a fresh rng is the one a draw
    of its own length gives, runs go on across refills, and a run from another rng is that rng's, whatever the
    buffer held."""
    src, pool = SyntheticPrompts(TOK, chat=False), SyntheticPrompts(TOK, chat=False).words_pool
    own = "".join(pool[np.random.default_rng(9).integers(0, len(pool), 7)])
    assert src.words(np.random.default_rng(9), 7) == own
    rng = np.random.default_rng(5)
    same = np.random.default_rng(5)
    first, second = (same.integers(0, len(pool), src.DRAWN) for _ in range(2))
    full = src.DRAWN // 200  # runs the first draw holds
    runs = [src.words(rng, 200) for _ in range(full + 2)]  # past the first refill
    assert all(len(TOK.encode(r, add_special_tokens=False).ids) == 200 for r in runs)
    assert runs[0] == "".join(pool[first[:200]])
    assert runs[full - 1] == "".join(pool[first[(full - 1) * 200 : full * 200]])
    assert runs[full] == "".join(pool[second[:200]])  # the rest of a draw too short for a run: a fresh draw
    assert src.words(np.random.default_rng(9), 7) == own  # another rng: its own words, not the buffer's
    a, b = SyntheticPrompts(TOK, chat=True), SyntheticPrompts(TOK, chat=True)
    ra, rb = np.random.default_rng(11), np.random.default_rng(11)
    assert [a.build(ra, 40).text for _ in range(60)] == [b.build(rb, 40).text for _ in range(60)]


def test_align_targets_the_servers_count() -> None:
    src = SyntheticPrompts(TOK, chat=False)
    src.align(1.0, 7.0)  # the server counts 7 more tokens than the client
    p = src.build(np.random.default_rng(0), 100)
    assert p.tokens == 93


def test_file_prompts_sharegpt_and_plain(tmp_path) -> None:
    f = tmp_path / "d.jsonl"
    rows = [
        {
            "conversations": [
                {"from": "system", "value": "s"},
                {"from": "human", "value": "hello world"},
                {"from": "gpt", "value": "hi"},
            ]
        },
        {"prompt": "one two three"},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    texts = load_prompt_file(f)
    assert texts == ["hello world", "one two three"]
    src = FilePrompts(texts, TOK, chat=True)
    seen = {src.build(np.random.default_rng(i)).text for i in range(20)}
    assert seen == set(texts)
    assert all(p.tokens == server_count(p.text, True) for p in src.prompts)


def test_bad_prompt_file_says_which_line(tmp_path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"prompt": "ok"}\n{"nothing": 1}\n')
    with pytest.raises(ValueError, match=":2:"):
        load_prompt_file(f)


def test_sampled_verification_catches_a_mismatch_and_then_checks_every_prompt() -> None:
    src = SyntheticPrompts(TOK, chat=False, verify_every=64)
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = src.build(rng, 50)
        assert p.tokens == 50 == server_count(p.text, False)  # exact whether or not this one was re-encoded
    assert src.mismatches == 0 and src.verify_every == 64
    src.count.overhead = 1  # simulate a tokenizer whose prompts come out one token short of the plan
    p = src.build(rng, 50)  # built 201: not a sampled one, so the plan is trusted...
    src.built = 255  # ...and the 256th is re-encoded: the mismatch is found and repaired
    p = src.build(rng, 50)
    assert src.mismatches == 1 and src.verify_every == 1
    assert p.tokens == server_count(p.text, False)


@pytest.mark.parametrize("chat", [True, False])
def test_long_prompts_from_cached_pieces_count_exactly_and_share_no_prefix(chat: bool) -> None:
    src = SyntheticPrompts(TOK, chat=chat, verify_every=0)  # no re-encoding: the count must hold by itself
    rng = np.random.default_rng(3)
    lengths = [SyntheticPrompts.LONG + 1 + src.count.overhead, 20000, 32768]
    prompts = [src.build(rng, n) for n in lengths]
    assert [p.tokens for p in prompts] == lengths == [server_count(p.text, chat) for p in prompts]
    assert len(src._pieces) == SyntheticPrompts.PIECES
    # a fresh random head each (HEAD words at least): the server's prefix cache serves no block to another
    heads = {p.text[:200] for p in prompts}
    assert len(heads) == 3
