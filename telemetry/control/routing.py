"""Gray routing on the master (or a local run): ``--route-fallback`` judged and acted on, and the summary's
``versions`` and ``route_fallback`` sections. The grammars are :mod:`workload.routing`; the options and the users'
side (each version's tokenizer, a fallback applied to a process's table) are :mod:`users.routing`.

**The fallback.** At each check of the live detectors (every second, on the data every live process has reported:
``until_s``), the N trailing windows of FROM and of TO that end at ``until_s`` are built from the per-version slots
(:meth:`telemetry.measure.view.RunView.version_windows`); a window is flagged when any condition holds (a relative one
compares FROM with TO in the same window; a window without a value judges nothing). When all N are flagged the
rule fires once: FROM's buckets move to TO (:class:`RouteSwitch`: the local users' table, or a message to every
worker), it is logged and counted as ``llm_route_fallback_total{from,to}``. The state is the run view's
``route_fallback`` and the summary's ``route_fallback`` section, with the requests each version was sent before and
after the switch:

    fb = RouteFallback(FallbackRule.parse(text), window_s=5.0)
    if fb.check(view, until_s, now_s):   # fired now: RouteSwitch moves the buckets
    "switch_after_breach_s": seconds from the end of the first flagged window to the switch

**The versions section.** The users route each request by its fingerprint (``--route-table``,
:mod:`workload.routing.table`) and stamp ``GenerationResult.version``; telemetry records per (user class, stage,
version). ``summary["versions"]`` has per route version its requests, share of traffic next to the share its bucket
ranges promise, base URL, token counts, the client/server prompt mismatch, its tokenizer (``--route-tokenizers``:
name, hash, compat level), its own backend's server figures (KV usage, running, waiting, preemptions, prefix-cache
hit rate from that backend's /metrics) and latency quantiles (ms; the ``versions`` metrics of
:mod:`telemetry.metrics`), so one run compares two deployments side by side:

    "versions": {"v1": {"requests": 812, "ok": 812, "share": 0.79, "expected_share": 0.8,
                        "base_url": "http://a:8000", "ttft_ms": Q, "itl_ms": Q, "tpot_ms": Q, "e2e_ms": Q, ...}}
"""

from __future__ import annotations

import logging
import time

from locust.runners import MasterRunner

from telemetry.measure.recorder import Recorder
from telemetry.measure.runstate import RunState
from telemetry.measure.targets import metrics_url
from telemetry.measure.view import RunView, Window
from telemetry.metrics import CLIENT_METRICS, having
from telemetry.outputs.summary import q_ms
from users.routing import apply_fallback, route_fallback_from, route_table_from
from workload.routing.fallback import ERROR_RATE, Condition, FallbackRule
from workload.routing.table import ROUTE_FALLBACK_MESSAGE, ROUTE_FALLBACK_OPTION

log = logging.getLogger(__name__)

FALLBACK_METRICS = frozenset(m.key for m in CLIENT_METRICS if m.windowed and not m.samples)
"""The latency metrics a fallback rule may name: kept per version and wall-clock slot (one value per request).
The wiring hands it to the option's type (:func:`users.routing.add_arguments`)."""


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
        }

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
                               "breached": c.breached(value, ref)})
            flags = [x["breached"] for x in checks]
            flagged = True if any(f is True for f in flags) else (None if all(f is None for f in flags) else False)
            out.append({"start_s": a.start_s, "end_s": a.end_s, "requests": [a.requests, b.requests],
                        "flagged": flagged, "checks": checks})
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
            f"{c['condition']} ({_fmt(c)})" for c in x["checks"] if c["breached"]) for x in windows)
        log.error(f"--route-fallback: {self.rule.source} -> {self.rule.target} at {now_s:.1f} s "
                  f"({s['switch_after_breach_s']:.1f} s after the first flagged window ended): {why}")
        return True


def _fmt(c: dict) -> str:
    if c["condition"].startswith(ERROR_RATE):
        return f"{c['value']:.2%}" + (f" vs {c['reference']:.2%}" if c["reference"] is not None else "")
    return f"{c['value'] * 1000:.0f} ms" + (f" vs {c['reference'] * 1000:.0f} ms" if c["reference"] is not None else "")


