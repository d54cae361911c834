"""The report's sections, in page order: each takes the summary dict and returns HTML ("" = skip).

Every section reads only the summary (docs/summary.schema.json plus ``timeseries``, ``histograms`` and
the ``attribution`` extras) and copes with what is missing: a run with one stage has no curve against
concurrency, a run without server metrics has no server timeline, and so on — each says so in a line
rather than drawing an empty axis. The time-series sections live in :mod:`~telemetry.outputs.report.timeline`,
the attribution one in :mod:`~telemetry.outputs.report.attribution_view`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from html import escape

from telemetry.metrics import BY_KEY, keys, reasoned_in, shown
from telemetry.outputs.report.attribution_view import attribution
from telemetry.outputs.report.capacity_view import capacity
from telemetry.outputs.report.fmt import badge, ms, num, ratio, table
from telemetry.outputs.report.parts import Q_KEYS, figure, note, q_row, qv, section
from telemetry.outputs.report.svg import PALETTE, Marker, Series, line_chart
from telemetry.outputs.report.timeline import distributions, server_timeline

LATENCY_ROWS = keys("top")
"""The latency table's rows (registry keys)."""

# How the report presents each client metric (registry keys of telemetry.metrics, in display order)
REPORT_CARDS = ("ttft", "itl", "ttst", "ttfa")
"""A p99 card (p50 under it) in the overview."""
REPORT_STAGES: dict[str, tuple[str, ...]] = {
    "ttft": ("p50", "p99"), "itl": ("p50", "p99"), "tpot": ("p99",), "e2e": ("p99",), "client_queue": ("p99",),
    "ttst": ("p50", "p99"), "prompt_build": ("p99",), "ttfa": ("p50", "p99"), "thinking": ("p50",),
}
"""Quantile columns of the stages table (per-stage metrics)."""
REPORT_VERSIONS: dict[str, tuple[str, ...]] = {k: ("p50", "p99") for k in ("ttft", "itl", "ttst", "ttfa")}
"""Quantile columns of the route versions table."""
LOAD_CHARTS: dict[str, dict[str, tuple[str, ...]]] = {
    "TTFT": {"ttft": ("p50", "p99"), "ttfa": ("p50", "p99")},
    "ITL and TPOT": {"itl": ("p50", "p99"), "tpot": ("p99",)},
    "TTST": {"ttst": ("p50", "p99")},
}
"""Plots against load: title -> the per-stage metrics drawn in it and their quantiles (the first solid, the others
dashed)."""


# ---- overview -------------------------------------------------------------------------------------


