"""Report sections drawn from the summary's ``histograms`` and ``timeseries``: latency distributions,
client latency and throughput per window, and the server's KV-cache usage and queue over time (stages and spike
windows marked).

The charts over time (:func:`latency_timeline`, :func:`throughput_timeline`, :func:`server_chart`) are also what
the web UI's live charts draw (webui/charts.py), from the summary as of now: one plotting module, two callers."""

from __future__ import annotations

import math
from collections.abc import Mapping

from telemetry.metrics import having, reasoned_in, shown
from telemetry.outputs.report.fmt import ms, num
from telemetry.outputs.report.parts import figure, note, qv, section
from telemetry.outputs.report.svg import PALETTE, Band, Marker, Series, histogram_chart, line_chart

# ---- latency distributions -------------------------------------------------------------------------


def hist_bins(h) -> tuple[list[float], list[float]]:
    """A summary histogram as (edges in ms, counts per bin). Forms: ``{"edges_ms": [...], "counts": [...]}``
    (telemetry's log-spaced bins) or ``{"le": [seconds...], "cum": [...]}`` (cumulative, as scraped)."""
    if not isinstance(h, Mapping):
        return [], []
    if "edges_ms" in h:
        return [float(e) for e in h["edges_ms"]], [float(c) for c in h.get("counts", [])]
    les, cum = list(h.get("le") or []), [float(c) for c in h.get("cum") or []]
    if not les or len(les) != len(cum):
        return [], []
    counts = [c - p for c, p in zip(cum, [0.0, *cum[:-1]], strict=True)]
    finite = [float(le) * 1000.0 for le in les if math.isfinite(float(le))]
    if not finite:
        return [], []
    # the first bucket is drawn from half its bound (log axis); the +Inf bucket cannot be placed
    edges = [finite[0] / 2, *finite]
    return edges, counts[: len(finite)]


def _distribution(title: str, h, q: Mapping | None) -> str:
    edges, counts = hist_bins(h)
    total = sum(counts)
    if total <= 0 or len(edges) != len(counts) + 1:
        return ""
    markers = [Marker(v, f"{key} {ms(v)} ms", color) for key, color in (("p50", PALETTE[2]), ("p99", PALETTE[1]))
               if (v := qv(q, key)) is not None and v > 0]
    return histogram_chart(
        title, edges, [100.0 * c / total for c in counts], x_label="ms (log scale)", y_label="% of samples",
        markers=markers, desc=f"{int(total)} samples",
    )


DISTRIBUTIONS = {m.key: m.label for m in having("distribution")}
"""Key of the summary's ``histograms`` -> label."""


def distributions(s: Mapping) -> str:
    hists = s.get("histograms") or {}
    figs = [figure(_distribution(f"{DISTRIBUTIONS[key]} distribution", hists.get(key), s.get(f"{key}_ms")))
            for key in shown(DISTRIBUTIONS, reasoned_in(s))]
    figs = [f for f in figs if f]
    if not figs:
        return section("distributions", "Latency distributions", note("No latency histograms in the summary."))
    return section("distributions", "Latency distributions", '<div class="grid">' + "".join(figs) + "</div>",
                    note("Share of samples per log-spaced bin; dashed lines: the run's p50 and p99."))


# ---- server over time ------------------------------------------------------------------------------

SERIES_KEYS = {"kv": ("kv_cache_usage",), "waiting": ("requests_waiting",), "running": ("requests_running",)}
"""Plotted column -> field of a scraped server sample (telemetry.measure.scraper)."""


def timeseries_columns(ts) -> dict[str, list]:
    """The server samples of ``timeseries`` (telemetry's ``{"server": [sample, ...], "client": [...]}``, or a
    bare list of samples) as columns ``{"t": [...], "kv": [...], "waiting": [...], ...}``."""
    if isinstance(ts, Mapping):
        ts = ts.get("server")
    rows = [r for r in (ts or []) if isinstance(r, Mapping) and isinstance(r.get("t"), int | float)]
    cols = {"t": [r["t"] for r in rows]}
    for name, keys in SERIES_KEYS.items():
        cols[name] = [next((r[k] for k in keys if r.get(k) is not None), None) for r in rows]
    return cols


