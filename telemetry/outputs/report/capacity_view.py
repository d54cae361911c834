"""The report's "Capacity" section: a capacity search's answer (the summary's ``capacity``) and its probes.

The pictures are drawn from the probes' own figures (``capacity.probes``), one point per probe, passing probes in
green and breaching ones in red: the load against each SLO figure with its threshold as a dashed line (the found
load marked), and the Pareto view — output tokens/s per user against output tokens/s per GPU, the frontier drawn
through the passing probes no other passing probe beats on both. The web UI's live charts draw the same functions
from the summary so far (:func:`capacity_charts`), so the probes show while the search runs.

Tokens/s per user is the probe's output tokens/s over its users (an open loop's users are its pool: the most
requests in flight); per GPU, over ``--gpus`` (without it, the whole deployment counts as one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from telemetry.outputs.report.fmt import badge, num, table
from telemetry.outputs.report.parts import figure, note, section
from telemetry.outputs.report.svg import Marker, Series, line_chart

PASS_COLOR, FAIL_COLOR, LINE_COLOR = "#2ca02c", "#d62728", "#555"


def _probes(s: Mapping) -> tuple[Mapping, list[Mapping]]:
    cap = s.get("capacity")
    if not isinstance(cap, Mapping):
        return {}, []
    probes = [p for p in cap.get("probes") or [] if isinstance(p, Mapping) and isinstance(p.get("load"), int | float)]
    return cap, probes


def _axis(cap: Mapping) -> str:
    return "users" if cap.get("axis") == "users" else "request rate (req/s)"


def _load(cap: Mapping, p: Mapping) -> str:
    return f"users={int(p['load'])}" if cap.get("axis") == "users" else f"rate={p['load']:g}"


def _val(v: float | None) -> str:
    """An SLO figure as the statements write it (4 significant digits)."""
    return "–" if not isinstance(v, int | float) else format(v, ".4g")


def _check_names(probes: Sequence[Mapping]) -> list[str]:
    names: list[str] = []
    for p in probes:
        for c in p.get("checks") or []:
            if c.get("name") not in names:
                names.append(c["name"])
    return names


def _check(p: Mapping, name: str) -> Mapping | None:
    return next((c for c in p.get("checks") or [] if c.get("name") == name), None)


def per_user(p: Mapping) -> float | None:
    """A probe's output tokens/s per user (its users; an open loop's pool)."""
    out, users = p.get("output_per_s"), p.get("users")
    return out / users if isinstance(out, int | float) and isinstance(users, int | float) and users > 0 else None


def per_gpu(cap: Mapping, p: Mapping) -> float | None:
    out, gpus = p.get("output_per_s"), cap.get("gpus") or 1
    return out / gpus if isinstance(out, int | float) else None


def _split(probes: Sequence[Mapping], x, y, tip) -> list[Series]:
    """Two point series (passing, breaching) of the probes with a value on both axes."""
    out = []
    for passed, label, color in ((True, "met every SLO", PASS_COLOR), (False, "breached", FAIL_COLOR)):
        rows = [p for p in probes if bool(p.get("passed")) == passed and x(p) is not None and y(p) is not None]
        if rows:
            out.append(Series(label, [x(p) for p in rows], [y(p) for p in rows], color, points=True,
                              tips=[tip(p) for p in rows]))
    return out


def slo_charts(s: Mapping) -> list[str]:
    """One chart per SLO figure the probes were judged on: load against the figure, its threshold dashed."""
    cap, probes = _probes(s)
    if not probes:
        return []
    loads = [float(p["load"]) for p in probes]
    found = cap.get("users") if cap.get("axis") == "users" else cap.get("rate")
    markers = [Marker(float(found), f"capacity {_load(cap, {'load': found})}", PASS_COLOR)] if found else []
    charts = []
    for name in _check_names(probes):
        threshold = next(c["threshold"] for p in probes if (c := _check(p, name)) is not None)

        def value(p, name=name):
            c = _check(p, name)
            return c.get("value") if c else None

        def tip(p, name=name, value=value):
            verdict = "met" if p.get("passed") else "breached"
            return f"probe {p.get('probe')} {_load(cap, p)}: {name} {_val(value(p))} ({verdict})"

        series = _split(probes, lambda p: float(p["load"]), value, tip)
        series.append(Series(f"threshold {threshold:g}", [min(loads), max(loads)], [threshold, threshold],
                             LINE_COLOR, dashed=True))
        charts.append(line_chart(f"{name} against load", series, x_label=_axis(cap), y_label=name, markers=markers))
    return [c for c in charts if c]


def _frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both coordinates (higher is better on each), by x."""
    best = [p for p in points if not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in points)]
    return sorted(set(best))


