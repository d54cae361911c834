"""Building blocks shared by the report's sections: a section, a note, a figure, Q-object cells."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from telemetry.outputs.report.fmt import ms, num

Q_KEYS = ("count", "mean", "p50", "p90", "p95", "p99", "max")


def section(anchor: str, title: str, *parts: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{"".join(parts)}</section>'


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def figure(svg: str, caption: str = "") -> str:
    if not svg:
        return ""
    cap = f"<figcaption>{escape(caption)}</figcaption>" if caption else ""
    return f'<figure class="plot-fig">{svg}{cap}</figure>'


def qv(d: Mapping | None, key: str) -> float | None:
    if not isinstance(d, Mapping):
        return None
    v = d.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def q_cell(q: Mapping, key: str) -> str:
    """A quantile; one read from a server histogram's first bucket is only known as "≤ its bound", one in the open
    last bucket as "> the last bound"."""
    bucket = (q.get("bucket") or {}).get(key) if isinstance(q.get("bucket"), Mapping) else None
    if bucket and bucket[0] == 0 and bucket[1] is not None:
        return f"≤{ms(bucket[1])}"
    if bucket and bucket[1] is None:  # above the last finite bound: only that bound is known
        return f">{ms(bucket[0])}"
    return ms(qv(q, key))


def q_row(label: str, q: Mapping | None) -> list[str]:
    if not isinstance(q, Mapping):
        return [label] + ["–"] * len(Q_KEYS)
    return [label, num(q.get("count"))] + [q_cell(q, k) for k in Q_KEYS[1:]]
