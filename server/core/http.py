"""The test servers' HTTP/1.1 server on asyncio's Protocol API, built for streaming many SSE responses fast.

Keep-alive, pipelined requests (answered in order), ``Content-Length`` request bodies,
``Expect: 100-continue``, and chunked streaming responses. Handlers are plain callables
``handler(request, conn)`` (or coroutine functions): they answer at once (:meth:`Connection.respond`) or start a
stream and write to it later. Two ways to stream:

- queued (the simulator): :meth:`Connection.write_chunk` queues a chunk, sent by :meth:`WriteBatcher.flush`, which
  the engine calls before it waits: one ``transport.write`` per connection per wake-up, however many engine steps
  (when behind schedule) produced tokens; :meth:`Connection.end_stream` ends the response at that flush;
- at once (the scripted server, whose writes are its schedule): :meth:`Connection.send` writes bytes already framed
  with :func:`chunk`, :meth:`Connection.finish` ends the response.

With ``stamped=True`` the connection reads its socket itself with the kernel's receive stamp
(:mod:`workload.netstamp`): ``Request.arrival`` is when the request's last read reached the host (on the loop's
clock), so a schedule that starts at arrival does not start late when the loop is busy.

    batcher = WriteBatcher()
    routes = {("GET", "/health"): lambda req, conn: conn.respond(200, b"")}
    server = await loop.create_server(lambda: Connection(routes, batcher), "127.0.0.1", 8000)
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from workload import netstamp

log = logging.getLogger("server.core")

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
JSON = "application/json"
SSE = "text/event-stream; charset=utf-8"
REASONS = {s.value: s.phrase for s in HTTPStatus}


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    arrival: float | None = None
    """When the read that completed the request reached the host (the loop's clock; ``stamped`` connections only):
    None when it came unstamped or was parsed later from the buffer (then it starts when it is parsed)."""


Handler = Callable[[Request, "Connection"], object]

_date_cache = [0, b""]


def _date() -> bytes:
    now = int(time.time())
    if now != _date_cache[0]:
        _date_cache[0], _date_cache[1] = now, email.utils.formatdate(now, usegmt=True).encode()
    return _date_cache[1]


def chunk(data: bytes) -> bytes:
    """``data`` as one HTTP/1.1 chunk (an SSE event is sent as one)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def _not_found(req: Request, conn: Connection) -> None:
    conn.respond(404, b'{"detail":"Not Found"}')


def _not_allowed(req: Request, conn: Connection) -> None:
    conn.respond(405, b'{"detail":"Method Not Allowed"}')


class WriteBatcher:
    """Connections with queued stream chunks; :meth:`flush` sends each one's queue in one write."""

    __slots__ = ("dirty",)

    def __init__(self) -> None:
        self.dirty: list[Connection] = []

    def flush(self) -> None:
        dirty, self.dirty = self.dirty, []
        for conn in dirty:
            conn.flush()


class Connection(asyncio.Protocol):
    """One client connection. ``on_close`` (set by a handler) runs if the client goes away mid-response.

    ``fallback`` answers a request no route matches (default: 405 for a known path, else 404); ``name`` is the
    ``server`` header; ``stamped``: read with the kernel's receive stamps (``Request.arrival``)."""

    __slots__ = ("routes", "paths", "batcher", "transport", "buf", "busy", "keep_alive", "closed", "on_close",
                 "_continued", "_out", "_end", "fallback", "name", "stamped", "arrival")

    def __init__(self, routes: dict[tuple[str, str], Handler], batcher: WriteBatcher | None = None,
                 fallback: Handler | None = None, name: str = "server.sim", stamped: bool = False):
        self.routes = routes
        self.batcher = batcher or WriteBatcher()
        self.fallback = fallback
        self.name = name.encode()
        self.stamped = stamped
        self.arrival: float | None = None
        self._out: list[bytes] = []
        self._end = False
        self.paths = {p for _m, p in routes}
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.keep_alive = True
        self.closed = False
        self.on_close: Callable[[], None] | None = None
        self._continued = False

    # ---- asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.stamped:
            self._read_stamped(transport)

    def _read_stamped(self, transport) -> None:
        """Read the socket ourselves with recvmsg and the kernel's receive stamps (its transport paused); where
        stamps are unavailable asyncio reads and requests carry no arrival."""
        sock = getattr(transport.get_extra_info("socket"), "_sock", None)
        try:
            if sock is None or not netstamp.enable(sock):
                raise OSError("no kernel receive stamps")
            transport.pause_reading()
            asyncio.get_running_loop()._add_reader(sock.fileno(), self._readable, sock)  # noqa: SLF001 (the fd's transport is paused)
        except (AttributeError, OSError, RuntimeError):
            self.stamped = False
            transport.resume_reading()

    def _readable(self, sock: socket.socket) -> None:
        clock = asyncio.get_running_loop().time
        try:
            data, _now, arrival = netstamp.read(sock.recvmsg, 65536, clock, netstamp.realtime_offset(clock))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.transport.abort()
            return
        if not data:
            self.transport.close()
            return
        self.arrival = arrival
        self.data_received(data)

    def connection_lost(self, exc) -> None:
        self.closed = True
        cb, self.on_close = self.on_close, None
        if cb is not None:
            try:
                cb()
            except Exception:
                log.exception("on_close callback failed")

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._next_request()

    # ---- request parsing --------------------------------------------------------------------
    def _next_request(self) -> None:
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                self._fail(431, "request header too large")
            return
        try:
            head = bytes(buf[:end]).decode("latin-1").split("\r\n")
            method, target, version = head[0].split(" ", 2)
            headers = {}
            for line in head[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._fail(400, "malformed request")
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._fail(411, "chunked request bodies are not supported; send Content-Length")
            return
        if length < 0 or length > MAX_BODY:
            self._fail(413, "request body too large")
            return
        if len(buf) < end + 4 + length:
            if headers.get("expect", "").lower() == "100-continue" and not self._continued:
                self._continued = True
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        body = bytes(buf[end + 4:end + 4 + length])
        del buf[:end + 4 + length]
        self._continued = False
        conn_hdr = headers.get("connection", "").lower()
        self.keep_alive = conn_hdr != "close" and (version != "HTTP/1.0" or conn_hdr == "keep-alive")
        if "?" in target or "#" in target or not target.startswith("/"):
            split = urlsplit(target)
            path, query = split.path, parse_qs(split.query)
        else:  # the usual origin-form path: nothing to split
            path, query = target, {}
        req = Request(method.upper(), path, query, headers, body, self.arrival)
        self.arrival = None  # a request parsed later from the buffer starts when it is parsed
        self.busy = True
        handler = self.routes.get((req.method, req.path))
        if handler is None:
            handler = self.fallback or (_not_allowed if req.path in self.paths else _not_found)
        try:
            result = handler(req, self)
            if asyncio.iscoroutine(result):
                asyncio.get_running_loop().create_task(self._await(result))
        except Exception:
            log.exception("handler for %s %s failed", req.method, req.path)
            self._internal_error()

    async def _await(self, coro) -> None:
        try:
            await coro
        except Exception:
            log.exception("async handler failed")
            self._internal_error()

    def _internal_error(self) -> None:
        if self.busy and not self.closed:
            self.respond(500, b'{"error":{"message":"internal server error","type":"InternalServerError",'
                              b'"param":null,"code":500}}')

    def _fail(self, status: int, message: str) -> None:
        self.keep_alive = False
        self.busy = True
        self.respond(status, b'{"detail":"%s"}' % message.encode())

    def _done(self) -> None:
        self.flush()
        self.busy = False
        self.on_close = None
        if not self.keep_alive:
            self.close()
        elif self.buf and not self.closed:
            asyncio.get_running_loop().call_soon(self._next_request_if_idle)

    def _next_request_if_idle(self) -> None:
        if not self.busy and not self.closed:
            self._next_request()

    # ---- responses --------------------------------------------------------------------------
    def _head(self, status: int, content_type: str, extra: bytes) -> bytes:
        # ``extra`` ends the head (it carries the blank line), so "connection: close" must come before it.
        return b"HTTP/1.1 %d %s\r\ndate: %s\r\nserver: %s\r\ncontent-type: %s\r\n%s%s" % (
            status, REASONS.get(status, "Unknown").encode(), _date(), self.name, content_type.encode(),
            b"" if self.keep_alive else b"connection: close\r\n", extra)

    def respond(self, status: int, body: bytes, content_type: str = JSON,
                headers: dict[str, str] | None = None) -> None:
        """A complete response, written now; the connection then serves the next request."""
        if self.closed:
            return
        self.flush()
        self.transport.write(self._head(status, content_type, _fields(headers)
                                        + b"content-length: %d\r\n\r\n" % len(body)) + body)
        self._done()

    def start_stream(self, status: int = 200, content_type: str = SSE, headers: dict[str, str] | None = None,
                     first: bytes = b"") -> None:
        """The head of a chunked response, and ``first`` (bytes already framed with :func:`chunk`) in the same
        write."""
        if not self.closed:
            self.transport.write(self._head(status, content_type, _fields(headers)
                                            + b"transfer-encoding: chunked\r\n\r\n") + first)

    def stream_whole(self, body: bytes, status: int = 200, content_type: str = SSE,
                     headers: dict[str, str] | None = None) -> None:
        """A whole chunked response in one write: the head, ``body`` (framed with :func:`chunk`), the terminating
        chunk; the connection then serves the next request."""
        if not self.closed:
            self.transport.write(self._head(status, content_type, _fields(headers)
                                            + b"transfer-encoding: chunked\r\n\r\n") + body + b"0\r\n\r\n")
            self._done()

    def send(self, data: bytes) -> None:
        """Write ``data`` (framed with :func:`chunk`) now, ahead of nothing queued: a stream whose writes are its
        schedule; :meth:`finish` ends it."""
        if not self.closed:
            self.transport.write(data)

    def finish(self, last: bytes = b"") -> None:
        """Write ``last`` (framed) and the terminating zero-length chunk now; the connection then serves the next
        request."""
        if not self.closed:
            self.transport.write(last + b"0\r\n\r\n")
            self._done()

    def write_chunk(self, data: bytes) -> None:
        """Queue one chunk (sent at the next flush)."""
        if self.closed:
            return
        out = self._out
        if not out:
            self.batcher.dirty.append(self)
        out.append(chunk(data))

    def end_stream(self, last: bytes = b"") -> None:
        """Queue ``last`` (if any) and the terminating zero-length chunk; the response ends at the flush."""
        if self.closed:
            return
        if last:
            self.write_chunk(last)
        elif not self._out:
            self.batcher.dirty.append(self)
        self._out.append(b"0\r\n\r\n")
        self._end = True

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        self._out = []
        if not self.closed:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        if self._end:
            self._end = False
            self._done()

    def close(self) -> None:
        """Send what is queued, then close (a cut stream closes without the terminating chunk)."""
        if not self.closed and self.transport is not None:
            self.flush()
            self.closed = True
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once (a reset), what is queued unsent."""
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.abort()


def _fields(headers: dict[str, str] | None) -> bytes:
    return b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers.items()) if headers else b""
