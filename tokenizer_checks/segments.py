"""Compare two tokenizations of the same text: the token-set Jaccard drift and exact boundary differences.

Boundaries come from the character offsets the Rust tokenizers return. Two segmentations agree on a
stretch of text when the same offsets tile it; where they do not, :func:`boundary_diffs` reports the
smallest character span, between cut points both share, that splits differently, with each side's pieces.
Byte-level BPE can split one character over several tokens (they share its offsets); such splits count
as differences too, because the lists of offsets differ.

    >>> jaccard_drift(["un", "happy"], ["unh", "appy"])
    1.0
    >>> boundary_diffs("unhappy", [(0, 2), (2, 7)], [(0, 3), (3, 7)])
    [Span(start=0, end=7, text='unhappy', a=['un', 'happy'], b=['unh', 'appy'])]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from tokenizers import Tokenizer

Offsets = Sequence[tuple[int, int]]


def jaccard_drift(old: Sequence[str], new: Sequence[str]) -> float:
    """Seed 2.1: ``1 - |set(old) & set(new)| / |set(old) | set(new)|`` on token strings (0 when both empty)."""
    a, b = set(old), set(new)
    union = a | b
    return 1.0 - len(a & b) / len(union) if union else 0.0


@dataclass(frozen=True)
class Span:
    """A character span ``[start, end)`` that the two tokenizers split differently."""

    start: int
    end: int
    text: str
    a: list[str]
    b: list[str]

    def to_dict(self) -> dict:
        return asdict(self)


def _cuts(offsets: Offsets) -> set[int]:
    cuts: set[int] = set()
    for s, e in offsets:
        cuts.add(s)
        cuts.add(e)
    return cuts


def boundary_diffs(text: str | None, a: Offsets, b: Offsets, length: int | None = None) -> list[Span]:
    """Spans, between cut points both sides share, whose offsets differ; pieces are ``text[s:e]`` per token.

    ``text`` may be None (a log without the text): pieces are then ``"s:e"`` strings.
    """
    a = [tuple(o) for o in a]
    b = [tuple(o) for o in b]
    end = length if length is not None else (len(text) if text is not None else max(_cuts(a) | _cuts(b) | {0}))
    common = sorted((_cuts(a) & _cuts(b)) | {0, end})
    out: list[Span] = []
    ia = ib = 0
    bounds = list(zip(common, common[1:], strict=False))
    for k, (lo, hi) in enumerate(bounds):
        last = k == len(bounds) - 1
        seg_a, ia = _take(a, ia, hi, last)
        seg_b, ib = _take(b, ib, hi, last)
        if seg_a != seg_b:
            piece = text[lo:hi] if text is not None else ""
            out.append(Span(lo, hi, piece, _pieces(text, seg_a), _pieces(text, seg_b)))
    return out


def _take(offsets: list[tuple[int, int]], i: int, hi: int, last: bool) -> tuple[list[tuple[int, int]], int]:
    """Tokens from index i that start before ``hi`` (all the rest for the last span)."""
    j = len(offsets) if last else i
    while j < len(offsets) and offsets[j][0] < hi:
        j += 1
    return offsets[i:j], j


def _pieces(text: str | None, offsets: list[tuple[int, int]]) -> list[str]:
    return [text[s:e] if text is not None else f"{s}:{e}" for s, e in offsets]


def added_tokens(tok: Tokenizer) -> dict[str, tuple[int, bool]]:
    """content -> (id, special) for a tokenizer's added tokens (BOS/EOS/pad, role markers, placeholders...)."""
    return {t.content: (i, bool(t.special)) for i, t in tok.get_added_tokens_decoder().items()}


def special_token_diff(old: Tokenizer, new: Tokenizer) -> dict[str, list[dict]]:
    """Added / removed / changed (id or special flag) added-tokens between two vocabularies, sorted by id."""
    a, b = added_tokens(old), added_tokens(new)
    added = [{"token": c, "id": b[c][0]} for c in b.keys() - a.keys()]
    removed = [{"token": c, "id": a[c][0]} for c in a.keys() - b.keys()]
    changed = [
        {"token": c, "old_id": a[c][0], "new_id": b[c][0], "old_special": a[c][1], "new_special": b[c][1]}
        for c in a.keys() & b.keys()
        if a[c] != b[c]
    ]
    return {
        "added": sorted(added, key=lambda d: d["id"]),
        "removed": sorted(removed, key=lambda d: d["id"]),
        "changed": sorted(changed, key=lambda d: d["new_id"]),
    }
