"""drift: how an upgrade from OLD to NEW tokenizer changes the tokens of a corpus.

Per text: the Jaccard drift of the two token-string sets, whether the ids are identical, the token-count
ratio, and the exact character spans that split differently (from offsets). Across the vocabularies:
added / removed / changed special (added) tokens. Texts are batch-encoded by the Rust tokenizers
without special tokens. The default corpus is the shipped mixed Chinese/English/code corpus.

  python -m tokenizer_checks drift --old deepseek-v2 --new deepseek-v3
  python -m tokenizer_checks drift --old deepseek-v3 --new deepseek-v4 --max-mean-drift 0 --json
"""

from __future__ import annotations

import argparse
import statistics

from tokenizer_checks.loading import load
from tokenizer_checks.outcome import Outcome
from tokenizer_checks.segments import boundary_diffs, jaccard_drift, special_token_diff
from tokenizer_checks.texts import load_texts
from workload.argtypes import fraction, non_negative_int
from workload.routing.compat import COMPAT_CORPUS

HELP = "Jaccard drift, boundary differences and special-token changes between two tokenizers"
DEFAULT_CORPUS = COMPAT_CORPUS  # the corpus X-Compat-Level is measured on (workload/routing/compat.py)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--old", required=True, metavar="TOK", help="the tokenizer in service now")
    p.add_argument("--new", required=True, metavar="TOK", help="the candidate tokenizer")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS), metavar="FILE",
                   help="texts, one per line or JSONL with 'text' (default: the shipped mixed corpus)")
    p.add_argument("--examples", type=non_negative_int, default=5, metavar="N",
                   help="most-drifted texts to show (default %(default)s)")
    p.add_argument("--max-mean-drift", type=fraction, metavar="X", help="exit 1 when the mean drift is above X")
    p.add_argument("--max-plain-mean-drift", type=fraction, metavar="X",
                   help="exit 1 when the mean drift over plain texts (no special token matched) is above X")
    p.add_argument("--max-drift", type=fraction, metavar="X", help="exit 1 when any text's drift is above X")
    p.add_argument("--min-identical", type=fraction, metavar="X",
                   help="exit 1 when the share of texts with identical ids is below X")


def run(args: argparse.Namespace) -> Outcome:
    texts = load_texts(args.corpus)
    old, new = load(args.old), load(args.new)
    raw = [t.text for t in texts]
    enc_old = old.encode_batch(raw, add_special_tokens=False)
    enc_new = new.encode_batch(raw, add_special_tokens=False)

    old_added = {i for i, _ in old.get_added_tokens_decoder().items()}
    new_added = {i for i, _ in new.get_added_tokens_decoder().items()}
    rows = []
    for t, a, b in zip(texts, enc_old, enc_new, strict=True):
        spans = boundary_diffs(t.text, a.offsets, b.offsets)
        rows.append({
            "special_in_text": bool(old_added.intersection(a.ids) or new_added.intersection(b.ids)),
            "id": t.id,
            "drift": round(jaccard_drift(a.tokens, b.tokens), 6),
            "identical_ids": a.ids == b.ids,
            "old_tokens": len(a.ids),
            "new_tokens": len(b.ids),
            "boundary_diffs": len(spans),
            "spans": [s.to_dict() for s in spans[:5]],
            "text": t.text if len(t.text) <= 200 else t.text[:200] + "…",
        })
    drifts = [r["drift"] for r in rows]
    old_total = sum(r["old_tokens"] for r in rows)
    new_total = sum(r["new_tokens"] for r in rows)
    identical = sum(r["identical_ids"] for r in rows)
    specials = special_token_diff(old, new)
    ranked = sorted(rows, key=lambda r: (-r["drift"], -r["boundary_diffs"], r["id"]))
    examples = [r for r in ranked if not r["identical_ids"]][: max(args.examples, 0)]
    plain = [r for r in rows if not r["special_in_text"]]

    data = {
        "command": "drift",
        "old": args.old,
        "new": args.new,
        "corpus": str(args.corpus),
        "texts": len(rows),
        "identical": identical,
        "identical_share": round(identical / len(rows), 6),
        "mean_drift": round(statistics.fmean(drifts), 6),
        "max_drift": max(drifts),
        "texts_with_boundary_diffs": sum(1 for r in rows if r["boundary_diffs"]),
        "boundary_diffs": sum(r["boundary_diffs"] for r in rows),
        "old_tokens": old_total,
        "new_tokens": new_total,
        "token_ratio": round(new_total / old_total, 6) if old_total else None,
        "examples": examples,
        "special_tokens": specials,
        # texts in which either tokenizer matched one of its added/special tokens; the rest are plain text
        "special_token_texts": [r["id"] for r in rows if r["special_in_text"]],
        "plain": {
            "texts": len(plain),
            "identical": sum(r["identical_ids"] for r in plain),
            "mean_drift": round(statistics.fmean(r["drift"] for r in plain), 6) if plain else 0.0,
            "max_drift": max((r["drift"] for r in plain), default=0.0),
            "boundary_diffs": sum(r["boundary_diffs"] for r in plain),
        },
    }
    out = Outcome(data, _lines(data))
    out.check("mean_drift", data["mean_drift"], args.max_mean_drift)
    out.check("max_drift", data["max_drift"], args.max_drift)
    out.check("plain.mean_drift", data["plain"]["mean_drift"], args.max_plain_mean_drift)
    out.check("identical_share", data["identical_share"], args.min_identical, crossed_when="below")
    return out


def _lines(d: dict) -> list[str]:
    sp, pl = d["special_tokens"], d["plain"]
    lines = [
        f"drift {d['old']} -> {d['new']} over {d['texts']} texts ({d['corpus']})",
        f"  identical ids:      {d['identical']}/{d['texts']} ({d['identical_share']:.1%})",
        f"  Jaccard drift:      mean {d['mean_drift']:.4f}, max {d['max_drift']:.4f}",
        f"  boundary diffs:     {d['boundary_diffs']} spans in {d['texts_with_boundary_diffs']} texts",
        f"  token count:        {d['old_tokens']} -> {d['new_tokens']} (ratio {d['token_ratio']})",
        f"  plain texts:        {pl['identical']}/{pl['texts']} identical, mean drift {pl['mean_drift']:.4f} "
        f"(texts matching a special token: {', '.join(d['special_token_texts'][:8]) or 'none'})",
        f"  special tokens:     +{len(sp['added'])} added, -{len(sp['removed'])} removed, "
        f"{len(sp['changed'])} changed id/flag",
    ]
    for kind, key in (("added", "id"), ("removed", "id")):
        for item in sp[kind][:5]:
            lines.append(f"    {kind}: {item['token']} (id {item[key]})")
        if len(sp[kind]) > 5:
            lines.append(f"    ... {len(sp[kind]) - 5} more {kind}")
    for item in sp["changed"][:5]:
        lines.append(f"    changed: {item['token']} id {item['old_id']} -> {item['new_id']}, "
                     f"special {item['old_special']} -> {item['new_special']}")
    if len(sp["changed"]) > 5:
        lines.append(f"    ... {len(sp['changed']) - 5} more changed")
    if d["examples"]:
        lines.append("  most drifted:")
    for ex in d["examples"]:
        lines.append(f"    [{ex['id']}] drift {ex['drift']:.3f}, {ex['old_tokens']} -> {ex['new_tokens']} tokens: "
                     f"{ex['text'][:60]!r}")
        for s in ex["spans"][:2]:
            lines.append(f"      chars {s['start']}-{s['end']} {s['text']!r}: {s['a']} -> {s['b']}")
    return lines
