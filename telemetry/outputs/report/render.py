"""``render(summary) -> str``: the whole report as one self-contained HTML page.

Inline CSS and inline SVG only — no scripts, fonts, images or links to anything outside the file, so
it opens offline and can be mailed around. Sections come from :data:`telemetry.outputs.report.sections.SECTIONS`;
one that fails is replaced by a short error note instead of losing the whole report.

    Path("report.html").write_text(render(summary), encoding="utf-8")
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from html import escape

from telemetry.outputs.report.baseline import baseline_section
from telemetry.outputs.report.sections import SECTIONS
from telemetry.outputs.report.svg import LABEL_EM

log = logging.getLogger(__name__)

CSS = """
:root { --fg:#1d2330; --mut:#5b6475; --line:#d9dee7; --bg:#f6f7fa; --card:#fff; --ok:#1a7f37; --bad:#c62828; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
       color:var(--fg); background:var(--bg); }
header { background:#14213d; color:#fff; padding:18px 28px; }
header h1 { margin:0; font-size:21px; font-weight:600; }
header p { margin:4px 0 0; color:#c9d3e6; font-size:13px; }
nav { padding:8px 28px; background:#fff; border-bottom:1px solid var(--line); font-size:13px; }
nav a { color:#1f4e99; margin-right:16px; text-decoration:none; }
main { padding:8px 28px 40px; max-width:1500px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:14px 18px; margin:16px 0;
          overflow-x:auto; }
h2 { margin:0 0 10px; font-size:17px; }
h3 { margin:16px 0 6px; font-size:14px; color:var(--mut); }
.cards { display:grid; grid-template-columns:repeat(auto-fill,minmax(160px,1fr)); gap:10px; }
.card { border:1px solid var(--line); border-radius:6px; padding:10px 12px; }
.card .k { color:var(--mut); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.card .v { font-size:22px; font-weight:600; margin:2px 0; }
.card .s { color:var(--mut); font-size:12px; }
.meta { color:var(--mut); }
.grid { display:grid; grid-template-columns:repeat(auto-fill,minmax(min(480px,100%),1fr)); gap:14px; }
figure { margin:0; }
section > figure.plot-fig { max-width:820px; }
figcaption, .note { color:var(--mut); font-size:12.5px; margin:4px 0 8px; }
svg.chart { width:100%; height:auto; display:block; background:#fff; }
svg .ct { font-size:14px; font-weight:600; fill:var(--fg); }
svg .tk { font-size:11px; fill:var(--mut); }
svg .al { font-size:12px; fill:var(--fg); }
svg .lg { font-size:11.5px; fill:var(--fg); }
svg .mk { font-size:{LABEL_EM}px; font-weight:600; paint-order:stroke; stroke:#fff; stroke-width:3px; }
svg .bt { font-size:12px; fill:#fff; font-weight:600; }
svg .plot { fill:#fbfcfe; stroke:var(--line); }
svg .grid { stroke:#e8ebf1; stroke-width:1; }
svg .ax { stroke:#9aa3b2; }
table { border-collapse:collapse; width:100%; margin:6px 0; font-size:13px; }
th, td { border-bottom:1px solid var(--line); padding:4px 8px; text-align:left; vertical-align:top; }
th { background:#f0f2f6; font-weight:600; }
table.num td:not(:first-child), table.num th:not(:first-child) { text-align:right; font-variant-numeric:tabular-nums; }
tr.knee td { background:#fff2f0; font-weight:600; }
tr.warmup td { color:#8a93a3; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; color:#fff; }
.badge.ok { background:var(--ok); } .badge.bad { background:var(--bad); } .badge.na { background:#8a93a3; }
table.spikes td:last-child { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12px; }
footer { color:var(--mut); font-size:12px; padding:0 28px 24px; }
""".replace("{LABEL_EM}", f"{LABEL_EM:g}")

TITLES = {"overview": "Overview", "capacity": "Capacity", "latency": "Latency", "stages": "Stages",
          "distributions": "Distributions", "server": "Server", "slo": "SLO", "attribution": "Attribution",
          "versions": "Versions", "baseline": "Baseline"}


def _safe(name: str, fn, summary: Mapping) -> str:
    try:
        return fn(summary)
    except Exception as e:  # one malformed section must not cost the whole report
        log.warning(f"report section {name!r} failed: {type(e).__name__}: {e}")
        return (f'<section id="{name}"><h2>{escape(TITLES.get(name, name))}</h2><p class="note">This section could '
                f"not be drawn from the summary ({escape(type(e).__name__)}: {escape(str(e))}).</p></section>")


def render(summary: Mapping, *, title: str = "deepseek-locust report", baseline: Mapping | None = None) -> str:
    """The report for one summary dict (docs/summary.schema.json; missing parts are skipped or noted); with a
    ``baseline`` summary (``--llm-baseline``), both runs on the same axes after the stages."""
    bodies = {}
    for name, fn in SECTIONS.items():
        bodies[name] = _safe(name, fn, summary)
        if name == "stages" and baseline is not None:
            bodies["baseline"] = _safe("baseline", lambda s: baseline_section(s, baseline), summary)
    nav = "".join(f'<a href="#{n}">{escape(TITLES.get(n, n))}</a>' for n, b in bodies.items() if b)
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    sub = (f"{escape(str(summary.get('model') or '?'))} at {escape(str(summary.get('host', '?')))} · "
           f"generated {generated} · summary schema {escape(str(summary.get('schema', '?')))}")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{sub}</p></header><nav>{nav}</nav><main>"
        + "".join(bodies.values())
        + "</main><footer>Self-contained report: inline SVG and CSS, no scripts, no external resources.</footer>"
        "</body></html>\n"
    )
