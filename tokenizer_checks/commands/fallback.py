"""fallback: when the primary tokenizer is rolled back to a fallback, does every input still end inside the
context window?

For each input: its token count under both tokenizers, which of them overflow the window
(``--max-tokens`` minus ``--reserve`` for BOS/template/generation), and what the fallback path does.
``--trigger primary`` is the classic logic (only an input that overflows the *primary* count is cut, then
re-encoded with the fallback); ``fallback`` or ``either`` also cut inputs that only the fallback sees as
too long. ``--strategy`` says how the cut is made:

* ``chars``: the classic pre-cut ``text[:N]`` (``--cut-chars``, default 2048), then re-encode;
* ``tokens``: encode with the fallback, keep the first window tokens and cut the text at that token's end
  offset (fills the window exactly);
* ``none``: no cut (shows the raw overflow).

The verdict is PASS only when every input ends inside the window as the fallback tokenizer counts it
(the one serving after the rollback); the count under the primary is reported beside it. Exit code 1
on FAIL: the window given on the command line is the threshold.

  python -m tokenizer_checks fallback --primary deepseek-v3 --fallback deepseek-v2 --max-tokens 4096 \\
      --corpus tokenizer_checks/data/long_inputs.jsonl --strategy tokens --trigger either
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

from tokenizers import Tokenizer

from tokenizer_checks.loading import load
from tokenizer_checks.outcome import Outcome
from tokenizer_checks.texts import InputError, load_texts, shipped
from workload.argtypes import non_negative_int, positive_int

HELP = "which inputs overflow the window under each tokenizer, how the fallback truncates, and a verdict"
DEFAULT_CORPUS = shipped("long_inputs.jsonl")


def _count(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def _cut_chars(text: str, fallback: Tokenizer, window: int, args: argparse.Namespace) -> str:
    return text[: args.cut_chars]


def _cut_tokens(text: str, fallback: Tokenizer, window: int, args: argparse.Namespace) -> str:
    enc = fallback.encode(text, add_special_tokens=False)
    if len(enc.ids) <= window:
        return text
    # cut before the first token that no longer fits (a character split over two tokens goes whole); the cut
    # text is re-encoded, and BPE at the new edge may merge differently, so step back until it fits
    keep = window
    while keep > 0:
        cut = text[: enc.offsets[keep][0]]
        if _count(fallback, cut) <= window:
            return cut
        keep -= 1
    return ""


def _cut_none(text: str, fallback: Tokenizer, window: int, args: argparse.Namespace) -> str:
    return text


STRATEGIES: dict[str, Callable[[str, Tokenizer, int, argparse.Namespace], str]] = {
    "chars": _cut_chars,
    "tokens": _cut_tokens,
    "none": _cut_none,
}
TRIGGERS: dict[str, Callable[[bool, bool], bool]] = {
    "primary": lambda over_primary, over_fallback: over_primary,
    "fallback": lambda over_primary, over_fallback: over_fallback,
    "either": lambda over_primary, over_fallback: over_primary or over_fallback,
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--primary", required=True, metavar="TOK", help="the tokenizer in service before the rollback")
    p.add_argument("--fallback", required=True, metavar="TOK", help="the tokenizer rolled back to")
    p.add_argument("--max-tokens", required=True, type=positive_int, metavar="N", help="context window in tokens")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS), metavar="FILE",
                   help="inputs, one per line or JSONL with 'text' (default: the shipped long inputs)")
    p.add_argument("--reserve", type=non_negative_int, default=0, metavar="N",
                   help="tokens kept free for BOS/chat template/generation (default %(default)s)")
    p.add_argument("--strategy", choices=sorted(STRATEGIES), default="chars",
                   help="how the fallback cuts (default chars, text[:2048])")
    p.add_argument("--trigger", choices=sorted(TRIGGERS), default="primary",
                   help="which count decides that an input is cut (default primary: what overflows the primary)")
    p.add_argument("--cut-chars", type=positive_int, default=2048, metavar="N", help="chars kept by --strategy chars")


def run(args: argparse.Namespace) -> Outcome:
    primary, fallback = load(args.primary), load(args.fallback)
    window = args.max_tokens - args.reserve
    if window <= 0:
        raise InputError(f"--reserve {args.reserve} leaves no room in --max-tokens {args.max_tokens}")
    texts = load_texts(args.corpus)
    raw = [t.text for t in texts]
    p_counts = [len(e.ids) for e in primary.encode_batch(raw, add_special_tokens=False)]
    f_counts = [len(e.ids) for e in fallback.encode_batch(raw, add_special_tokens=False)]
    cut, trigger = STRATEGIES[args.strategy], TRIGGERS[args.trigger]
    rows = []
    for t, pc, fc in zip(texts, p_counts, f_counts, strict=True):
        over_p, over_f = pc > window, fc > window
        truncated = trigger(over_p, over_f)
        final = cut(t.text, fallback, window, args) if truncated else t.text
        fp, ff = (_count(primary, final), _count(fallback, final)) if final != t.text else (pc, fc)
        rows.append({
            "id": t.id,
            "chars": len(t.text),
            "primary_tokens": pc,
            "fallback_tokens": fc,
            "overflow_primary": over_p,
            "overflow_fallback": over_f,
            "truncated": truncated,
            "kept_chars": len(final),
            "final_primary_tokens": fp,
            "final_fallback_tokens": ff,
            "inside_window": ff <= window,
            "inside_window_primary": fp <= window,
            "window_used": round(ff / window, 4),
        })
    outside = [r["id"] for r in rows if not r["inside_window"]]
    unchecked = [r["id"] for r in rows if r["overflow_fallback"] and not r["overflow_primary"]]
    cut_rows = [r for r in rows if r["truncated"]]
    verdict = (
        f"PASS: all {len(rows)} inputs end inside {window} tokens under {args.fallback}"
        if not outside
        else f"FAIL: {len(outside)} of {len(rows)} inputs end outside {window} tokens under {args.fallback}: "
        + ", ".join(outside)
    )
    data = {
        "command": "fallback",
        "primary": args.primary,
        "fallback": args.fallback,
        "max_tokens": args.max_tokens,
        "reserve": args.reserve,
        "window": window,
        "strategy": args.strategy,
        "trigger": args.trigger,
        "inputs": len(rows),
        "overflow_primary": sum(r["overflow_primary"] for r in rows),
        "overflow_fallback": sum(r["overflow_fallback"] for r in rows),
        "fits_primary_overflows_fallback": unchecked,
        "truncated": len(cut_rows),
        "truncated_window_used_mean": (
            round(statistics.fmean(r["window_used"] for r in cut_rows), 4) if cut_rows else None
        ),
        "inside_window": len(rows) - len(outside),
        "inside_window_primary": sum(r["inside_window_primary"] for r in rows),
        "outside": outside,
        "all_inside": not outside,
        "verdict": verdict,
        "results": rows,
    }
    out = Outcome(data, _lines(data))
    out.checks.append({"name": "inputs_outside_window", "limit": 0, "value": len(outside), "crossed": bool(outside)})
    return out


def _lines(d: dict) -> list[str]:
    lines = [
        f"fallback {d['primary']} -> {d['fallback']}, window {d['window']} tokens "
        f"(max {d['max_tokens']} - reserve {d['reserve']}), strategy {d['strategy']}, trigger {d['trigger']}",
        f"  inputs {d['inputs']}: overflow under {d['primary']} {d['overflow_primary']}, "
        f"under {d['fallback']} {d['overflow_fallback']}; truncated {d['truncated']}",
    ]
    if d["fits_primary_overflows_fallback"]:
        ids = ", ".join(d["fits_primary_overflows_fallback"])
        lines.append(f"  fit {d['primary']} but overflow {d['fallback']}: {ids}")
    if d["truncated_window_used_mean"] is not None:
        lines.append(f"  truncated inputs use {d['truncated_window_used_mean']:.1%} of the window on average")
    head = f"  {'id':<14}{'chars':>7}{'primary':>9}{'fallback':>9}  {'action':<10}{'kept':>7}{'final':>7}  inside"
    lines.append(head)
    for r in d["results"]:
        action = "cut" if r["truncated"] else "as is"
        lines.append(f"  {r['id']:<14}{r['chars']:>7}{r['primary_tokens']:>9}{r['fallback_tokens']:>9}  {action:<10}"
                     f"{r['kept_chars']:>7}{r['final_fallback_tokens']:>7}  {'yes' if r['inside_window'] else 'NO'}")
    lines.append(d["verdict"])
    return lines
