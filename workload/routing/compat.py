"""The compat level of a tokenizer upgrade, measured: what ``X-Compat-Level`` a version's requests carry and what
``python -m tokenizer_checks diff`` reports (one rule, both places).

Each text is encoded by the OLD tokenizer (the route table's first version, the one in service) and the NEW one
(a version being gray-released); the level is the strictest statement every text supports:

* ``full``: identical ids for every text (the two are interchangeable);
* ``backward``: different ids but the same token boundaries, hence the same counts, for every text: a prompt cut to
  a length for one is that length for the other;
* ``forward``: boundaries differ, but the new tokenizer never counts more tokens than the old: a prompt that fits a
  window sized for the old one fits the new one;
* ``none``: the new tokenizer counts more tokens for some text.

    >>> compat_level([TextPair(True, True, 12, 12)])
    'full'
    >>> measure(load_tokenizer("deepseek-v2"), load_tokenizer("deepseek-v3"))["level"]   # over COMPAT_CORPUS
    'none'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

COMPAT_CORPUS = Path(__file__).resolve().parents[1] / "data" / "drift_corpus.txt"
"""The texts the level is measured on: the mixed Chinese / English / code corpus that ``tokenizer_checks drift`` and
``difflog`` default to (one text per line, ``#`` lines skipped, ``\\n`` for a newline)."""


@lru_cache(maxsize=1)
def corpus_texts() -> tuple[str, ...]:
    lines = COMPAT_CORPUS.read_text(encoding="utf-8").splitlines()
    return tuple(ln.replace("\\n", "\n") for ln in lines if ln.strip() and not ln.startswith("#"))


@dataclass(frozen=True)
class TextPair:
    """One text under both tokenizers."""

    same_ids: bool
    same_boundaries: bool
    old_tokens: int
    new_tokens: int


def compat_level(pairs: Iterable[TextPair]) -> str:
    """The level every pair supports (see the module docstring); ``full`` for no pairs is refused."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("compat level: no text to measure on")
    if all(p.same_ids for p in pairs):
        return "full"
    if all(p.same_boundaries for p in pairs):
        return "backward"
    if all(p.new_tokens <= p.old_tokens for p in pairs):
        return "forward"
    return "none"


def _ends(offsets: Sequence[Sequence[int]]) -> set[int]:
    return {int(o[1]) for o in offsets}


def pair_of(old_ids: Sequence[int], old_offsets: Sequence[Sequence[int]], new_ids: Sequence[int],
            new_offsets: Sequence[Sequence[int]]) -> TextPair:
    """A text's pair from both encodings (ids and character offsets)."""
    return TextPair(list(old_ids) == list(new_ids), _ends(old_offsets) == _ends(new_offsets), len(old_ids),
                    len(new_ids))


def measure(old: Tokenizer, new: Tokenizer, texts: Sequence[str] | None = None) -> dict:
    """``{"level", "texts", "identical_ids", "same_boundaries", "mean_token_ratio"}`` of NEW against OLD over
    ``texts`` (default: :data:`COMPAT_CORPUS`)."""
    texts = list(corpus_texts() if texts is None else texts)
    a = old.encode_batch(texts, add_special_tokens=False)
    b = new.encode_batch(texts, add_special_tokens=False)
    pairs = [pair_of(x.ids, x.offsets, y.ids, y.offsets) for x, y in zip(a, b, strict=True)]
    ratios = [p.new_tokens / p.old_tokens for p in pairs if p.old_tokens]
    return {
        "level": compat_level(pairs),
        "texts": len(pairs),
        "identical_ids": sum(p.same_ids for p in pairs),
        "same_boundaries": sum(p.same_boundaries for p in pairs),
        "mean_token_ratio": round(sum(ratios) / len(ratios), 4) if ratios else None,
    }
