"""Small formatting helpers for the report: numbers for people, HTML tables, escaping."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape


def ms(v: float | None) -> str:
    """Milliseconds: 1 decimal under 100 ms, whole numbers above; "–" when unknown."""
    if v is None or not math.isfinite(float(v)):
        return "–"
    v = float(v) + 0.0  # -0.0 -> 0.0
    text = f"{v:.1f}" if abs(v) < 100 else f"{v:,.0f}"
    return "0.0" if text == "-0.0" else text


def num(v: float | int | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.{digits}f}"


def ratio(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "", raw: bool = False) -> str:
    """An HTML table; cells are escaped unless ``raw`` (already HTML)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if raw else escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    c = f' class="{cls}"' if cls else ""
    return f"<table{c}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def badge(passed: bool | None, yes: str = "PASS", no: str = "FAIL", na: str = "n/a") -> str:
    if passed is None:
        return f'<span class="badge na">{escape(na)}</span>'
    return f'<span class="badge {"ok" if passed else "bad"}">{yes if passed else no}</span>'
