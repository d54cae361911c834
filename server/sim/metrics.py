"""vLLM V1's Prometheus metrics, fed by the simulated engine and served at ``/metrics``.

Names, types, labels (``model_name``, ``engine``) and histogram bucket boundaries follow vLLM V1's
``PrometheusStatLogger``. ``legacy=True`` adds the pre-V1 names that older servers (like vLLM
v0.6.3) export: ``vllm:gpu_cache_usage_perc`` and ``vllm:time_per_output_token_seconds``.

Observations are plain Python counters and :class:`Hist` objects (cheap on the engine's hot path);
a custom collector turns them into metric families at scrape time, in a private registry.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
FINISH_REASONS = ("stop", "length", "abort")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (vLLM's token-count buckets)."""
    out: list[int] = []
    base = 1
    while True:
        for m in (1, 2, 5):
            v = base * m
            if v > max_value:
                return tuple(out)
            out.append(v)
        base *= 10


class Hist:
    """A fixed-bucket histogram: counts per bucket (last one is +Inf) and the running sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        out, acc = [], 0
        for b, c in zip((*self.bounds, float("inf")), self.counts, strict=True):
            acc += c
            out.append(("+Inf" if b == float("inf") else repr(float(b)), acc))
        return out


class EngineMetrics:
    """Every counter and histogram the engine updates; gauges are read live through ``gauges``."""

    def __init__(self, max_model_len: int):
        tok_buckets = build_1_2_5_buckets(max_model_len)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.ttft = Hist(TTFT_BUCKETS)
        self.itl = Hist(ITL_BUCKETS)
        self.tpot_request = Hist(ITL_BUCKETS)
        self.e2e = Hist(REQUEST_LATENCY_BUCKETS)
        self.queue = Hist(REQUEST_LATENCY_BUCKETS)
        self.inference = Hist(REQUEST_LATENCY_BUCKETS)
        self.prefill = Hist(REQUEST_LATENCY_BUCKETS)
        self.decode = Hist(REQUEST_LATENCY_BUCKETS)
        self.request_prompt_tokens = Hist(tok_buckets)
        self.request_generation_tokens = Hist(tok_buckets)
        self.request_max_tokens = Hist(tok_buckets)
        self.iteration_tokens = Hist(ITERATION_TOKEN_BUCKETS)


# (name, documentation, attribute) of each exported histogram, in vLLM's order.
HISTOGRAMS: tuple[tuple[str, str, str], ...] = (
    ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", "request_prompt_tokens"),
    ("vllm:request_generation_tokens", "Number of generation tokens processed.", "request_generation_tokens"),
    ("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", "iteration_tokens"),
    ("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", "request_max_tokens"),
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "itl"),
    ("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
     "tpot_request"),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
    ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", "queue"),
    ("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", "inference"),
    ("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", "prefill"),
    ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", "decode"),
)


class SimCollector:
    """Yields vLLM's metric families from the engine's live state (a prometheus_client custom collector)."""

    def __init__(self, metrics: EngineMetrics, gauges: Callable[[], dict], model_name: str,
                 cache_info: dict[str, str], legacy: bool = False, engine: str = "0", kv=None):
        self.kv = kv
        """A :class:`server.sim.pd.KvTransfer` (the decode instance of a prefill/decode pair), else None."""
        self.m = metrics
        self.gauges = gauges
        self.labels = ["model_name", "engine"]
        self.values = [model_name, engine]
        self.cache_info = cache_info
        self.legacy = legacy

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        g = GaugeMetricFamily(name, doc, labels=self.labels)
        g.add_metric(self.values, value)
        return g

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        c = CounterMetricFamily(name, doc, labels=self.labels)
        c.add_metric(self.values, value)
        return c

    def collect(self) -> Iterator:
        m, live = self.m, self.gauges()
        yield self._gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                          live["running"])
        deferred = self.kv.deferred if self.kv is not None else 0
        yield self._gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                          live["waiting"] + deferred)
        by_reason = GaugeMetricFamily("vllm:num_requests_waiting_by_reason", "Number of waiting requests by reason. "
                                      "Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = "
                                      "deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
                                      "Sum of all reasons equals vllm:num_requests_waiting.",
                                      labels=[*self.labels, "reason"])
        by_reason.add_metric([*self.values, "capacity"], live["waiting"])
        by_reason.add_metric([*self.values, "deferred"], deferred)
        yield by_reason
        yield self._gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", live["kv_usage"])
        if self.legacy:
            yield self._gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.",
                              live["kv_usage"])
        yield self._counter("vllm:prefix_cache_queries",
                            "Prefix cache queries, in terms of number of queried tokens.", live["prefix_queries"])
        yield self._counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                            live["prefix_hits"])
        yield self._counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                            live["preemptions"])
        yield self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens)
        yield self._counter("vllm:generation_tokens", "Number of generation tokens processed.", m.generation_tokens)
        ok = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                 labels=[*self.labels, "finished_reason"])
        for reason, n in m.success.items():
            ok.add_metric([*self.values, reason], n)
        yield ok
        if live.get("spec") is not None:
            yield from self._spec(*live["spec"])
        for name, doc, attr in HISTOGRAMS:
            yield self._hist(name, doc, getattr(m, attr))
        if self.legacy:
            yield self._hist("vllm:time_per_output_token_seconds",
                             "Histogram of time per output token in seconds.", m.itl)
        if self.kv is not None:  # vLLM's NIXL connector (the decode instance pulls each request's KV)
            yield self._hist("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for KV cache.",
                             self.kv.xfer)
            yield self._hist("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per KV transfer.",
                             self.kv.bytes)
            yield self._counter("vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.",
                                self.kv.failed)
        info = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                                 labels=list(self.cache_info))
        info.add_metric(list(self.cache_info.values()), 1.0)
        yield info

    def _spec(self, drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]) -> Iterator:
        """vLLM's four speculative-decoding counters (vllm/v1/spec_decode/metrics.py: names, help, labels)."""
        yield self._counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", drafts)
        yield self._counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", draft_tokens)
        yield self._counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", accepted)
        pos = CounterMetricFamily("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                                  labels=[*self.labels, "position"])
        for i, n in enumerate(per_pos):
            pos.add_metric([*self.values, str(i)], n)
        yield pos

    def _hist(self, name: str, doc: str, h: Hist) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=self.labels)
        fam.add_metric(self.values, buckets=h.cumulative(), sum_value=h.sum)
        return fam


class HeaderCollector:
    """``sim:tokenizer_header_requests_total{header, value}``: generation requests per X-Tokenizer-* header value
    received (not a vLLM metric: the simulator's own record that a gray-routing client's headers arrive)."""

    NAME = "sim:tokenizer_header_requests"

    def __init__(self, counts: Counter) -> None:
        self.counts = counts

    def collect(self) -> Iterator:
        fam = CounterMetricFamily(self.NAME, "Generation requests per tokenizer metadata header value received.",
                                  labels=("header", "value"))
        for (header, value), n in sorted(self.counts.items()):
            fam.add_metric([header, value], float(n))
        yield fam


def make_registry(collector: SimCollector) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
