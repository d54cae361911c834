"""profile: what encoding costs with each tokenizer, side by side — is the new one slower? (article 3.1)

The first tokenizer of --tokenizers is the baseline ("old"); each other one is compared with it. Cells:
the shipped multilingual cases grouped by language (their 'category'), and synthetic prompts of exact
lengths (64 ... 32768 tokens; built with the baseline's tokenizer by workload.prompts, so the other
tokenizers encode the very same text and their own token counts are shown). Each cell is timed twice:
single (one encode per text) and batch (one encode_batch over --batch texts: a language's cases cycled,
or distinct prompts, at most --batch-tokens tokens per call). Texts are encoded without special tokens.

Timing: time.perf_counter_ns over repeated passes after a warm-up (the token count), --repeats rounds of at least
--seconds/--repeats each per tokenizer, interleaved between the tokenizers (order flipped every round);
the figure is the median round. Cost is given as µs per call, µs per token and tokens/s (each tokenizer's
own token count), from the wall clock; the process's CPU time (time.process_time_ns) is reported beside it.
The ratio of a cell is new/old time for the same texts (wall clock, or CPU time with --clock cpu: steadier
when other processes share the cores); the overall ratio is the median of the cell ratios (single and batch,
languages and lengths); --max-slowdown X exits 1 when a tokenizer's overall ratio is above X.
TOKENIZERS_PARALLELISM is "false" unless set (workload.tokenizers): batch encode then runs on one thread.

Allocation: after timing, each call once more under tracemalloc: bytes left allocated by the call's result
and the peak during it. tracemalloc sees the Python side only: the Rust tokenizers library's own heap is
invisible to it (the report says so); the process's max RSS is given as the only figure that includes it.

--flamegraph OUT.svg samples this run with py-spy (py-spy record --pid <own pid>). Where the kernel does not
allow it (ptrace denied, common in containers) one line on stderr says the graph was not recorded and
py-spy's error; the profile is still printed and the exit code does not depend on the graph.

  python -m tokenizer_checks profile --tokenizers deepseek-v2,deepseek-v3
  python -m tokenizer_checks profile --tokenizers deepseek-v3,deepseek-v4 --max-slowdown 1.2 --json
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tracemalloc
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial

import numpy as np
from tokenizers import Tokenizer

from tokenizer_checks.flamegraph import FlameGraph
from tokenizer_checks.loading import load
from tokenizer_checks.outcome import Outcome
from tokenizer_checks.texts import InputError, load_texts, parse_names, shipped
from tokenizer_checks.timing import TRACEMALLOC_NOTE, Timing, allocation, time_passes
from workload.argtypes import positive_int, positive_number, reject, seconds
from workload.prompts import SyntheticPrompts

HELP = "encode cost per tokenizer (µs/token, tokens/s, allocation) by language and length, and the slowdown ratio"
DEFAULT_CASES = shipped("multilingual_cases.jsonl")
DEFAULT_LENGTHS = (64, 256, 1024, 4096, 16384, 32768)
RATIO_METHOD = "median over cells of new/old {clock} time per pass on the same texts"
SEED = 0


def _lengths(text: str) -> list[int]:
    form = "comma-separated token counts such as 64,1024,32768 (or 'none')"
    if text.strip().lower() == "none":
        return []
    try:
        values = [positive_int(item) for item in text.split(",") if item.strip()]
    except argparse.ArgumentTypeError:
        raise reject(form, text) from None
    if not values:
        raise reject(form, text)
    return sorted(set(values))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizers", required=True, metavar="OLD,NEW,...",
                   help="two or more TOKs, comma-separated; the first is the baseline")
    p.add_argument("--cases", default=str(DEFAULT_CASES), metavar="FILE",
                   help="texts grouped by their 'category' as languages (default: the shipped multilingual cases)")
    p.add_argument("--lengths", type=_lengths, default=list(DEFAULT_LENGTHS), metavar="N,N,...",
                   help="synthetic prompt lengths in tokens, or 'none' (default "
                   f"{','.join(map(str, DEFAULT_LENGTHS))})")
    p.add_argument("--seconds", type=seconds, default=0.05, metavar="S",
                   help="least time per cell and tokenizer (default 0.05; smaller is faster and noisier)")
    p.add_argument("--repeats", type=positive_int, default=5, metavar="N",
                   help="timed rounds per cell, the median reported (default 5)")
    p.add_argument("--batch", type=positive_int, default=16, metavar="N", help="texts per encode_batch (default 16)")
    p.add_argument("--batch-tokens", type=positive_int, default=8192, metavar="N",
                   help="at most this many tokens per synthetic encode_batch, at least one text (default 8192)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="what the ratios compare: wall time (perf_counter_ns, default) or the process's CPU time "
                   "(process_time_ns: steadier on a busy machine); both are reported")
    p.add_argument("--max-slowdown", type=positive_number, metavar="X",
                   help="exit 1 when a tokenizer's overall new/old ratio is above X (e.g. 1.2)")
    p.add_argument("--flamegraph", metavar="OUT.svg",
                   help="also record a py-spy flame graph of the run (says so when the kernel forbids it)")


@dataclass
class Cell:
    group: str  # "language" or "length"
    key: str | int
    mode: str  # "single" or "batch"
    texts: list[str]

    def calls(self, tok: Tokenizer) -> list[Callable[[], object]]:
        if self.mode == "batch":
            return [partial(tok.encode_batch, self.texts, add_special_tokens=False)]
        return [partial(tok.encode, t, add_special_tokens=False) for t in self.texts]


def _pass(calls: list[Callable[[], object]]) -> Callable[[], None]:
    def run() -> None:
        for call in calls:
            call()

    return run


class _Counts:
    """Token counts per tokenizer and text, each distinct text encoded once (this warms the tokenizer's caches)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], int] = {}

    def __call__(self, name: str, tok: Tokenizer, texts: list[str]) -> int:
        new = [t for t in dict.fromkeys(texts) if (name, t) not in self.seen]
        for t, e in zip(new, tok.encode_batch(new, add_special_tokens=False), strict=True):
            self.seen[name, t] = len(e.ids)
        return sum(self.seen[name, t] for t in texts)


def _cells(args: argparse.Namespace, baseline: Tokenizer) -> list[Cell]:
    by_language: dict[str, list[str]] = {}
    for t in load_texts(args.cases):
        by_language.setdefault(str(t.meta.get("category") or "-"), []).append(t.text)
    cells = []
    for language, texts in by_language.items():
        cycled = [texts[i % len(texts)] for i in range(max(args.batch, len(texts)))]
        cells += [Cell("language", language, "single", texts), Cell("language", language, "batch", cycled)]
    if args.lengths:
        try:
            prompts = SyntheticPrompts(baseline, chat=False, verify_every=0)
        except ValueError as exc:
            raise InputError(f"cannot build synthetic prompts with {args.tokenizers.split(',')[0]!r}: {exc}") from None
        rng = np.random.default_rng(SEED)
        for n in args.lengths:
            count = min(args.batch, max(1, args.batch_tokens // n))
            texts = [prompts.build(rng, n).text for _ in range(count)]
            cells += [Cell("length", n, "single", texts[:1]), Cell("length", n, "batch", texts)]
    return cells


def _figures(t: Timing, texts: int, calls: int, tokens: int) -> dict:
    return {
        "texts": texts,
        "calls": calls,
        "tokens": tokens,
        "us_per_call": round(t.ns / calls / 1e3, 3),
        "us_per_token": round(t.ns / tokens / 1e3, 4) if tokens else None,
        "tokens_per_s": round(tokens / (t.ns / 1e9)) if t.ns else None,
        "cpu_us_per_call": round(t.cpu_ns / calls / 1e3, 3),
        "cpu_us_per_token": round(t.cpu_ns / tokens / 1e3, 4) if tokens else None,
        "rounds": len(t.rounds),
        "passes": t.passes,
        "spread": round((max(t.rounds) - min(t.rounds)) / t.ns, 4) if t.ns else 0.0,
    }


def _ratio(new: Timing, old: Timing, clock: str) -> float | None:
    a, b = (new.ns, old.ns) if clock == "wall" else (new.cpu_ns, old.cpu_ns)
    return round(a / b, 4) if b > 0 else None


def _measure(cells: list[Cell], toks: dict[str, Tokenizer], args: argparse.Namespace) -> list[dict]:
    rows, count = [], _Counts()
    for cell in cells:
        calls = {name: cell.calls(tok) for name, tok in toks.items()}
        tokens = {name: count(name, tok, cell.texts) for name, tok in toks.items()}  # also the warm-up
        timings = time_passes({name: _pass(c) for name, c in calls.items()}, args.seconds, args.repeats,
                              warm_up=False)
        row = {"group": cell.group, "key": cell.key, "mode": cell.mode, "tokenizers": {}}
        for name in toks:
            row["tokenizers"][name] = _figures(timings[name], len(cell.texts), len(calls[name]), tokens[name])
        base = timings[next(iter(toks))]
        for clock in ("wall", "cpu"):
            row[f"{clock}_ratio"] = {name: _ratio(timings[name], base, clock) for name in list(toks)[1:]}
        row["ratio"] = row[f"{args.clock}_ratio"]
        rows.append(row)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for cell, row in zip(cells, rows, strict=True):
            for name, tok in toks.items():
                seen = [allocation(call) for call in cell.calls(tok)]
                row["tokenizers"][name]["alloc_bytes_per_call"] = round(statistics.fmean(s[0] for s in seen))
                row["tokenizers"][name]["alloc_peak_bytes"] = max(s[1] for s in seen)
    finally:
        if started:
            tracemalloc.stop()
    return rows


def _nest(rows: list[dict], group: str, label: str) -> list[dict]:
    out: dict[object, dict] = {}
    for r in rows:
        if r["group"] == group:
            entry = out.setdefault(r["key"], {label: r["key"]})
            entry[r["mode"]] = r["tokenizers"]
            for key in ("ratio", "wall_ratio", "cpu_ratio"):
                entry.setdefault(key, {})[r["mode"]] = r[key]
    return list(out.values())


def _ratios(rows: list[dict], names: list[str]) -> dict:
    summary = {}
    for name in names[1:]:
        def med(keep: Callable[[dict], bool], key: str = "ratio", name: str = name) -> float | None:
            values = [r[key][name] for r in rows if keep(r) and r[key][name] is not None]
            return round(statistics.median(values), 4) if values else None

        worst = max(rows, key=lambda r, name=name: r["ratio"][name] or 0.0)
        summary[name] = {
            "overall": med(lambda r: True),
            "overall_wall": med(lambda r: True, "wall_ratio"),
            "overall_cpu": med(lambda r: True, "cpu_ratio"),
            "languages": med(lambda r: r["group"] == "language"),
            "lengths": med(lambda r: r["group"] == "length"),
            "single": med(lambda r: r["mode"] == "single"),
            "batch": med(lambda r: r["mode"] == "batch"),
            "max": worst["ratio"][name],
            "max_cell": f"{worst['group']} {worst['key']} {worst['mode']}",
            "cells": len(rows),
        }
    return summary


def run(args: argparse.Namespace) -> Outcome:
    names = parse_names(args.tokenizers)
    toks = {name: load(name) for name in names}
    cells = _cells(args, toks[names[0]])
    recorder = FlameGraph(args.flamegraph) if args.flamegraph else None
    with recorder if recorder is not None else nullcontext():
        rows = _measure(cells, toks, args)
    if recorder is not None and not recorder.recorded:
        print(f"tokenizer_checks profile: {recorder.line()}", file=sys.stderr, flush=True)
    data = {
        "command": "profile",
        "tokenizers": names,
        "baseline": names[0],
        "cases": str(args.cases),
        "lengths": list(args.lengths),
        "settings": {
            "seconds_per_cell": args.seconds, "repeats": args.repeats, "batch": args.batch,
            "batch_tokens": args.batch_tokens, "statistic": "median of rounds", "clock": args.clock,
            "timers": {"wall": "time.perf_counter_ns", "cpu": "time.process_time_ns"},
            "add_special_tokens": False, "seed": SEED,
            "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM"), "cpus": os.cpu_count(),
        },
        "by_language": _nest(rows, "language", "language"),
        "by_length": _nest(rows, "length", "length"),
        "ratio": {"clock": args.clock, "method": RATIO_METHOD.format(clock=args.clock),
                  "by_tokenizer": _ratios(rows, names)},
        "memory": {
            "tool": "tracemalloc",
            "alloc_bytes_per_call": "bytes the call's result keeps allocated (Python side), mean over the calls",
            "alloc_peak_bytes": "peak Python-side allocation during one call, above its start",
            "note": TRACEMALLOC_NOTE,
            "process_max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        },
        "flamegraph": recorder.to_json() if recorder is not None else None,
    }
    out = Outcome(data, _lines(data))
    for name, r in data["ratio"]["by_tokenizer"].items():
        out.check(f"slowdown {name}/{names[0]}", r["overall"], args.max_slowdown)
    return out


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def _table(entries: list[dict], label: str, names: list[str], clock: str) -> list[str]:
    """One row per entry and mode: each tokenizer's µs/token and tokens/s (wall clock), then the ratios."""
    width = max(20, *(len(n) + 2 for n in names))
    rwidth = max(12, *(len(n) + 8 for n in names[1:]))
    head = f"    {label:<11}{'mode':<7}" + "".join(f"{n:>{width}}" for n in names)
    head += "".join(f"{'ratio ' + n:>{rwidth}}" for n in names[1:])
    sub = f"    {'':<18}" + "".join(f"{'µs/token':>9} {'tok/s':>7}".rjust(width) for _ in names)
    sub += "".join(f"{'(' + clock + ')':>{rwidth}}" for _ in names[1:])
    lines = [head, sub]
    for e in entries:
        for mode in ("single", "batch"):
            line = f"    {str(e[label]):<11}{mode:<7}"
            for n in names:
                f = e[mode][n]
                rate = "-" if f["tokens_per_s"] is None else f"{f['tokens_per_s'] / 1e3:.0f}k"
                line += f"{_num(f['us_per_token']):>9} {rate:>7}".rjust(width)
            line += "".join(f"{_num(e['ratio'][mode][n]):>{rwidth}}" for n in names[1:])
            lines.append(line)
    return lines


def _lines(d: dict) -> list[str]:
    names, s, ratio = d["tokenizers"], d["settings"], d["ratio"]
    lines = [
        f"profile {', '.join(names)} (baseline {d['baseline']}): encode cost over {len(d['by_language'])} "
        f"languages ({d['cases']}) and {len(d['by_length'])} synthetic lengths",
        f"  timing: median of {s['repeats']} rounds, >= {s['seconds_per_cell']:g} s per cell and tokenizer; "
        f"batch = encode_batch of {s['batch']} texts (<= {s['batch_tokens']} tokens for lengths); "
        f"TOKENIZERS_PARALLELISM={s['tokenizers_parallelism']}",
    ]
    for name, r in ratio["by_tokenizer"].items():
        lines.append(
            f"  ratio {name}/{d['baseline']}: {_num(r['overall'])} ({ratio['method']}; "
            f"wall {_num(r['overall_wall'])}, cpu {_num(r['overall_cpu'])}; languages {_num(r['languages'])}, "
            f"lengths {_num(r['lengths'])}, single {_num(r['single'])}, batch {_num(r['batch'])}; "
            f"max {_num(r['max'])} at {r['max_cell']})"
        )
    if d["by_language"]:
        lines += ["  by language:", *_table(d["by_language"], "language", names, ratio["clock"])]
    if d["by_length"]:
        lines += ["  by length (tokens):", *_table(d["by_length"], "length", names, ratio["clock"])]
    lines.append("  allocation seen by tracemalloc, per call (kept by the result / peak during the call):")
    for n in names:
        cells = [e[m][n] for group in ("by_language", "by_length") for e in d[group] for m in ("single", "batch")]
        kept = max(c["alloc_bytes_per_call"] for c in cells)
        peak = max(c["alloc_peak_bytes"] for c in cells)
        lines.append(f"    {n}: at most {kept} B kept, {peak} B peak")
    lines.append(f"  note: {d['memory']['note']}; process max RSS {d['memory']['process_max_rss_kib'] / 1024:.0f} MiB "
                 "(the whole process, Rust heap included)")
    if d["flamegraph"] is not None:
        fg = d["flamegraph"]
        lines.append(f"  flame graph written to {fg['path']} (py-spy)" if fg["recorded"]
                     else f"  flame graph NOT recorded ({fg['path']}): {fg['error']}")
    return lines
