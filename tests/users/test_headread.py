"""The kernel-stamped header read (users/headread.py): a first chunk that came with the headers keeps its arrival."""

from __future__ import annotations

import time

import gevent.socket
import pytest
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse

from users.headread import StampedResponse
from workload import netstamp

HEAD_AND_FIRST_CHUNK = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"d\r\ndata: first\n\n\r\n")


def _pair() -> tuple[gevent.socket.socket, gevent.socket.socket]:
    listener = gevent.socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = gevent.socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    return client, server


def _stamping(client, server) -> None:
    """Until the kernel stamps packets (it turns stamping on in deferred work: tests/workload/test_netstamp.py)."""
    netstamp.enable(client)
    for _ in range(200):
        server.sendall(b".")
        _data, ancillary, _f, _a = client._sock.recvmsg(16, netstamp.ANCILLARY_SIZE)
        if ancillary:
            return
        time.sleep(0.01)
    raise AssertionError("the kernel never stamped a packet")


@pytest.mark.parametrize("cls", [StampedResponse, HTTPSocketPoolResponse])
def test_headers_read_late_keep_the_first_chunks_arrival(cls) -> None:
    client, server = _pair()
    with client, server:
        _stamping(client, server)
        server.sendall(HEAD_AND_FIRST_CHUNK)
        sent = time.perf_counter()
        time.sleep(0.08)  # the reader gets to the headers late (a busy event loop): the bytes wait in the kernel
        resp = cls(client, None, method="POST")
        read = time.perf_counter()
        assert resp.status_code == 200 and bytes(resp._body_buffer) == b"data: first\n\n"
        arrival = getattr(resp, "arrival", None)
        if cls is StampedResponse:
            assert arrival is not None and abs(arrival - sent) < 0.01 and read - arrival >= 0.07, (arrival, sent, read)
        else:  # geventhttpclient's own: no arrival, the reason for users/headread.py
            assert arrival is None


def test_a_closed_keep_alive_socket_is_the_error_geventhttpclient_retries_on() -> None:
    client, server = _pair()
    with client:
        server.close()
        with pytest.raises(HTTPConnectionClosed):
            StampedResponse(client, None, method="POST")
