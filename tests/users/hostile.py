"""A hostile OpenAI-compatible server in the test's own process, and one real Locust user run against it.

The server answers ``GET /v1/models`` (one model) and ``POST /tokenize`` (404: no alignment check) itself;
every LLM request (``POST /v1/...``) goes to the test's ``answer(sock, request)``, which writes whatever raw
bytes it likes (a cut body, junk, nothing at all) and returns True to keep the connection open.

    def answer(sock, req):
        sock.sendall(http(200, b'{"id": "x"}'))
        return True

    with hostile(answer) as (host, requests):
        run = first_request(BatchCompletionUser, host, "--request-timeout", "0.5")
    run.result.error_kind, run.exception, requests[0].body

The user runs under a real Locust ``LocalRunner`` with the users plugin installed (as the locustfile
does), so the request event, the stall watch and the settings are the product's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import gevent
from gevent.event import Event
from gevent.server import StreamServer
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from locust.env import Environment

from users.options import add_arguments
from users.plugin import install
from users.routing import add_arguments as add_route_arguments

MODEL = "hostile-model"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def http(status: int, body: bytes, content_type: str = "application/json", length: int | None = None,
         extra: str = "") -> bytes:
    """A whole HTTP/1.1 response (``length`` overrides Content-Length, to announce more than is sent)."""
    n = len(body) if length is None else length
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {n}\r\n{extra}\r\n"
    return head.encode() + body


def sse_head(status: int = 200) -> bytes:
    """Headers of a chunked SSE stream; write events with :func:`chunk`, end with :data:`LAST_CHUNK`."""
    return f"HTTP/1.1 {status} OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n".encode()


def chunk(*events: bytes) -> bytes:
    data = b"".join(b"data: " + e + b"\n\n" for e in events)
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


def _read_request(f) -> Request | None:
    line = f.readline()
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers = {}
    while (h := f.readline()) not in (b"\r\n", b"\n", b""):
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0") or 0))
    return Request(method, path, headers, body)


@dataclass
class _Server:
    answer: Callable
    requests: list[Request] = field(default_factory=list)

    def handle(self, sock, _addr) -> None:
        f = sock.makefile("rb")
        try:
            while (req := _read_request(f)) is not None:
                if req.method == "GET" and req.path.endswith("/v1/models"):
                    sock.sendall(http(200, json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()))
                    continue
                if req.path.endswith("/tokenize"):
                    sock.sendall(http(404, b'{"detail": "Not Found"}'))
                    continue
                self.requests.append(req)
                if not self.answer(sock, req):
                    return
        except OSError:
            return
        finally:
            f.close()
            sock.close()


@contextmanager
def hostile(answer: Callable) -> Iterator[tuple[str, list[Request]]]:
    """Serve ``answer`` on 127.0.0.1 (a free port); yield (host URL, the LLM requests received)."""
    server = _Server(answer)
    srv = StreamServer(("127.0.0.1", 0), server.handle)
    srv.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}", server.requests
    finally:
        srv.stop(timeout=1)


def options(*argv: str):
    """Locust's defaults plus the users' options and the routing ones, parsed from ``argv`` (as the locustfile adds
    them)."""
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    add_arguments(parser)
    add_route_arguments(parser, None)
    return parser.parse_args(["--headless", "--input-len", "fixed:16", "--output-len", "fixed:8", *argv])


@dataclass
class Run:
    events: list[dict]
    """The Locust ``request`` events fired, in order (keyword arguments of the event)."""
    environment: Environment

    @property
    def result(self):
        """The first request's GenerationResult (``context["llm_result"]``)."""
        return self.events[0]["context"]["llm_result"]

    @property
    def exception(self):
        return self.events[0]["exception"]


def run_user(user_class, host: str, *argv: str, requests: int = 1, timeout: float = 8.0,
             setup: Callable[[Environment], None] | None = None, plugin: bool = True) -> Run:
    """Run one ``user_class`` user under a LocalRunner until it has fired ``requests`` request events
    (``plugin=False``: without the users plugin, as a library user would, so without the stall watch)."""
    env = Environment(user_classes=[user_class], host=host, parsed_options=options(*argv))
    if plugin:
        install(env)
    runner = env.create_local_runner()
    if setup is not None:
        setup(env)
    events: list[dict] = []
    enough = Event()

    def on_request(**kw) -> None:
        events.append(kw)
        if len(events) >= requests:
            enough.set()

    env.events.request.add_listener(on_request)
    runner.start(1, 1)
    try:
        assert enough.wait(timeout), f"{len(events)} of {requests} requests in {timeout} s"
    finally:
        runner.quit()
        gevent.sleep(0)
    return Run(events[:requests], env)


def first_request(user_class, host: str, *argv: str, timeout: float = 8.0) -> Run:
    return run_user(user_class, host, *argv, requests=1, timeout=timeout)
