"""The hostile server of tests/users/hostile.py as its own process, for runs of a real ``locust``: each LLM
request gets the next of ``--modes`` in turn; ``GET /stats`` counts the requests served per mode and per
Authorization header.

    python -m tests.users.hostile_server --port 8123 --modes ok,silence,huge_line,close
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter

import gevent
from gevent.server import StreamServer

from tests.users.hostile import LAST_CHUNK, _Server, chunk, http, sse_head

TOKENS = 4
_DELTA = b'{"choices":[{"index":0,"delta":{"content":"tok "}}],"usage":{"prompt_tokens":16,"completion_tokens":%d}}'
_FINISH = b'{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":16,"completion_tokens":%d}}'  # noqa: E501
GOOD = sse_head() + b"".join(chunk(_DELTA % (i + 1)) for i in range(TOKENS)) + chunk(_FINISH % TOKENS, b"[DONE]")
GOOD += LAST_CHUNK


def _good(sock) -> bool:
    gevent.sleep(0.05)  # a pace for closed-loop users
    sock.sendall(GOOD)
    return True


def _silence(sock) -> bool:
    sock.sendall(sse_head())
    gevent.sleep(60)
    return False


def _never(_sock) -> bool:
    gevent.sleep(60)
    return False


def _huge_line(sock) -> bool:
    sock.sendall(sse_head())
    line = b'{"choices":[{"index":0,"delta":{"content":"' + b"x" * (4 << 20) + b'"}}]}'
    sock.sendall(chunk(line) + LAST_CHUNK)  # one 4 MiB data line
    return True


def _bad_utf8(sock) -> bool:
    sock.sendall(sse_head() + chunk(_DELTA % 1) + chunk(b'{"choices":[{"index":0,"delta":{"content":"\xff\xfe"}}]}'))
    sock.sendall(chunk(_FINISH % 2, b"[DONE]") + LAST_CHUNK)
    return True


def _html(sock) -> bool:
    sock.sendall(http(200, b"<html><body>502 Bad Gateway (nginx)</body></html>", "text/html"))
    return True


def _chunked_garbage(sock) -> bool:
    sock.sendall(sse_head() + chunk(_DELTA % 1))
    gevent.sleep(0.05)  # mid-stream; in the headers' own packet it is a stream_cut too (users.client._answered)
    sock.sendall(b"zz-not-a-size\r\ngarbage\r\n")
    return False


def _redirect(sock) -> bool:
    sock.sendall(http(307, b"moved", "text/plain", extra="Location: http://elsewhere.invalid/v1/chat/completions\r\n"))
    return True


def _close(sock) -> bool:
    gevent.sleep(0.05)
    raw = GOOD.replace(b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding: chunked\r\nConnection: close\r\n")
    sock.sendall(raw)
    return False


MODES = {
    "ok": _good,
    "silence": _silence,
    "never": _never,
    "huge_line": _huge_line,
    "bad_utf8": _bad_utf8,
    "html": _html,
    "chunked_garbage": _chunked_garbage,
    "redirect": _redirect,
    "close": _close,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--modes", default="ok")
    args = ap.parse_args()
    modes = args.modes.split(",")
    turn = itertools.cycle(modes)
    served: Counter = Counter()
    auth: dict[str, int] = {}
    """Authorization header -> LLM requests that carried it."""

    def answer(sock, req) -> bool:
        if req.method == "GET":  # /health, /stats
            body = json.dumps({"requests": sum(served.values()), "auth": auth,
                               **{f"mode_{m}": n for m, n in served.items()}})
            sock.sendall(http(200, body.encode()))
            return True
        who = req.headers.get("authorization", "")
        auth[who] = auth.get(who, 0) + 1
        mode = next(turn)
        served[mode] += 1
        return MODES[mode](sock)

    server = _Server(answer)
    StreamServer(("127.0.0.1", args.port), server.handle).serve_forever()


if __name__ == "__main__":
    main()
