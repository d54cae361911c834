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
    >>> measure(load_tokenizer("deepseek-v2"), load_tokenizer("deepseek-v3"))["level"]   # over COMPAT_TEXTS
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tokenizers import Tokenizer

COMPAT_TEXTS: tuple[str, ...] = (
    "大模型推理服务的吞吐量取决于批处理策略、显存容量和请求长度分布。",
    "分词器升级可能悄悄改变 token 边界，让所有基于长度的基准测试失去可比性。",
    "The first token latency is dominated by prefill compute and the time a request waits in the queue.",
    "Continuous batching lets a new request join the running batch at any decode step.",
    "def route(bucket: int) -> str:\n    return 'beta' if bucket >= 80 else 'v1'",
    "for i in range(10):\n    total += prices[i] * 0.85  # 15% off",
    "KV Cache 的块大小默认是 16 个 token，前缀缓存复用相同系统提示的块。",
    "Compare TTFT p99 of v1 and beta over the same 10 s windows before rolling out 100%.",
    "SELECT version, count(*) FROM requests WHERE ttft_ms > 2000 GROUP BY version;",
    "Mixed 中英文 text with numbers 12345 and symbols -> => != <= ...",
)
"""The texts the client measures the drift on (mixed Chinese / English / code, like the drift corpus)."""


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
                    len(new_ids))  # fmt: skip


def measure(old: Tokenizer, new: Tokenizer, texts: Sequence[str] = COMPAT_TEXTS) -> dict:
    """``{"level", "texts", "identical_ids", "same_boundaries", "mean_token_ratio"}`` of NEW against OLD."""
    a = old.encode_batch(list(texts), add_special_tokens=False)
    b = new.encode_batch(list(texts), add_special_tokens=False)
    pairs = [pair_of(x.ids, x.offsets, y.ids, y.offsets) for x, y in zip(a, b, strict=True)]
    ratios = [p.new_tokens / p.old_tokens for p in pairs if p.old_tokens]
    return {
        "level": compat_level(pairs),
        "texts": len(pairs),
        "identical_ids": sum(p.same_ids for p in pairs),
        "same_boundaries": sum(p.same_boundaries for p in pairs),
        "mean_token_ratio": round(sum(ratios) / len(ratios), 4) if ratios else None,
    }
