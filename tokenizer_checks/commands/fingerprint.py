"""fingerprint: the gray-routing fingerprint of one request input, its bucket and version, and the
tokenizer metadata headers.

fingerprint = ``M + ":" + sha256(canonical)[:16 hex]``, canonical = ``json.dumps(input, sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`` as UTF-8; bucket = ``int(hex, 16) % 100``; the version comes
from ``--table``. For chat the input is the messages list, for completions the prompt
(see :mod:`workload.routing.table`).

  python -m tokenizer_checks fingerprint --model-id deepseek-v4 --input '[{"role":"user","content":"你好"}]'
  python -m tokenizer_checks fingerprint --model-id m --input @request.json --table 0-49=v1,50-99=v2 --json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from tokenizer_checks.outcome import Outcome
from tokenizer_checks.texts import InputError
from workload.routing.table import (
    BUCKET_TABLE_FORM,
    COMPAT_LEVELS,
    DEFAULT_BUCKET_TABLE,
    BucketTable,
    canonical_json,
    fingerprint,
    metadata_headers,
)

HELP = "fingerprint, bucket and version of a request input, with the X-Tokenizer-* headers"


def _table(text: str) -> BucketTable:
    try:
        return BucketTable.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-id", required=True, metavar="M")
    p.add_argument("--input", required=True, metavar="JSON",
                   help="the input as JSON (messages list or prompt string), or @FILE holding it")
    p.add_argument("--table", type=_table, default=DEFAULT_BUCKET_TABLE, metavar="TABLE",
                   help=f"bucket table {BUCKET_TABLE_FORM}; default {DEFAULT_BUCKET_TABLE}")
    p.add_argument("--tokenizer", default="deepseek-v4", metavar="TOK",
                   help="tokenizer whose tokenizer.json is hashed into X-Tokenizer-Hash (default deepseek-v4)")
    p.add_argument("--compat-level", choices=COMPAT_LEVELS, default="backward", help="X-Compat-Level")


def _input(text: str) -> object:
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        if not path.is_file():
            raise InputError(f"no such file: {path}")
        text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"--input is not JSON ({exc.msg} at char {exc.pos}); quote a prompt as '\"text\"'") from None


def run(args: argparse.Namespace) -> Outcome:
    obj = _input(args.input)
    table = args.table if isinstance(args.table, BucketTable) else _table(args.table)
    fp, bucket = fingerprint(args.model_id, obj)
    version = table.version(bucket)
    try:
        headers = metadata_headers(version, args.tokenizer, args.compat_level)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    canonical = canonical_json(obj)
    data = {
        "command": "fingerprint",
        "model_id": args.model_id,
        "fingerprint": fp,
        "bucket": bucket,
        "version": version,
        "sha256": hashlib.sha256(canonical).hexdigest(),
        "canonical": canonical.decode("utf-8"),
        "table": {v: round(s, 4) for v, s in table.shares().items()},
        "headers": headers,
    }
    lines = [f"fingerprint {fp}", f"bucket      {bucket}", f"version     {version}",
             *(f"{k}: {v}" for k, v in headers.items())]
    return Outcome(data, lines)
