"""Prompts with a known token count, built with the real tokenizer.

Synthetic prompts are random words drawn from a cached pool of words that are each ONE token with a
leading space (``" apple"``). Every word starts a new pre-token in DeepSeek's (and any byte-level BPE's)
pre-tokenizer, so a prompt of n pool words is n tokens. Re-encoding verifies it: the first 16 prompts,
then one in ``verify_every`` (64) — re-encoding costs ~150 µs a prompt, the largest per-request cost of
the client — and every prompt from the first mismatch on (never seen with these tokenizers).
For chat, the chat template's tokens are part of the count, so the server's ``usage.prompt_tokens`` equals
the drawn length: the tokenizer's own template (``render=chat_renderer(name)``, e.g. Qwen2.5's
``<|im_start|>system…<|im_start|>user\n…<|im_start|>assistant\n``), DeepSeek's
(``<｜begin▁of▁sentence｜><｜User｜>…<｜Assistant｜>``) when none is given. Random words per request keep
the server's prefix cache from serving one prompt to everyone.

    tok = load_tokenizer("qwen2.5")
    src = SyntheticPrompts(tok, chat=True, render=chat_renderer("qwen2.5"))
    p = src.build(rng, 512)        # Prompt(text=..., tokens=512); text is the user message content
    files = FilePrompts(load_prompt_file("sharegpt.jsonl"), tok, chat=True, render=chat_renderer("qwen2.5"))
    p = files.build(rng)           # a random record, tokens counted by the client

``SyntheticPrompts.align(a, b)`` makes prompts target a server that counts ``a * client + b`` tokens
(fitted from its ``/tokenize`` by ``users.align``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from workload.tokenizers import ChatRenderer, render_chat

_WORD = re.compile(r"Ġ[a-z]{3,9}")  # byte-level BPE marks a leading space with Ġ
_POOL_SIZE = 4000
_SPACE_LED = re.compile(r"Ġ[A-Za-z]")
NATURAL_TEXT = Path(__file__).with_name("data") / "natural_text.txt"
"""The natural text source: English prose and requests, Chinese prose, code (Python, SQL, Rust, shell), written
for this project."""
SYNTHETIC_TEXTS = ("words", "natural")
"""What synthetic prompts are made of: random single-token pool words, or runs of natural text (and code) from
:data:`NATURAL_TEXT` completed with pool words to the exact count."""


@dataclass(frozen=True, slots=True)
class Prompt:
    text: str
    """Completion prompt, or the content of the single user message for chat."""
    tokens: int
    """The client's count, as the server counts it (chat template included for chat)."""


