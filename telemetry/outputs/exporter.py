"""Prometheus exporter on the master: a custom collector over the run's view, in a private registry.

Names and labels are the README's Prometheus list (histogram names from telemetry/metrics.py); with
``--route-table`` the ``llm_*`` histograms and counters also carry a ``version`` label (the route version each
request went to; "" for none), without it the labels are ``user_class`` and ``stage`` only (the Grafana dashboard
sums over labels, so it reads both).
Histograms come from the merged fixed-bucket counts (vLLM's boundaries), ``llm_latency_quantile_seconds``
from the merged sketches (both for the client metrics of :mod:`telemetry.metrics`), server gauges are relayed
from the latest scrape.

    exporter = Exporter(hub.view, host="127.0.0.1", port=9646); exporter.start()   # port 0 = any free port
    exporter.registry.get_sample_value("llm_requests_total", {...})
    exporter.stop()  # safe twice
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import TYPE_CHECKING

from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from telemetry.measure.buckets import BucketHistogram
from telemetry.measure.recorder import Recorder
from telemetry.metrics import having
from telemetry.options import PROMETHEUS_HOST_DEFAULT, PROMETHEUS_PORT_DEFAULT

if TYPE_CHECKING:
    from collections.abc import Callable

    from telemetry.measure.view import RunView

log = logging.getLogger(__name__)

QUANTILES = (0.5, 0.9, 0.95, 0.99)
SERVER_GAUGES = {
    "kv_cache_usage": ("llm_server_kv_cache_usage_ratio", "Server KV-cache usage 0..1 (relayed from the server)"),
    "requests_running": ("llm_server_requests_running", "Requests running on the server (relayed)"),
    "requests_waiting": ("llm_server_requests_waiting", "Requests waiting on the server (relayed)"),
}
ENGINE_GAUGES = {field: (name.replace("llm_server_", "llm_engine_"), doc.replace("on the server", "on the engine")
                 .replace("Server KV-cache", "The engine's KV-cache")) for field, (name, doc) in SERVER_GAUGES.items()}
"""Each engine's gauges (labels ``target``, ``engine``), relayed from its own series in the latest scrape."""
ENGINE_LABELS = ["target", "engine"]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class LLMCollector(Collector):
    """Yields the llm_* families from a fresh view of the run at each scrape (``view_of()``)."""

    def __init__(self, view_of: Callable[[], RunView]) -> None:
        self.view_of = view_of

    @staticmethod
    def versioned(view: RunView) -> bool:
        """Label by route version: with ``--route-table`` (or results that carry a version); else no version label."""
        return bool(getattr(view.options, "route_table", None)) or any(k[2] for k in view.merged.cells)

    def collect(self):
        view = self.view_of()
        versioned = self.versioned(view)
        labels = ["user_class", "stage", "version"] if versioned else ["user_class", "stage"]
        groups: dict[tuple[str, ...], list] = defaultdict(list)
        for (uc, stage, version), cell in view.merged.cells.items():
            groups[(uc, stage, version or "") if versioned else (uc, stage)].append(cell)
        yield from self._histograms(groups, labels)
        yield from self._counters(view, groups, labels)
        yield from self._gauges(view)

    def _histograms(self, groups, labels):
        for metric in having("histogram"):
            fam = HistogramMetricFamily(metric.prom_name, metric.prom_help, labels=labels)
            for key, cells in sorted(groups.items()):
                h = BucketHistogram(metric.bounds)
                for c in cells:
                    h.merge(c.hists[metric.key])
                buckets = [
                    (floatToGoString(le) if not math.isinf(le) else "+Inf", float(n)) for le, n in h.cumulative()
                ]
                fam.add_metric(list(key), buckets, h.sum)
            yield fam

    def _counters(self, view: RunView, groups, labels):
        req = CounterMetricFamily("llm_requests", "LLM requests by outcome and error kind",
                                  labels=[*labels, "outcome", "error_kind"])
        prompt = CounterMetricFamily("llm_prompt_tokens", "Prompt tokens sent", labels=labels)
        output = CounterMetricFamily("llm_output_tokens", "Output tokens received", labels=labels)
        reasoning = CounterMetricFamily("llm_reasoning_tokens", "Output tokens that were reasoning", labels=labels)
        for key, cells in sorted(groups.items()):
            outcomes: dict[str, int] = defaultdict(int)
            for c in cells:
                for k, n in c.outcomes.items():
                    outcomes[k] += n
            for k, n in sorted(outcomes.items()):
                req.add_metric([*key, "ok" if k == "ok" else "error", "" if k == "ok" else k], n)
            prompt.add_metric(list(key), sum(c.prompt_tokens for c in cells))
            output.add_metric(list(key), sum(c.output_tokens for c in cells))
            reasoning.add_metric(list(key), sum(c.reasoning_tokens for c in cells))
        yield req
        yield prompt
        yield output
        yield reasoning
        latest = view.server_latest
        if latest and latest.get("preemptions_total") is not None:
            pre = CounterMetricFamily("llm_server_preemptions", "Server preemptions (relayed counter)")
            pre.add_metric([], latest["preemptions_total"])
            yield pre
        yield from _spec_counters((latest or {}).get("spec"))

    def _gauges(self, view: RunView):
        users = GaugeMetricFamily("llm_active_users", "Locust users running")
        users.add_metric([], float(view.active_users))
        yield users

        info = GaugeMetricFamily("llm_stage_info", "The current load stage (value 1)",
                                 labels=["stage", "index", "users", "rate", "input_len"])
        if view.current_stage is not None:
            st = view.current_stage
            info.add_metric([st.name, str(st.index), "" if st.users is None else str(st.users),
                             "" if st.rate is None else f"{st.rate:g}", st.input_len or ""], 1.0)
        yield info

        q = GaugeMetricFamily("llm_latency_quantile_seconds", "Quantiles from the merged sketches (all users, stages)",
                              labels=["metric", "quantile"])
        cells = list(view.merged.cells.values())
        for m in (metric.key for metric in having("top")):
            s = Recorder.merged_sketch(cells, m)
            if s.count == 0:
                continue
            for qq in QUANTILES:
                q.add_metric([m, f"{qq:g}"], s.quantile(qq))
        yield q

        fill = view.client_kv_fill
        if fill is not None:
            g = GaugeMetricFamily("llm_client_kv_block_fill_ratio", "Client-side KV block fill (blocks of 16)")
            g.add_metric([], fill)
            yield g

        latest = view.server_latest
        for field, (name, doc) in SERVER_GAUGES.items():
            if latest and latest.get(field) is not None:
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], float(latest[field]))
                yield g
        yield from self._engines(latest)
        yield from self._versions(view)
        yield from self._detectors(view.detectors, latest)

    @staticmethod
    def _engine_labels(key: str, engine: dict) -> list[str]:
        return [str(engine.get("target") or ""), str(engine.get("engine", key))]

    def _engines(self, latest: dict | None):
        """Every engine of every target (the scraper's per-engine samples)."""
        engines = (latest or {}).get("engines") or {}
        for field, (name, doc) in ENGINE_GAUGES.items():
            g = GaugeMetricFamily(name, doc, labels=ENGINE_LABELS)
            for key, e in engines.items():
                if e.get(field) is not None:
                    g.add_metric(self._engine_labels(key, e), float(e[field]))
            yield g

    @staticmethod
    def _versions(view: RunView):
        """Each route version's backend (its latest scrape) and the fallback's switch counter."""
        if view.version_servers:
            for field, (name, doc) in SERVER_GAUGES.items():
                g = GaugeMetricFamily(name.replace("llm_server_", "llm_version_server_"),
                                      doc.replace("(relayed", "of the version's backend (relayed"),
                                      labels=["version"])
                for version, server in view.version_servers.items():
                    series = server.get("series") or []
                    if series and series[-1].get(field) is not None:
                        g.add_metric([version], float(series[-1][field]))
                yield g
        fb = view.route_fallback
        if fb is not None and fb.get("from") is not None:
            c = CounterMetricFamily("llm_route_fallback", "Route fallbacks applied (--route-fallback)",
                                    labels=["from", "to"])
            c.add_metric([str(fb["from"]), str(fb["to"])], 1.0 if fb.get("fired") else 0.0)
            yield c

    def _detectors(self, state: dict | None, latest: dict | None):
        """The live detectors (telemetry/control/detectors.py): deploy/prometheus/rules/alerts.yml reads these names."""
        if state is None:
            return
        im = state.get("imbalance") or {}
        g = GaugeMetricFamily("llm_engine_imbalanced", "1 for the engine that stays off the rest of the fleet over "
                              "the trailing --imbalance-windows windows, 0 for the others", labels=ENGINE_LABELS)
        for key, e in ((latest or {}).get("engines") or {}).items():
            g.add_metric(self._engine_labels(key, e), 1.0 if im.get("imbalanced") and im.get("engine") == key else 0.0)
        yield g
        b = GaugeMetricFamily("llm_batching_degraded",
                              "1 while the batching-collapse rule flags each of the trailing windows, else 0")
        b.add_metric([], 1.0 if state["batching"]["degraded"] else 0.0)
        yield b
        breached = GaugeMetricFamily("llm_slo_breached", "1 while the SLO's trailing-window value is past its "
                                     "threshold, else 0", labels=["slo"])
        value = GaugeMetricFamily("llm_slo_value", "The SLO's value over the trailing windows (ms; error_rate 0..1)",
                                  labels=["slo"])
        threshold = GaugeMetricFamily("llm_slo_threshold", "The SLO's threshold (ms; error_rate 0..1)",
                                      labels=["slo"])
        for c in state["slo"]:
            breached.add_metric([c["name"]], 1.0 if c["breached"] else 0.0)
            if c["value"] is not None:
                value.add_metric([c["name"]], float(c["value"]))
            threshold.add_metric([c["name"]], float(c["threshold"]))
        yield breached
        yield value
        yield threshold


