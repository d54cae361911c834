"""Scrapes the server's Prometheus ``/metrics`` (vLLM V1 or legacy names) into a time series.

``parse_server_metrics(text)`` turns one scrape into a flat sample: gauges (KV-cache usage,
running / waiting requests), counters (read with or without ``_total``), and the cumulative
buckets / sum / count of the queue, prefill, decode, TTFT, ITL and E2E histograms (summed over
label sets such as ``engine``), so windowed deltas can be taken later. :class:`ServerScraper`
polls on the master in a greenlet; failures are counted and warned about once, never raised.

    sample = parse_server_metrics(text)   # {"kv_cache_usage": 0.4, "hist": {"ttft": {...}}, ...}
    scraper = ServerScraper("http://127.0.0.1:8000/metrics", interval_s=2.0); scraper.start(t0_wall)
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict

import gevent
import requests
from prometheus_client.parser import text_string_to_metric_families

from telemetry.options import SERVER_METRICS_INTERVAL_DEFAULT

log = logging.getLogger(__name__)

GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
}
"""Summary field -> server names, V1 first then legacy."""
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions_total": ("vllm:num_preemptions",),
    "prompt_tokens_total": ("vllm:prompt_tokens",),
    "generation_tokens_total": ("vllm:generation_tokens",),
    "request_success_total": ("vllm:request_success",),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries",),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits",),
}
"""Summary field -> counter base names; each is read as ``base_total`` or plain ``base``."""
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
}
"""Summary field -> histogram names (V1 first, then legacy)."""
SPEC_COUNTERS: dict[str, str] = {
    "drafts": "vllm:spec_decode_num_drafts",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "accepted": "vllm:spec_decode_num_accepted_tokens",
}
"""Speculative decoding's counters (``base_total`` or plain), kept per ``engine`` label in ``sample["spec"]``."""
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
"""Accepted draft tokens per draft position (label ``position``): ``sample["spec"][engine]["per_position"]``."""
V1_MARKER, LEGACY_MARKER = "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"


def _le(value: str) -> float:
    return math.inf if value in ("+Inf", "Inf", "inf") else float(value)


def parse_server_metrics(text: str) -> dict:
    """One scrape -> ``{field: value|None, ..., "hist": {...}, "metric_names": "vllm-v1|vllm-legacy|none"}``."""
    plain: dict[str, float] = defaultdict(float)
    spec: dict[str, dict] = {}
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            if s.name.endswith("_bucket") and "le" in s.labels:
                buckets[s.name[: -len("_bucket")]][_le(s.labels["le"])] += s.value
            else:
                plain[s.name] += s.value  # summed over label sets (engines, finish reasons...)
                if s.name.startswith("vllm:spec_decode_"):
                    _spec_sample(spec, s.name, s.labels, s.value)
    sample: dict = {}
    for field_name, names in GAUGES.items():
        sample[field_name] = next((plain[n] for n in names if n in plain), None)
    for field_name, bases in COUNTERS.items():
        sample[field_name] = next((plain[n] for b in bases for n in (b + "_total", b) if n in plain), None)
    hists = {}
    for field_name, names in HISTOGRAMS.items():
        for n in names:
            if n in buckets:
                les = sorted(buckets[n])
                hists[field_name] = {
                    "le": les,
                    "cum": [buckets[n][le] for le in les],
                    "sum": plain.get(n + "_sum", 0.0),
                    "count": plain.get(n + "_count", buckets[n].get(math.inf, 0.0)),
                }
                break
    sample["hist"] = hists
    sample["spec"] = spec or None
    sample["metric_names"] = "vllm-v1" if V1_MARKER in plain else "vllm-legacy" if LEGACY_MARKER in plain else "none"
    return sample


def _spec_sample(spec: dict[str, dict], name: str, labels: dict, value: float) -> None:
    """One ``vllm:spec_decode_*`` sample into ``spec[engine]``: ``drafts``, ``draft_tokens``, ``accepted`` and
    ``per_position`` (a list indexed by the ``position`` label)."""
    base = name[: -len("_total")] if name.endswith("_total") else name
    per_engine = spec.setdefault(str(labels.get("engine", "")), {})
    if base == SPEC_PER_POSITION:
        pos = labels.get("position", "")
        if pos.isdigit():
            per = per_engine.setdefault("per_position", [])
            per.extend([0.0] * (int(pos) + 1 - len(per)))
            per[int(pos)] += value
        return
    for field_name, counter in SPEC_COUNTERS.items():
        if base == counter:
            per_engine[field_name] = per_engine.get(field_name, 0.0) + value


def metrics_url(option: str | None, host: str | None) -> str | None:
    """``--server-metrics-url``: explicit URL, ``off`` -> None, default ``<host>/metrics``."""
    if option and option.strip().lower() == "off":
        return None
    if option:
        return option
    if not host:
        return None
    base = host.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/metrics"


class ServerScraper:
    """Polls a /metrics URL every ``interval_s`` on the master; keeps every sample (``t`` = s since start)."""

    def __init__(
        self, url: str, interval_s: float = SERVER_METRICS_INTERVAL_DEFAULT, timeout_s: float | None = None
    ) -> None:
        self.url = url
        self.interval_s = interval_s
        self.timeout_s = timeout_s if timeout_s is not None else max(1.0, min(interval_s, 5.0))
        self.series: list[dict] = []
        self.failures = 0
        self.successes = 0
        self.metric_names = "none"
        self._t0_wall = time.time()
        self._greenlet: gevent.Greenlet | None = None
        self._warned = False
        self._session = requests.Session()  # keep-alive, as Prometheus itself scrapes

    @property
    def latest(self) -> dict | None:
        return self.series[-1] if self.series else None

    def start(self, t0_wall: float) -> None:
        self._t0_wall = t0_wall
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def stop(self, final_scrape: bool = True) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=True)
            self._greenlet = None
            if final_scrape:
                self.scrape_once()
        self._session.close()

    def _loop(self) -> None:
        while True:
            self.scrape_once()
            gevent.sleep(self.interval_s)

    def scrape_once(self) -> dict | None:
        """Fetch and parse once; on failure count it, warn the first time, and return None."""
        wall = time.time()
        try:
            resp = self._session.get(self.url, timeout=self.timeout_s)
            resp.raise_for_status()
            sample = parse_server_metrics(resp.content.decode("utf-8", errors="replace"))
        except Exception as e:  # any network or parse failure is counted, never raised
            self.failures += 1
            if not self._warned:
                self._warned = True
                log.warning(f"server metrics scrape of {self.url} failed ({type(e).__name__}: {e}); "
                            "counting failures and retrying quietly")
            return None
        self.successes += 1
        sample["t"] = wall - self._t0_wall
        if sample["metric_names"] != "none":
            self.metric_names = sample["metric_names"]
        self.series.append(sample)
        return sample
