"""Scrapes the servers' Prometheus ``/metrics`` (vLLM V1 or legacy names) into one time series, kept per engine.

A fleet is one or more *targets* (``--server-metrics-url URL[,URL...]``, an item ``role=URL`` names a prefill or
decode server), each exporting one or more *engines* (vLLM's ``engine`` label: one per data-parallel rank).
``parse_engines(text)`` turns one target's scrape into a sample per engine: gauges (KV-cache usage, running /
waiting requests), counters (read with or without ``_total``), the cumulative buckets / sum / count of the
queue, prefill, decode, TTFT, ITL and E2E histograms and the ``vllm:cache_config_info`` labels. Every table
below is read the same way for the fleet and for each engine, so a series added to a table is kept per engine
too. ``fleet_sample(engines)`` folds them into the fleet's figures (counters, histograms, running and waiting
summed; KV usage the engines' mean) with the engines kept under ``"engines"``.

:class:`ServerScraper` polls every target on the master in a greenlet; each target's failures are counted and
warned about once, never raised; a target that failed this round contributes its last good sample.

    sample = parse_server_metrics(text)   # {"kv_cache_usage": 0.4, "hist": {...}, "engines": {"0": {...}}, ...}
    scraper = ServerScraper(metrics_targets("http://a:8000,http://b:8000", None), interval_s=2.0)
    scraper.start(t0_wall)
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from urllib.parse import urlsplit

import gevent
import requests
from prometheus_client.parser import text_string_to_metric_families

from telemetry.measure.targets import Target
from telemetry.options import SERVER_METRICS_INTERVAL_DEFAULT

log = logging.getLogger(__name__)

GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
}
"""Summary field -> server names, V1 first then legacy."""
MEAN_GAUGES = frozenset({"kv_cache_usage"})
"""Gauges a fleet reports as its engines' mean (a share); the others add up."""
LABELLED_GAUGES: dict[str, tuple[str, str, str]] = {
    "requests_deferred": ("vllm:num_requests_waiting_by_reason", "reason", "deferred"),
}
"""Summary field -> (gauge, label, value): one label value of a labelled gauge (a prefill/decode server's
requests waiting for their KV transfer)."""
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions_total": ("vllm:num_preemptions",),
    "prompt_tokens_total": ("vllm:prompt_tokens",),
    "generation_tokens_total": ("vllm:generation_tokens",),
    "request_success_total": ("vllm:request_success",),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries",),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits",),
    "kv_transfer_failures_total": ("vllm:nixl_num_failed_transfers",),
}
"""Summary field -> counter base names; each is read as ``base_total`` or plain ``base``."""
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "kv_transfer": ("vllm:nixl_xfer_time_seconds",),
    "kv_transfer_bytes": ("vllm:nixl_bytes_transferred",),
}
"""Summary field -> histogram names (V1 first, then legacy)."""
SPEC_COUNTERS: dict[str, str] = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
"""Speculative decoding's counters: each engine sample's ``spec`` (with ``per_position``), the fleet's per engine."""
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
"""Accepted draft tokens per draft position (label ``position``): ``spec["per_position"]``."""
CACHE_INFO = ("vllm:cache_config_info", "vllm:cache_config")
"""The info gauge whose labels are an engine's cache config (block_size, num_gpu_blocks, ...)."""
V1_MARKER, LEGACY_MARKER = "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"
ENGINE_LABEL = "engine"
NO_ENGINE = "0"
"""The engine name of series without an ``engine`` label (a server with one engine, older vLLM)."""


def _le(value: str) -> float:
    return math.inf if value in ("+Inf", "Inf", "inf") else float(value)


