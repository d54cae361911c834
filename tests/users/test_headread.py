"""The kernel-stamped header read (users/headread.py): a first chunk that came with the headers keeps its arrival."""

from __future__ import annotations

import time

import gevent.socket
import pytest
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse

from tests.support import stamped_pair
from users.headread import StampedResponse

HEAD_AND_FIRST_CHUNK = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"d\r\ndata: first\n\n\r\n")


@pytest.mark.parametrize("cls", [StampedResponse, HTTPSocketPoolResponse])
def test_headers_read_late_keep_the_first_chunks_arrival(cls) -> None:
    with stamped_pair(gevent.socket) as (client, server):
        server.sendall(HEAD_AND_FIRST_CHUNK)
        sent = time.perf_counter()
        time.sleep(0.08)  # the reader gets to the headers late (a busy event loop): the bytes wait in the kernel
        resp = cls(client, None, method="POST")
        read = time.perf_counter()
        assert resp.status_code == 200 and bytes(resp._body_buffer) == b"data: first\n\n"
        arrival = getattr(resp, "arrival", None)
        if cls is StampedResponse:
            assert arrival is not None and abs(arrival - sent) < 0.01 and read - arrival >= 0.07, (arrival, sent, read)
            assert resp.stamp_offset is not None  # the stream's reads reuse it (users/client.py)
        else:  # geventhttpclient's own: no arrival, the reason for users/headread.py
            assert arrival is None


def test_a_closed_keep_alive_socket_is_the_error_geventhttpclient_retries_on() -> None:
    with stamped_pair(gevent.socket) as (client, server):
        server.close()
        with pytest.raises(HTTPConnectionClosed):
            StampedResponse(client, None, method="POST")
