"""Per-request records: ``--llm-requests-jsonl PATH`` writes one JSON line per LLM request of every worker, on the
master, as the workers' reports arrive (a worker holds only what it finished since its last report, ~3 s).

A line (:func:`record_of`): every label of the request (each field of :class:`users.result.RequestMeta`, by its
name: ``stage``, ``version``, ``turn``, ``user_class``, ``request_id``, ...), ``worker``
(Locust's worker index; 0 in a local run), ``start_unix_s`` (UTC epoch seconds), ``ok``, ``prompt_tokens``,
``output_tokens``, ``token_source``, ``finish_reason``, then ``<key>_ms`` of every per-request client metric
(:data:`telemetry.metrics.PER_REQUEST`, in registry order: ``ttft_ms``, ``tpot_ms``, ``e2e_ms``, ...; null when the
request has none) — a count keeps its plain key (the server's in-band ``cached_tokens``, ``spec_drafted``,
``spec_accepted``, ``spec_steps``, ``spec_acceptance``),
``chunk_offsets_ms`` (arrival of each token-bearing chunk after the request's start, µs-rounded ms),
``chunk_tokens`` (tokens per such chunk), ``error_kind``, ``error_message``. Milliseconds as in the summary; the
same definitions (users/result.py).

The vLLM-bench result (telemetry/outputs/vllmbench.py) is built from these lines at the end of the run.

    log = RequestLog(path)      # master / local: log.open(); log.write(records, worker); log.close()
    record_of(result)           # worker: shipped under REPORT_KEY in report_to_master
"""

from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path
from typing import IO

import orjson

from telemetry.metrics import PER_REQUEST
from users.result import GenerationResult, RequestMeta

log = logging.getLogger(__name__)
_LABELS = tuple(f.name for f in fields(RequestMeta))
REPORT_KEY = "llm_requests"
"""Where a worker's report carries its records since the last report."""


def record_of(r: GenerationResult, worker: int | None = None) -> dict:
    """The JSONL line of one request (``worker`` is set by the master, which knows the sender)."""
    offsets = ((r.chunk_times - r.t0) * 1000.0).round(3).tolist() if len(r.chunk_times) else []
    return {
        **{label: getattr(r.meta, label) for label in _LABELS},
        "worker": worker,
        "start_unix_s": r.wall_start,
        "ok": r.ok,
        "prompt_tokens": r.prompt_tokens,
        "output_tokens": r.output_tokens,
        "token_source": r.token_source,
        "finish_reason": r.finish_reason,
        **{m.summary_key: m.shown(m.take(r)) for m in PER_REQUEST},
        "chunk_offsets_ms": offsets,
        "chunk_tokens": r.chunk_tokens.tolist(),
        "error_kind": r.error_kind,
        "error_message": r.error_message,
    }


class RequestLog:
    """The master's (or local run's) JSONL file: opened at test start, one line per record, closed at the end."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lines = 0
        self._f: IO[bytes] | None = None
        self._failed = False

    def open(self) -> None:
        self.close()
        self.lines, self._failed = 0, False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = self.path.open("wb")
        except OSError as e:
            self._fail(e)

    def write(self, records: object, worker: int | None) -> None:
        """Append ``records`` (a worker's report: a list of dicts, or None when it had none) tagged with ``worker``."""
        if self._f is None or records is None:
            return
        if not isinstance(records, list):  # a malformed report: dropped with a line, the run goes on
            log.error(f"--llm-requests-jsonl: dropped a report from worker {worker}: not a list of request records")
            return
        try:
            for rec in records:
                rec["worker"] = worker
                self._f.write(orjson.dumps(rec) + b"\n")
            self.lines += len(records)
        except (OSError, TypeError, ValueError) as e:
            self._fail(e)

    def close(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except OSError as e:
                self._fail(e)

    def _fail(self, e: Exception) -> None:
        if not self._failed:
            self._failed = True
            log.error(f"--llm-requests-jsonl {self.path}: {type(e).__name__}: {e}; no more request lines are written")
        self._f = None


def read_records(path: str | Path) -> list[dict]:
    """Every line of a request log (tests, the vLLM-bench writer)."""
    with Path(path).open("rb") as f:
        return [orjson.loads(line) for line in f if line.strip()]


def wants_request_log(options) -> bool:
    """Per-request records are kept when a file is asked for, or the vLLM-bench result that is built from them."""
    return bool(getattr(options, "llm_requests_jsonl", None) or getattr(options, "vllm_bench_json", None))


def request_log_for(options) -> RequestLog | None:
    """The run's request log: --llm-requests-jsonl, else (for --vllm-bench-json alone) a file beside that one."""
    path = getattr(options, "llm_requests_jsonl", None)
    if not path and getattr(options, "vllm_bench_json", None):
        path = str(options.vllm_bench_json) + ".requests.jsonl"
    return RequestLog(path) if path else None
