"""The report's "P99 attribution" section: batching verdict, client latency per window with spike and
flagged windows shaded, the spike table, and the first-token decomposition (whole run and per stage)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from telemetry.attribution.options import SPIKE_FACTOR_DEFAULT
from telemetry.outputs.report.fmt import badge, ms, num, table
from telemetry.outputs.report.parts import Q_KEYS, figure, note, q_row, qv, section
from telemetry.outputs.report.svg import PALETTE, Band, Series, line_chart, stacked_bar

# ---- attribution -----------------------------------------------------------------------------------


def _decomposition_figure(d: Mapping) -> str:
    rem = d.get("remainder_ms") or {}
    parts = [("server queue", qv(d.get("queue_ms"), "mean")), ("server prefill", qv(d.get("prefill_ms"), "mean")),
             ("other server", rem.get("server_other")), ("network & client", rem.get("network_client"))]
    if not all(isinstance(v, int | float) for _, v in parts):
        return ""
    return figure(stacked_bar("Where the mean TTFT went", [(n, float(v)) for n, v in parts]),
                   "Means add up, quantiles do not: the split uses means over the same span.")


def _decomposition(d: Mapping) -> str:
    if not d:
        return ""
    rows = [
        q_row(label, d.get(key))
        for key, label in (("ttft_client_ms", "client TTFT"), ("ttft_server_ms", "server TTFT"),
                           ("queue_ms", "server queue"), ("prefill_ms", "server prefill"),
                           ("decode_ms", "server decode (per request)"), ("itl_client_ms", "client ITL"),
                           ("decode_itl_server_ms", "server ITL"))
        if key in d
    ]
    statement = d.get("statement")
    html = (note(statement) if statement else "") + table(["", *Q_KEYS], rows, cls="num") + note(
        "Server quantiles are interpolated inside vLLM's histogram buckets (as Prometheus' histogram_quantile "
        "does); \"≤X\" marks one that lies in the first bucket, known only to be at most X. Means are exact.")
    stages = [st for st in d.get("stages") or [] if isinstance(st, Mapping) and not st.get("warmup")]
    if len(stages) > 1:
        srows = []
        for st in stages:
            rem = st.get("remainder_ms") or {}
            srows.append([str(st.get("name")), ms(qv(st.get("ttft_client_ms"), "mean")),
                          ms(qv(st.get("ttft_server_ms"), "mean")), ms(qv(st.get("queue_ms"), "mean")),
                          ms(qv(st.get("prefill_ms"), "mean")), ms(rem.get("server_other")),
                          ms(rem.get("network_client")), ms(qv(st.get("itl_client_ms"), "mean")),
                          ms(qv(st.get("decode_itl_server_ms"), "mean"))])
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
SLOWEST_COLUMNS = (("request_id", "request"), ("client_ttft_ms", "client TTFT"), ("server_ttft_ms", "server TTFT"),
                   ("queue_ms", "queue"), ("prefill_ms", "prefill"), ("decode_ms", "decode"),
                   ("client_e2e_ms", "client E2E"), ("server_e2e_ms", "server E2E"),
                   ("remainder_ttft_ms", "TTFT remainder"), ("remainder_e2e_ms", "E2E remainder"))
SLOWEST_SHOWN = 5


def _tail(att: Mapping) -> str:
    """The bottleneck verdict, and the tail from joined spans (compositions, slowest requests) when present."""
    out = []
    bn = att.get("bottleneck")
    if isinstance(bn, Mapping) and bn.get("cause"):
        out.append(f"<p><b>Bottleneck: {escape(str(bn['cause']))}</b> — {escape(str(bn.get('evidence', '')))}"
                   f" <small>(from {escape(str(bn.get('source', '')))})</small></p>")
    tail = att.get("tail") or {}
    if tail.get("source") != "spans":
        if tail.get("statement"):
            out.append(note(f"No server spans joined (--otlp-receiver): the split is the histograms' mean — "
                            f"{tail['statement']}"))
        return "".join(out)
    out.append("<h3>The tail, request by request (server spans joined)</h3>")
    out.extend(f"<p>{escape(tail[by]['statement'])}</p>" for by in ("ttft", "e2e") if isinstance(tail.get(by), Mapping))
    for by, rows in (tail.get("slowest") or {}).items():
        if not rows:
            continue
        body = [[str(r.get(k)) if k == "request_id" else ms(r.get(k)) for k, _ in SLOWEST_COLUMNS]
                for r in rows[:SLOWEST_SHOWN]]
        out.append(f"<p>Slowest by {escape(by.upper())} (ms)</p>")
        out.append(table([label for _, label in SLOWEST_COLUMNS], body, cls="slowest"))
    return "".join(out)


def attribution(s: Mapping) -> str:
    att = s.get("attribution")
    if not isinstance(att, Mapping):
        return section("attribution", "P99 attribution", note("No attribution in this summary."))
    if "error" in att:
        return section("attribution", "P99 attribution", note(f"The attribution failed: {att['error']}"))
    bf = att.get("batching_failure") or {}
    base = bf.get("baseline") or {}
    flagged = bf.get("flagged_windows") or []
    judged = "verdict" in bf and (base or bf.get("verdict"))
    verdict = badge(not bf.get("verdict") if judged else None, yes="batching OK", no="batching FAILED",
                    na="not judged")
    base_text = (f"baseline (windows {base.get('windows')}): TTFT p99 {ms(base.get('p99_ms'))} ms, "
                 f"batch {num(base.get('batch_size_median'))}" if base else "no baseline (too few windows with data)")
    flagged_text = escape(str(flagged) if flagged else "none")
    bf_html = f"<p>Dynamic batching: {verdict} — flagged windows: {flagged_text}; {escape(base_text)}</p>"
    spikes = att.get("spikes") or []
    if spikes:
        rows = [[f"{sp.get('start_s', 0):.0f}–{sp.get('end_s', 0):.0f}", SPIKE_METRICS.get(sp.get("metric"), "?"),
                 f"{sp.get('ratio', 0):.1f}×", str(sp.get("category", "")), str(sp.get("cause", ""))] for sp in spikes]
        spikes_html = table(["window (s)", "metric", "× median", "category", "cause"], rows, cls="spikes")
    else:
        factor = num(att.get("spike_factor", SPIKE_FACTOR_DEFAULT))
        spikes_html = note(f"No window's P99 exceeded {factor}× the run's median window P99.")
    decomposition = att.get("decomposition") or {}
    figs = (figure(_windows_chart(att), "Red bands: spike windows; purple: windows flagged by the batching rule.")
            + _decomposition_figure(decomposition))
    return section(
        "attribution", "P99 attribution", _tail(att), bf_html, f'<div class="grid">{figs}</div>' if figs else "",
        "<h3>Spikes</h3>", spikes_html, "<h3>First-token decomposition</h3>", _decomposition(decomposition),
    )
