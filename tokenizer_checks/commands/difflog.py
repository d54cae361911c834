"""difflog: tokenize the same inputs with several tokenizers into a JSONL log for ``diff``.

One record per (tokenizer, input), in the classic diff-log format plus the ids and the text:
``{"ts": <epoch ms>, "tokenizer": "deepseek-v3", "input_id": "L1", "tokens": [...], "offsets": [[s, e], ...],
"ids": [...], "text": "..."}``. ``tokens`` are the tokenizer's own token strings (byte-level symbols for
byte-level BPE); ``offsets`` are character offsets into the text. Inputs are encoded without special tokens.

  python -m tokenizer_checks difflog --tokenizers deepseek-v2,deepseek-v3 \\
      --inputs tokenizer_checks/data/multilingual_cases.jsonl --out /tmp/tok.jsonl
  python -m tokenizer_checks diff /tmp/tok.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tokenizer_checks.loading import load
from tokenizer_checks.outcome import Outcome
from tokenizer_checks.texts import load_texts, parse_names

HELP = "tokenize inputs with each tokenizer into a JSONL log {ts, tokenizer, input_id, tokens, offsets}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizers", required=True, metavar="A,B", help="one or more TOKs, comma-separated")
    p.add_argument("--inputs", required=True, metavar="FILE", help="inputs, one per line or JSONL with 'id'/'text'")
    p.add_argument("--out", required=True, metavar="LOG.jsonl", help="log file to write (replaced)")
    p.add_argument("--no-text", action="store_true", help="leave the input text out of the records")


def records(names: list[str], texts: list, with_text: bool = True) -> list[dict]:
    out = []
    raw = [t.text for t in texts]
    for name in names:
        encs = load(name).encode_batch(raw, add_special_tokens=False)
        ts = int(time.time() * 1000)
        for t, e in zip(texts, encs, strict=True):
            rec = {"ts": ts, "tokenizer": name, "input_id": t.id, "tokens": e.tokens,
                   "offsets": [list(o) for o in e.offsets], "ids": e.ids}
            if with_text:
                rec["text"] = t.text
            out.append(rec)
    return out


def run(args: argparse.Namespace) -> Outcome:
    names = parse_names(args.tokenizers, least=1)
    texts = load_texts(args.inputs)
    recs = records(names, texts, with_text=not args.no_text)
    out_path = Path(args.out).expanduser()
    with out_path.open("w", encoding="utf-8") as fh:
        for rec in recs:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    per = {n: sum(1 for r in recs if r["tokenizer"] == n) for n in names}
    data = {"command": "difflog", "out": str(out_path), "records": len(recs), "inputs": len(texts),
            "tokenizers": per}
    lines = [f"wrote {len(recs)} records ({len(texts)} inputs x {len(names)} tokenizers) to {out_path}"]
    return Outcome(data, lines)