class _Engine:
    """One engine's series of one scrape, summed over its other label sets (finish reasons, ...)."""

    def __init__(self) -> None:
        self.plain: dict[str, float] = defaultdict(float)
        self.labelled: dict[tuple[str, str, str], float] = defaultdict(float)
        self.buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
        self.cache: dict[str, str] | None = None
        self.per_pos: dict[int, float] = defaultdict(float)

    def spec(self) -> dict | None:
        """This engine's speculative counters (None when it exports none)."""
        plain = self.plain
        if not any(n in plain for n in SPEC_COUNTERS.values()):
            return None
        out: dict = {f: plain.get(n, 0.0) for f, n in SPEC_COUNTERS.items()}
        out["per_position"] = [self.per_pos.get(i, 0.0) for i in range(max(self.per_pos, default=-1) + 1)]
        return out

    def sample(self) -> dict:
        plain, buckets = self.plain, self.buckets
        sample: dict = {}
        for field_name, names in GAUGES.items():
            sample[field_name] = next((plain[n] for n in names if n in plain), None)
        for field_name, key in LABELLED_GAUGES.items():
            sample[field_name] = self.labelled.get(key)
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
        sample["cache_config"] = self.cache
        sample["spec"] = self.spec()
        sample["metric_names"] = ("vllm-v1" if V1_MARKER in plain else "vllm-legacy" if LEGACY_MARKER in plain
                                  else "none")
        return sample


def parse_engines(text: str) -> dict[str, dict]:
    """One target's scrape -> ``{engine label: sample}`` (an engine-less server is engine ``"0"``)."""
    engines: dict[str, _Engine] = defaultdict(_Engine)
    watched = {key[0] for key in LABELLED_GAUGES.values()}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            e = engines[s.labels.get(ENGINE_LABEL) or NO_ENGINE]
            if family.name in CACHE_INFO:
                e.cache = {k: v for k, v in s.labels.items() if k != ENGINE_LABEL}
            elif s.name.endswith("_bucket") and "le" in s.labels:
                e.buckets[s.name[: -len("_bucket")]][_le(s.labels["le"])] += s.value
            else:
                e.plain[s.name] += s.value
                if s.name == SPEC_PER_POSITION and str(s.labels.get("position", "")).isdigit():
                    e.per_pos[int(s.labels["position"])] += s.value
                if s.name in watched:
                    for key in LABELLED_GAUGES.values():
                        if key[0] == s.name and s.labels.get(key[1]) == key[2]:
                            e.labelled[key] += s.value
    return {name: engines[name].sample() for name in sorted(engines, key=_engine_order)}


