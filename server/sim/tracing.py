"""``--otlp-traces-endpoint URL``: the simulator's ``llm_request`` span per finished request, as vLLM 0.32 emits it.

vLLM (``vllm/v1/engine/output_processor.py``, ``do_tracing``) ends each finished request with a SERVER span
named ``llm_request`` that continues the request's ``traceparent``, starts at its arrival and carries, in
seconds: ``gen_ai.latency.time_to_first_token``, ``.e2e``, ``.time_in_queue``, ``.time_in_model_prefill``,
``.time_in_model_decode``, ``.time_in_model_inference``; ``gen_ai.usage.prompt_tokens`` /
``completion_tokens``, ``gen_ai.request.id`` and ``gen_ai.request.max_tokens``. Aborted requests get none.
The values come from the same engine clock as the simulator's histograms. Spans are posted as OTLP/HTTP
protobuf from a background thread every ``interval_s`` (vLLM's batch processor: 5 s).

    tracer = SimTracer("http://127.0.0.1:4318/v1/traces"); tracer.start()
    tracer.begin(req, headers, external_id)      # when the request is submitted
    tracer.finished(req, now)                    # from the engine's finish bookkeeping
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.request

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

log = logging.getLogger("server.sim")
SCOPE = "vllm.v1.engine.output_processor"  # vLLM: trace.get_tracer(__name__) in vllm/tracing/otel.py
MAX_QUEUE = 100_000


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, bool):
        v = AnyValue(bool_value=value)
    elif isinstance(value, int):
        v = AnyValue(int_value=value)
    elif isinstance(value, float):
        v = AnyValue(double_value=value)
    else:
        v = AnyValue(string_value=str(value))
    return KeyValue(key=key, value=v)


def parse_traceparent(value: str | None) -> tuple[bytes, bytes] | None:
    """(trace id, parent span id) of a W3C ``traceparent`` header, None when absent or malformed."""
    if not value:
        return None
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        tid, sid = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
    except ValueError:
        return None
    return (tid, sid) if any(tid) and any(sid) else None


class SimTracer:
    def __init__(self, endpoint: str, interval_s: float = 0.2) -> None:
        self.endpoint, self.interval_s = endpoint, interval_s
        self._open: dict[int, tuple] = {}
        self._done: list[Span] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.exported = 0
        self.failed = 0
        self.dropped = 0
        self._resource = Resource(attributes=[_kv("service.name", "vllm"), _kv("vllm.process_id", str(os.getpid())),
                                              _kv("vllm.instrumenting_module_name", "vllm.api_server")])

    def start(self) -> SimTracer:
        self._thread = threading.Thread(target=self._loop, name="sim-otlp", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._flush()

    # ---- engine side -----------------------------------------------------------------------------
    def begin(self, req, headers: dict[str, str], external_id: str, max_tokens: int) -> None:
        ctx = parse_traceparent(headers.get("traceparent"))
        self._open[id(req)] = (ctx, external_id, time.time_ns(), max_tokens)

    def abort(self, req) -> None:
        self._open.pop(id(req), None)

    def finished(self, req, now: float) -> None:
        entry = self._open.pop(id(req), None)
        if entry is None:
            return
        ctx, external_id, start_ns, max_tokens = entry
        first, sched = req.first_token or now, req.first_scheduled or req.arrival
        e2e = now - req.arrival
        attrs = [
            _kv("gen_ai.latency.time_to_first_token", float(first - req.arrival)),
            _kv("gen_ai.latency.e2e", float(e2e)),
            _kv("gen_ai.latency.time_in_queue", float(sched - req.arrival)),
            _kv("gen_ai.usage.prompt_tokens", int(req.num_prompt)),
            _kv("gen_ai.usage.completion_tokens", int(req.num_output)),
            _kv("gen_ai.latency.time_in_model_prefill", float(first - sched)),
            _kv("gen_ai.latency.time_in_model_decode", float(now - first)),
            _kv("gen_ai.latency.time_in_model_inference", float(now - sched)),
            _kv("gen_ai.request.id", external_id),
            _kv("gen_ai.request.max_tokens", int(max_tokens)),
        ]
        tid, parent = ctx if ctx is not None else (os.urandom(16), b"")
        span = Span(trace_id=tid, span_id=os.urandom(8), parent_span_id=parent, name="llm_request",
                    kind=Span.SPAN_KIND_SERVER, start_time_unix_nano=start_ns,
                    end_time_unix_nano=start_ns + int(e2e * 1e9), attributes=attrs)
        with self._lock:
            if len(self._done) >= MAX_QUEUE:
                self.dropped += 1
                return
            self._done.append(span)

    # ---- export ----------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            spans, self._done = self._done, []
        if not spans:
            return
        body = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
            resource=self._resource,
            scope_spans=[ScopeSpans(scope=InstrumentationScope(name=SCOPE), spans=spans)],
        )]).SerializeToString()
        rq = urllib.request.Request(self.endpoint, data=body, method="POST",
                                    headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(rq, timeout=5) as r:
                r.read()
            self.exported += len(spans)
        except Exception as e:  # the collector is down: the spans are lost, counted, the engine goes on
            self.failed += len(spans)
            if self.failed == len(spans):
                log.warning("OTLP export to %s failed: %s (counting lost spans)", self.endpoint, e)