def _stage_markers(s: Mapping) -> list[Marker]:
    sts = s.get("stages") or []
    if len(sts) < 2:
        return []
    # warm-up stages get a line without a label (their label would sit on top of the next stage's)
    return [Marker(st["start_s"], "", "#bbb") if st.get("warmup") else Marker(st["start_s"], str(st["name"]), "#777")
            for st in sts if isinstance(st.get("start_s"), int | float)]


def _spike_bands(s: Mapping) -> list[Band]:
    att = s.get("attribution") or {}
    return [Band(sp["start_s"], sp["end_s"], PALETTE[1], sp.get("cause", "")) for sp in att.get("spikes") or []
            if isinstance(sp.get("start_s"), int | float) and isinstance(sp.get("end_s"), int | float)]


def _client_windows(s: Mapping) -> list[Mapping]:
    ts = s.get("timeseries")
    return [w for w in (ts.get("client") or []) if isinstance(w, Mapping)] if isinstance(ts, Mapping) else []


LATENCY_LINES = (("ttft", "p50", PALETTE[0], False), ("ttft", "p99", PALETTE[1], False),
                 ("tpot", "p50", PALETTE[2], True), ("itl", "p50", PALETTE[4], True),
                 ("itl", "p99", PALETTE[3], True))
"""(metric, quantile, colour, on the right-hand axis) of the latency-over-time chart."""


def latency_timeline(s: Mapping) -> str:
    """TTFT p50/p99 (left axis), TPOT p50 and ITL p50/p99 (right axis) per window, stage starts marked."""
    client = _client_windows(s)
    if len(client) < 2:
        return ""
    mid = [(w["start_s"] + w["end_s"]) / 2 for w in client]
    labels = {m.key: m.label for m in having("distribution")} | {"itl": "ITL"}
    series = [Series(f"{labels.get(key, key)} {q}", mid, [qv(w.get(f"{key}_ms"), q) for w in client], color,
                     right=right, dashed=right)
              for key, q, color, right in LATENCY_LINES]
    return line_chart("Client latency over time", series,
                      x_label="seconds since start", y_label="TTFT ms", y2_label="TPOT / ITL ms",
                      markers=_stage_markers(s), x_from_zero=True)


def throughput_timeline(s: Mapping) -> str:
    """Output tokens/s (left) and requests/s (right) per window, stage starts marked."""
    client = _client_windows(s)
    ts = s.get("timeseries") or {}
    if len(client) < 2:
        return ""
    mid = [(w["start_s"] + w["end_s"]) / 2 for w in client]
    rps = [w.get("requests", 0) / (w["end_s"] - w["start_s"]) if w["end_s"] > w["start_s"] else None for w in client]
    series = [Series("output tokens/s", mid, [w.get("output_per_s") for w in client], PALETTE[0]),
              Series("requests/s", mid, rps, PALETTE[2], right=True, dashed=True)]
    return line_chart(f"Throughput per {num(ts.get('window_s'))} s window", series, x_label="seconds since start",
                      y_label="output tokens/s", y2_label="requests/s", markers=_stage_markers(s), x_from_zero=True)


def server_chart(s: Mapping) -> str:
    """The scraped server KV usage (left) and running / waiting requests (right); "" without server samples."""
    cols = timeseries_columns(s.get("timeseries"))
    t = cols["t"]
    has = {k: any(v is not None for v in cols[k]) for k in SERIES_KEYS}
    if not t or not (has["kv"] or has["waiting"] or has["running"]):
        return ""
    series = []
    if has["kv"]:
        series.append(Series("server KV usage", t, cols["kv"], PALETTE[4]))
    if has["waiting"]:
        series.append(Series("waiting", t, cols["waiting"], PALETTE[1], right=True))
    if has["running"]:
        series.append(Series("running", t, cols["running"], PALETTE[2], right=True))
    return line_chart(
        "Server KV-cache usage and queue", series, x_label="seconds since start", y_label="KV usage (0–1)",
        y2_label="requests", markers=_stage_markers(s), bands=_spike_bands(s), x_from_zero=True,
    )


def server_timeline(s: Mapping) -> str:
    figs = [figure(throughput_timeline(s)), figure(latency_timeline(s))]
    svg = server_chart(s)
    if svg:
        figs.append(figure(svg, "Shaded: latency-spike windows (see Attribution)."))
    else:
        figs.append(note("No server metrics were scraped in this run (--server-metrics-url)."))
    return section("server", "Over time", '<div class="grid">' + "".join(f for f in figs if f) + "</div>")
