"""``--otlp-receiver PORT``: an OTLP/HTTP (protobuf) trace endpoint inside the master (or a local run).

Point the server at it: ``vllm serve ... --otlp-traces-endpoint http://<master>:PORT/v1/traces`` with
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`` in vLLM's environment (its default is gRPC); the
simulator: ``python -m server.sim --otlp-traces-endpoint http://<master>:PORT/v1/traces``. Every ``llm_request``
span goes to the :class:`~telemetry.traces.join.TraceJoin`; a body that is not an export request is answered
400 and counted (``bad_exports``). gzip bodies are accepted.

    rx = OtlpReceiver(join, "127.0.0.1", 4318); rx.start(); ...; rx.stop()
"""

from __future__ import annotations

import gzip
import logging

from gevent.pywsgi import WSGIServer

from telemetry.traces.join import TraceJoin
from telemetry.traces.otlp import EMPTY_RESPONSE, parse_request

log = logging.getLogger(__name__)
MAX_BODY = 64 * 1024 * 1024


class OtlpReceiver:
    def __init__(self, join: TraceJoin, host: str, port: int) -> None:
        self.join, self.host, self.port = join, host, port
        self._server: WSGIServer | None = None

    def start(self) -> bool:
        """Listen; False (with one error line) when the port cannot be bound."""
        try:
            self._server = WSGIServer((self.host, self.port), self._app, log=None, error_log=None)
            self._server.start()
        except OSError as e:
            log.error(f"--otlp-receiver: cannot listen on {self.host}:{self.port}: {e.strerror or e}")
            self._server = None
            return False
        self.port = self._server.server_port
        log.info(f"OTLP trace receiver on http://{self.host}:{self.port}/v1/traces")
        return True

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(timeout=1)

    def _app(self, environ, start_response):
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != "/v1/traces":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"POST OTLP protobuf to /v1/traces\n"]
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(min(length, MAX_BODY)) if length else environ["wsgi.input"].read()
            if environ.get("HTTP_CONTENT_ENCODING", "").lower() == "gzip":
                body = gzip.decompress(body)
            if "json" in environ.get("CONTENT_TYPE", ""):
                raise ValueError("OTLP/JSON is not read here; export protobuf (http/protobuf)")
            spans, other = parse_request(body)
        except (ValueError, OSError, EOFError) as e:
            self.join.bad_exports += 1
            if self.join.bad_exports == 1:
                log.error(f"OTLP receiver: {e} (counting such exports in traces.bad_exports)")
            start_response("400 Bad Request", [("Content-Type", "text/plain")])
            return [str(e).encode()]
        self.join.add_spans(spans, other)
        start_response("200 OK", [("Content-Type", "application/x-protobuf")])
        return [EMPTY_RESPONSE]
