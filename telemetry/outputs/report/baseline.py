"""The report's baseline section (``--llm-baseline BASE.json``): this run and a baseline run on the same axes.

For every stage of either run (matched by name, in this run's order, then the baseline's own), one point per run
of output tokens/s and of TTFT/ITL/TPOT/E2E p50 and p99: this run in solid lines, the baseline dashed in the same
colour; then the compare table of ``python -m telemetry.compare`` (the same rows, the same deltas).

    html = baseline_section(summary, base_summary)
"""

from __future__ import annotations

from collections.abc import Mapping

from telemetry.compare import fmt_value, rows
from telemetry.outputs.report.fmt import table
from telemetry.outputs.report.parts import figure, note, qv, section
from telemetry.outputs.report.svg import PALETTE, Series, line_chart

CHARTS = (("Output tokens/s", (("output tok/s", lambda st: st.get("output_per_s")),), "tok/s"),
          ("TTFT", (("p50", lambda st: qv(st.get("ttft_ms"), "p50")), ("p99", lambda st: qv(st.get("ttft_ms"), "p99"))),
           "ms"),
          ("ITL", (("p50", lambda st: qv(st.get("itl_ms"), "p50")), ("p99", lambda st: qv(st.get("itl_ms"), "p99"))),
           "ms"),
          ("TPOT", (("p50", lambda st: qv(st.get("tpot_ms"), "p50")), ("p99", lambda st: qv(st.get("tpot_ms"), "p99"))),
           "ms"),
          ("E2E", (("p50", lambda st: qv(st.get("e2e_ms"), "p50")), ("p99", lambda st: qv(st.get("e2e_ms"), "p99"))),
           "ms"))
"""(title, ((series label, value of a stage), ...), y label)."""


def _measured(s: Mapping) -> dict[str, Mapping]:
    stages = [st for st in (s.get("stages") or []) if isinstance(st, Mapping)]
    return {str(st.get("name")): st for st in stages if not st.get("warmup")}


def baseline_section(summary: Mapping, base: Mapping) -> str:
    ours, theirs = _measured(summary), _measured(base)
    names = list(ours) + [n for n in theirs if n not in ours]
    xs = [float(i) for i in range(len(names))]
    x_names = dict(zip(xs, names, strict=True))
    charts = []
    for title, parts, unit in CHARTS:
        series = []
        for i, (label, take) in enumerate(parts):
            color = PALETTE[i * 2 % len(PALETTE)]
            series.append(Series(f"this run {label}", xs, [take(ours[n]) if n in ours else None for n in names], color))
            series.append(Series(f"baseline {label}", xs, [take(theirs[n]) if n in theirs else None for n in names],
                                 color, dashed=True))
        charts.append(line_chart(f"{title}: this run and the baseline", series, x_label="stage", y_label=unit,
                                 x_names=x_names))
    grid = '<div class="grid">' + "".join(figure(c) for c in charts if c) + "</div>"
    compared = rows(base, summary)
    body = [[r.scope, r.figure, fmt_value(r.base), fmt_value(r.new), fmt_value(r.delta),
             f"{r.percent:+.1f}%" if r.percent is not None else "-"] for r in compared]
    run = base.get("run") or {}
    when = f" started {run.get('started_utc')}" if run.get("started_utc") else ""
    head = ["scope", "figure", "baseline", "this run", "delta", "delta %"]
    return section("baseline", "Against the baseline",
                   note(f"Baseline: {base.get('model') or '?'} at {base.get('host') or '?'}{when}; this run solid, the "
                        "baseline dashed, stages matched by name."),
                   grid, table(head, body, cls="num"))
