"""A POST written to a geventhttpclient connection pool with its fixed head rendered once per target, not per request.

geventhttpclient's ``HTTPClient.request`` merges the client's default headers with the request's into
case-insensitive dicts twice, checks each field against a regex, looks for chunked and ``Expect`` headers and renders
every line again, for every request: ~30 µs of Python per request at 64 streams, as much as a 200-token stream's chunk
scans. Here the part that is the same for every request of a target — the request line, the client's default headers
overridden by the target's, ``Host`` — is rendered and checked once per (client, path, fixed headers) and kept; a
request adds its own headers (the request id and trace context: :mod:`users.tracing`) and ``Content-Length``, then
goes out in one write on a pooled socket, and the response is geventhttpclient's own (stamped: :mod:`users.headread`).

A POST is not retried after a send error (RFC 9110 9.2.2, as geventhttpclient does); a broken send still reads the
answer the server may have written before it closed (e.g. a 413), which raises when there is none. The pool's
liveness check of an idle socket before reuse stays the pool's. A client that talks through an HTTP proxy (Locust's
``proxy_host``) sends through geventhttpclient's own ``request``, which writes the proxy's absolute-form request line
and credentials.

    resp = post(http, "/v1/chat/completions", {"Content-Type": "application/json"},
                (("X-Request-Id", rid), ("traceparent", tp)), body)
"""

from __future__ import annotations

import errno
import re

from geventhttpclient.client import HTTPClient
from geventhttpclient.response import HTTPSocketPoolResponse

from users.headread import StampedResponse

__all__ = ["head", "post", "render"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP field name (RFC 9110 5.1)."""
_UNSAFE = re.compile(r"[\r\n\x00]")
"""What a field value may not hold: it would end the field (header injection) or the head."""
_HEADS: dict[tuple, bytes] = {}
_MAX_HEADS = 1024
"""Targets x header sets kept (a route table has a few; more would only be a misuse): past it the cache starts over."""


def _checked(name: str, value: str) -> str:
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise ValueError(f"invalid header field name {name!r}")
    value = str(value)
    if _UNSAFE.search(value):
        raise ValueError(f"invalid value for header field {name!r}: {value!r}")
    return f"{name}: {value}\r\n"


def _host(http: HTTPClient) -> str:
    host = f"[{http.host}]" if ":" in http.host and not http.host.startswith("[") else http.host
    return host if http.port in (80, 443) else f"{host}:{http.port}"


def head(http: HTTPClient, path: str, headers: dict[str, str]) -> bytes:
    """The request line and fixed header lines of a POST to ``path`` on ``http`` (latin-1, as geventhttpclient
    writes a head), rendered once per (client, path, headers) and cached; ValueError for a malformed path or field."""
    key = (id(http), path, tuple(headers.items()))
    got = _HEADS.get(key)
    if got is not None:
        return got
    if not path.startswith("/") or path.startswith("//") or _UNSAFE.search(path) or " " in path:
        raise ValueError(f"invalid request path {path!r}")
    own = {k.lower() for k in headers}
    lines = [f"POST {path} {http.version}\r\n"]
    lines += [_checked(k, v) for k, v in http.default_headers.items() if k.lower() not in own]
    lines += [_checked(k, v) for k, v in headers.items()]
    if "host" not in own and not any(k.lower() == "host" for k in http.default_headers):
        lines.append(_checked("Host", _host(http)))
    rendered = "".join(lines).encode("latin-1")
    if len(_HEADS) >= _MAX_HEADS:
        _HEADS.clear()
    _HEADS[key] = rendered  # the client stays alive as long as its pool: id() is not reused while it is in use
    return rendered


def render(http: HTTPClient, path: str, headers: dict[str, str], extra: tuple[tuple[str, str], ...],
           body: bytes) -> bytes:
    """The whole request: the cached head, ``extra`` header lines (checked: no CR, LF or NUL), Content-Length, body."""
    lines = []
    for name, value in extra:
        if _UNSAFE.search(value):
            raise ValueError(f"invalid value for header field {name!r}: {value!r}")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    return head(http, path, headers) + "".join(lines).encode("latin-1") + body


def post(http: HTTPClient, path: str, headers: dict[str, str], extra: tuple[tuple[str, str], ...],
         body: bytes) -> HTTPSocketPoolResponse:
    """Write the POST on a socket of ``http``'s pool and read the response's headers (geventhttpclient's response,
    kernel-stamped). Raises what the socket and the header parse raise (OSError, TimeoutError, HTTPParseError)."""
    if http.use_proxy:
        return http.request("POST", path, body=body, headers={**headers, **dict(extra)})
    data = render(http, path, headers, extra, body)
    pool = http._connection_pool
    sock = pool.get_socket()
    try:
        sock.sendall(data)
    except OSError as e:
        if e.errno not in (errno.ECONNRESET, errno.EPIPE):
            pool.release_socket(sock)
            raise
        # the server may have answered and closed before it took the whole request: read that answer (the
        # response releases the socket itself, and raises when there is none)
    return StampedResponse(sock, pool, block_size=http.block_size, method="POST", headers_type=http.headers_type)
