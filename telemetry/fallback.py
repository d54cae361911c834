"""``--route-fallback`` on the master (or a local run): the rule of :mod:`workload.fallback` judged on each
version's live windows, and the switch when it holds.

At each check of the live detectors (every second, on the data every live process has reported: ``until_s``),
the N trailing windows of FROM and of TO that end at ``until_s`` are built from the per-version slots
(:meth:`telemetry.view.RunView.version_windows`); a window is flagged when any condition holds (a relative one
compares FROM with TO in the same window; a window without a value judges nothing). When all N are flagged the
rule fires once: the caller moves FROM's buckets to TO (the local users' table, or a message to every worker),
logs it and counts ``llm_route_fallback_total{from,to}``. The state is the run view's ``route_fallback`` and the
summary's ``route_fallback`` section, with the requests each version was sent before and after the switch:

    fb = RouteFallback(FallbackRule.parse(text), window_s=5.0)
    if fb.check(view, until_s, now_s):   # fired now: apply fb.state["from"] -> fb.state["to"]
        ...
    "switch_after_breach_s": seconds from the end of the first flagged window to the switch
"""

from __future__ import annotations

import logging

from telemetry.view import RunView, Window
from workload.fallback import ERROR_RATE, Condition, FallbackRule

log = logging.getLogger(__name__)


def window_value(cond: Condition, w: Window) -> float | None:
    """The condition's metric over one window: error rate (0..1) or the latency quantile (seconds)."""
    if w.requests == 0 and cond.metric == ERROR_RATE:
        return None
    if cond.metric == ERROR_RATE:
        return w.errors / w.requests
    sketch = w.sketches.get(cond.metric)
    return sketch.quantile(cond.quantile) if sketch is not None and sketch.count else None


class RouteFallback:
    """The rule, its window length and its state (JSON-ready) across checks."""

    def __init__(self, rule: FallbackRule, window_s: float) -> None:
        self.rule = rule
        self.window_s = float(rule.window_s or window_s)
        self.state: dict = {
            "rule": rule.text, "from": rule.source, "to": rule.target, "window_s": self.window_s,
            "windows": rule.windows, "fired": False, "breach_at_s": None, "rule_met_s": None, "switched_at_s": None,
            "switched_at_unix": None, "switch_after_breach_s": None, "switch_after_rule_s": None, "last": [],
            "error": None,
        }  # fmt: skip

    def judge(self, view: RunView, until_s: float) -> list[dict]:
        """The N trailing windows that end at ``until_s``, each with its values and flag (None: not judged)."""
        n, w = self.rule.windows, self.window_s
        origin = until_s - n * w
        if origin < 0:
            return []
        src = view.version_windows(self.rule.source, w, origin, n)
        dst = view.version_windows(self.rule.target, w, origin, n)
        out = []
        for a, b in zip(src, dst, strict=True):
            checks = []
            for c in self.rule.conditions:
                value, ref = window_value(c, a), window_value(c, b)
                checks.append({"condition": c.text, "value": value, "reference": ref,
                               "breached": c.breached(value, ref)})  # fmt: skip
            flags = [x["breached"] for x in checks]
            flagged = True if any(f is True for f in flags) else (None if all(f is None for f in flags) else False)
            out.append({"start_s": a.start_s, "end_s": a.end_s, "requests": [a.requests, b.requests],
                        "flagged": flagged, "checks": checks})  # fmt: skip
        return out

    def check(self, view: RunView, until_s: float, now_s: float) -> bool:
        """Judge; True exactly once, when the rule fires (the caller then applies the switch)."""
        if self.state["fired"]:
            return False
        windows = self.judge(view, until_s)
        self.state["last"] = windows
        if not windows or not all(x["flagged"] is True for x in windows):
            return False
        s = self.state
        s["fired"] = True
        s["breach_at_s"] = windows[0]["end_s"]
        s["rule_met_s"] = until_s
        s["switched_at_s"] = now_s
        s["switched_at_unix"] = view.t0_wall + now_s
        s["switch_after_breach_s"] = now_s - windows[0]["end_s"]
        s["switch_after_rule_s"] = now_s - until_s
        why = "; ".join(f"{x['start_s']:.0f}-{x['end_s']:.0f} s: " + ", ".join(
            f"{c['condition']} ({_fmt(c)})" for c in x["checks"] if c["breached"]) for x in windows)  # fmt: skip
        log.error(f"--route-fallback: {self.rule.source} -> {self.rule.target} at {now_s:.1f} s "
                  f"({s['switch_after_breach_s']:.1f} s after the first flagged window ended): {why}")  # fmt: skip
        return True


def _fmt(c: dict) -> str:
    if c["condition"].startswith(ERROR_RATE):
        return f"{c['value']:.2%}" + (f" vs {c['reference']:.2%}" if c["reference"] is not None else "")
    return f"{c['value'] * 1000:.0f} ms" + (f" vs {c['reference'] * 1000:.0f} ms" if c["reference"] is not None else "")


def fallback_section(view: RunView, _summary: dict | None = None) -> dict | None:
    """The summary's ``route_fallback``: the rule's state and, per version, the requests sent before and after
    the switch (whole slots on each side; ``after`` is null when the rule did not fire)."""
    state = view.route_fallback
    if state is None:
        return None
    out = {k: v for k, v in state.items() if k != "last"}
    out["last_windows"] = state.get("last", [])
    at = state.get("switched_at_s")
    out["before"] = _shares(view.sent_by_version(until_s=at) if at is not None else view.sent_by_version())
    out["after"] = _shares(view.sent_by_version(since_s=at)) if at is not None else None
    return out


def _shares(sent: dict[str, int]) -> dict[str, dict]:
    total = sum(sent.values())
    return {v: {"sent": n, "share": n / total if total else None} for v, n in sorted(sent.items())}
