"""The report's sections, in page order: each takes the summary dict and returns HTML ("" = skip).

Every section reads only the summary (schema 1 of DESIGN.md plus ``timeseries``, ``histograms`` and
the ``attribution`` extras) and copes with what is missing: a run with one stage has no curve against
concurrency, a run without server metrics has no server timeline, and so on — each says so in a line
rather than drawing an empty axis.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from html import escape

from telemetry.report.fmt import badge, ms, num, ratio, table
from telemetry.report.svg import PALETTE, Band, Marker, Series, histogram_chart, line_chart, stacked_bar

Q_KEYS = ("count", "mean", "p50", "p90", "p95", "p99", "max")
LATENCY_ROWS = {
    "ttft_ms": "TTFT",
    "itl_ms": "ITL",
    "inter_chunk_ms": "inter-chunk",
    "tpot_ms": "TPOT",
    "e2e_ms": "E2E",
    "decode_span_ms": "decode span",
}


def _section(anchor: str, title: str, *parts: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{"".join(parts)}</section>'


def _note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _figure(svg: str, caption: str = "") -> str:
    if not svg:
        return ""
    cap = f"<figcaption>{escape(caption)}</figcaption>" if caption else ""
    return f'<figure class="plot-fig">{svg}{cap}</figure>'


def _q(d: Mapping | None, key: str) -> float | None:
    if not isinstance(d, Mapping):
        return None
    v = d.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _q_cell(q: Mapping, key: str) -> str:
    """A quantile; one read from a server histogram's first bucket is only known as "≤ its bound"."""
    bucket = (q.get("bucket") or {}).get(key) if isinstance(q.get("bucket"), Mapping) else None
    if bucket and bucket[0] == 0 and bucket[1] is not None:
        return f"≤{ms(bucket[1])}"
    return ms(_q(q, key))


def _q_row(label: str, q: Mapping | None) -> list[str]:
    if not isinstance(q, Mapping):
        return [label] + ["–"] * len(Q_KEYS)
    return [label, num(q.get("count"))] + [_q_cell(q, k) for k in Q_KEYS[1:]]


# ---- overview -------------------------------------------------------------------------------------


def overview(s: Mapping) -> str:
    req = s.get("requests") or {}
    tok = s.get("tokens") or {}
    srv = s.get("server") or {}
    slo = s.get("slo") or {}
    cards = [
        ("requests", f"{num(req.get('total'))}", f"{num(req.get('ok'))} ok · {num(req.get('failed'))} failed"),
        ("output tokens/s", num(tok.get("output_per_s")),
         f"{num(tok.get('output'))} tokens ({tok.get('source', '?')})"),
        ("TTFT p99", f"{ms(_q(s.get('ttft_ms'), 'p99'))} ms", f"p50 {ms(_q(s.get('ttft_ms'), 'p50'))} ms"),
        ("ITL p99", f"{ms(_q(s.get('itl_ms'), 'p99'))} ms", f"p50 {ms(_q(s.get('itl_ms'), 'p50'))} ms"),
        ("goodput", f"{num(s.get('goodput_rps'), 2)} req/s", "requests/s meeting every SLO"),
        ("server KV max", ratio((srv.get("kv_cache_usage") or {}).get("max")),
         f"{num(srv.get('preemptions'))} preemptions, {num(srv.get('requests_waiting_max'))} waiting max"),
    ]
    att = s.get("attribution")
    if isinstance(att, Mapping) and "spikes" in att:
        spikes = att.get("spikes") or []
        cats = Counter(sp.get("category", "unknown") for sp in spikes)
        sub = ", ".join(f"{n} {c.replace('_', ' ')}" for c, n in cats.most_common(3)) or "no window over the threshold"
        failed = (att.get("batching_failure") or {}).get("verdict")
        cards.append(("latency spikes", str(len(spikes)), sub + ("; batching FAILED" if failed else "")))
    html = "".join(
        f'<div class="card"><div class="k">{escape(k)}</div><div class="v">{escape(v)}</div>'
        f'<div class="s">{escape(sub)}</div></div>'
        for k, v, sub in cards
    )
    errors = req.get("errors") or {}
    err = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()) if v) or "none"
    verdict = badge(slo.get("passed")) if slo.get("checks") else badge(None)
    meta = (
        f'<p class="meta">model <b>{escape(str(s.get("model") or "?"))}</b> · host {escape(str(s.get("host", "?")))}'
        f" · {num(s.get('duration_s'))} s · {num(s.get('workers'))} worker(s) · errors: {escape(err)}"
        f" · server metrics: {escape(str(srv.get('metric_names', 'none')))} · SLO {verdict}</p>"
    )
    return _section("overview", "Overview", meta, f'<div class="cards">{html}</div>')


