"""OTLP/HTTP protobuf: read an ``ExportTraceServiceRequest`` into :class:`ServerSpan` records.

vLLM (0.32, ``vllm/v1/engine/output_processor.py``) ends each request with one span named ``llm_request``
whose attributes are seconds (floats) and token counts; the simulator (``server/sim/tracing.py``) emits the
same. The span continues the trace context of the request's ``traceparent``, so its trace id is ours.

    spans, bad = parse_request(body)       # body: the POST body (gzip already undone)
    spans[0].trace_id, spans[0].ttft_s, spans[0].queue_s
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPAN_NAME = "llm_request"
# vLLM's SpanAttributes (vllm/tracing/utils.py): seconds, token counts, the engine's request id
ATTR_TTFT = "gen_ai.latency.time_to_first_token"
ATTR_E2E = "gen_ai.latency.e2e"
ATTR_QUEUE = "gen_ai.latency.time_in_queue"
ATTR_PREFILL = "gen_ai.latency.time_in_model_prefill"
ATTR_DECODE = "gen_ai.latency.time_in_model_decode"
ATTR_INFERENCE = "gen_ai.latency.time_in_model_inference"
ATTR_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
ATTR_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
ATTR_REQUEST_ID = "gen_ai.request.id"
ATTR_MAX_TOKENS = "gen_ai.request.max_tokens"

EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()


@dataclass(frozen=True, slots=True)
class ServerSpan:
    """One server request span (seconds; None where the span did not carry the attribute)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    request_id: str | None
    ttft_s: float | None
    e2e_s: float | None
    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None
    inference_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    start_ns: int
    end_ns: int


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def _num(attrs: dict, key: str) -> float | None:
    v = attrs.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(attrs: dict, key: str) -> int | None:
    v = attrs.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_request(body: bytes) -> tuple[list[ServerSpan], int]:
    """The ``llm_request`` spans of one export request, and how many other spans it carried (ignored).
    Raises ``ValueError`` for a body that is not an ExportTraceServiceRequest."""
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except Exception as e:  # protobuf's DecodeError
        raise ValueError(f"not an OTLP ExportTraceServiceRequest: {e}") from None
    out: list[ServerSpan] = []
    other = 0
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for sp in ss.spans:
                if sp.name != SPAN_NAME or len(sp.trace_id) != 16:
                    other += 1
                    continue
                attrs = {a.key: _value(a.value) for a in sp.attributes}
                rid = attrs.get(ATTR_REQUEST_ID)
                out.append(ServerSpan(
                    trace_id=sp.trace_id.hex(), span_id=sp.span_id.hex(), parent_span_id=sp.parent_span_id.hex(),
                    request_id=str(rid) if rid is not None else None,
                    ttft_s=_num(attrs, ATTR_TTFT), e2e_s=_num(attrs, ATTR_E2E), queue_s=_num(attrs, ATTR_QUEUE),
                    prefill_s=_num(attrs, ATTR_PREFILL), decode_s=_num(attrs, ATTR_DECODE),
                    inference_s=_num(attrs, ATTR_INFERENCE), prompt_tokens=_int(attrs, ATTR_PROMPT_TOKENS),
                    completion_tokens=_int(attrs, ATTR_COMPLETION_TOKENS),
                    start_ns=int(sp.start_time_unix_nano), end_ns=int(sp.end_time_unix_nano),
                ))
    return out, other
