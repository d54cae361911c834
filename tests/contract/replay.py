"""Helpers of the contract tests: recorded SSE bodies cut into random reads, and a server that replays a recorded
exchange to the users' client over a real socket."""

from __future__ import annotations

import json
import socket
import threading
import time

import numpy as np

from tests.fixtures.sse import Transcript


def cut(body: bytes, rng: np.random.Generator, lo: int = 1, hi: int = 7) -> list[bytes]:
    pieces, i = [], 0
    while i < len(body):
        n = int(rng.integers(lo, hi + 1))
        pieces.append(body[i : i + n])
        i += n
    return pieces



class ReplayServer:
    """Answers every POST with a recorded status and body, written as chunked transfer encoding in
    small pieces with pauses, so the client sees events (and UTF-8 characters) split across reads."""

    def __init__(self, t: Transcript, seed: int = 0):
        self.t, self.rng = t, np.random.default_rng(seed)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.requests.append(_read_request(conn))
            status, ctype = self.t.meta["status"], self.t.meta["content_type"]
            conn.sendall(f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ntransfer-encoding: chunked\r\n\r\n".encode())
            for piece in cut(self.t.body, self.rng, 1, 90):
                conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                time.sleep(0.0005)
            conn.sendall(b"0\r\n\r\n")

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=5)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
    while len(body) < length:
        body += conn.recv(65536)
    return body


def exchange_transcript(t: Transcript, count_text=None):
    from geventhttpclient import HTTPClient

    from users.client import Call, exchange
    from users.result import RequestMeta

    server = ReplayServer(t)
    http = HTTPClient("127.0.0.1", server.port, network_timeout=10, connection_timeout=5)
    request = t.meta["request"]
    call = Call(
        path=t.meta["path"],
        body=json.dumps(request).encode(),
        headers={"Content-Type": "application/json"},
        meta=RequestMeta(max_tokens=request["max_tokens"], user_class="Replay", name=f"POST {t.meta['path']} [stream]"),
        stream=True,
        prompt_tokens_client=0,
    )
    try:
        return exchange(http, call, count_text=count_text)
    finally:
        http.close()
        server.close()

