"""A throwaway OTLP/HTTP endpoint, run as its own process: ``python -m tests.vllm.otlp_sink PORT``.

Answers every POST with 200 and an empty ExportTraceServiceResponse; ``GET /idle`` answers the seconds since the last
POST. A process, not a thread of the test run: a thread alive when Locust's import monkey-patches gevent can deadlock
the test process on an import lock.
"""

from __future__ import annotations

import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LAST = [time.monotonic()]


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        LAST[0] = time.monotonic()
        self._answer(b"", "application/x-protobuf")

    def do_GET(self) -> None:  # noqa: N802
        self._answer(f"{time.monotonic() - LAST[0]:.3f}".encode(), "text/plain")

    def _answer(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