class RouteSwitch:
    """``--route-fallback`` on the master (or a local run): the rule, checked against the route table's versions at
    start (a bad one is logged and not run: no judge, a state that says why), judged at each live check; when it
    fires, FROM's buckets go to TO — in this process's users (a local run) or every worker's (the master sends
    ``ROUTE_FALLBACK_MESSAGE`` and keeps it in the options for a worker that connects later)."""

    def __init__(self, environment, merger: RunState) -> None:
        self.environment = environment
        self.merger = merger
        self.fallback: RouteFallback | None = None
        """The rule's judge while a valid rule runs, else None."""

    def start(self) -> None:
        self.fallback = None
        options = self.environment.parsed_options
        if options is not None and getattr(options, ROUTE_FALLBACK_OPTION, None) is not None:
            setattr(options, ROUTE_FALLBACK_OPTION, None)  # a new test routes by the table again
        text = getattr(options, "route_fallback", None)
        if not text:
            return
        try:
            rule = route_fallback_from(options)
        except ValueError as e:
            log.error(f"{e}; the fallback rule is not run")
            self.merger.route_fallback = {"rule": str(text), "fired": False, "error": str(e)}
            return
        assert rule is not None  # text was given
        self.fallback = RouteFallback(rule, self.merger.attribution_window)
        self.merger.route_fallback = dict(self.fallback.state)

    def check(self, view: RunView, until_s: float) -> None:
        """Judge the rule; when it fires, move the buckets (this process's users, or every worker's)."""
        fb = self.fallback
        if fb is None:
            return
        if fb.check(view, until_s, time.time() - self.merger.t0_wall):
            msg = {"from": fb.rule.source, "to": fb.rule.target}
            runner = self.environment.runner
            if isinstance(runner, MasterRunner):
                runner.send_message(ROUTE_FALLBACK_MESSAGE, msg)
                if self.environment.parsed_options is not None:
                    setattr(self.environment.parsed_options, ROUTE_FALLBACK_OPTION, msg)
            else:
                apply_fallback(self.environment, msg)
        self.merger.route_fallback = dict(fb.state)


def version_backends(options) -> dict[str, str]:
    """``{version: its backend's /metrics URL}`` to scrape with --route-table (empty without one, with a bad one, or
    with --server-metrics-url off)."""
    try:
        table = route_table_from(options)
    except ValueError:
        return {}
    option = getattr(options, "server_metrics_url", None)
    if table is None or (option and str(option).strip().lower() == "off"):
        return {}
    return {route.version: metrics_url(None, route.base_url) for _lo, _hi, route in table.spans}


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


def server_figures(server: dict | None) -> dict | None:
    """One version's backend over the run, from its own scrapes: KV usage, running and waiting (mean, max, last),
    preemptions and prefix-cache queries/hits (counter deltas between the first and last scrape) and the hit
    rate; None when the version's backend was not scraped."""
    if server is None:
        return None
    series = [x for x in server.get("series", ()) if isinstance(x, dict)]

    def gauge(key: str) -> dict:
        vals = [float(x[key]) for x in series if x.get(key) is not None]
        return {"mean": sum(vals) / len(vals) if vals else None, "max": max(vals) if vals else None,
                "last": vals[-1] if vals else None}

    def delta(key: str) -> float | None:
        vals = [float(x[key]) for x in series if x.get(key) is not None]
        return vals[-1] - vals[0] if len(vals) >= 2 else None

    queries, hits = delta("prefix_cache_queries_total"), delta("prefix_cache_hits_total")
    return {
        "metrics_url": server.get("url"),
        "scrapes": int(server.get("scrapes", 0)),
        "scrape_failures": int(server.get("failures", 0)),
        "kv_cache_usage": gauge("kv_cache_usage"),
        "requests_running": gauge("requests_running"),
        "requests_waiting": gauge("requests_waiting"),
        "preemptions": delta("preemptions_total"),
        "prefix_cache_queries": queries,
        "prefix_cache_hits": hits,
        "prefix_cache_hit_rate": hits / queries if queries and hits is not None else None,
    }


def versions_section(view: RunView, _summary: dict | None = None, tokenizers: dict | None = None) -> dict:
    """``{version: {...}}`` from the merged recorder (warm-up stages left out, like the rest of the summary);
    ``tokenizers``: each version's tokenizer record (users/routing.py)."""
    warmup = view.warmup_stages()
    try:
        table = route_table_from(view.options)
    except ValueError:
        table = None
    expected = table.buckets().shares() if table else {}
    urls = {r.version: r.base_url for _lo, _hi, r in table.spans} if table else {}
    by_version: dict[str, list] = {}
    for (_cls, stage, version), cell in view.merged.cells.items():
        if version is not None and stage not in warmup:
            by_version.setdefault(version, []).append(cell)
    total = sum(c.requests for cells in by_version.values() for c in cells)
    duration = view.duration_s
    out: dict[str, dict] = {}
    for version in sorted(by_version, key=lambda v: (list(urls).index(v) if v in urls else len(urls), v)):
        cells = by_version[version]
        n = sum(c.requests for c in cells)
        output = sum(c.output_tokens for c in cells)
        mismatch = [sum(c.mismatch[0] for c in cells), sum(c.mismatch[1] for c in cells)]
        out[version] = {
            "requests": n,
            "ok": sum(c.ok for c in cells),
            "failed": n - sum(c.ok for c in cells),
            "share": n / total if total else None,
            "expected_share": expected.get(version),
            "base_url": urls.get(version),
            "prompt_tokens": sum(c.prompt_tokens for c in cells),
            "output_tokens": output,
            "output_per_s": output / duration if duration and duration > 0 else None,
            "prompt_mismatch_ratio": mismatch[0] / mismatch[1] if mismatch[1] else None,
            "tokenizer": (tokenizers or {}).get(version),
            "server": server_figures(view.version_servers.get(version)),
            **{m.summary_key: q_ms(Recorder.merged_sketch(cells, m.key)) for m in having("versions")},
        }
    return out
