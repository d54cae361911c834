"""Record raw SSE transcripts from the real vLLM CPU engine, for the contract suite.

Each case sends one request and writes the response body byte for byte (after HTTP chunked
decoding) to ``tests/fixtures/sse/<case>.txt``, and what was asked and answered to
``<case>.meta.json`` (request path and body, HTTP status, content type, vLLM version). The
contract tests (``tests/contract/``) replay the bodies through the users' SSE parser.

    .venv/bin/python -m scripts.capture_transcripts                 # starts the tiny model itself
    .venv/bin/python -m scripts.capture_transcripts --url http://127.0.0.1:8000 --model tiny
    .venv/bin/python -m scripts.capture_transcripts --set reasoning      # only the reasoning-parser cases

The ``reasoning_*`` cases come from a server started with ``--reasoning-parser deepseek_r1`` (R1 as
served: thinking in ``reasoning_content``/``reasoning``, the answer in ``content``). The tiny model's random
output may never close ``</think>``: then the whole answer is reasoning, still the real wire format.
"""

from __future__ import annotations

import argparse
import http.client
import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from scripts.tiny_engine import tiny_engine

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "sse"
PROMPT = "Explain what a paged KV cache is, in one paragraph."


@dataclass(frozen=True)
class Case:
    path: str
    body: dict
    note: str
    extra: dict = field(default_factory=dict)


def _chat(**kw) -> dict:
    return {"messages": [{"role": "user", "content": PROMPT}], **kw}


def _completion(**kw) -> dict:
    return {"prompt": PROMPT, **kw}


_GEN = {"max_tokens": 24, "ignore_eos": True, "temperature": 1.0, "seed": 7}
_USAGE = {"stream_options": {"include_usage": True}}
_CONTINUOUS = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}

CASES: dict[str, Case] = {
    "chat_usage": Case("/v1/chat/completions", _chat(stream=True, **_GEN, **_USAGE), "chat, final usage chunk"),
    "chat_continuous": Case(
        "/v1/chat/completions", _chat(stream=True, **_GEN, **_CONTINUOUS), "chat, usage on every chunk"
    ),
    "chat_no_usage": Case("/v1/chat/completions", _chat(stream=True, **_GEN), "chat, no usage at all"),
    "completions_usage": Case("/v1/completions", _completion(stream=True, **_GEN, **_USAGE), "completions, usage"),
    "completions_continuous": Case(
        "/v1/completions", _completion(stream=True, **_GEN, **_CONTINUOUS), "completions, usage on every chunk"
    ),
    "completions_batch_usage": Case(
        "/v1/completions",
        {"prompt": [PROMPT, "Two short words."], "stream": True, **_GEN, **_USAGE},
        "two prompts in one streamed request: choices carry index 0 and 1",
    ),
    "error_unknown_model": Case(
        "/v1/chat/completions", _chat(stream=True, **_GEN, **_USAGE), "unknown model", {"model": "no-such-model"}
    ),
    "error_max_tokens": Case(
        "/v1/chat/completions",
        _chat(stream=True, **{**_GEN, "max_tokens": 4096}, **_USAGE),
        "max_tokens beyond --max-model-len 2048",
    ),
}


REASONING_PARSER = ("--reasoning-parser", "deepseek_r1")
"""The extra ``vllm serve`` flags of the reasoning cases."""
REASONING_CASES: dict[str, Case] = {
    "reasoning_chat_continuous": Case(
        "/v1/chat/completions",
        _chat(stream=True, **_GEN, **_CONTINUOUS),
        "R1 reasoning parser (deepseek_r1), chat, usage on every chunk",
    ),
    "reasoning_chat_whole": Case(
        "/v1/chat/completions", _chat(stream=False, **_GEN), "R1 reasoning parser (deepseek_r1), chat, not streamed"
    ),
}
_GREEDY = {"max_tokens": 48, "ignore_eos": True, "temperature": 0}
SPECULATIVE_CASES: dict[str, Case] = {
    "spec_chat_continuous": Case(
        "/v1/chat/completions", _chat(stream=True, **_GREEDY, **_CONTINUOUS),
        "ngram speculation (3 drafts) at temperature 0, per-request metrics (detailed) and prompt tokens details: "
        "multi-token chunks, the last chunk's metrics.speculative_decoding and usage.prompt_tokens_details",
    ),
    "spec_chat_whole": Case(
        "/v1/chat/completions", _chat(stream=False, **_GREEDY), "the same, not streamed: metrics in the body",
    ),
}
"""Captured from a server with tests/vllm/engine.py's SPEC_FLAGS (ngram, detailed per-request spec metrics)."""
SPECULATIVE = ("--speculative-config",
               '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}',
               "--per-request-spec-decode-metrics", "detailed")
"""== tests.vllm.engine.SPEC_FLAGS (a test holds them equal); this script does not import the tests at load."""
SETS = {"plain": (CASES, ()), "reasoning": (REASONING_CASES, REASONING_PARSER),
        "speculative": (SPECULATIVE_CASES, SPECULATIVE)}


def capture(url: str, model: str, case: Case) -> tuple[bytes, dict]:
    body = {"model": model, **case.body, **case.extra}
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    try:
        conn.request("POST", case.path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        meta = {
            "note": case.note,
            "path": case.path,
            "request": body,
            "status": resp.status,
            "content_type": resp.getheader("content-type"),
        }
    finally:
        conn.close()
    return raw, meta


def server_version(url: str) -> str:
    try:
        with urllib.request.urlopen(url + "/version", timeout=5) as r:
            return json.loads(r.read()).get("version", "?")
    except OSError:
        return "?"


def capture_all(url: str, model: str, out: Path, cases: dict[str, Case] = CASES) -> None:
    out.mkdir(parents=True, exist_ok=True)
    version = server_version(url)
    for name, case in cases.items():
        raw, meta = capture(url, model, case)
        meta["vllm_version"] = version
        (out / f"{name}.txt").write_bytes(raw)
        (out / f"{name}.meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
        print(f"{name}: HTTP {meta['status']}, {len(raw)} bytes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server; default: start the tiny model (needs make vllm-env)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--set", choices=("all", *SETS), default="all",
                        help="which cases (reasoning: a server started with --reasoning-parser deepseek_r1)")
    args = parser.parse_args(argv)
    chosen = list(SETS) if args.set == "all" else [args.set]
    if args.url:
        for name in chosen:
            capture_all(args.url.rstrip("/"), args.model, args.out, SETS[name][0])
        return 0
    for name in chosen:
        cases, extra = SETS[name]
        with tiny_engine("capture_transcripts", "64M", extra) as url:
            capture_all(url, args.model, args.out, cases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