def latency(s: Mapping) -> str:
    rows = [_q_row(label, s.get(key)) for key, label in LATENCY_ROWS.items() if key in s]
    if not rows:
        return ""
    return _section("latency", "Latency (ms)", table(["metric", *Q_KEYS], rows, cls="num"))


# ---- stages: against concurrency ------------------------------------------------------------------


def _stage_axis(stages: Sequence[Mapping]) -> tuple[list[float], str, dict[float, str] | None]:
    users = [st.get("users") for st in stages]
    rates = [st.get("rate") for st in stages]
    if all(isinstance(u, int | float) for u in users) and len(set(users)) == len(users):
        return [float(u) for u in users], "concurrent users", None
    if all(isinstance(r, int | float) for r in rates) and len(set(rates)) == len(rates):
        return [float(r) for r in rates], "request rate (req/s)", None
    xs = [float(i) for i in range(len(stages))]
    return xs, "stage", {x: str(st.get("name", i)) for i, (x, st) in enumerate(zip(xs, stages, strict=True))}


def _rps(st: Mapping) -> float | None:
    span = (st.get("end_s") or 0) - (st.get("start_s") or 0)
    return st.get("requests", 0) / span if span > 0 and st.get("requests") is not None else None


def stages(s: Mapping) -> str:
    sts = [st for st in (s.get("stages") or []) if isinstance(st, Mapping)]
    if not sts:
        return ""
    sat = s.get("saturation") or {}
    knee = sat.get("stage")
    measured = [st for st in sts if not st.get("warmup")]  # warm-up stages are in the table, not on the curves
    xs, x_label, names = _stage_axis(measured)
    markers = [Marker(x, f"knee: {knee}", "#b00") for x, st in zip(xs, measured, strict=True) if st.get("name") == knee]
    parts: list[str] = []
    if len(measured) >= 2:
        thr = line_chart(
            "Throughput against load",
            [Series("output tokens/s", xs, [st.get("output_per_s") for st in measured], PALETTE[0]),
             Series("requests/s", xs, [_rps(st) for st in measured], PALETTE[2], right=True, dashed=True)],
            x_label=x_label, y_label="output tokens/s", y2_label="requests/s", markers=markers, x_names=names,
        )
        ttft = line_chart(
            "TTFT against load",
            [Series("TTFT p50", xs, [_q(st.get("ttft_ms"), "p50") for st in measured], PALETTE[0]),
             Series("TTFT p99", xs, [_q(st.get("ttft_ms"), "p99") for st in measured], PALETTE[1])],
            x_label=x_label, y_label="ms", markers=markers, x_names=names,
        )
        itl = line_chart(
            "ITL and TPOT against load",
            [Series("ITL p50", xs, [_q(st.get("itl_ms"), "p50") for st in measured], PALETTE[0]),
             Series("ITL p99", xs, [_q(st.get("itl_ms"), "p99") for st in measured], PALETTE[1]),
             Series("TPOT p99", xs, [_q(st.get("tpot_ms"), "p99") for st in measured], PALETTE[3], dashed=True)],
            x_label=x_label, y_label="ms", markers=markers, x_names=names,
        )
        parts.append('<div class="grid">' + _figure(thr) + _figure(ttft) + _figure(itl) + "</div>")
    else:
        parts.append(_note("One stage only: no curve against concurrency (run a --shape sweep for one)."))
    knee_text = f"Saturation knee: {knee} — {sat.get('reason', '')}" if knee else f"No knee: {sat.get('reason', 'n/a')}"
    parts.append(_note(knee_text))
    rows = []
    for st in sts:
        mark = ' class="knee"' if st.get("name") == knee else ' class="warmup"' if st.get("warmup") else ""
        cells = [
            escape(str(st.get("name"))), num(st.get("users")), num(st.get("rate"), 2), escape(str(st.get("input_len"))),
            num(_span(st)), num(st.get("requests")), num(st.get("output_per_s")),
            ms(_q(st.get("ttft_ms"), "p50")), ms(_q(st.get("ttft_ms"), "p99")), ms(_q(st.get("itl_ms"), "p50")),
            ms(_q(st.get("itl_ms"), "p99")), ms(_q(st.get("tpot_ms"), "p99")), ms(_q(st.get("e2e_ms"), "p99")),
            ms(_q(st.get("client_queue_ms"), "p99")), ratio(st.get("client_kv_block_fill")),
            ratio(st.get("server_kv_usage_mean")), num(st.get("preemptions")),
        ]
        rows.append(f"<tr{mark}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = ["stage", "users", "rate", "input len", "s", "requests", "out tok/s", "TTFT p50", "TTFT p99", "ITL p50",
               "ITL p99", "TPOT p99", "E2E p99", "queue p99", "client KV fill", "server KV mean", "preempt."]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    parts.append(f'<table class="num"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return _section("stages", "Stages", *parts)


def _span(st: Mapping) -> float | None:
    a, b = st.get("start_s"), st.get("end_s")
    return round(b - a, 1) if isinstance(a, int | float) and isinstance(b, int | float) else None


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
               if (v := _q(q, key)) is not None and v > 0]
    return histogram_chart(
        title, edges, [100.0 * c / total for c in counts], x_label="ms (log scale)", y_label="% of samples",
        markers=markers, desc=f"{int(total)} samples",
    )


