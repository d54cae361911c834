"""Units of the trace join: ids, the simulator's span against vLLM's own attribute names, the receiver's parse,
the join's bookkeeping and the tail composition."""

from __future__ import annotations

import re

import pytest

from server.sim.scheduler import SimRequest
from server.sim.tracing import SimTracer
from telemetry.traces.join import ClientRecord, TraceJoin
from telemetry.traces.otlp import ServerSpan, parse_request
from telemetry.traces.tail import composition
from tests.requires import VLLM, require
from users.tracing import RequestIds, span_id_of, trace_id_of


def test_request_ids_are_unique_and_carry_their_trace():
    ids = RequestIds(worker=3, run=0xABCDEF01)
    seen = set()
    for n in range(1, 1001):
        rid, tp = ids.next()
        assert rid == f"abcdef01-3-{n}"
        assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", tp)
        assert tp[3:35] == trace_id_of(rid) and tp[36:52] == span_id_of(rid)
        seen.add(tp[3:35])
    assert len(seen) == 1000
    assert trace_id_of("not-one-of-ours") is None and trace_id_of("x") is None


def _finished_request(tracer: SimTracer, traceparent: str) -> bytes:
    req = SimRequest(rid="r", tokens=list(range(12)), num_prompt=10, max_tokens=2, stop_at=2)
    tracer.begin(req, {"traceparent": traceparent}, "chatcmpl-abc-0", 2)
    req.arrival, req.first_scheduled, req.first_token = 1.0, 1.25, 1.5
    tracer.finished(req, 2.0)
    body = tracer._done[0]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[body])])]) \
        .SerializeToString()


def test_sim_span_continues_the_trace_and_reads_back():
    tracer = SimTracer("http://127.0.0.1:9/v1/traces")
    rid, tp = RequestIds(worker=1, run=7).next()
    spans, other = parse_request(_finished_request(tracer, tp))
    assert other == 0 and len(spans) == 1
    s = spans[0]
    assert s.trace_id == trace_id_of(rid) and s.parent_span_id == span_id_of(rid)
    assert (s.ttft_s, s.e2e_s, s.queue_s, s.prefill_s, s.decode_s, s.inference_s) == (0.5, 1.0, 0.25, 0.25, 0.5, 0.75)
    assert (s.prompt_tokens, s.completion_tokens, s.request_id) == (10, 2, "chatcmpl-abc-0")
    with pytest.raises(ValueError):
        parse_request(b"\xff\xff not protobuf")


@pytest.mark.vllm
def test_sim_span_uses_vllms_attribute_names():
    """Every attribute the simulator sets is one vLLM 0.32's do_tracing sets on its llm_request span."""
    from tests.vllm.engine import VENV, missing_reason  # noqa: PLC0415  (waits for make test's engine build)

    require(missing_reason(), VLLM)
    site = sorted((VENV / "lib").glob("python*/site-packages/vllm"))
    utils = (site[0] / "tracing" / "utils.py").read_text()
    names = dict(re.findall(r"^\s+(GEN_AI_[A-Z0-9_]+) = \"([a-z0-9_.]+)\"", utils, re.M))
    proc = (site[0] / "v1" / "engine" / "output_processor.py").read_text()
    do_tracing = proc[proc.index("def do_tracing"):proc.index('span_name="llm_request"')]
    vllm_attrs = {names[k] for k in re.findall(r"SpanAttributes\.(GEN_AI_[A-Z0-9_]+)", do_tracing)}
    tracer = SimTracer("http://127.0.0.1:9/v1/traces")
    _finished_request(tracer, "00-" + "1" * 32 + "-" + "2" * 16 + "-01")
    ours = {a.key for a in tracer._done[0].attributes}
    assert ours <= vllm_attrs and len(ours) >= 10, (ours - vllm_attrs, vllm_attrs)


def _span(tid: str, **kw) -> ServerSpan:
    base = dict(trace_id=tid, span_id="1" * 16, parent_span_id="", request_id=None, ttft_s=0.1, e2e_s=1.0,
                queue_s=0.05, prefill_s=0.04, decode_s=0.9, inference_s=0.94, prompt_tokens=1, completion_tokens=1,
                start_ns=0, end_ns=1)
    base.update(kw)
    return ServerSpan(**base)


def _client(tid: str, ttft: float = 0.12, e2e: float = 1.05, batch: int = 1, ok: bool = True) -> ClientRecord:
    return ClientRecord(tid, f"r-{tid}", ok, ttft, e2e, None, "main", "U", batch, None)


def test_join_either_order_batches_and_bounds():
    j = TraceJoin(max_pending=2)
    j.add_client(_client("a"))
    j.add_spans([_span("a")])
    j.add_spans([_span("b", ttft_s=0.2)])
    j.add_client(_client("b", ttft=0.3))
    j.add_client(_client("c", batch=2))
    j.add_spans([_span("c", ttft_s=0.1), _span("c", ttft_s=0.15)])
    assert j.joined_ok == 3 and [x.spans for x in j.joined] == [1, 1, 2]
    assert j.joined[2].server_ttft_s == 0.15  # a batch's server time is its slowest prompt's
    for tid in ("x", "y", "z"):  # three unmatched spans, room for two: the oldest is evicted and counted
        j.add_spans([_span(tid)])
    c = j.counts()
    assert c["unmatched"] == 3 and j.evicted_spans == 1 and c["requests_unjoined"] == 0


