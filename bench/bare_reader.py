"""The floor for a Python streaming client: gevent sockets that send a prebuilt request and only count
SSE chunks (``\\n\\n``) — no HTTP parsing, no JSON, no timing. ``bench.client_cost`` compares the users to it.

    python -m bench.bare_reader --port 8001 --streams 64 --seconds 10 [--path /v1/chat/completions]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

from workload.argtypes import port, positive_int, seconds  # noqa: E402


def request_bytes(host: str, port: int, path: str, max_tokens: int, model: str = "bare") -> bytes:
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": " hello" * 16}],
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
    ).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def stream_forever(host: str, port: int, req: bytes, counts: list[int]) -> None:
    sock = socket.create_connection((host, port))
    chunks = 0
    while True:
        sock.sendall(req)
        while True:
            data = sock.recv(65536)
            if not data:
                return
            chunks += data.count(b"\n\n")
            counts[0] = chunks
            if data.endswith(b"0\r\n\r\n"):
                break


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port, required=True)
    p.add_argument("--streams", type=positive_int, default=64)
    p.add_argument("--seconds", type=seconds, default=10.0)
    p.add_argument("--path", default="/v1/chat/completions")
    p.add_argument("--max-tokens", type=positive_int, default=200)
    p.add_argument("--model", default="bare", help="model name sent (the scripted server counts tokens per model)")
    args = p.parse_args()
    req = request_bytes(args.host, args.port, args.path, args.max_tokens, args.model)
    counters = [[0] for _ in range(args.streams)]
    for i in range(args.streams):  # ramp like Locust's spawn rate: all in about one second
        gevent.spawn_later(i / args.streams, stream_forever, args.host, args.port, req, counters[i])
    time.sleep(args.seconds)
    print(json.dumps({"chunks": sum(c[0] for c in counters)}))


if __name__ == "__main__":
    main()
