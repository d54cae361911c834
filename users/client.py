"""Send one LLM request over geventhttpclient (Locust's FastHttpUser transport) and time it ourselves.

Locust's own ``response_time`` for a stream stops at the headers; here every read of the body is
stamped with the time its bytes reached the host — the kernel's receive timestamp (Linux
``SO_TIMESTAMPNS``, mapped onto ``time.perf_counter()``), so a client busy with other streams does not
delay the stamp; elsewhere ``perf_counter()`` as the read returns. The SSE events a read completes are
classified, and the request ends as ONE frozen :class:`~users.result.GenerationResult`, ok or failed:

    http = user.client.client.clientpool.get_client(URL(host))   # geventhttpclient.HTTPClient
    result = exchange(http, call, t0=time.perf_counter(), inflight=board, count_text=count)

How the answer is read — the stream's chunk classifier, its end-of-stream rule, the parse of a whole
answer — is the call's ``answer`` (:class:`users.adapters.base.Answer`, by default the OpenAI shape).

Error kinds: ``http_4xx`` / ``http_5xx`` / ``http_429`` / ``http_3xx`` (a redirect: not followed) (quoting the
server's body, truncated),
``timeout`` (no byte for ``--request-timeout``: users.watchdog, or the socket timeout without it), ``connection``
(no response: refused, reset, closed before the headers), ``stream_cut`` (the stream ended or broke
without the answer's end markers: for OpenAI ``[DONE]`` and a ``finish_reason``), ``bad_chunk`` (an
unparseable data line), ``server_error`` (an error object inside a 200 stream), ``empty`` (no token at all).

The read loop is the hot path of the whole client: one wait for readability, one ``recvmsg``, one parser
``feed`` (C, llhttp) and one call of the tally's reader per read: a read that is one token-bearing chunk of the
stream's learned shape is read by a byte scan (:mod:`users.chunkscan`), any other goes through the SSE framer and
a full ``orjson.loads`` per event. t0 (closed loop) is when the pooled connection is handed to the
request, just before the write (:mod:`users.sendstamp`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from gevent import getcurrent
from geventhttpclient._parser import HTTPResponseParser
from geventhttpclient.client import HTTPClient
from geventhttpclient.response import HTTPParseError, HTTPSocketPoolResponse

import users.sendstamp as sendstamp
import users.wire as wire
from users.adapters.base import Answer
from users.adapters.openai import OPENAI
from users.faults import LLMError, StreamFault, quote
from users.inband import server_record
from users.inflight import Inflight, LiveRequest
from users.result import GenerationResult, RequestMeta
from users.sse import SSEParser
from users.tally import StreamTally, Think
from users.watchdog import Stalled
from workload import netstamp

_RECV = 16384  # bytes per read: several events when the client falls behind; cheaper to allocate than 64 KiB
_ERROR_BODY_LIMIT = 64 * 1024
_cfeed = HTTPResponseParser.feed  # the C parser itself (the Python wrapper only adds a HEAD-request repair)


@dataclass(slots=True)
class Call:
    """What to send and how to label it; everything but the timing."""

    path: str
    body: bytes
    headers: dict[str, str]
    """The target's fixed headers (the same for all its requests: rendered once, :mod:`users.wire`)."""
    meta: RequestMeta
    """The request's labels, handed to its result as they are (the same object)."""
    stream: bool
    prompt_tokens_client: int
    answer: Answer = OPENAI
    """How to read the answer (the adapter's)."""
    opens_thinking: bool = False
    """The prompt ends inside ``<think>`` (R1's chat template): the stream starts as reasoning."""
    extra: tuple[tuple[str, str], ...] = ()
    """This request's own headers (request id, trace context): rendered with each request."""
    prompt_build_s: float | None = None
    """How long building this call took (the tokenizer layer: prompt synthesis, counting, body): the result's."""


def _kind_of_status(status: int) -> str:
    if status == 429:
        return "http_429"
    if status < 400:
        return "http_3xx"  # a redirect is not followed: a POST to a load-tested server must not move
    return "http_5xx" if status >= 500 else "http_4xx"


def _answered(e: HTTPParseError) -> bool:
    """The parse error came after a final (2xx-5xx) status and its headers, read in the same recv as the
    broken body: the server answered, then broke the stream, whether or not its bytes shared a packet.
    geventhttpclient raises from inside the response's constructor, so its frame is the only handle."""
    tb = e.__traceback__
    while tb is not None:
        resp = tb.tb_frame.f_locals.get("self")
        if isinstance(resp, HTTPSocketPoolResponse):
            return bool(resp.headers_complete) and resp.get_code() >= 200
        tb = tb.tb_next
    return False