def overview(s: Mapping) -> str:
    req = s.get("requests") or {}
    tok = s.get("tokens") or {}
    srv = s.get("server") or {}
    slo = s.get("slo") or {}
    cards = [
        ("requests", f"{num(req.get('total'))}", f"{num(req.get('ok'))} ok · {num(req.get('failed'))} failed"),
        ("output tokens/s", num(tok.get("output_per_s")),
         f"{num(tok.get('output'))} tokens ({tok.get('source', '?')})"
         + (f"; {num(tok['reasoning'])} reasoning, {num(tok.get('answer'))} answer" if tok.get("reasoning") else "")),
        *((f"{m.label} p99", f"{ms(qv(s.get(m.summary_key), 'p99'))} ms",
           f"p50 {ms(qv(s.get(m.summary_key), 'p50'))} ms")
          for m in map(BY_KEY.get, shown(REPORT_CARDS, reasoned_in(s)))),
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
    return section("overview", "Overview", meta, f'<div class="cards">{html}</div>')


def latency(s: Mapping) -> str:
    rows = [q_row(m.label, s.get(m.summary_key)) for m in map(BY_KEY.get, shown(LATENCY_ROWS, reasoned_in(s)))
            if m.summary_key in s]
    if not rows:
        return ""
    return section("latency", "Latency (ms)", table(["metric", *Q_KEYS], rows, cls="num"))


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
    parts: list[str] = []
    charts = load_charts(s)
    if charts:
        parts.append('<div class="grid">' + "".join(figure(f) for f in charts) + "</div>")
    else:
        parts.append(note("One stage only: no curve against concurrency (run a --shape sweep for one)."))
    knee_text = f"Saturation knee: {knee} — {sat.get('reason', '')}" if knee else f"No knee: {sat.get('reason', 'n/a')}"
    parts.append(note(knee_text))
    rows = []
    quantiles = [(BY_KEY[k], q) for k in shown(REPORT_STAGES, reasoned_in(s)) for q in REPORT_STAGES[k]]
    for st in sts:
        mark = ' class="knee"' if st.get("name") == knee else ' class="warmup"' if st.get("warmup") else ""
        cells = [
            escape(str(st.get("name"))), num(st.get("users")), num(st.get("rate"), 2), escape(str(st.get("input_len"))),
            num(_span(st)), num(st.get("requests")), num(st.get("output_per_s")),
            *(ms(qv(st.get(m.summary_key), q)) for m, q in quantiles), ratio(st.get("client_kv_block_fill")),
            ratio(st.get("server_kv_usage_mean")), ratio(st.get("server_kv_usage_max")), num(st.get("preemptions")),
        ]
        rows.append(f"<tr{mark}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    headers = ["stage", "users", "rate", "input len", "s", "requests", "out tok/s",
               *(f"{m.label} {q}" for m, q in quantiles), "client KV fill", "server KV mean", "server KV max",
               "preempt."]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    parts.append(f'<table class="num"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return section("stages", "Stages", *parts)


def load_charts(s: Mapping) -> list[str]:
    """Throughput and the :data:`LOAD_CHARTS` latencies against load, one point per measured stage (the knee marked);
    [] with fewer than two measured stages. The report's stages section and the web UI's live charts draw these."""
    sts = [st for st in (s.get("stages") or []) if isinstance(st, Mapping)]
    measured = [st for st in sts if not st.get("warmup")]  # warm-up stages are in the table, not on the curves
    if len(measured) < 2:
        return []
    knee = (s.get("saturation") or {}).get("stage")
    xs, x_label, names = _stage_axis(measured)
    markers = [Marker(x, f"knee: {knee}", "#b00") for x, st in zip(xs, measured, strict=True) if st.get("name") == knee]
    thr = line_chart(
        "Throughput against load",
        [Series("output tokens/s", xs, [st.get("output_per_s") for st in measured], PALETTE[0]),
         Series("requests/s", xs, [_rps(st) for st in measured], PALETTE[2], right=True, dashed=True)],
        x_label=x_label, y_label="output tokens/s", y2_label="requests/s", markers=markers, x_names=names,
    )
    latency = [line_chart(f"{title} against load", series, x_label=x_label, y_label="ms", markers=markers,
                          x_names=names) for title, series in _load_series(measured, xs, reasoned_in(s)).items()]
    return [c for c in (thr, *latency) if c]


def _load_series(measured: Sequence[Mapping], xs: list[float], did_reason: bool) -> dict[str, list[Series]]:
    """Plot title -> series, for the metrics drawn against load (:data:`LOAD_CHARTS`): the first metric of a plot
    in solid lines, the others dashed."""
    plots: dict[str, list[Series]] = {}
    for title, metrics in LOAD_CHARTS.items():
        series = plots[title] = []
        for i, key in enumerate(shown(metrics, did_reason)):
            m, quantiles = BY_KEY[key], metrics[key]
            for q in quantiles:
                color = PALETTE[len(series) if i == 0 else len(series) + 1]
                values = [qv(st.get(m.summary_key), q) for st in measured]
                series.append(Series(f"{m.label} {q}", xs, values, color, dashed=i > 0))
    return plots


def _span(st: Mapping) -> float | None:
    a, b = st.get("start_s"), st.get("end_s")
    return round(b - a, 1) if isinstance(a, int | float) and isinstance(b, int | float) else None


# ---- SLO -------------------------------------------------------------------------------------------


def slo(s: Mapping) -> str:
    checks = (s.get("slo") or {}).get("checks") or []
    if not checks:
        return section("slo", "SLO verdicts", note("No SLO configured (--slo-preset interactive or --slo-*)."))
    rows = [[escape(str(c.get("name"))), num(c.get("threshold"), 3), num(c.get("value"), 3), badge(c.get("passed"))]
            for c in checks]
    verdict = badge((s.get("slo") or {}).get("passed"))
    return section("slo", "SLO verdicts", f"<p>overall {verdict}</p>",
                    table(["check", "threshold", "value", "verdict"], rows, cls="num", raw=True))


def versions(s: Mapping) -> str:
    vs = s.get("versions") or {}
    if not vs:
        return ""
    quantiles = [(BY_KEY[k], q) for k in shown(REPORT_VERSIONS, reasoned_in(s)) for q in REPORT_VERSIONS[k]]
    rows = [[escape(str(v)), num(d.get("requests")), *(ms(qv(d.get(m.summary_key), q)) for m, q in quantiles)]
            for v, d in vs.items()]
    headers = ["version", "requests", *(f"{m.label} {q}" for m, q in quantiles)]
    out = table(headers, rows, cls="num", raw=True)
    backends = [(v, d) for v, d in vs.items() if d.get("server") or d.get("tokenizer")]
    if backends:  # each version's tokenizer and its own backend (--route-tokenizers, every route backend scraped)
        brows = []
        for v, d in backends:
            t, sv = d.get("tokenizer") or {}, d.get("server") or {}
            kv = sv.get("kv_cache_usage") or {}
            brows.append([escape(str(v)), escape(str(t.get("name", "–"))), escape(str(t.get("compat_level", "–"))),
                          ratio(d.get("prompt_mismatch_ratio")), ratio(kv.get("mean")), ratio(kv.get("max")),
                          num((sv.get("requests_waiting") or {}).get("max")), num(sv.get("preemptions")),
                          ratio(sv.get("prefix_cache_hit_rate")), num(sv.get("scrape_failures"))])
        out += table(["version", "tokenizer", "compat", "prompt mismatch", "server KV mean", "KV max", "waiting max",
                      "preemptions", "prefix hit rate", "failed scrapes"], brows, cls="num", raw=True)
    fb = s.get("route_fallback")
    if fb:  # note() escapes
        if fb.get("fired"):
            shares = "; ".join(f"{side}: " + (", ".join(f"{v} {num(x.get('sent'))} ({ratio(x.get('share'))})"
                                                        for v, x in (fb.get(side) or {}).items()) or "none")
                               for side in ("before", "after"))
            text = (f"Fallback {fb.get('from')} → {fb.get('to')} at {num(fb.get('switched_at_s'), 1)} s, "
                    f"{num(fb.get('switch_after_breach_s'), 1)} s after the first flagged window ended "
                    f"({fb.get('rule')}). Requests sent {shares}.")
        else:
            text = f"Fallback rule {fb.get('rule')}: {fb.get('error') or 'did not fire.'}"
        out += note(text)
    return section("versions", "Route versions", out)


def engines(s: Mapping) -> str:
    """Every replica and engine (``server.engines``): one row each, when the server is more than one engine."""
    srv = s.get("server") or {}
    es = srv.get("engines") or []
    if len(es) < 2:
        return ""
    rows = []
    for e in es:
        kv, q, run = e.get("kv_cache_usage") or {}, e.get("queue_time_ms") or {}, e.get("requests_running") or {}
        who = [escape(str(e.get(k) or "–")) for k in ("target", "role", "engine")]
        rows.append([*who, num(e.get("requests_finished")), ratio(kv.get("mean")), ratio(kv.get("max")),
                     num(run.get("mean"), 1), num(e.get("requests_waiting_max")), ms(q.get("p50")), ms(q.get("p99")),
                     num(e.get("preemptions")), ratio(e.get("prefix_cache_hit_rate")), num(e.get("num_gpu_blocks"))])
    out = table(["target", "role", "engine", "finished", "KV mean", "KV max", "running mean", "waiting max",
                 "queue p50", "queue p99", "preemptions", "prefix hit rate", "KV blocks"], rows, cls="num", raw=True)
    bn = (s.get("attribution") or {}).get("bottleneck") or {}
    text = f"{len(es)} engines, {num(srv.get('kv_blocks_total'))} KV blocks in all."
    if bn.get("cause") == "engine_imbalance":
        text += f" Imbalance: {bn.get('evidence')}."
    return section("engines", "Replicas and engines", out + note(text))


SECTIONS: dict[str, Callable[[Mapping], str]] = {
    "overview": overview,
    "capacity": capacity,
    "latency": latency,
    "stages": stages,
    "distributions": distributions,
    "server": server_timeline,
    "engines": engines,
    "slo": slo,
    "attribution": attribution,
    "versions": versions,
}
"""Section id -> renderer, in page order."""