def pareto_chart(s: Mapping) -> str:
    """Output tokens/s per user against per GPU, one point per probe, the passing probes' frontier drawn."""
    cap, probes = _probes(s)
    if not probes:
        return ""
    series = _split(probes, per_user, lambda p: per_gpu(cap, p),
                    lambda p: f"probe {p.get('probe')} {_load(cap, p)}: {num(per_user(p))} tok/s per user, "
                              f"{num(per_gpu(cap, p))} tok/s per GPU")
    front = _frontier([(per_user(p), per_gpu(cap, p)) for p in probes if p.get("passed")
                       and per_user(p) is not None and per_gpu(cap, p) is not None])
    if len(front) >= 2:
        series.append(Series("frontier of the passing probes", [x for x, _ in front], [y for _, y in front],
                             PASS_COLOR, dashed=True))
    y_label = "output tok/s per GPU" if cap.get("gpus") else "output tok/s (no --gpus: per deployment)"
    return line_chart("Tokens/s per user vs tokens/s per GPU (Pareto)", series, x_label="output tok/s per user",
                      y_label=y_label)


def capacity_charts(s: Mapping) -> list[str]:
    """Every capacity picture (the SLO figures against load, then the Pareto view); [] without a search."""
    pareto = pareto_chart(s)
    return [*slo_charts(s), *([pareto] if pareto else [])]


def capacity(s: Mapping) -> str:
    cap, probes = _probes(s)
    if not cap:
        return ""
    facts = (f"{num(cap.get('probes_used'))} of at most {num(cap.get('max_probes'))} probes · goodput "
             f"{num(cap.get('goodput_rps'), 2)} req/s · output {num(cap.get('output_per_s'))} tok/s"
             f" · {num(cap.get('output_per_s_per_gpu'))} tok/s per GPU · "
             f"${num(cap.get('usd_per_million_output_tokens'), 3)} per million output tokens · "
             + (f"{cap['energy_j_per_output_token']:.3g} J per output token"
                if isinstance(cap.get("energy_j_per_output_token"), int | float)
                else f"no energy per token ({cap.get('energy_note') or 'no GPU energy reading'})"))
    parts = [f"<p><b>{escape(str(cap.get('statement') or ''))}</b></p>", note(facts)]
    charts = capacity_charts(s)
    if charts:
        parts.append('<div class="grid">' + "".join(figure(c) for c in charts) + "</div>")
    names = _check_names(probes)
    rows = []
    for p in probes:
        early = p.get("early_stop") or {}
        rows.append([escape(str(p.get("stage"))), escape(_load(cap, p)), badge(p.get("passed"), "met", "breached"),
                     *(_val((_check(p, n) or {}).get("value")) for n in names), num(p.get("requests")),
                     num(p.get("output_per_s")), num(per_user(p)), num(per_gpu(cap, p)),
                     escape(str(early.get("reason") or ""))])
    parts.append(table(["probe", "load", "verdict", *names, "requests", "out tok/s", "tok/s per user",
                        "tok/s per GPU", "stopped early"], rows, cls="num", raw=True))
    return section("capacity", "Capacity under SLO", *parts)
