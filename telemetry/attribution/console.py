"""A few console lines about the attribution, printed under telemetry's summary table.

    print("\\n".join(console_lines(summary["attribution"])))
"""

from __future__ import annotations

from collections.abc import Mapping

from telemetry.attribution.options import SPIKE_FACTOR_DEFAULT

MAX_SPIKES = 5
MAX_STAGES = 8


def console_lines(att: Mapping) -> list[str]:
    if not isinstance(att, Mapping) or "error" in att:
        return [f"attribution: not available ({att.get('error') if isinstance(att, Mapping) else 'missing'})"]
    lines = []
    bf = att.get("batching_failure") or {}
    base = bf.get("baseline")
    rule = bf.get("rule") or {}
    flagged = bf.get("flagged_windows") or []
    if base is None:
        verdict = "not judged (too few windows with traffic and server metrics for a baseline)"
    elif bf.get("verdict"):
        verdict = (f"FAILED from t={bf.get('failed_at_s', 0):.0f}s (flagged windows {flagged}: TTFT p99 "
                   f"+{rule.get('p99_rise', 0.4):.0%} or more and batch below {rule.get('size_ratio', 0.35):.0%} of "
                   f"the baseline {base['batch_size_median']:g})")
    else:
        verdict = f"ok (baseline batch {base['batch_size_median']:g}, TTFT p99 {base['p99_ms']:.0f} ms"
        verdict += f"; flagged windows {flagged})" if flagged else ")"
    lines.append(f"attribution ({att.get('window_s', 0):g} s windows): dynamic batching {verdict}")
    d = att.get("decomposition") or {}
    if d.get("statement"):
        lines.append(f"  first token: {d['statement']}")
    stages = [st for st in d.get("stages") or []
              if isinstance(st, Mapping) and st.get("statement") and not st.get("warmup")]
    if len(stages) > 1:
        lines.extend(f"    {st['name']}: {st['statement']}" for st in stages[:MAX_STAGES])
        if len(stages) > MAX_STAGES:
            lines.append(f"    ... {len(stages) - MAX_STAGES} more stages in the summary JSON")
    spikes = att.get("spikes") or []
    factor = att.get("spike_factor", SPIKE_FACTOR_DEFAULT)
    if spikes:
        lines.append(f"  {len(spikes)} latency spike(s) over {factor:g}× the median window p99:")
        lines.extend(f"    {sp['cause']}" for sp in spikes[:MAX_SPIKES])
        if len(spikes) > MAX_SPIKES:
            lines.append(f"    ... {len(spikes) - MAX_SPIKES} more in the summary JSON")
    else:
        lines.append(f"  no latency spikes (no window p99 over {factor:g}× the median window p99)")
    tail = att.get("tail") or {}
    if tail.get("source") == "spans":
        lines.extend(f"  tail ({by}, joined spans): {tail[by]['statement']}" for by in ("ttft", "e2e") if tail.get(by))
    bn = att.get("bottleneck")
    if isinstance(bn, Mapping) and bn.get("cause"):
        lines.append(f"  bottleneck: {bn['cause']} — {bn.get('evidence', '')}")
    return lines
