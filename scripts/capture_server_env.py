"""Record what the real vLLM CPU engine answers about itself, for the simulator's contract (the server
environment): ``GET /version``, ``GET /v1/models`` and the ``vllm:cache_config_info`` sample of ``/metrics``.

Writes ``tests/contract/server_env/version.json``, ``models.json`` and ``cache_config_info.txt`` (the metric's
HELP/TYPE lines and its sample, verbatim). ``tests/contract/test_server_env.py`` holds the simulator to them.

    .venv/bin/python -m scripts.capture_server_env                       # starts the tiny model itself
    .venv/bin/python -m scripts.capture_server_env --url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

from scripts.tiny_engine import tiny_engine

OUT = Path(__file__).resolve().parent.parent / "tests" / "contract" / "server_env"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def capture(url: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "version.json").write_bytes(_get(url + "/version"))
    (out / "models.json").write_text(json.dumps(json.loads(_get(url + "/v1/models")), indent=2) + "\n")
    lines = [ln for ln in _get(url + "/metrics").decode().splitlines() if "vllm:cache_config_info" in ln]
    if not any(not ln.startswith("#") for ln in lines):
        sys.exit("capture_server_env: no vllm:cache_config_info sample on /metrics")
    (out / "cache_config_info.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out}/version.json, models.json, cache_config_info.txt")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running server; default: start the tiny model (needs make vllm-env)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.url:
        capture(args.url.rstrip("/"), args.out)
        return 0
    with tiny_engine("capture_server_env", "64M") as url:
        capture(url, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
