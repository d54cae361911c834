"""``--otlp-endpoint URL``: one span per LLM request exported to any OTLP/HTTP collector (opentelemetry-sdk).

The span carries the request's own trace id and span id (the ``traceparent`` it was sent with, see
:mod:`users.tracing`), so the server's ``llm_request`` span is its child in the tracing backend.

Span ``llm_client_request`` (kind CLIENT, from t0 to the end of the stream, wall clock), attributes:
``llm.request_id``, ``llm.user_class``, ``llm.stage``, ``llm.version`` (when routed), ``llm.ok``,
``llm.error_kind`` (failed requests; the span's status is ERROR), ``llm.batch_size``,
``gen_ai.usage.prompt_tokens``, ``gen_ai.usage.completion_tokens``, ``llm.ttft_ms``, ``llm.e2e_ms``;
events ``first_token``, ``first_answer_token`` (when the answer came after reasoning) and ``last_token``.

    exporter = SpanExport("http://collector:4318/v1/traces"); exporter.record(result); exporter.close()
"""

from __future__ import annotations

import logging

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from users.result import GenerationResult
from users.tracing import span_id_of, trace_id_of

log = logging.getLogger(__name__)
SPAN_NAME = "llm_client_request"
SERVICE_NAME = "deepseek-locust"


class _Preset(IdGenerator):
    """Hands out the ids set just before a span starts (the request's own), else random ones."""

    def __init__(self) -> None:
        self.trace = 0
        self.span = 0
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        return self.trace or self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        return self.span or self._random.generate_span_id()


def _ns(wall: float) -> int:
    return int(wall * 1e9)


class SpanExport:
    def __init__(self, endpoint: str, schedule_delay_ms: int = 1000) -> None:
        self._ids = _Preset()
        self.provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}), id_generator=self._ids)
        self.provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=5), schedule_delay_millis=schedule_delay_ms)
        )
        self.tracer = self.provider.get_tracer("deepseek_locust")
        self.exported = 0

    def record(self, r: GenerationResult) -> None:
        tid = trace_id_of(r.meta.request_id) if r.meta.request_id else None
        sid = span_id_of(r.meta.request_id) if r.meta.request_id else None
        wall0 = r.wall_start

        def at(t: float) -> int:  # perf_counter stamp -> wall ns (t0 is at wall_start)
            return _ns(wall0 + (t - r.t0))

        attrs = {
            "llm.request_id": r.meta.request_id or "", "llm.user_class": r.meta.user_class, "llm.stage": r.meta.stage,
            "llm.ok": r.ok, "llm.batch_size": r.meta.batch_size, "gen_ai.usage.prompt_tokens": r.prompt_tokens,
            "gen_ai.usage.completion_tokens": r.output_tokens, "llm.e2e_ms": r.e2e_s * 1000.0,
        }
        if r.ttft_s is not None:
            attrs["llm.ttft_ms"] = r.ttft_s * 1000.0
        if r.meta.version:
            attrs["llm.version"] = r.meta.version
        if r.error_kind:
            attrs["llm.error_kind"] = r.error_kind
        self._ids.trace = int(tid, 16) if tid else 0
        self._ids.span = int(sid, 16) if sid else 0
        try:
            span = self.tracer.start_span(SPAN_NAME, context=Context(), kind=SpanKind.CLIENT, attributes=attrs,
                                          start_time=_ns(wall0))
        finally:
            self._ids.trace = self._ids.span = 0
        times = r.chunk_times
        if len(times):
            span.add_event("first_token", timestamp=at(float(times[0])))
        t_answer = getattr(r, "t_answer", None)
        if t_answer is not None and len(times) and t_answer != float(times[0]):
            span.add_event("first_answer_token", timestamp=at(t_answer))
        if len(times):
            span.add_event("last_token", timestamp=at(float(times[-1])))
        if not r.ok:
            span.set_status(Status(StatusCode.ERROR, r.error_kind or "error"))
        span.end(end_time=at(r.t_end))
        self.exported += 1

    def flush(self) -> None:
        self.provider.force_flush(5000)

    def close(self) -> None:
        self.provider.shutdown()
