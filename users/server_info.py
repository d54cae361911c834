"""Small blocking HTTP look-ups done once per process at test start: the model id and /tokenize.

first_model("http://127.0.0.1:8000", headers)        # "deepseek-..." or raises ServerUnreachable
post = json_poster("http://127.0.0.1:8000", headers)  # post("/tokenize", {...}) -> (status, dict | None)
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_S = 10.0
CONNECT_CHECK_S = 3.0
"""How long the start check waits for a TCP connection to the server."""


class ServerUnreachable(RuntimeError):
    pass


def _call(url: str, headers: dict[str, str], data: bytes | None = None) -> tuple[int, dict | None]:
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def unreachable(base_url: str, timeout: float = CONNECT_CHECK_S) -> str | None:
    """Why nothing could be sent to ``base_url`` (no http(s) scheme, no host, no TCP connection), or None."""
    url = urllib.parse.urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        return "not an http(s) URL; expected e.g. http://127.0.0.1:8000"
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return "a bad port"
    try:
        socket.create_connection((url.hostname, port), timeout=timeout).close()
    except OSError as e:
        return f"cannot connect ({e.strerror or type(e).__name__}); is the server up?"
    return None


def first_model(host: str, headers: dict[str, str]) -> str:
    url = host.rstrip("/") + "/v1/models"
    try:
        status, obj = _call(url, headers)
    except (OSError, urllib.error.URLError) as e:
        raise ServerUnreachable(f"cannot reach {url} ({getattr(e, 'reason', e)}); is the server up?") from None
    try:
        return str(obj["data"][0]["id"])  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        raise ServerUnreachable(f"{url} answered HTTP {status} without a model id") from None


def json_poster(host: str, headers: dict[str, str]):
    base = host.rstrip("/")
    hdrs = {**headers, "Content-Type": "application/json", "Accept": "application/json"}

    def post(path: str, obj: dict) -> tuple[int, dict | None]:
        try:
            return _call(base + path, hdrs, json.dumps(obj).encode())
        except (OSError, urllib.error.URLError):
            return 0, None

    return post
