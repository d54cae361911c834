"""diff: align difflog records of two tokenizers by ``input_id`` and report character-level boundary
differences through their offsets, with the compat level of B against A (:mod:`workload.routing.compat`: the
rule the gray-routed users' ``X-Compat-Level`` comes from).

Reads one log holding both tokenizers' records, or two logs (one each). When a log holds the same
(tokenizer, input_id) more than once, the record with the latest ``ts`` counts. Inputs present on one
side only are listed as unmatched.

  python -m tokenizer_checks diff /tmp/tok.jsonl
  python -m tokenizer_checks diff bpe.jsonl wp.jsonl --max-diff-share 0.05
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenizer_checks.outcome import Outcome
from tokenizer_checks.segments import boundary_diffs
from tokenizer_checks.texts import InputError, parse_names
from workload.argtypes import fraction, non_negative_int
from workload.jsonl import json_lines
from workload.routing.compat import TextPair, compat_level

HELP = "align two tokenizers' difflog records by input_id and report boundary differences via offsets"
REQUIRED = ("ts", "tokenizer", "input_id", "tokens", "offsets")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("logs", nargs="+", metavar="LOG.jsonl", help="one log with two tokenizers, or two logs")
    p.add_argument("--pair", metavar="A,B", help="the two tokenizers to compare when the logs hold more")
    p.add_argument("--max-diff-share", type=fraction, metavar="X",
                   help="exit 1 when the share of inputs split differently is above X (0..1)")
    p.add_argument("--show", type=non_negative_int, default=10, metavar="N",
                   help="differing inputs to print (default %(default)s)")


def read_log(path: str) -> list[dict]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"no such log: {p}")
    out = []
    for n, rec in json_lines(p, p.read_text(encoding="utf-8").splitlines(), error=InputError):
        missing = [k for k in REQUIRED if not isinstance(rec, dict) or k not in rec]
        if missing:
            raise InputError(f"{p}:{n}: record lacks {', '.join(missing)} (need {', '.join(REQUIRED)})")
        offs = rec["offsets"]
        if not isinstance(offs, list) or len(offs) != len(rec["tokens"]) or not all(
            isinstance(o, list) and len(o) == 2 and all(isinstance(x, int) for x in o) for o in offs
        ):
            raise InputError(f"{p}:{n}: offsets must be [[start, end], ...], one per token")
        out.append(rec)
    return out


def run(args: argparse.Namespace) -> Outcome:
    if len(args.logs) > 2:
        raise InputError("give one log (two tokenizers in it) or two logs")
    latest: dict[tuple[str, str], dict] = {}
    for path in args.logs:
        for rec in read_log(path):
            key = (str(rec["tokenizer"]), str(rec["input_id"]))
            if key not in latest or rec["ts"] >= latest[key]["ts"]:
                latest[key] = rec
    names = list(dict.fromkeys(t for t, _ in latest))
    if args.pair:
        pair = parse_names(args.pair)
        if len(pair) != 2 or not set(pair) <= set(names):
            raise InputError(f"--pair must name two tokenizers found in the logs ({', '.join(names)})")
        a, b = pair
    elif len(names) == 2:
        a, b = names
    else:
        raise InputError(f"the logs hold {len(names)} tokenizers ({', '.join(names) or 'none'}); need two or --pair")
    ids_a = [i for t, i in latest if t == a]
    ids_b = {i for t, i in latest if t == b}
    rows = []
    for input_id in ids_a:
        if input_id not in ids_b:
            continue
        ra, rb = latest[(a, input_id)], latest[(b, input_id)]
        text = ra.get("text") if ra.get("text") == rb.get("text") else None
        spans = boundary_diffs(text, ra["offsets"], rb["offsets"])
        rows.append({"input_id": input_id, "same_boundaries": not spans, "same_tokens": ra["tokens"] == rb["tokens"],
                     "tokens": [len(ra["tokens"]), len(rb["tokens"])], "spans": [s.to_dict() for s in spans]})
    differing = [r for r in rows if not r["same_boundaries"]]
    data = {
        "command": "diff",
        "logs": args.logs,
        "a": a,
        "b": b,
        "compared": len(rows),
        "same_boundaries": len(rows) - len(differing),
        "with_boundary_diffs": len(differing),
        "spans": sum(len(r["spans"]) for r in rows),
        "diff_share": round(len(differing) / len(rows), 6) if rows else 0.0,
        "compat_level": compat_level(TextPair(r["same_tokens"], r["same_boundaries"], *r["tokens"]) for r in rows)
        if rows else None,
        "unmatched": {a: sorted(set(ids_a) - ids_b), b: sorted(ids_b - set(ids_a))},
        "results": rows,
    }
    if not rows:
        raise InputError(f"no input_id is logged for both {a} and {b}")
    out = Outcome(data, _lines(data, args.show))
    out.check("diff_share", data["diff_share"], args.max_diff_share)
    return out


def _lines(d: dict, show: int) -> list[str]:
    lines = [
        f"diff {d['a']} vs {d['b']}: {d['compared']} inputs aligned by input_id, "
        f"{d['with_boundary_diffs']} split differently ({d['spans']} spans), {d['same_boundaries']} identical; "
        f"compat level of {d['b']} against {d['a']}: {d['compat_level']} (X-Compat-Level, workload/routing/compat.py)",
    ]
    for side, ids in d["unmatched"].items():
        if ids:
            lines.append(f"  only in {side}: {', '.join(ids[:10])}{' ...' if len(ids) > 10 else ''}")
    for r in [r for r in d["results"] if not r["same_boundaries"]][:show]:
        lines.append(f"  {r['input_id']}: {r['tokens'][0]} vs {r['tokens'][1]} tokens")
        for s in r["spans"][:3]:
            lines.append(f"    chars {s['start']}-{s['end']} {s['text']!r}: {s['a']} | {s['b']}")
    return lines