def _not_a_stream(resp: HTTPSocketPoolResponse, live: LiveRequest) -> LLMError | None:
    """A stream answered with a body that is declared as something else (an HTML error page from a proxy,
    a JSON object): the error it is, read whole up to the error body limit; None for an event stream (or
    no Content-Type: read as one). Once per request, before the read loop."""
    ct = resp.get("content-type")
    if not ct or "event-stream" in ct:
        return None
    body = _read_all(resp, _ERROR_BODY_LIMIT, live)
    if "json" in ct and (b'"error"' in body or b'"object":"error"' in body.replace(b" ", b"")):
        return StreamFault("server_error", quote(body, strip=True))
    return StreamFault("bad_chunk", f"not an event stream (Content-Type: {ct}): {quote(body, strip=True)}")


def exchange(
    http: HTTPClient,
    call: Call,
    t0: float | None = None,
    inflight: Inflight | None = None,
    count_text: Callable[[str], int] | None = None,
) -> GenerationResult:
    """Send ``call``; never raises for a failed request (the result says why), only for GreenletExit & co.

    ``t0`` is the scheduled send time in open loop; None means "just before the request is written".
    """
    wall = time.time()
    tally = call.answer.tally(call.prompt_tokens_client)
    if call.opens_thinking:
        tally.think = Think.INSIDE
    resp: HTTPSocketPoolResponse | None = None
    pool = http._connection_pool
    sendstamp.install(pool)
    t_sent = time.perf_counter()
    live = LiveRequest(tally, t_sent)
    scheduled = t0
    if t0 is None:
        t0 = t_sent
    if inflight is not None:
        inflight.add(live)
    try:
        try:
            resp = wire.post(http, call.path, call.headers, call.extra, call.body)
        except TimeoutError:
            raise LLMError("timeout", "no response headers within the request timeout") from None
        except HTTPParseError as e:
            if _answered(e):  # broken framing in the body bytes that came with the headers: the same bytes
                raise LLMError("stream_cut", f"HTTPParseError after the headers: {e}") from None  # as a later read
            raise LLMError("connection", f"{type(e).__name__}: {e}") from None
        except OSError as e:
            raise LLMError("connection", f"{type(e).__name__}: {e}") from None
        finally:  # the request went out when its socket left the pool (users.sendstamp), not at this call
            t_sent = sendstamp.written_at(pool, t_sent)
            if scheduled is None:
                t0 = t_sent
        status = resp.status_code
        if status >= 300:
            body = quote(_read_all(resp, _ERROR_BODY_LIMIT, live), strip=True)
            moved = f" to {resp.get('location')}" if status < 400 else ""
            raise LLMError(_kind_of_status(status), f"HTTP {status}{moved}: {body}")
        if call.stream:
            if (fault := _not_a_stream(resp, live)) is not None:
                raise fault
            t_end = _read_stream(resp, tally, live)
            return _stream_result(call, tally, t0, t_sent, t_end, wall, count_text)
        raw = _read_all(resp, None, live)
        return _whole_result(call, raw, t0, t_sent, time.perf_counter(), wall, count_text)
    except LLMError as e:  # a StreamFault too (found in the answer)
        return _failed(call, e.kind, str(e), t0, t_sent, wall, tally)
    except Stalled:
        detail = f"no byte for the request timeout after {tally.output_tokens} tokens"
        return _failed(call, "timeout", f"timeout: {detail}", t0, t_sent, wall, tally)
    finally:
        live.live = False
        if resp is not None:
            resp.release()  # closes the socket unless the message completed cleanly
        if inflight is not None:
            inflight.discard(live)


