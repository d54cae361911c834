"""consistency: do several tokenizers split the same multilingual inputs the same way?

Each case is encoded without special tokens (a subword-consistency assertion). Per case the
report groups the tokenizers by their segmentation (token boundaries from offsets), says whether the
ids are identical (the strict assertion; only meaningful within one vocabulary family), and for each
tokenizer that disagrees with the first one lists the character spans that split differently.
The default cases are three multilingual ones ("AI模型v2.0发布", "こんにちはWorld", "订单#123已完成") and a shipped
set covering Chinese, English, Japanese, Korean, Arabic, Cyrillic, emoji, code, numbers and dates.

  python -m tokenizer_checks consistency --tokenizers deepseek-v3,deepseek-v4,qwen2.5,r1-distill-llama
"""

from __future__ import annotations

import argparse
from collections import Counter

from tokenizer_checks.loading import load
from tokenizer_checks.outcome import Outcome
from tokenizer_checks.segments import boundary_diffs
from tokenizer_checks.texts import load_texts, parse_names, shipped
from workload.argtypes import non_negative_int

HELP = "which tokenizers split multilingual cases differently, and where"
DEFAULT_CASES = shipped("multilingual_cases.jsonl")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizers", required=True, metavar="A,B,...", help="two or more TOKs, comma-separated")
    p.add_argument("--cases", default=str(DEFAULT_CASES), metavar="FILE",
                   help="cases, one per line or JSONL with 'text' (optional 'category'); default: the shipped set")
    p.add_argument("--max-inconsistent", type=non_negative_int, metavar="N",
                   help="exit 1 when more than N cases are split differently")


def run(args: argparse.Namespace) -> Outcome:
    names = parse_names(args.tokenizers)
    cases = load_texts(args.cases)
    raw = [c.text for c in cases]
    encs = {n: load(n).encode_batch(raw, add_special_tokens=False) for n in names}
    ref = names[0]
    rows = []
    pair_disagree: Counter[str] = Counter()
    for i, case in enumerate(cases):
        segs = {n: [tuple(o) for o in encs[n][i].offsets] for n in names}
        groups: dict[tuple, list[str]] = {}
        id_groups: dict[tuple, list[str]] = {}
        for n in names:
            groups.setdefault(tuple(segs[n]), []).append(n)
            id_groups.setdefault(tuple(encs[n][i].ids), []).append(n)
        differences = []
        for n in names[1:]:
            spans = boundary_diffs(case.text, segs[ref], segs[n])
            if spans:
                pair_disagree[n] += 1
                differences.append({"tokenizer": n, "vs": ref, "spans": [s.to_dict() for s in spans]})
        rows.append({
            "id": case.id,
            "category": case.meta.get("category", ""),
            "text": case.text,
            "consistent": len(groups) == 1,
            "ids_equal": all(encs[n][i].ids == encs[ref][i].ids for n in names),
            "groups": list(groups.values()),
            "id_groups": list(id_groups.values()),
            "token_counts": {n: len(encs[n][i].ids) for n in names},
            "tokens": {n: [case.text[s:e] for s, e in segs[n]] for n in names},
            "differences": differences,
        })
    by_cat: dict[str, dict[str, int]] = {}
    for r in rows:
        c = by_cat.setdefault(r["category"] or "-", {"cases": 0, "inconsistent": 0})
        c["cases"] += 1
        c["inconsistent"] += not r["consistent"]
    inconsistent = sum(not r["consistent"] for r in rows)
    data = {
        "command": "consistency",
        "tokenizers": names,
        "reference": ref,
        "cases": len(rows),
        "consistent": len(rows) - inconsistent,
        "inconsistent": inconsistent,
        "ids_equal": sum(r["ids_equal"] for r in rows),
        "disagree_with_reference": {n: pair_disagree[n] for n in names[1:]},
        "by_category": by_cat,
        "results": rows,
    }
    out = Outcome(data, _lines(data))
    out.check("inconsistent_cases", inconsistent, args.max_inconsistent)
    return out


def _lines(d: dict) -> list[str]:
    lines = [
        f"consistency of {', '.join(d['tokenizers'])} over {d['cases']} cases (reference {d['reference']})",
        f"  same segmentation: {d['consistent']}/{d['cases']}; identical ids: {d['ids_equal']}/{d['cases']}",
        "  cases split differently from the reference: "
        + ", ".join(f"{n} {k}" for n, k in d["disagree_with_reference"].items()),
        "  by category: " + ", ".join(f"{c} {v['inconsistent']}/{v['cases']}" for c, v in d["by_category"].items()),
    ]
    for r in d["results"]:
        mark = "same" if r["consistent"] else "DIFF"
        lines.append(f"  [{mark}] {r['id']} {r['text']!r}: "
                     + " | ".join(f"{'+'.join(g)}" for g in r["groups"]))
        if not r["consistent"]:
            for n in d["tokenizers"]:
                lines.append(f"      {n:>18}: {r['tokens'][n]}")
    return lines