def _engine_order(name: str) -> tuple:
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def _add(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _add_hists(hists: list[dict]) -> dict | None:
    """Bucket-wise sum of cumulative histograms (the same bounds; a histogram with other bounds is left out)."""
    if not hists:
        return None
    les = hists[0]["le"]
    same = [h for h in hists if h["le"] == les]
    return {"le": list(les), "cum": [sum(c) for c in zip(*(h["cum"] for h in same), strict=True)],
            "sum": sum(h["sum"] for h in same), "count": sum(h["count"] for h in same)}


def fleet_sample(engines: dict[str, dict]) -> dict:
    """The fleet's sample of ``{key: engine sample}``: counters, histograms, running/waiting summed, KV usage the
    mean (:data:`MEAN_GAUGES`); ``engines`` keeps them (each with ``target``/``role``/``engine`` when given)."""
    parts = list(engines.values())
    sample: dict = {}
    for field_name in (*GAUGES, *LABELLED_GAUGES, *COUNTERS):
        values = [p.get(field_name) for p in parts]
        total = _add(values)
        if field_name in MEAN_GAUGES and total is not None:
            total /= sum(v is not None for v in values)
        sample[field_name] = total
    sample["hist"] = {k: h for k in HISTOGRAMS
                      if (h := _add_hists([p["hist"][k] for p in parts if k in p.get("hist", {})])) is not None}
    names = {p.get("metric_names", "none") for p in parts}
    sample["metric_names"] = next((n for n in ("vllm-v1", "vllm-legacy") if n in names), "none")
    sample["spec"] = {k: p["spec"] for k, p in engines.items() if p.get("spec")} or None
    sample["engines"] = engines
    return sample


def engine_keys(series: list[dict]) -> list[str]:
    """Every engine seen in a fleet series, in first-seen order."""
    keys: dict[str, None] = {}
    for s in series:
        keys.update(dict.fromkeys(s.get("engines") or {}))
    return list(keys)


def engine_series(series: list[dict], key: str) -> list[dict]:
    """One engine's samples (``t`` and its own fields) out of a fleet series."""
    return [{**s["engines"][key], "t": s["t"]} for s in series if key in (s.get("engines") or {})]


def role_series(series: list[dict], role: str) -> list[dict]:
    """The fleet series of one role's engines only (``prefill`` or ``decode``; empty when no target has it)."""
    out = []
    for s in series:
        mine = {k: e for k, e in (s.get("engines") or {}).items() if e.get("role") == role}
        if mine:
            out.append({**fleet_sample(mine), "t": s["t"]})
    return out


def parse_server_metrics(text: str) -> dict:
    """One scrape -> the fleet sample of its engines (:func:`fleet_sample`), engines keyed by their label."""
    engines = parse_engines(text)
    for name, e in engines.items():
        e["engine"] = name
    return fleet_sample(engines)


class _TargetState:
    __slots__ = ("failures", "latest", "successes", "target", "warned")

    def __init__(self, target: Target) -> None:
        self.target = target
        self.successes = 0
        self.failures = 0
        self.latest: dict | None = None
        self.warned = False


class ServerScraper:
    """Polls every target's /metrics every ``interval_s`` on the master; keeps every fleet sample (``t`` = s since
    start), its engines keyed ``target/engine`` (just ``engine`` with one unnamed target)."""

    def __init__(self, targets: str | list[Target], interval_s: float = SERVER_METRICS_INTERVAL_DEFAULT,
                 timeout_s: float | None = None) -> None:
        if isinstance(targets, str):
            targets = [Target(urlsplit(targets).netloc, targets)]
        self.targets = [_TargetState(t) for t in targets]
        self.url = targets[0].url if targets else ""
        self.interval_s = interval_s
        self.timeout_s = timeout_s if timeout_s is not None else max(1.0, min(interval_s, 5.0))
        self.series: list[dict] = []
        self.metric_names = "none"
        self._t0_wall = time.time()
        self._greenlet: gevent.Greenlet | None = None
        self._session = requests.Session()  # keep-alive, as Prometheus itself scrapes

    @property
    def successes(self) -> int:
        return sum(t.successes for t in self.targets)

    @property
    def failures(self) -> int:
        return sum(t.failures for t in self.targets)

    @property
    def latest(self) -> dict | None:
        return self.series[-1] if self.series else None

    def target_states(self) -> list[dict]:
        """Per target: name, url, role, scrapes, failures (the view's ``server_targets``)."""
        return [{"target": s.target.name, "url": s.target.url, "role": s.target.role, "scrapes": s.successes,
                 "scrape_failures": s.failures} for s in self.targets]

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

    def _scrape_target(self, state: _TargetState) -> bool:
        url = state.target.url
        try:
            resp = self._session.get(url, timeout=self.timeout_s)
            resp.raise_for_status()
            engines = parse_engines(resp.content.decode("utf-8", errors="replace"))
        except Exception as e:  # any network or parse failure is counted, never raised
            state.failures += 1
            if not state.warned:
                state.warned = True
                log.warning(f"server metrics scrape of {url} failed ({type(e).__name__}: {e}); "
                            "counting failures and retrying quietly")
            return False
        state.successes += 1
        state.latest = engines
        return True

    def scrape_once(self) -> dict | None:
        """Fetch every target (concurrently) and fold them; None when none has answered yet (or none now)."""
        wall = time.time()
        if len(self.targets) == 1:
            ok = [self._scrape_target(self.targets[0])]
        else:
            jobs = [gevent.spawn(self._scrape_target, s) for s in self.targets]
            gevent.joinall(jobs)
            ok = [bool(j.value) for j in jobs]
        if not any(ok):
            return None
        named = len(self.targets) > 1 or self.targets[0].target.role is not None
        engines: dict[str, dict] = {}
        for state in self.targets:
            for name, e in (state.latest or {}).items():
                key = f"{state.target.name}/{name}" if named else name
                engines[key] = {**e, "target": state.target.name, "role": state.target.role, "engine": name}
        sample = fleet_sample(engines)
        sample["t"] = wall - self._t0_wall
        if sample["metric_names"] != "none":
            self.metric_names = sample["metric_names"]
        self.series.append(sample)
        return sample