def _read_stream(resp: HTTPSocketPoolResponse, tally: StreamTally, live: LiveRequest) -> float:
    """Read the body to its end, stamping each read; return the stamp of the read that ended it (the end
    of the stream for E2E: when its last bytes reached the host, not when this greenlet got to them).
    Raise LLMError/StreamFault on a broken stream. Each read sets ``live.last`` (the stall watch reads it).

    The C parser (llhttp) de-chunks the body and hands each piece straight to ``pending.append`` (set as
    the response's ``_on_body``): no Python frame and no buffer copy between the socket and the framer.
    """
    perf = time.perf_counter
    parser = SSEParser()
    take = tally.reader(parser)
    pending: list[bytearray] = []
    sock = resp._sock
    offset = getattr(resp, "stamp_offset", None)  # the header read's, stamping on (users.headread): per request
    if offset is None:
        netstamp.enable(sock)  # no socket (the pool took it back): nothing to stamp
        offset = netstamp.realtime_offset(perf)
    if resp._body_buffer:  # body bytes that came with the headers
        pending.append(bytearray(resp._body_buffer))
        del resp._body_buffer[:]
    resp._on_body = pending.append
    t = perf()
    arrived = getattr(resp, "arrival", None)  # the header read's kernel stamp (users.headread)
    if arrived is not None and arrived < t:
        t = arrived
    if pending:
        take(pending.pop(), t)
    if resp.message_complete or sock is None:
        # The whole (short) stream came with the headers; the pool may already have taken the socket back.
        if not resp.message_complete:
            raise LLMError("stream_cut", f"connection closed mid-stream after {tally.output_tokens} tokens")
        tally.add(parser.close(), t)
        return t
    raw, readable = _raw_reader(sock)
    if raw is not None:
        # wait until the bytes are there, then read them once: gevent's own recvmsg reads first and so pays a
        # syscall and an exception per chunk just to learn "not yet". The read watcher stays started for the
        # whole stream, calling this greenlet back: no waiter, no watcher start/stop and no epoll change per read
        # (gevent's wait pays all three). Whatever is thrown in while waiting (the stall watch's Stalled, a
        # kill, a cancel_wait) raises from the hub switch.
        readable.start(getcurrent().switch)
        wait = sock.hub.switch
        read_once = netstamp.reader(raw, _RECV, perf, offset)
    try:
        while not resp.message_complete:
            if raw is not None:
                wait()
                try:  # t: when the bytes reached this host, not when this greenlet got to read them
                    data, live.last, t = read_once()
                except BlockingIOError:  # woken without bytes after all
                    continue
            else:
                data = sock.recv(_RECV)
                live.last = t = perf()
            _cfeed(resp, data)  # b"" at EOF completes a body delimited by the connection's end
            if not data and not resp.message_complete:
                raise LLMError("stream_cut", f"connection closed mid-stream after {tally.output_tokens} tokens")
            if pending:
                chunk = pending[0] if len(pending) == 1 else b"".join(pending)
                pending.clear()
                take(chunk, t)
    except TimeoutError:
        stalled = f"stream stalled past the request timeout after {tally.output_tokens} tokens"
        raise LLMError("timeout", stalled) from None
    except (OSError, HTTPParseError) as e:
        raise LLMError("stream_cut", f"{type(e).__name__} after {tally.output_tokens} tokens: {e}") from None
    finally:
        if raw is not None:
            readable.stop()
    tally.add(parser.close(), t)
    return t


def _raw_reader(sock):
    """(the OS socket's recvmsg, its gevent read watcher) of a gevent socket whose watcher is free, else Nones."""
    try:
        raw, readable = sock._sock.recvmsg, sock._read_event
    except AttributeError:
        return None, None
    return (raw, readable) if readable.callback is None else (None, None)


def _read_all(resp: HTTPSocketPoolResponse, limit: int | None, live: LiveRequest | None = None) -> bytes:
    """The whole body (non-streaming answers, error bodies up to ``limit`` bytes). Each read tells the stall
    watch a byte came (``live.last``): the request timeout is "no byte for that long", not a body deadline."""
    out = bytearray(resp._body_buffer)
    del resp._body_buffer[:]
    sock = resp._sock
    if sock is None and not resp.message_complete:
        if limit is not None:
            return bytes(out)
        raise LLMError("stream_cut", "connection closed before the end of the response body")
    try:
        while not resp.message_complete and (limit is None or len(out) < limit):
            data = sock.recv(_RECV)
            if live is not None:
                live.last = time.perf_counter()
            resp.feed(data)
            out += resp._body_buffer
            del resp._body_buffer[:]
            if not data and not resp.message_complete:
                if limit is not None:  # an error body cut short: quote what came
                    break
                raise LLMError("stream_cut", "connection closed before the end of the response body")
    except TimeoutError:
        if limit is not None:
            return bytes(out)
        raise LLMError("timeout", "response body stalled past the request timeout") from None
    except Stalled:  # the stall watch's timeout: an error body is quoted as far as it came, as above
        if limit is not None:
            return bytes(out)
        raise
    except (OSError, HTTPParseError) as e:
        if limit is not None:
            return bytes(out)
        raise LLMError("stream_cut", f"{type(e).__name__} while reading the body: {e}") from None
    return bytes(out)


