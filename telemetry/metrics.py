"""The client metrics, each defined once: what it is, how it is taken from a result, and what the summary keeps.

Every consumer iterates :data:`CLIENT_METRICS` (in this order): the recorder (sketches per cell, fixed-bucket
histograms, per-slot sketches), the exporter (histogram families, ``llm_latency_quantile_seconds``), the
summary (top-level and per-stage ``<key>_ms``, ``histograms``, ``versions``), the console table and the CSV
files, the hub's live view and the web UI's LLM tab, the HTML report and the Grafana dashboard generator.
Values are recorded in seconds; people see milliseconds (``<key>_ms``), Prometheus sees seconds.

To add a client metric, add one :class:`ClientMetric` below (and, when it is a new quantity, a property of
:class:`~users.result.GenerationResult` for ``take``); every output picks it up from its flags. How an output
presents a metric (a console column's width, which quantiles a table or the CSV shows, a report card, a Grafana
panel's title and help) lives with that output, keyed by the metric's ``key``:
``telemetry.outputs.sinks`` (``STAGE_TABLE``, ``STAGES_CSV``), ``telemetry.outputs.live`` (``LIVE``),
``telemetry.outputs.report.sections`` (``REPORT_*``, ``LOAD_CHARTS``), ``telemetry.outputs.progress`` (``SHOWN``) and
``deploy/grafana/dashboard.py`` (``METRIC_PANELS``).

    for m in CLIENT_METRICS:
        if m.top:
            print(m.label, summary[m.summary_key]["p99"])
    BY_KEY["ttft"].take(result)  # seconds, or None when the request has no such value
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from telemetry.measure.buckets import RATIO, SUB_10MS, VLLM_ITL, VLLM_REQUEST, VLLM_TTFT

if TYPE_CHECKING:  # no import at run time: the dashboard generator reads this module without Locust
    from users.result import GenerationResult

_EMPTY = np.zeros(0, dtype=np.float64)
Take = Callable[["GenerationResult"], "float | np.ndarray | None"]


@dataclass(frozen=True, slots=True)
class ClientMetric:
    """One client-side latency metric and every place it appears."""

    key: str
    """Short name: the sketch/histogram key, ``<key>_ms`` in the summary, ``metric`` in the stats CSV and in
    ``llm_latency_quantile_seconds``, ``<key>_p50``/``_p99`` in the web tab."""
    label: str
    """For people: console rows, table headings, plot titles (``TTFT``)."""
    take: Take
    """The value of one ok request in seconds (None: the request has none), or with ``samples`` an array."""
    samples: bool = False
    """``take`` returns an array of samples (ITL: k samples of g/k per chunk); recorded vectorized."""
    at: Callable[..., float | np.ndarray] | None = None
    """For ``windowed``: when the value happened (perf_counter), ``at(result)``; None: the end of the request.
    With ``samples``, ``at(result, samples)`` gives an array aligned with the samples."""
    unit: str = "s"
    """Unit of the recorded values: ``s`` (shown as ms, ``<key>_ms``) or a count/ratio (``tokens``, ``steps``,
    ``ratio``: shown as recorded, under ``<key>``)."""
    prom_name: str | None = None
    """Prometheus histogram family (base unit seconds), or None when the metric is not exported as one."""
    prom_help: str = ""
    bounds: tuple[float, ...] = ()
    """Histogram upper bounds (``le``, seconds; +Inf implicit) for ``prom_name``, from telemetry.measure.buckets."""
    windowed: bool = False
    """Also sketched per wall-clock slot (the summary's ``timeseries``, attribution windows)."""
    top: bool = True
    """In the summary top level (``<key>_ms``), the console table, the stats CSV's ``all`` rows, the report's
    latency table and ``llm_latency_quantile_seconds``."""
    per_stage: bool = False
    """``<key>_ms`` in each summary stage and rows per stage in the stats CSV."""
    versions: bool = False
    """``<key>_ms`` per route version (summary ``versions``)."""
    distribution: bool = False
    """A log-binned distribution in the summary's ``histograms`` and a plot in the report."""
    server: bool = False
    """Taken from the server's in-band record (``result.server``): None for every request without one."""

    @property
    def summary_key(self) -> str:
        return f"{self.key}_ms" if self.unit == "s" else self.key

    def shown(self, value: float | None) -> float | int | None:
        """A recorded value as people see it: seconds as ms (µs-rounded), a count as an int, a ratio as it is."""
        if value is None:
            return None
        if self.unit == "s":
            return round(value * 1000.0, 3)
        return int(value) if self.unit in ("tokens", "steps") else round(value, 6)

    @property
    def histogram(self) -> bool:
        return self.prom_name is not None


_last_gaps: list = [None, _EMPTY]
"""(result, its gaps) of the latest :func:`_gaps` call."""


def _gaps(r: GenerationResult) -> np.ndarray:
    """``r.inter_chunk_samples()``, without np.diff's overhead (this runs on the hot path). The same array for the same
    result (a result is frozen): ITL's samples are its gaps when every chunk carries one token, and the recorder
    bins an array once for both metrics when it sees the same one again (telemetry/measure/recorder.py)."""
    if _last_gaps[0] is not r:
        t = r.chunk_times
        _last_gaps[0], _last_gaps[1] = r, t[1:] - t[:-1]
    return _last_gaps[1]


def _itl(r: GenerationResult) -> np.ndarray:
    """``r.itl_samples()`` without the copy when every chunk carries one token (then the samples are the gaps)."""
    if len(r.chunk_times) < 2:
        return _EMPTY
    gaps = _gaps(r)
    k = np.asarray(r.chunk_tokens[1:], dtype=np.int64)
    return gaps if gaps.size == int(k.sum()) else np.repeat(gaps / k, k)


def _server(name: str) -> Take:
    """A field of the server's in-band record (:class:`users.result.ServerRecord`); None without one."""

    def take(r: GenerationResult) -> float | None:
        rec = r.server
        return None if rec is None else getattr(rec, name)

    return take


def _spec_acceptance(r: GenerationResult) -> float | None:
    """Draft tokens accepted / drafted of one request (None when nothing was drafted)."""
    rec = r.server
    if rec is None or not rec.spec_drafted or rec.spec_accepted is None:
        return None
    return rec.spec_accepted / rec.spec_drafted


def _per_token_times(r: GenerationResult, samples: np.ndarray) -> np.ndarray:
    """Arrival time of each ITL sample: a chunk's time, repeated once per token it carries."""
    times = np.asarray(r.chunk_times[1:], dtype=np.float64)
    return times if times.size == samples.size else np.repeat(times, np.asarray(r.chunk_tokens[1:], dtype=np.int64))


CLIENT_METRICS: tuple[ClientMetric, ...] = (
    ClientMetric(
        "ttft", "TTFT", attrgetter("ttft_s"), at=lambda r: float(r.chunk_times[0]),
        prom_name="llm_time_to_first_token_seconds", prom_help="Time to first token (client side)",
        bounds=VLLM_TTFT, windowed=True, per_stage=True, versions=True, distribution=True,
    ),
    ClientMetric(
        "itl", "ITL", _itl, samples=True, at=_per_token_times,
        prom_name="llm_inter_token_latency_seconds",
        prom_help="Inter-token latency (client side; k samples of g/k per chunk)",
        bounds=SUB_10MS + VLLM_ITL, windowed=True, per_stage=True, versions=True, distribution=True,
    ),
    ClientMetric(
        "tpot", "TPOT", attrgetter("tpot_s"),
        prom_name="llm_time_per_output_token_seconds", prom_help="Time per output token per request (client side)",
        bounds=SUB_10MS + VLLM_ITL, windowed=True, per_stage=True, versions=True, distribution=True,
    ),
    ClientMetric(
        "e2e", "E2E", attrgetter("e2e_s"),
        prom_name="llm_request_duration_seconds", prom_help="End-to-end request latency (client side)",
        bounds=VLLM_REQUEST, windowed=True, per_stage=True, versions=True, distribution=True,
    ),
    ClientMetric("inter_chunk", "inter-chunk", _gaps, samples=True),
    ClientMetric(
        "decode_span", "decode span", attrgetter("decode_span_s"),
        prom_name="llm_decode_span_seconds", prom_help="Last token minus first token per request (cumulative drift)",
        bounds=VLLM_REQUEST, versions=True, distribution=True,
    ),
    ClientMetric("client_queue", "queue", lambda r: max(r.client_queue_s, 0.0), top=False, per_stage=True),
    ClientMetric(  # ITL's buckets: a decode step's scale (ms to s), with the sub-10 ms ones
        "ttst", "TTST", attrgetter("ttst_s"),
        prom_name="llm_time_to_second_token_seconds",
        prom_help="Time to second token: second token-bearing chunk minus the first (client side)",
        bounds=SUB_10MS + VLLM_ITL, per_stage=True, versions=True, distribution=True,
    ),
    ClientMetric(  # the tokenizer layer of the P99 attribution (telemetry/attribution/decompose.py): before t0
        "prompt_build", "prompt build", attrgetter("prompt_build_s"), per_stage=True,
    ),
    ClientMetric(  # TTFT's buckets; for a model without reasoning it equals TTFT
        "ttfa", "TTFA", attrgetter("ttfa_s"),
        prom_name="llm_time_to_first_answer_token_seconds",
        prom_help="Time to first answer token: the first content after the reasoning (client side; == TTFT "
        "without reasoning)",
        bounds=VLLM_TTFT, per_stage=True, versions=True, distribution=True,
    ),
    ClientMetric(
        "thinking", "thinking span", attrgetter("thinking_s"),
        prom_name="llm_thinking_span_seconds",
        prom_help="First answer token minus first reasoning token per request (client side)",
        bounds=VLLM_REQUEST, per_stage=True, versions=True, distribution=True,
    ),
    ClientMetric("answer_span", "answer span", attrgetter("answer_span_s"), per_stage=True, versions=True),
    # The server's in-band record (--enable-per-request-metrics and friends): vLLM's own clocks, one value per
    # request; in the request log and the per-request join, not in the client's latency tables.
    ClientMetric(
        "server_ttft", "server TTFT", _server("ttft_s"), top=False,
        prom_name="llm_server_time_to_first_token_seconds",
        prom_help="The server's in-band TTFT per request: first scheduled to first token (queue excluded)",
        bounds=VLLM_TTFT, server=True,
    ),
    ClientMetric("server_queue", "server queue", _server("queue_s"), top=False, server=True),
    ClientMetric("server_generation", "server generation", _server("generation_s"), top=False, server=True),
    ClientMetric("server_mean_itl", "server mean ITL", _server("mean_itl_s"), top=False, server=True),
    ClientMetric("cached_tokens", "cached prompt tokens", _server("cached_tokens"), unit="tokens", top=False,
                 server=True),
    ClientMetric("spec_drafted", "draft tokens", _server("spec_drafted"), unit="tokens", top=False, server=True),
    ClientMetric("spec_accepted", "accepted draft tokens", _server("spec_accepted"), unit="tokens", top=False,
                 server=True),
    ClientMetric("spec_steps", "speculative steps", _server("spec_steps"), unit="steps", top=False, server=True),
    ClientMetric(
        "spec_acceptance", "draft acceptance", _spec_acceptance, unit="ratio", top=False,
        prom_name="llm_spec_acceptance_ratio",
        prom_help="Draft tokens accepted / drafted per request (the server's in-band speculative record)",
        bounds=RATIO, server=True,
    ),
)
"""Every client metric, in display order."""

BY_KEY: dict[str, ClientMetric] = {m.key: m for m in CLIENT_METRICS}

PER_REQUEST: tuple[ClientMetric, ...] = tuple(m for m in CLIENT_METRICS if not m.samples)
"""The metrics with one value per request (not ITL's samples): ``<key>_ms`` in each line of the request log."""

BOUNDS: dict[str, tuple[float, ...]] = {m.key: m.bounds for m in CLIENT_METRICS if m.histogram}
"""Histogram upper bounds per histogram metric (seconds)."""


def keys(flag: str) -> tuple[str, ...]:
    """Keys of the metrics whose ``flag`` field is set, in registry order (``keys("windowed")``)."""
    return tuple(m.key for m in CLIENT_METRICS if getattr(m, flag))


def having(flag: str) -> tuple[ClientMetric, ...]:
    """The metrics whose ``flag`` field is set, in registry order."""
    return tuple(m for m in CLIENT_METRICS if getattr(m, flag))


REASONING_ONLY = frozenset({"ttfa", "thinking", "answer_span"})
"""Metrics that say something only when a request reasoned: without reasoning TTFA equals TTFT, there is no thinking
span and the answer span is the decode span. What people read (the console table, the web UI's LLM tab and live
charts, the HTML report) leaves them out, or says "no reasoning", for a run in which nothing reasoned
(:func:`shown`); the data outputs (summary JSON, CSV, request log, Prometheus) keep them."""


def reasoned(reasoning_tokens: int, thinking_spans: int) -> bool:
    """Whether requests reasoned: reasoning tokens counted (a reasoning parser's ``reasoning`` field) or a thinking
    span measured (``<think>`` tags carry no reasoning-token count)."""
    return reasoning_tokens > 0 or thinking_spans > 0


def reasoned_in(summary) -> bool:
    """:func:`reasoned` over a run's summary (or the summary so far)."""
    return reasoned((summary.get("tokens") or {}).get("reasoning") or 0,
                    (summary.get("thinking_ms") or {}).get("count") or 0)


def shown(metric_keys, did_reason: bool) -> tuple[str, ...]:
    """The metric keys an output for people shows: ``metric_keys`` (in their order) less :data:`REASONING_ONLY`
    when nothing reasoned."""
    return tuple(k for k in metric_keys if did_reason or k not in REASONING_ONLY)