class TokenCounter:
    """Counts a prompt the way vLLM does: completions encode with special tokens, chat renders the template
    (``render``: the tokenizer's, ``workload.tokenizers.chat_renderer(name)``; default DeepSeek's, ``render_chat``)
    and encodes it without adding special tokens."""

    def __init__(self, tokenizer: Tokenizer, chat: bool, render: ChatRenderer | None = None) -> None:
        self.tokenizer = tokenizer
        self.chat = chat
        self.render = render or render_chat
        self._system: int | None = None
        self.overhead = self(" the") - self._bare(" the") if chat else 0
        """Tokens the chat template adds around the user content (0 for completions), measured around a space-led
        word as prompts start with one: around a bare space, DeepSeek-V2's and Qwen2.5's templates merge the space
        into their own tokens and counted one less, so every prompt missed its count and was re-encoded."""

    @property
    def system_overhead(self) -> int:
        """Tokens a system message before the user's adds beyond its own words (0 for completions): the template's
        text around it, less a default system prompt it replaces (Qwen2.5's "You are Qwen…"); 0 with DeepSeek's.
        Measured once, around a space-led word as system prompts are pool words."""
        if self._system is None:
            self._system = 0
            if self.chat:
                user = [{"role": "user", "content": " the"}]
                with_system = self._encoded(self.render([{"role": "system", "content": " the"}, *user]))
                self._system = with_system - self._encoded(self.render(user)) - self._bare(" the")
        return self._system

    def _encoded(self, rendered: str) -> int:
        return len(self.tokenizer.encode(rendered, add_special_tokens=False).ids)

    def _bare(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def __call__(self, text: str) -> int:
        if self.chat:
            return self._encoded(self.render([{"role": "user", "content": text}]))
        return len(self.tokenizer.encode(text).ids)


@lru_cache(maxsize=8)
def _word_pool(tokenizer: Tokenizer) -> np.ndarray:
    """Lower-case words that encode to exactly one token with a leading space, most common first."""
    vocab = sorted((i, t) for t, i in tokenizer.get_vocab().items() if _WORD.fullmatch(t))
    words = [" " + t[1:] for _, t in vocab[: _POOL_SIZE * 2]]
    encoded = tokenizer.encode_batch(words, add_special_tokens=False)
    single = [w for w, e in zip(words, encoded, strict=True) if len(e.ids) == 1][:_POOL_SIZE]
    if len(single) < 100:
        raise ValueError("tokenizer has too few single-token words to synthesize prompts")
    return np.asarray(single, dtype=object)


class NaturalText:
    """Runs of :data:`NATURAL_TEXT` cut where the tokenizer's count adds up: the text is encoded once, and a run
    starts and ends just before a token that is a space-led word (``Ġ`` + a letter, no space before it) — a
    pre-token boundary for a byte-level BPE, as every pool word is — so a run of tokens ``[i, j)`` re-encodes to
    ``j - i`` tokens and runs and pool words concatenate to the sum of their counts."""

    def __init__(self, tokenizer: Tokenizer, path: Path = NATURAL_TEXT) -> None:
        self.text = text = path.read_text(encoding="utf-8")
        enc = tokenizer.encode(text, add_special_tokens=False)
        toks, offs = enc.tokens, enc.offsets
        bounds = [k for k in range(1, len(toks))
                  if _SPACE_LED.match(toks[k]) and not toks[k - 1].endswith("Ġ")]
        self.bounds = np.asarray(bounds, dtype=np.int64)
        """Token indexes a run may start or end at."""
        self.starts = [offs[k][0] for k in bounds]
        """Character offset of each boundary in the text."""

    def __bool__(self) -> bool:
        return len(self.bounds) >= 2

    def run(self, rng: np.random.Generator, most: int) -> tuple[str, int]:
        """A run of at most ``most`` tokens from a random boundary: (text, tokens); ("", 0) when none fits."""
        b = self.bounds
        p = int(rng.integers(0, len(b) - 1))
        q = int(np.searchsorted(b, b[p] + most, side="right")) - 1
        if q <= p:
            return "", 0
        return self.text[self.starts[p] : self.starts[q]], int(b[q] - b[p])


@lru_cache(maxsize=8)
def _natural(tokenizer: Tokenizer) -> NaturalText | None:
    nat = NaturalText(tokenizer)
    return nat if nat else None


class SyntheticPrompts:
    """Prompts of an exact token count: natural text and code completed with pool words (``text="natural"``), or
    random pool words alone (``"words"``)."""

    ALWAYS_FIRST = 16
    LONG = 4096
    """Prompts of more words than this are built from cached pieces (:meth:`build`)."""
    PIECE, PIECES, HEAD = 512, 32, 256
    NATURAL_HEAD = 16
    """Random pool words that start a natural prompt: its first prefix-cache block (16 tokens on vLLM's GPUs, the
    chat template's tokens before it) is its own, as with words."""

    def __init__(self, tokenizer: Tokenizer, chat: bool, verify_every: int = 64,
                 render: ChatRenderer | None = None, text: str = "words") -> None:
        if text not in SYNTHETIC_TEXTS:
            raise ValueError(f"unknown synthetic text {text!r}; expected one of {', '.join(SYNTHETIC_TEXTS)}")
        self.count = TokenCounter(tokenizer, chat, render)
        self.words_pool = _word_pool(tokenizer)
        self.natural = _natural(tokenizer) if text == "natural" else None
        """The natural text source; None: pool words alone (``words``, or a tokenizer without space-led words)."""
        self.verify_every = verify_every
        """Re-encode one prompt in this many (after the first 16); 1 = every prompt; 0 = never."""
        self.built = 0
        self.mismatches = 0
        self._a, self._b = 1.0, 0.0
        self._pieces: list[str] | None = None
        self._pool_list: list[str] = self.words_pool.tolist()
        self._drawn: list[int] = []
        """Pool indices drawn ahead from ``_drawn_rng`` for short runs of words; ``_at`` is the next one to use."""
        self._drawn_rng: np.random.Generator | None = None
        self._at = 0

    def align(self, a: float, b: float) -> None:
        """Aim at a server that counts ``a * client_tokens + b``."""
        self._a, self._b = a, b

    DRAWN = 2048
    """Pool indices drawn from an rng at once for short runs of words: one numpy call (and one acquisition of the
    generator's lock, a Python lock under gevent) serves a hundred prompts instead of two numpy calls each."""

    def words(self, rng: np.random.Generator, n: int) -> str:
        """``n`` pool words: exactly ``n`` tokens anywhere after a token boundary (a shared system prompt, a
        prefix). One numpy draw and one join: a 32K-token text in milliseconds (``bench.long_prompt``). Runs of up to
        ``DRAWN / 8`` words take their indices from ``DRAWN`` drawn ahead from the same ``rng`` (another rng draws
        its own): the words stay a function of the rng's seed and of the calls made with it."""
        n = int(n)
        if n > self.DRAWN // 8:
            return "".join(self.words_pool[rng.integers(0, len(self.words_pool), n)])
        at = self._at
        if self._drawn_rng is not rng or at + n > len(self._drawn):
            self._drawn = rng.integers(0, len(self.words_pool), self.DRAWN).tolist()
            self._drawn_rng, at = rng, 0
        self._at = at + n
        pool = self._pool_list
        return "".join([pool[i] for i in self._drawn[at : at + n]])

    def fresh(self, rng: np.random.Generator, n: int) -> str:
        """``n`` tokens of prompt text: :data:`NATURAL_HEAD` random pool words (the text has a few hundred places
        to start from: without a random head, prompts would share their first prefix-cache blocks), then runs of
        natural text from random places while more than a few tokens are left, ending with at least one pool word
        (so the content ends, as it starts, on a space-led word, whatever the chat template puts after it); pool
        words alone without a natural source."""
        nat = self.natural
        if nat is None:
            return self.words(rng, n)
        head = min(int(n), self.NATURAL_HEAD)
        parts, left = [self.words(rng, head)], int(n) - head
        while left > 8:
            text, k = nat.run(rng, left - 1)
            if not k:
                break
            parts.append(text)
            left -= k
        parts.append(self.words(rng, left))
        return "".join(parts)

    def _long(self, rng: np.random.Generator) -> list[str]:
        """The cached pieces of long prompts: ``PIECES`` texts of ``PIECE`` pool words, each encoded once here
        (one batch) and kept only when it is exactly ``PIECE`` tokens."""
        if self._pieces is None:
            texts = [self.fresh(rng, self.PIECE) for _ in range(self.PIECES)]
            encoded = self.count.tokenizer.encode_batch(texts, add_special_tokens=False)
            self._pieces = [t for t, e in zip(texts, encoded, strict=True) if len(e.ids) == self.PIECE]
            if not self._pieces:
                raise ValueError("no piece of pool words encodes to its word count: cannot build long prompts")
        return self._pieces

    def build(self, rng: np.random.Generator, n: int | None = None) -> Prompt:
        """A prompt of ``n`` tokens (chat template included for chat). Up to ``LONG`` words it is all fresh random
        words; longer, a fresh random head (at least ``HEAD`` words: no two prompts share a prefix-cache block)
        followed by cached pieces in random order — a 32K-token prompt in about a millisecond, where encoding it
        to verify would hold the users' event loop for most of a second. Only the head is re-encoded to
        verify: every piece was, and a piece starts with a space-led word, a pre-token boundary, so the counts
        add up."""
        n = 256 if n is None else int(n)
        if self._a != 1.0 or self._b != 0.0:
            n = round((n - self._b) / self._a)
        want = max(1, n - self.count.overhead)
        tail, extra = "", 0
        if want > self.LONG:
            pieces = self._long(rng)
            m = (want - self.HEAD) // self.PIECE
            tail = "".join([pieces[i] for i in rng.integers(0, len(pieces), m)])
            extra = m * self.PIECE
            want -= extra
        text = self.fresh(rng, want)
        expected = want + self.count.overhead
        self.built += 1
        every = self.verify_every
        if not every or (self.built > self.ALWAYS_FIRST and self.built % every):
            return Prompt(text + tail, expected + extra)
        got = self.count(text)
        if got != expected:  # never seen with single-token words: from now on check all, and repair
            self.mismatches += 1
            self.verify_every = 1
        for _ in range(8):
            if got == expected:
                break
            text = text[: text.rfind(" ")] if got > expected else text + self.words(rng, 1)
            got = self.count(text)
        return Prompt(text + tail, got + extra)


class FilePrompts:
    """Prompts of a dataset, drawn at random; token counts computed once."""

    def __init__(self, prompts: list[str], tokenizer: Tokenizer, chat: bool,
                 render: ChatRenderer | None = None) -> None:
        self.count = count = TokenCounter(tokenizer, chat, render)
        self.prompts = [Prompt(t, count(t)) for t in prompts]

    def build(self, rng: np.random.Generator, n: int | None = None) -> Prompt:
        return self.prompts[int(rng.integers(len(self.prompts)))]
