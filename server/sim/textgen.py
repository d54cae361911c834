"""Generated text made of real token ids, so a client that counts tokens agrees with ``usage``.

The vocabulary is filtered to whole lower-case ASCII words with a leading space (" the", " of", ...)
that encode back to exactly themselves. A run of such words splits at every space under the
byte-level pre-tokenizer, so re-encoding the streamed text of N word tokens gives the same N ids;
:func:`build_vocabulary` checks that on a long random sample and says so in ``round_trip_ok``.
The one exception is EOS (when ``ignore_eos`` is off): it counts in ``usage`` but has no text, as in vLLM.

    vocab = build_vocabulary(load_tokenizer("deepseek-v4"), np.random.default_rng(0))
    vocab.text[vocab.ids.pool[0]]   # -> b" the" (JSON-safe bytes, ready for an SSE frame)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer

from server.sim.scheduler import TokenIds

POOL_SIZE = 1 << 15
MAX_WORDS = 4096
EOS_NAMES = ("<｜end▁of▁sentence｜>", "</s>", "<|endoftext|>", "<|im_end|>", "<|end_of_text|>")


@dataclass(frozen=True)
class Vocabulary:
    ids: TokenIds
    text: dict[int, bytes]
    """JSON-string-safe UTF-8 bytes of each generated id (EOS maps to b"")."""
    words: int
    round_trip_ok: bool


def _word_candidates(tok: Tokenizer) -> list[int]:
    out = []
    for piece, i in tok.get_vocab().items():
        if piece[:1] in ("Ġ", "▁"):
            w = piece[1:]
            if 2 <= len(w) <= 10 and w.isascii() and w.isalpha() and w.islower():
                out.append(i)
    out.sort()  # low ids are the earliest merges: the most common words
    return out


def eos_id_of(tok: Tokenizer) -> int:
    for name in EOS_NAMES:
        i = tok.token_to_id(name)
        if i is not None:
            return i
    return 0


def build_vocabulary(tok: Tokenizer, rng: np.random.Generator) -> Vocabulary:
    words: list[int] = []
    for i in _word_candidates(tok):
        text = tok.decode([i])
        if text.startswith(" ") and tok.encode(text, add_special_tokens=False).ids == [i]:
            words.append(i)
            if len(words) >= MAX_WORDS:
                break
    if not words:
        raise ValueError("tokenizer has no plain ' word' tokens to generate text from")
    pool = rng.choice(np.asarray(words), size=POOL_SIZE).tolist()
    eos = eos_id_of(tok)
    text = {i: tok.decode([i]).encode() for i in words}
    text[eos] = b""
    sample = pool[:2048]
    ok = tok.encode(tok.decode(sample), add_special_tokens=False).ids == sample
    return Vocabulary(TokenIds(pool, eos), text, len(words), ok)