DISTRIBUTIONS = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2e": "E2E", "decode_span": "decode span"}


def distributions(s: Mapping) -> str:
    hists = s.get("histograms") or {}
    figs = [_figure(_distribution(f"{label} distribution", hists.get(key), s.get(f"{key}_ms")))
            for key, label in DISTRIBUTIONS.items()]
    figs = [f for f in figs if f]
    if not figs:
        return _section("distributions", "Latency distributions", _note("No latency histograms in the summary."))
    return _section("distributions", "Latency distributions", '<div class="grid">' + "".join(figs) + "</div>",
                    _note("Share of samples per log-spaced bin; dashed lines: the run's p50 and p99."))


# ---- server over time ------------------------------------------------------------------------------

SERIES_KEYS = {"kv": ("kv_cache_usage",), "waiting": ("requests_waiting",), "running": ("requests_running",)}
"""Plotted column -> field of a scraped server sample (telemetry.scraper)."""


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


def _throughput_timeline(s: Mapping) -> str:
    ts = s.get("timeseries")
    client = [w for w in (ts.get("client") or []) if isinstance(w, Mapping)] if isinstance(ts, Mapping) else []
    if len(client) < 2:
        return ""
    mid = [(w["start_s"] + w["end_s"]) / 2 for w in client]
    rps = [w.get("requests", 0) / (w["end_s"] - w["start_s"]) if w["end_s"] > w["start_s"] else None for w in client]
    series = [Series("output tokens/s", mid, [w.get("output_per_s") for w in client], PALETTE[0]),
              Series("requests/s", mid, rps, PALETTE[2], right=True, dashed=True)]
    return line_chart(f"Throughput per {num(ts.get('window_s'))} s window", series, x_label="seconds since start",
                      y_label="output tokens/s", y2_label="requests/s", markers=_stage_markers(s), x_from_zero=True)


