"""Record the real vLLM CPU engine's ``/metrics`` with ``--data-parallel-size 2``, for the simulator's fleet contract:
after a few chat requests, every ``vllm:`` family's HELP/TYPE lines and samples, verbatim.

Writes ``tests/contract/fleet/metrics_dp2.txt``; ``tests/contract/test_fleet_contract.py`` holds the simulator's
``--data-parallel-size 2`` to its names and label sets.

    .venv/bin/python -m scripts.capture_fleet_metrics                       # starts the tiny model itself (DP=2)
    .venv/bin/python -m scripts.capture_fleet_metrics --url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripts.tiny_engine import tiny_engine

OUT = Path(__file__).resolve().parent.parent / "tests" / "contract" / "fleet" / "metrics_dp2.txt"
REQUESTS = 6


def _chat(url: str, model: str, i: int) -> None:
    body = json.dumps({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": f"hello {i}"}]})
    req = urllib.request.Request(url + "/v1/chat/completions", body.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()


def capture(url: str, out: Path) -> None:
    with urllib.request.urlopen(url + "/v1/models", timeout=30) as r:
        model = json.loads(r.read())["data"][0]["id"]
    with ThreadPoolExecutor(REQUESTS) as pool:
        list(pool.map(lambda i: _chat(url, model, i), range(REQUESTS)))
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    lines = [ln for ln in text.splitlines() if "vllm:" in ln]
    if not any('engine="1"' in ln for ln in lines):
        sys.exit("capture_fleet_metrics: no engine=\"1\" series: is the server running --data-parallel-size 2?")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(lines)} lines)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running server; default: start the tiny model with --data-parallel-size 2")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.url:
        capture(args.url.rstrip("/"), args.out)
        return 0
    with tiny_engine("capture_fleet_metrics", "8M", ("--data-parallel-size", "2")) as url:
        capture(url, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
