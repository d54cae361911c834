"""Hand-written inline SVG charts for the HTML report (no JavaScript, no external resources).

Every function returns one ``<svg>`` element as a string; text is HTML-escaped here. Coordinates
are in a fixed ``viewBox`` so the browser scales the chart to the page width.

    line_chart("TTFT vs users", [Series("p99", [1, 2, 4], [120, 180, 900], "#d62728")],
               x_label="users", y_label="ms", markers=[Marker(4, "knee")])
    bar_chart("TTFT distribution", ["≤100", "≤250"], [12, 40], y_label="% of requests")
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

W, H = 640, 300
PAD_L, PAD_R, PAD_T, PAD_B = 62, 62, 34, 58
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    xs: Sequence[float]
    ys: Sequence[float | None]
    """None leaves a gap in the line."""
    color: str = PALETTE[0]
    right: bool = False
    """Plot against the right-hand axis."""
    dashed: bool = False
    points: bool = False
    """Points only, no line between them (e.g. a search's probes, where one load is probed twice)."""
    tips: Sequence[str] = ()
    """A tooltip per point (its ``<title>``), in the order of ``xs``."""


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical line at ``x`` with a label (e.g. the saturation knee, a stage start)."""

    x: float
    label: str
    color: str = "#444"


@dataclass(frozen=True, slots=True)
class Band:
    """A shaded x-range (e.g. a latency-spike window)."""

    x0: float
    x1: float
    color: str = "#d62728"
    label: str = ""


@dataclass(slots=True)
class _Scale:
    lo: float
    hi: float
    p0: float
    p1: float
    ticks: list[float] = field(default_factory=list)

    def __call__(self, v: float) -> float:
        span = self.hi - self.lo or 1.0
        return self.p0 + (v - self.lo) / span * (self.p1 - self.p0)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (1, 2, 2.5, 5 × 10^k steps)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks, t = [], start
    while t < hi + step * 0.999:
        ticks.append(round(t, 12))
        t += step
    return ticks


def fmt_num(v: float) -> str:
    """Short tick label: 1.2k, 350, 0.25."""
    a = abs(v)
    if a >= 10_000:
        return f"{v / 1000:.0f}k"
    if a >= 1000:
        return f"{v / 1000:.1f}k".replace(".0k", "k")
    if a >= 10 or v == 0:
        return f"{v:.0f}"
    return f"{v:.2g}"


def _finite(vals) -> list[float]:
    return [float(v) for v in vals if v is not None and math.isfinite(float(v))]


def _y_scale(series: Sequence[Series], zero: bool) -> _Scale | None:
    ys = [y for s in series for y in _finite(s.ys)]
    if not ys:
        return None
    lo, hi = (min(0.0, min(ys)) if zero else min(ys)), max(ys)
    ticks = nice_ticks(lo, hi)
    return _Scale(ticks[0], ticks[-1], H - PAD_B, PAD_T, ticks)


def _frame(title: str, body: list[str], *, desc: str = "") -> str:
    head = f'<svg class="chart" viewBox="0 0 {W} {H}" role="img">'
    t = f'<title>{escape(title)}</title><desc>{escape(desc)}</desc>' if desc else f"<title>{escape(title)}</title>"
    caption = f'<text x="{PAD_L}" y="20" class="ct">{escape(title)}</text>'
    return "".join([head, t, caption, *body, "</svg>"])


def _axes(x: _Scale, y: _Scale | None, y2: _Scale | None, x_label: str, y_label: str, y2_label: str,
          x_names: Mapping[float, str] | None) -> list[str]:
    out = [f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" class="plot"/>']
    for t in (x_names.keys() if x_names else x.ticks):
        px = x(t)
        label = x_names[t] if x_names else fmt_num(t)
        out.append(f'<line x1="{px:.1f}" y1="{H - PAD_B}" x2="{px:.1f}" y2="{H - PAD_B + 4}" class="ax"/>')
        out.append(f'<text x="{px:.1f}" y="{H - PAD_B + 16}" class="tk" text-anchor="middle">{escape(label)}</text>')
    if y is not None:
        for t in y.ticks:
            py = y(t)
            out.append(f'<line x1="{PAD_L}" y1="{py:.1f}" x2="{W - PAD_R}" y2="{py:.1f}" class="grid"/>')
            out.append(f'<text x="{PAD_L - 6}" y="{py + 4:.1f}" class="tk" text-anchor="end">{fmt_num(t)}</text>')
        out.append(f'<text transform="translate(14 {(PAD_T + H - PAD_B) / 2}) rotate(-90)" class="al" '
                   f'text-anchor="middle">{escape(y_label)}</text>')
    if y2 is not None:
        for t in y2.ticks:
            py = y2(t)
            out.append(f'<text x="{W - PAD_R + 6}" y="{py + 4:.1f}" class="tk">{fmt_num(t)}</text>')
        out.append(f'<text transform="translate({W - 12} {(PAD_T + H - PAD_B) / 2}) rotate(90)" class="al" '
                   f'text-anchor="middle">{escape(y2_label)}</text>')
    out.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{H - PAD_B + 34}" class="al" '
               f'text-anchor="middle">{escape(x_label)}</text>')
    return out


def _path(s: Series, x: _Scale, y: _Scale) -> list[str]:
    out, seg = [], []
    pts = []
    for xv, yv in zip(s.xs, s.ys, strict=False):
        if yv is None or not math.isfinite(float(yv)):
            if seg:
                pts.append(seg)
            seg = []
            continue
        seg.append((x(float(xv)), y(float(yv))))
    if seg:
        pts.append(seg)
    dash = ' stroke-dasharray="6 4"' if s.dashed else ""
    if s.points:  # every finite point, with its tooltip
        for i, (xv, yv) in enumerate(zip(s.xs, s.ys, strict=False)):
            if yv is None or not math.isfinite(float(yv)):
                continue
            tip = f"<title>{escape(s.tips[i])}</title>" if i < len(s.tips) else ""
            out.append(f'<circle cx="{x(float(xv)):.1f}" cy="{y(float(yv)):.1f}" r="4.5" fill="{s.color}" '
                       f'fill-opacity="0.85" class="point">{tip}</circle>')
        return out
    for seg in pts:
        d = " ".join(f"{'M' if i == 0 else 'L'}{px:.1f},{py:.1f}" for i, (px, py) in enumerate(seg))
        out.append(f'<path d="{d}" fill="none" stroke="{s.color}" stroke-width="2"{dash} class="line"/>')
        if len(seg) <= 40:
            out.extend(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{s.color}"/>' for px, py in seg)
    return out


def _legend(series: Sequence[Series]) -> list[str]:
    out, px = [], PAD_L
    py = H - 8
    for s in series:
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        side = " (right)" if s.right else ""
        label = escape(s.name + side)
        if s.points:
            out.append(f'<circle cx="{px + 9}" cy="{py - 4}" r="4.5" fill="{s.color}"/>')
        else:
            out.append(f'<line x1="{px}" y1="{py - 4}" x2="{px + 18}" y2="{py - 4}" stroke="{s.color}" '
                       f'stroke-width="2.5"{dash}/>')
        out.append(f'<text x="{px + 22}" y="{py}" class="lg">{label}</text>')
        px += 30 + 6.5 * len(s.name + side)
    return out


def line_chart(
    title: str,
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    y2_label: str = "",
    markers: Sequence[Marker] = (),
    bands: Sequence[Band] = (),
    x_names: Mapping[float, str] | None = None,
    x_from_zero: bool = False,
    desc: str = "",
) -> str:
    """Lines over a shared x axis, optionally some against a right-hand axis; "" when nothing to draw.
    ``x_from_zero``: the x axis starts at 0 (time since the run started)."""
    xs = _finite(x for s in series for x in s.xs) + [m.x for m in markers] + [v for b in bands for v in (b.x0, b.x1)]
    left = [s for s in series if not s.right]
    right = [s for s in series if s.right]
    if not xs or not any(_finite(s.ys) for s in series):
        return ""
    lo, hi = min(xs), max(xs)
    if x_names:
        pad = 0.5 if hi > lo else 1.0
        x = _Scale(lo - pad, hi + pad, PAD_L, W - PAD_R)
    else:
        near_zero = lo >= 0 and (x_from_zero or lo < (hi - lo) * 0.25)
        ticks = nice_ticks(0.0 if near_zero else lo, hi)
        x = _Scale(ticks[0], ticks[-1], PAD_L, W - PAD_R, ticks)
    y = _y_scale(left, zero=True)
    y2 = _y_scale(right, zero=True)
    body = _axes(x, y, y2, x_label, y_label, y2_label, x_names)
    for b in bands:
        x0, x1 = x(b.x0), x(b.x1)
        tip = f"<title>{escape(b.label)}</title>" if b.label else ""
        body.append(f'<rect x="{x0:.1f}" y="{PAD_T}" width="{max(x1 - x0, 1.5):.1f}" height="{H - PAD_T - PAD_B}" '
                    f'fill="{b.color}" fill-opacity="0.13" class="band">{tip}</rect>')
    for s in left:
        if y is not None:
            body.extend(_path(s, x, y))
    for s in right:
        if y2 is not None:
            body.extend(_path(s, x, y2))
    for i, m in enumerate(markers):
        px = x(m.x)
        body.append(f'<line x1="{px:.1f}" y1="{PAD_T}" x2="{px:.1f}" y2="{H - PAD_B}" stroke="{m.color}" '
                    f'stroke-width="1.5" stroke-dasharray="4 3" class="marker"/>')
        anchor = "end" if px > W - PAD_R - 80 else "start"
        dx = -4 if anchor == "end" else 4
        if m.label:
            body.append(f'<text x="{px + dx:.1f}" y="{PAD_T + 14 + 13 * (i % 3)}" class="mk" fill="{m.color}" '
                        f'text-anchor="{anchor}">{escape(m.label)}</text>')
    body.extend(_legend(series))
    return _frame(title, body, desc=desc)


def bar_chart(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    *,
    y_label: str,
    x_label: str = "",
    color: str = PALETTE[0],
    highlight: Mapping[int, str] | None = None,
    desc: str = "",
) -> str:
    """Vertical bars with category labels (e.g. histogram buckets); ``highlight`` maps a bar to a note."""
    if not values:
        return ""
    ticks = nice_ticks(0.0, max(max(values), 1e-12))
    y = _Scale(ticks[0], ticks[-1], H - PAD_B, PAD_T, ticks)
    x = _Scale(0, len(values), PAD_L, W - PAD_R)
    body = _axes(x, y, None, x_label, y_label, "", {})
    step = max(1, math.ceil(len(labels) / 12))
    bw = (W - PAD_L - PAD_R) / len(values)
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        px, py = x(i), y(v)
        note = (highlight or {}).get(i)
        fill = PALETTE[1] if note else color
        tip = escape(f"{label}: {v:.3g}" + (f" — {note}" if note else ""))
        body.append(f'<rect x="{px + 1:.1f}" y="{py:.1f}" width="{bw - 2:.1f}" height="{H - PAD_B - py:.1f}" '
                    f'fill="{fill}" class="bar"><title>{tip}</title></rect>')
        if i % step == 0:
            body.append(f'<text x="{px + bw / 2:.1f}" y="{H - PAD_B + 16}" class="tk" '
                        f'text-anchor="middle">{escape(label)}</text>')
        if note:
            body.append(f'<text x="{px + bw / 2:.1f}" y="{py - 4:.1f}" class="mk" fill="{PALETTE[1]}" '
                        f'text-anchor="middle">{escape(note)}</text>')
    return _frame(title, body, desc=desc)


def stacked_bar(title: str, parts: Sequence[tuple[str, float]], *, unit: str = "ms", desc: str = "") -> str:
    """One horizontal bar split into named parts (negative parts are drawn as zero and noted)."""
    total = sum(max(v, 0.0) for _, v in parts)
    if total <= 0:
        return ""
    x0, x1 = 20, W - 20
    body, px = [], float(x0)
    for i, (name, v) in enumerate(parts):
        w = max(v, 0.0) / total * (x1 - x0)
        color = PALETTE[i % len(PALETTE)]
        body.append(f'<rect x="{px:.1f}" y="38" width="{w:.1f}" height="34" fill="{color}" class="bar">'
                    f'<title>{escape(f"{name}: {v:.1f} {unit}")}</title></rect>')
        if w > 60:
            body.append(f'<text x="{px + w / 2:.1f}" y="60" class="bt" text-anchor="middle">{round(v)}</text>')
        px += w
    lx, ly = float(x0), 94.0  # the legend wraps onto more rows when it is long
    for i, (name, v) in enumerate(parts):
        label = f"{name} {round(v)} {unit}"  # round(): never "-0"
        width = 26 + 7.2 * len(label)
        if lx + width > x1 and lx > x0:
            lx, ly = float(x0), ly + 20
        body.append(f'<rect x="{lx:.1f}" y="{ly}" width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"/>')
        body.append(f'<text x="{lx + 16:.1f}" y="{ly + 10}" class="lg">{escape(label)}</text>')
        lx += width
    h = int(ly + 24)
    svg = _frame(title, body, desc=desc)
    return svg.replace(f'viewBox="0 0 {W} {H}"', f'viewBox="0 0 {W} {h}"', 1)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade inside [lo, hi] (positive values); round linear steps on a narrow range."""
    if hi < 3 * lo:  # under half a decade the log axis is nearly linear: label it like one
        return [t for t in nice_ticks(lo, hi) if lo <= t <= hi] or [lo, hi]
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0**e
            if lo <= v <= hi:
                ticks.append(v)
    if len(ticks) > 8:
        ticks = [t for t in ticks if math.log10(t).is_integer()] or ticks
    if len(ticks) < 3:  # less than a decade wide: every 1..9 multiple
        fine = [m * 10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                for m in range(1, 10) if lo <= m * 10.0**e <= hi]
        ticks = fine if len(fine) <= 9 else fine[::2]
    if len(ticks) < 2:  # a narrow range: label its ends
        ticks = sorted({*ticks, float(f"{lo:.2g}"), float(f"{hi:.2g}")})
        ticks = [t for t in ticks if lo <= t <= hi] or [lo, hi]
    return ticks


def histogram_chart(
    title: str,
    edges: Sequence[float],
    values: Sequence[float],
    *,
    x_label: str,
    y_label: str,
    markers: Sequence[Marker] = (),
    color: str = PALETTE[0],
    desc: str = "",
) -> str:
    """Bars between consecutive ``edges`` (positive, ascending) on a log x axis, e.g. latency bins."""
    if len(edges) != len(values) + 1 or not values or edges[0] <= 0 or max(values) <= 0:
        return ""
    lo, hi = math.log10(edges[0]), math.log10(edges[-1])
    if hi <= lo:
        return ""
    x = _Scale(lo, hi, PAD_L, W - PAD_R)
    ticks = nice_ticks(0.0, max(values))
    y = _Scale(ticks[0], ticks[-1], H - PAD_B, PAD_T, ticks)
    label = fmt_num if edges[-1] >= 3 * edges[0] else (lambda t: f"{t:g}")  # narrow: 8.25 stays 8.25
    names = {math.log10(t): label(t) for t in _log_ticks(edges[0], edges[-1])}
    body = _axes(x, y, None, x_label, y_label, "", names)
    for a, b, v in zip(edges, edges[1:], values, strict=False):
        if v <= 0:
            continue
        x0, x1, py = x(math.log10(a)), x(math.log10(b)), y(v)
        tip = escape(f"{a:.3g}–{b:.3g}: {v:.3g}")
        body.append(f'<rect x="{x0:.1f}" y="{py:.1f}" width="{max(x1 - x0 - 0.6, 0.8):.1f}" '
                    f'height="{H - PAD_B - py:.1f}" fill="{color}" class="bar"><title>{tip}</title></rect>')
    shown = sorted((m for m in markers if edges[0] <= m.x <= edges[-1]), key=lambda m: m.x)
    placed: list[tuple[float, float, int]] = []
    for m in shown:
        px = x(math.log10(m.x))
        body.append(f'<line x1="{px:.1f}" y1="{PAD_T}" x2="{px:.1f}" y2="{H - PAD_B}" stroke="{m.color}" '
                    f'stroke-width="1.5" stroke-dasharray="4 3" class="marker"/>')
        anchor, lx, row = _label_spot(px, label_width(m.label), placed)
        body.append(f'<text x="{lx:.1f}" y="{PAD_T + 16 + LABEL_ROW * row}" class="mk" fill="{m.color}" '
                    f'text-anchor="{anchor}">{escape(m.label)}</text>')
    return _frame(title, body, desc=desc)


LABEL_EM = 11.5
"""A marker label's font size in px (.mk in the report's CSS)."""
LABEL_ROW = 16
_NARROW, _SLIM, _WIDE = frozenset(" .,:;'|!il"), frozenset("fjrt()[]-/"), frozenset("mwMW%@")


def label_width(text: str) -> float:
    """An upper bound of a marker label's width in px: per-character em widths at least those of DejaVu Sans Bold,
    the widest sans-serif a report meets (its digits are 0.70 em, 'm' 1.04 em; a flat 7 px a character let two
    labels touch in Chromium)."""
    em = sum(0.40 if c in _NARROW else 0.55 if c in _SLIM else 1.05 if c in _WIDE else 0.86 if c.isupper() else 0.75
             for c in text)
    return em * LABEL_EM


def _label_spot(px: float, width: float, placed: list[tuple[float, float, int]]) -> tuple[str, float, int]:
    """Where a marker's label ``width`` px wide goes: right of its line, else left of it, on the first row where its
    box overlaps no label already ``placed`` (appended to) and stays inside the plot. Returns (text-anchor, x, row)."""
    for row in range(4):
        for anchor, x0 in (("start", px + 4), ("end", px - 4 - width)):
            x1 = x0 + width
            inside = x0 >= PAD_L and x1 <= W - PAD_R
            if inside and all(r != row or x1 + 4 <= a or x0 >= b + 4 for a, b, r in placed):
                placed.append((x0, x1, row))
                return anchor, (x0 if anchor == "start" else x1), row
    row = len(placed) % 4
    placed.append((px + 4, px + 4 + width, row))
    return "start", px + 4, row