def server_timeline(s: Mapping) -> str:
    figs = [_figure(_throughput_timeline(s))]
    cols = timeseries_columns(s.get("timeseries"))
    t = cols["t"]
    has = {k: any(v is not None for v in cols[k]) for k in SERIES_KEYS}
    if t and (has["kv"] or has["waiting"] or has["running"]):
        series = []
        if has["kv"]:
            series.append(Series("server KV usage", t, cols["kv"], PALETTE[4]))
        if has["waiting"]:
            series.append(Series("waiting", t, cols["waiting"], PALETTE[1], right=True))
        if has["running"]:
            series.append(Series("running", t, cols["running"], PALETTE[2], right=True))
        svg = line_chart(
            "Server KV-cache usage and queue", series, x_label="seconds since start", y_label="KV usage (0–1)",
            y2_label="requests", markers=_stage_markers(s), bands=_spike_bands(s), x_from_zero=True,
        )
        figs.append(_figure(svg, "Shaded: latency-spike windows (see Attribution)."))
    else:
        figs.append(_note("No server metrics were scraped in this run (--server-metrics-url)."))
    return _section("server", "Over time", '<div class="grid">' + "".join(f for f in figs if f) + "</div>")


# ---- SLO -------------------------------------------------------------------------------------------


def slo(s: Mapping) -> str:
    checks = (s.get("slo") or {}).get("checks") or []
    if not checks:
        return _section("slo", "SLO verdicts", _note("No SLO configured (--slo-preset seed or --slo-*)."))
    rows = [[escape(str(c.get("name"))), num(c.get("threshold"), 3), num(c.get("value"), 3), badge(c.get("passed"))]
            for c in checks]
    verdict = badge((s.get("slo") or {}).get("passed"))
    return _section("slo", "SLO verdicts", f"<p>overall {verdict}</p>",
                    table(["check", "threshold", "value", "verdict"], rows, cls="num", raw=True))


# ---- attribution -----------------------------------------------------------------------------------


def _decomposition_figure(d: Mapping) -> str:
    rem = d.get("remainder_ms") or {}
    parts = [("server queue", _q(d.get("queue_ms"), "mean")), ("server prefill", _q(d.get("prefill_ms"), "mean")),
             ("other server", rem.get("server_other")), ("network & client", rem.get("network_client"))]
    if not all(isinstance(v, int | float) for _, v in parts):
        return ""
    return _figure(stacked_bar("Where the mean TTFT went", [(n, float(v)) for n, v in parts]),
                   "Means add up, quantiles do not: the split uses means over the same span.")


def _decomposition(d: Mapping) -> str:
    if not d:
        return ""
    rows = [
        _q_row(label, d.get(key))
        for key, label in (("ttft_client_ms", "client TTFT"), ("ttft_server_ms", "server TTFT"),
                           ("queue_ms", "server queue"), ("prefill_ms", "server prefill"),
                           ("decode_ms", "server decode (per request)"), ("itl_client_ms", "client ITL"),
                           ("decode_itl_server_ms", "server ITL"))
        if key in d
    ]
    statement = d.get("statement")
    html = (_note(statement) if statement else "") + table(["", *Q_KEYS], rows, cls="num") + _note(
        "Server quantiles are interpolated inside vLLM's histogram buckets (as Prometheus' histogram_quantile "
        "does); \"≤X\" marks one that lies in the first bucket, known only to be at most X. Means are exact.")
    stages = [st for st in d.get("stages") or [] if isinstance(st, Mapping) and not st.get("warmup")]
    if len(stages) > 1:
        srows = []
        for st in stages:
            rem = st.get("remainder_ms") or {}
            srows.append([str(st.get("name")), ms(_q(st.get("ttft_client_ms"), "mean")),
                          ms(_q(st.get("ttft_server_ms"), "mean")), ms(_q(st.get("queue_ms"), "mean")),
                          ms(_q(st.get("prefill_ms"), "mean")), ms(rem.get("server_other")),
                          ms(rem.get("network_client")), ms(_q(st.get("itl_client_ms"), "mean")),
                          ms(_q(st.get("decode_itl_server_ms"), "mean"))])
        html += "<h3>Per stage (means, ms)</h3>" + table(
            ["stage", "client TTFT", "server TTFT", "queue", "prefill", "other server", "network & client",
             "client ITL", "server ITL"], srows, cls="num")
    return html