def test_tail_composition_names_the_dominant_part_and_never_goes_negative():
    j = TraceJoin()
    for i in range(100):
        tid = f"{i:032x}"
        slow = i >= 98
        j.add_client(_client(tid, ttft=2.0 if slow else 0.1, e2e=3.0))
        # the slow ones queued 1.8 s; one span's TTFT says more than the client saw (a clock skew): 0, counted
        j.add_spans([_span(tid, queue_s=1.8 if slow else 0.01, prefill_s=0.1 if slow else 0.05,
                           ttft_s=2.05 if i == 99 else (1.95 if slow else 0.08))])
    comp = composition(j.joined, "ttft")
    assert comp["requests"] == 2 and comp["threshold_ms"] == 2000.0
    assert comp["dominant"] == "queue" and comp["shares"]["queue"] == pytest.approx(0.9)
    assert comp["negative_parts"] == 1 and min(comp["shares"].values()) >= 0
    assert comp["statement"].startswith("of the 1 % slowest TTFTs (2 requests, >= 2000 ms")
    assert "90 % queue" in comp["statement"]


def test_a_span_without_our_trace_joins_by_the_echoed_request_id():
    rid, tp = RequestIds(worker=2, run=5).next()
    j = TraceJoin()
    j.add_client(ClientRecord(tp[3:35], rid, True, 0.2, 1.0, None, "main", "U", 1, None))
    # a proxy dropped traceparent: vLLM started a trace of its own, but its request id is chatcmpl-<X-Request-Id>
    j.add_spans([_span("f" * 32, request_id=f"chatcmpl-{rid}")])
    assert j.joined_ok == 1 and j.counts()["unmatched"] == 0


def test_a_first_chunk_stamped_late_is_bounded_by_the_next_arrival():
    """The client stamps body bytes that came with the headers when it reads them, later ones by the kernel's
    arrival time: the first may read later than the next (a span check once saw TTFT > E2E by 10 ms)."""
    from users.client import _arrivals

    assert _arrivals([5.0, 3.0, 4.0]).tolist() == [3.0, 3.0, 4.0]
    assert _arrivals([1.0, 2.0]).tolist() == [1.0, 2.0] and _arrivals([7.0]).tolist() == [7.0]
    assert _arrivals([]).size == 0


def test_any_stamp_is_bounded_by_every_later_arrival_and_the_end_of_the_stream():
    """A read the kernel did not stamp is stamped when it returns: a middle chunk can read later than the next
    ones, and the last token later than the read that ended the stream (a span's last_token once lay 0.12 ms
    after its end). TCP's order bounds each by all that came after."""
    from users.client import _arrivals, _restamped

    assert _arrivals([1.0, 6.0, 2.0, 3.0]).tolist() == [1.0, 2.0, 2.0, 3.0]
    assert _arrivals([6.0, 5.0, 2.0]).tolist() == [2.0, 2.0, 2.0]
    assert _arrivals([1.0, 2.0, 9.0], 8.0).tolist() == [1.0, 2.0, 8.0]
    assert _arrivals([1.0, 2.0], 8.0).tolist() == [1.0, 2.0]  # the end bounds, never raises
    times = [1.0, 6.0, 2.0]
    assert _restamped(6.0, times, _arrivals(times)) == 2.0  # the answer starting in the late chunk follows it


def test_the_answer_and_reasoning_stamps_follow_the_first_chunks_bound():
    """A first chunk stamped late carries TTFA with it: the answer (or the reasoning) starting in that chunk
    takes the bounded stamp, so TTFA == TTFT and the span's first_answer_token event is not a second, later
    first token; a later chunk's stamp in order is left alone."""
    from users.client import _arrivals, _restamped

    times = [5.0, 3.0, 4.0]
    a = _arrivals(times)
    assert _restamped(5.0, times, a) == 3.0 and _restamped(4.0, times, a) == 4.0
    assert _restamped(None, times, a) is None and _restamped(None, [], _arrivals([])) is None


def _receiver_plugin(**opts):
    """A local run with the traces plugin installed and started with these options."""
    from telemetry.traces.plugin import install as install_traces
    from tests.telemetry.helpers import local_env

    env, _hub, role = local_env(otlp_grace=0.0, **opts)
    plugin = install_traces(env)
    env.events.test_start.fire(environment=env)
    return plugin, role


def _post_traces(host: str, port: int) -> int:
    import urllib.request

    req = urllib.request.Request(f"http://{host}:{port}/v1/traces", data=b"", method="POST",
                                 headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status


def test_otlp_receiver_binds_the_host_it_is_given():
    """--otlp-receiver-host: the receiver listens on that address (127.0.0.2 here), not on 127.0.0.1."""
    import urllib.error

    from tests.support import free_port

    port = free_port()
    plugin, role = _receiver_plugin(otlp_receiver=port, otlp_receiver_host="127.0.0.2")
    try:
        assert plugin.receiver is not None and plugin.receiver.host == "127.0.0.2"
        assert _post_traces("127.0.0.2", port) == 200
        with pytest.raises(urllib.error.URLError):
            _post_traces("127.0.0.1", port)
    finally:
        plugin.stop_receiver()
        role.close()


def test_otlp_receiver_on_a_busy_port_is_one_error_line_and_no_receiver(caplog):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with caplog.at_level("ERROR"):
            plugin, role = _receiver_plugin(otlp_receiver=port)
        try:
            assert plugin.receiver is None
            lines = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
            assert len(lines) == 1 and lines[0].startswith(f"--otlp-receiver: cannot listen on 127.0.0.1:{port}: ")
        finally:
            role.close()
