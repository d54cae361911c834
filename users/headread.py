"""The response's header read, stamped by the kernel: when the first body bytes come with the headers.

A server may write its headers together with the first token (the scripted server does), and a client that gets to
a stream's headers late — its event loop busy with thousands of other streams — finds the first chunk already
waiting behind them either way. geventhttpclient reads the headers with a plain ``recv``, so those body bytes carried
no arrival time and were stamped when the greenlet got to them: every TTFT held its header read's loop lag (at
10,000 streams in one process, a p99 26-39 % over the server's own record). Here the first read of the headers is a
``recvmsg`` with the kernel's stamp (:mod:`workload.netstamp`; a read spanning several segments carries the newest
one's), kept as ``arrival``; the rest of the header parse is geventhttpclient's own, fed what was read.

    resp = StampedResponse(sock, pool, method="POST")   # as users.wire reads every LLM request's response
    resp.arrival                 # perf_counter() seconds when the first read's bytes reached the host; None: unknown
"""

from __future__ import annotations

import errno
import time

from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse

from workload import netstamp

__all__ = ["StampedResponse"]


class StampedResponse(HTTPSocketPoolResponse):
    """geventhttpclient's pooled response whose first header read is kernel-stamped (``arrival``)."""

    arrival: float | None = None
    stamp_offset: float | None = None
    """The wall-to-``perf_counter()`` offset the header read used, with ``SO_TIMESTAMPNS`` on: the body reads of the
    same request reuse both (None: this response did not read stamped)."""

    def _read_headers(self, pre_buffered: bytes = b"") -> None:
        if not pre_buffered:
            try:
                pre_buffered = self._first_read()
            except BaseException:
                self.release()  # as geventhttpclient does when its own header read fails
                raise
        super()._read_headers(pre_buffered)  # b"": nothing read here, it reads (and judges an EOF) itself

    def _first_read(self) -> bytes:
        """The first bytes of the response, stamped; b"" where the socket is not a plain gevent one or cannot stamp (the
        parent then reads) or the peer closed (the parent reads the EOF again and raises its own error)."""
        sock = self._sock
        try:
            raw, readable, wait = sock._sock.recvmsg, sock._read_event, sock._wait
        except AttributeError:
            return b""
        if not netstamp.enable(sock):  # the platform cannot stamp: the parent reads
            return b""
        perf = time.perf_counter
        offset = netstamp.realtime_offset(perf)
        while True:
            try:
                data, _now, arrival = netstamp.read(raw, self.block_size, perf, offset)
            except BlockingIOError:
                wait(readable)  # gevent's own wait: the socket's timeout applies, as it does to its recv
                continue
            except OSError as e:
                if e.errno == errno.ECONNRESET:  # a keep-alive socket the server closed: the client may retry
                    raise HTTPConnectionClosed("connection closed.") from None
                raise
            if data:
                self.arrival = arrival
            self.stamp_offset = offset
            return data