def _windows_chart(att: Mapping) -> str:
    ws = [w for w in att.get("windows") or [] if isinstance(w, Mapping)]
    if len(ws) < 2:
        return ""
    mid = [(w["start_s"] + w["end_s"]) / 2 for w in ws]
    series = [Series("TTFT p99", mid, [w.get("ttft_p99_ms") for w in ws], PALETTE[1]),
              Series("TTFT p50", mid, [w.get("ttft_p50_ms") for w in ws], PALETTE[0]),
              Series("ITL p99", mid, [w.get("itl_p99_ms") for w in ws], PALETTE[3], right=True, dashed=True)]
    flagged = set((att.get("batching_failure") or {}).get("flagged_windows") or [])
    bands = [Band(w["start_s"], w["end_s"], PALETTE[4], "batching flagged") for w in ws if w.get("index") in flagged]
    bands += [Band(sp["start_s"], sp["end_s"], PALETTE[1], sp.get("cause", "")) for sp in att.get("spikes") or []]
    return line_chart(
        f"Client latency per {num(att.get('window_s'))} s window", series, x_label="seconds since start",
        y_label="TTFT ms", y2_label="ITL ms", bands=bands, x_from_zero=True,
    )


SPIKE_METRICS = {"ttft_p99_ms": "TTFT p99", "itl_p99_ms": "ITL p99"}


def attribution(s: Mapping) -> str:
    att = s.get("attribution")
    if not isinstance(att, Mapping):
        return _section("attribution", "P99 attribution", _note("No attribution in this summary."))
    if "error" in att:
        return _section("attribution", "P99 attribution", _note(f"The attribution failed: {att['error']}"))
    bf = att.get("batching_failure") or {}
    base = bf.get("baseline") or {}
    flagged = bf.get("flagged_windows") or []
    judged = "verdict" in bf and (base or bf.get("verdict"))
    verdict = badge(not bf.get("verdict") if judged else None, yes="batching OK", no="batching FAILED",
                    na="not judged")
    base_text = (f"baseline (windows {base.get('windows')}): TTFT p99 {ms(base.get('p99_ms'))} ms, "
                 f"batch {num(base.get('batch_size_median'))}" if base else "no baseline (too few windows with data)")
    flagged_text = escape(str(flagged) if flagged else "none")
    bf_html = f"<p>Dynamic batching (seed 3.3): {verdict} — flagged windows: {flagged_text}; {escape(base_text)}</p>"
    spikes = att.get("spikes") or []
    if spikes:
        rows = [[f"{sp.get('start_s', 0):.0f}–{sp.get('end_s', 0):.0f}", SPIKE_METRICS.get(sp.get("metric"), "?"),
                 f"{sp.get('ratio', 0):.1f}×", str(sp.get("category", "")), str(sp.get("cause", ""))] for sp in spikes]
        spikes_html = table(["window (s)", "metric", "× median", "category", "cause"], rows, cls="spikes")
    else:
        spikes_html = _note(f"No window's P99 exceeded {num(att.get('spike_factor', 2))}× the run's median window P99.")
    decomposition = att.get("decomposition") or {}
    figs = (_figure(_windows_chart(att), "Red bands: spike windows; purple: windows flagged by the batching rule.")
            + _decomposition_figure(decomposition))
    return _section(
        "attribution", "P99 attribution", bf_html, f'<div class="grid">{figs}</div>' if figs else "",
        "<h3>Spikes</h3>", spikes_html, "<h3>First-token decomposition</h3>", _decomposition(decomposition),
    )


def versions(s: Mapping) -> str:
    vs = s.get("versions") or {}
    if not vs:
        return ""
    rows = [[escape(str(v)), num(d.get("requests")), ms(_q(d.get("ttft_ms"), "p50")), ms(_q(d.get("ttft_ms"), "p99")),
             ms(_q(d.get("itl_ms"), "p50")), ms(_q(d.get("itl_ms"), "p99"))] for v, d in vs.items()]
    return _section("versions", "Route versions",
                    table(["version", "requests", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99"], rows, cls="num",
                          raw=True))


SECTIONS: dict[str, Callable[[Mapping], str]] = {
    "overview": overview,
    "latency": latency,
    "stages": stages,
    "distributions": distributions,
    "server": server_timeline,
    "slo": slo,
    "attribution": attribution,
    "versions": versions,
}
"""Section id -> renderer, in page order."""
