"""Request traces in the Mooncake JSONL form (``--trace``): when each request came, how long it was, which
prefix blocks it shared — and the prompts that reproduce them.

One request per line, ``timestamp`` in milliseconds from the trace's start (equal stamps arrive together)::

    {"timestamp": 0, "input_length": 1200, "output_length": 52, "hash_ids": [0, 1, 2]}
    {"timestamp": 105, "input_length": 1800, "output_length": 26, "hash_ids": [0, 3, 4, 5]}

``hash_ids`` name the prompt's blocks of :data:`BLOCK_TOKENS` (512) tokens in order, ``ceil(input_length / 512)``
of them, the last one possibly partial: equal ids are equal blocks, so the two lines above share their first 512
tokens. Fewer ids than blocks (or none: the field is optional) leave the rest of the prompt unique.

    trace = load_trace("mooncake.jsonl")           # Trace: records in time order; ValueError "file:line: ..."
    blocks = BlockPrompts(tokenizer, chat=True, seed=0)
    p = blocks.build(trace.records[1], rng)        # Prompt: tokens == input_length, chat template included

A block's text depends on the seed and its id alone — the same bytes in every request, every user and every
worker — so the server's prefix cache sees exactly the sharing the trace recorded. Texts are pool words of one
token each (:mod:`workload.prompts`), so a block is 512 tokens wherever it stands and a partial last block is
the head of the full one. A 128K-token line is built in about 1.4 ms from cached blocks, 12 ms the first time
(``python -m bench.long_prompt``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from workload.jsonl import json_lines
from workload.prompts import Prompt, SyntheticPrompts
from workload.tokenizers import ChatRenderer

BLOCK_TOKENS = 512
"""Tokens per hash id (the Mooncake traces' block size)."""
FORM = ('JSONL, one request per line: {"timestamp": MS, "input_length": N, "output_length": N, '
        '"hash_ids": [ID, ...]} (hash_ids optional, at most ceil(input_length / 512) of them)')


@dataclass(frozen=True, slots=True)
class TraceRecord:
    line: int
    """Its line in the file (1-based), for messages."""
    at_s: float
    """Seconds after the trace's first request (the trace's clock, before ``--trace-speedup``)."""
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Trace:
    path: str
    records: tuple[TraceRecord, ...]
    """In time order (equal stamps keep the file's order)."""

    @property
    def span_s(self) -> float:
        """Seconds from the first request to the last, on the trace's clock."""
        return self.records[-1].at_s if self.records else 0.0

    @property
    def repeated_share(self) -> float:
        """The share of the trace's prompt tokens in blocks whose hash id an earlier request already sent: what a
        prefix cache can rightly serve when the whole trace is replayed."""
        seen: set[int] = set()
        repeated = total = 0
        for r in self.records:
            total += r.input_length
            for i, hash_id in enumerate(r.hash_ids):
                if hash_id in seen:
                    repeated += min(BLOCK_TOKENS, r.input_length - i * BLOCK_TOKENS)
                seen.add(hash_id)
        return repeated / total if total else 0.0


def _count(obj: dict, key: str, where: str, minimum: int) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")
    return value


def parse_record(obj: object, where: str, line: int) -> tuple[float, int, int, tuple[int, ...]]:
    """(timestamp ms, input_length, output_length, hash_ids) of one line's JSON, or ValueError naming ``where``."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object; {FORM}")
    stamp = obj.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp) or stamp < 0:
        raise ValueError(f"{where}: timestamp must be a number of milliseconds >= 0, got {stamp!r}")
    n_in = _count(obj, "input_length", where, 1)
    n_out = _count(obj, "output_length", where, 1)
    ids = obj.get("hash_ids", [])
    if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise ValueError(f"{where}: hash_ids must be a list of integers, got {ids!r}")
    blocks = math.ceil(n_in / BLOCK_TOKENS)
    if len(ids) > blocks:
        raise ValueError(f"{where}: {len(ids)} hash_ids for input_length {n_in}: at most {blocks} blocks of "
                         f"{BLOCK_TOKENS} tokens")
    return float(stamp), n_in, n_out, tuple(ids)


def load_trace(path: str | Path) -> Trace:
    """Every request of a trace file; ValueError naming ``file:line`` on the first bad line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"no such trace file {str(p)!r}")
    rows: list[tuple[float, int, int, int, tuple[int, ...]]] = []
    with p.open(encoding="utf-8") as f:
        for no, obj in json_lines(p, f, hint=FORM):
            rows.append((*parse_record(obj, f"{p}:{no}", no), no))  # type: ignore[arg-type]
    if not rows:
        raise ValueError(f"{p}: no requests; {FORM}")
    rows.sort(key=lambda r: r[0])  # stable: equal stamps keep their order
    first = rows[0][0]
    records = tuple(TraceRecord(no, (ms - first) / 1000.0, n_in, n_out, ids) for ms, n_in, n_out, ids, no in rows)
    return Trace(str(p), records)


class BlockPrompts:
    """Prompts of a trace's records: each hash id's block, then unique words for blocks without an id; the chat
    template's (or BOS's) tokens come off the end, so the server counts ``input_length``."""

    def __init__(self, tokenizer: Tokenizer, chat: bool, seed: int = 0, verify_first: int = 16,
                 render: ChatRenderer | None = None, salt: int | None = None) -> None:
        self._words = SyntheticPrompts(tokenizer, chat, verify_every=0, render=render)
        self._count = self._words.count
        self._overhead = self._count(self._words.words_pool[0]) - 1
        """The tokens around the text (the chat template's; for completions, a BOS the tokenizer adds)."""
        self._seed = int(seed)
        self._salt = () if salt is None else (int(salt),)
        """The run's prompt salt: a hash id's block is the same in every process of a run, not across runs."""
        self._verify = verify_first
        self._block = lru_cache(maxsize=4096)(self._block_text)

    def _block_text(self, hash_id: int) -> tuple[str, ...]:
        rng = np.random.default_rng([self._seed, 0x7ACE, hash_id & 0xFFFFFFFFFFFFFFFF, *self._salt])
        pool = self._words.words_pool
        return tuple(pool[rng.integers(0, len(pool), BLOCK_TOKENS)])

    def build(self, record: TraceRecord, rng: np.random.Generator) -> Prompt:
        want = max(1, record.input_length - self._overhead)
        parts: list[str] = []
        left = want
        for hash_id in record.hash_ids:
            if left <= 0:
                break
            words = self._block(hash_id)
            parts.append("".join(words if left >= BLOCK_TOKENS else words[:left]))
            left -= min(left, BLOCK_TOKENS)
        if left > 0:
            parts.append(self._words.words(rng, left))
        text = "".join(parts)
        tokens = want + self._overhead
        if self._verify > 0 and record.input_length <= SyntheticPrompts.LONG:
            # the first short prompts are encoded whole (the count is the server's, not assumed); a long one would
            # hold the users' event loop for most of a second, and its blocks add up as the short ones' do
            self._verify -= 1
            tokens = self._count(text)
        return Prompt(text, tokens)