def llm_registry(view_of: Callable[[], RunView]) -> CollectorRegistry:
    """A private registry holding one :class:`LLMCollector` (the exporter's, and the web UI's ``/llm/metrics``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LLMCollector(view_of))
    return registry


class Exporter:
    """Serves the private registry over HTTP (gevent WSGI server); start() reports a busy port in one line."""

    def __init__(
        self, view_of: Callable[[], RunView], host: str = PROMETHEUS_HOST_DEFAULT, port: int = PROMETHEUS_PORT_DEFAULT
    ) -> None:
        self.registry = llm_registry(view_of)
        self.host = host
        self.port = port
        self._server: WSGIServer | None = None

    def start(self) -> bool:
        """Bind and serve; False (after one error line) when the port cannot be bound."""
        if self._server is not None:
            return True
        server = WSGIServer((self.host, self.port), make_wsgi_app(self.registry), log=None, error_log=None)
        try:
            server.start()
        except OSError as e:
            log.error(f"Prometheus exporter not started: cannot bind {self.host}:{self.port} ({e.strerror or e}); "
                      "choose another --prometheus-port, or 0 to turn it off")
            return False
        self._server = server
        self.port = server.server_port
        log.info(f"LLM metrics for Prometheus at http://{self.host}:{self.port}/metrics")
        return True

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(timeout=1)


SPEC_RELAYED = {
    "drafts": ("llm_server_spec_decode_drafts", "Speculative verify steps that checked drafts (relayed counter)"),
    "draft_tokens": ("llm_server_spec_decode_draft_tokens", "Draft tokens proposed (relayed counter)"),
    "accepted": ("llm_server_spec_decode_accepted_tokens", "Draft tokens accepted (relayed counter)"),
}
"""The server's speculative-decoding counters relayed per ``engine`` (telemetry/measure/scraper.py ``spec``)."""


def _spec_counters(spec: dict | None):
    """The relayed ``llm_server_spec_decode_*`` counters (none while the server exports no speculation)."""
    if not spec:
        return
    for field_name, (name, help_text) in SPEC_RELAYED.items():
        fam = CounterMetricFamily(name, help_text, labels=["engine"])
        for engine, values in sorted(spec.items()):
            if values.get(field_name) is not None:
                fam.add_metric([engine], values[field_name])
        yield fam
    pos = CounterMetricFamily("llm_server_spec_decode_accepted_tokens_per_pos",
                              "Draft tokens accepted at each draft position (relayed counter)",
                              labels=["engine", "position"])
    for engine, values in sorted(spec.items()):
        for i, v in enumerate(values.get("per_position") or ()):
            pos.add_metric([engine, str(i)], v)
    yield pos