def _arrivals(times: list[float], t_end: float = math.inf) -> np.ndarray:
    """The chunks' arrival stamps: each read's by the kernel's arrival time, body bytes that came with the headers by
    the header read's (:mod:`users.headread`); a read the kernel did not stamp when this greenlet got to it.
    So on a busy client a stamp can lie after a later chunk's arrival, even after the end of the stream (TTFT >
    E2E, once seen in a span check; a last token after the span's end, by 0.12 ms, in another). TCP delivers in
    order: each chunk arrived no later than the next one, and none later than the read that ended the stream
    (``t_end``), so each stamp is bounded by every later one (a running minimum from the end)."""
    a = np.asarray(times, dtype=np.float64)
    if len(a) and a[-1] > t_end:
        a[-1] = t_end
    if len(a) > 1:
        np.minimum.accumulate(a[::-1], out=a[::-1])
    return a


def _restamped(t: float | None, times: list[float], arrivals: np.ndarray) -> float | None:
    """A tally stamp taken from a chunk (the reasoning's or the answer's start) follows that chunk's bound
    (:func:`_arrivals`): TTFA == TTFT when the answer starts in the first chunk."""
    if t is None:
        return None
    try:
        return float(arrivals[times.index(t)])
    except ValueError:
        return t


def _base(call: Call, t0: float, t_sent: float, wall: float) -> dict:
    return {"meta": call.meta, "t0": t0, "t_sent": t_sent, "prompt_tokens_client": call.prompt_tokens_client,
            "wall_start": wall, "prompt_build_s": call.prompt_build_s}


def _failed(call: Call, kind: str, message: str, t0: float, t_sent: float, wall: float, tally: StreamTally):
    return GenerationResult(
        ok=False,
        error_kind=kind,
        error_message=message,
        t_end=time.perf_counter(),
        chunk_times=_arrivals(tally.chunk_times),
        chunk_tokens=np.asarray(tally.chunk_tokens, dtype=np.int64),
        output_tokens=tally.usage_tokens if tally.usage_tokens is not None else tally.output_tokens,
        prompt_tokens=tally.prompt_tokens or 0,
        finish_reason=tally.finish_reason,
        **_base(call, t0, t_sent, wall),
    )


def _stream_result(call, tally: StreamTally, t0, t_sent, t_end, wall, count_text) -> GenerationResult:
    missing = call.answer.stream_missing(tally)
    if missing:
        raise LLMError("stream_cut", f"stream ended without {' and '.join(missing)} after {tally.output_tokens} tokens")
    if not tally.chunk_times:
        raise LLMError("empty", "the stream carried no token")
    if tally.usage_tokens is not None:
        output, source = tally.usage_tokens, "usage"
    else:
        output = count_text("".join(tally.texts)) if count_text else tally.output_tokens
        source = "tokenizer" if count_text else "chunks"
    arrivals = _arrivals(tally.chunk_times, t_end)
    return GenerationResult(
        ok=True,
        error_kind=None,
        error_message=None,
        t_end=t_end,
        chunk_times=arrivals,
        chunk_tokens=np.asarray(tally.chunk_tokens, dtype=np.int64),
        output_tokens=output,
        prompt_tokens=tally.prompt_tokens if tally.prompt_tokens is not None else call.prompt_tokens_client,
        token_source=source,
        t_reasoning=_restamped(tally.t_reason, tally.chunk_times, arrivals),
        t_answer=_restamped(tally.t_answer, tally.chunk_times, arrivals),
        reasoning_tokens=min(tally.reasoning_tokens(count_text), output),
        finish_reason=tally.finish_reason,
        server=server_record(tally.final),
        **_base(call, t0, t_sent, wall),
    )


def _whole_result(call, raw: bytes, t0, t_sent, t_end, wall, count_text) -> GenerationResult:
    w = call.answer.parse_whole(raw, count_text)
    output, prompt = w.output_tokens, w.prompt_tokens
    if output <= 0:
        raise LLMError("empty", "the response carried no token")
    return GenerationResult(
        ok=True,
        error_kind=None,
        error_message=None,
        t_end=t_end,
        output_tokens=int(output),
        prompt_tokens=int(prompt) if prompt is not None else call.prompt_tokens_client,
        token_source=w.token_source,
        reasoning_tokens=min(int(w.reasoning_tokens), int(output)),
        finish_reason=w.finish_reason,
        server=w.server,
        **_base(call, t0, t_sent, wall),
    )
