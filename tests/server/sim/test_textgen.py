"""Generated text: real token ids whose streamed text re-encodes to the same count (what clients rely on)."""

from __future__ import annotations

import numpy as np

from server.sim.textgen import build_vocabulary
from workload.tokenizers import load_tokenizer


def test_generated_ids_decode_and_re_encode_one_for_one():
    tok = load_tokenizer("deepseek-v4")
    vocab = build_vocabulary(tok, np.random.default_rng(3))
    assert vocab.round_trip_ok and vocab.words >= 1000
    rng = np.random.default_rng(4)
    for _ in range(20):
        start, n = int(rng.integers(0, 30000)), int(rng.integers(1, 400))
        ids = vocab.ids.take(start, 0, n)
        text = b"".join(vocab.text[i] for i in ids).decode()
        assert text == tok.decode(ids)
        assert tok.encode(text, add_special_tokens=False).ids == ids
    assert vocab.text[vocab.ids.eos_id] == b"" and tok.id_to_token(vocab.ids.eos_id) == "<｜end▁of▁sentence｜>"


def test_other_bundled_tokenizers_work_too():
    for name in ("deepseek-v2", "qwen2.5"):
        tok = load_tokenizer(name)
        vocab = build_vocabulary(tok, np.random.default_rng(0))
        assert vocab.round_trip_ok, name
