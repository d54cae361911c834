"""padding: tokens added by special-token handling and the padding they cause in batches.

Texts are encoded without special tokens by the Rust tokenizer; BOS and the end token are then added
explicitly (so the count does not depend on the transformers major version, which differ on BOS):

* before: the configured behaviour, which is what transformers does with ``add_eos_token=True``: the end
  token is always appended, even when the text already ends with an end token (``<|eot_id|>`` for
  R1-Distill-Llama, ``<｜end▁of▁sentence｜>`` for DeepSeek) — a doubled end token;
* after: the fix — no end token (or BOS) is added when one is already there.

Sequences are cut at ``--max-length`` (the end token kept) and padded per micro-batch of ``--batch-size``
to the longest row (or to ``--max-length`` with ``--pad-to max_length``). The report gives, for both, the
tokens added, the duplicated end tokens, pad tokens and the padding rate (pad / padded slots), and warns
about ``add_eos_token`` + ``padding_side="right"`` when the pad token is itself an end token.

  python -m tokenizer_checks padding --tokenizer r1-distill-llama --max-length 2048 \\
      --batch tokenizer_checks/data/padding_batch_llama3.jsonl --add-eos-token
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from tokenizer_checks.loading import config, load, token_text
from tokenizer_checks.outcome import Outcome
from tokenizer_checks.texts import InputError, load_texts
from workload.argtypes import fraction, non_negative_int, positive_int

HELP = "padding rate and end-token inflation from special-token handling, before and after the fix"
# End-of-turn / end-of-text markers of the bundled families; those present in the vocabulary count as "an end token".
KNOWN_END_TOKENS = ("<|eot_id|>", "<|end_of_text|>", "<｜end▁of▁sentence｜>", "<|im_end|>", "<|endoftext|>", "<|EOT|>")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizer", required=True, metavar="TOK",
                   help="the tokenizer whose special-token handling is checked")
    p.add_argument("--batch", required=True, metavar="FILE", help="texts, one per line or JSONL with 'text'")
    p.add_argument("--max-length", type=positive_int, default=2048, metavar="N",
                   help="truncation length (default %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=8, metavar="N",
                   help="rows per padded micro-batch (default %(default)s)")
    p.add_argument("--pad-to", choices=("longest", "max_length"), default="longest",
                   help="pad each micro-batch to its longest row (default) or to --max-length")
    p.add_argument("--padding-side", choices=("right", "left"), default=None,
                   help="default: the tokenizer_config's padding_side, else right")
    p.add_argument("--add-eos-token", action=argparse.BooleanOptionalAction, default=None,
                   help="append the end token (default: the tokenizer_config's add_eos_token)")
    p.add_argument("--add-bos-token", action=argparse.BooleanOptionalAction, default=None,
                   help="prepend BOS (default: the tokenizer_config's add_bos_token)")
    p.add_argument("--end-token", metavar="TEXT",
                   help="token appended by add_eos_token (default: <|eot_id|> when in the vocabulary, else eos_token)")
    p.add_argument("--max-padding-rate", type=fraction, metavar="X",
                   help="exit 1 when the configured (before) padding rate is above X (0..1)")
    p.add_argument("--max-duplicate-end", type=non_negative_int, metavar="N",
                   help="exit 1 when more than N sequences get a second end token")


@dataclass
class Figures:
    sequences: int = 0
    content_tokens: int = 0
    bos_added: int = 0
    end_added: int = 0
    duplicate_bos: int = 0
    duplicate_end: int = 0
    tokens: int = 0
    truncated: int = 0
    pad_tokens: int = 0
    slots: int = 0
    padding_rate: float = 0.0
    waste_rate: float = 0.0  # (pad tokens + duplicate BOS/end tokens) / padded slots
    mean_length: float = 0.0


@dataclass(frozen=True)
class Setup:
    bos_id: int | None  # None = no BOS added
    end_id: int | None  # None = no end token added
    end_ids: frozenset[int]
    max_length: int
    batch_size: int
    pad_to: str


def _sequence(ids: list[int], s: Setup, fix: bool, fig: Figures) -> list[int]:
    seq = list(ids)
    if s.bos_id is not None:
        has = bool(seq) and seq[0] == s.bos_id
        if not (fix and has):
            fig.duplicate_bos += has
            fig.bos_added += 1
            seq.insert(0, s.bos_id)
    appended = False
    if s.end_id is not None:
        has = bool(seq) and seq[-1] in s.end_ids
        if not (fix and has):
            fig.duplicate_end += has
            fig.end_added += 1
            seq.append(s.end_id)
            appended = True
    if len(seq) > s.max_length:
        fig.truncated += 1
        seq = seq[: s.max_length - 1] + [seq[-1]] if appended else seq[: s.max_length]
    return seq


def build(content: list[list[int]], s: Setup, fix: bool) -> tuple[list[list[int]], Figures]:
    """The sequences as fed to the model (before padding) and their figures."""
    fig = Figures(sequences=len(content), content_tokens=sum(len(c) for c in content))
    seqs = [_sequence(c, s, fix, fig) for c in content]
    lengths = [len(q) for q in seqs]
    for i in range(0, len(lengths), s.batch_size):
        rows = lengths[i : i + s.batch_size]
        width = max(rows) if s.pad_to == "longest" else s.max_length
        fig.pad_tokens += sum(width - n for n in rows)
        fig.slots += width * len(rows)
    fig.tokens = sum(lengths)
    fig.padding_rate = round(fig.pad_tokens / fig.slots, 6) if fig.slots else 0.0
    waste = fig.pad_tokens + fig.duplicate_end + fig.duplicate_bos
    fig.waste_rate = round(waste / fig.slots, 6) if fig.slots else 0.0
    fig.mean_length = round(fig.tokens / len(lengths), 3) if lengths else 0.0
    return seqs, fig


def _id(vocab: dict[str, int], text: str | None, what: str) -> int | None:
    if text is None:
        return None
    if text not in vocab:
        raise InputError(f"{what} {text!r} is not in the tokenizer's vocabulary")
    return vocab[text]


def run(args: argparse.Namespace) -> Outcome:
    tok, cfg = load(args.tokenizer), config(args.tokenizer)
    vocab = tok.get_vocab()
    add_bos = cfg.get("add_bos_token", False) if args.add_bos_token is None else args.add_bos_token
    add_eos = cfg.get("add_eos_token", False) if args.add_eos_token is None else args.add_eos_token
    side = args.padding_side or cfg.get("padding_side") or "right"
    eos_text = token_text(cfg.get("eos_token"))
    end_text = args.end_token or ("<|eot_id|>" if "<|eot_id|>" in vocab else eos_text)
    if add_eos and end_text is None:
        raise InputError("no end token known for this tokenizer: pass --end-token")
    bos_text = token_text(cfg.get("bos_token")) if add_bos else None
    if add_bos and bos_text is None:
        raise InputError("add_bos_token is on but the tokenizer_config names no bos_token")
    end_id = _id(vocab, end_text, "--end-token") if end_text else None
    end_ids = frozenset({vocab[t] for t in (*KNOWN_END_TOKENS, eos_text) if t in vocab} | ({end_id} - {None}))
    pad_text = token_text(cfg.get("pad_token"))
    pad_id = vocab.get(pad_text) if pad_text else None

    setup = Setup(_id(vocab, bos_text, "bos_token"), end_id if add_eos else None, end_ids, args.max_length,
                  args.batch_size, args.pad_to)
    texts = load_texts(args.batch)
    content = [e.ids for e in tok.encode_batch([t.text for t in texts], add_special_tokens=False)]
    ended = sum(1 for c in content if c and c[-1] in end_ids)
    (_, before), (_, after) = build(content, setup, fix=False), build(content, setup, fix=True)

    risks = []
    if add_eos and side == "right" and pad_id is not None and pad_id == end_id:
        risks.append(
            f"add_eos_token with padding_side='right' and pad_token {pad_text!r} = the appended end token "
            f"(id {pad_id}): "
            "the end token runs straight into padding with the same id, so a mask built from pad_token_id hides the "
            f"real end of {before.end_added} sequences ({before.duplicate_end} of them doubled)"
        )
    if before.duplicate_end:
        risks.append(f"{before.duplicate_end} of {before.sequences} texts already end with an end token and get "
                     f"another {end_text!r}")
    data = {
        "command": "padding",
        "tokenizer": args.tokenizer,
        "batch": str(args.batch),
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "pad_to": args.pad_to,
        "padding_side": side,
        "add_bos_token": bool(add_bos),
        "add_eos_token": bool(add_eos),
        "bos_token": bos_text,
        "end_token": end_text if add_eos else None,
        "end_tokens": sorted(t for t in vocab if vocab[t] in end_ids),
        "pad_token": pad_text,
        "texts_ending_with_end_token": ended,
        "before": asdict(before),
        "after": asdict(after),
        "inflation": {
            "tokens": before.tokens - after.tokens,
            "pad_tokens": before.pad_tokens - after.pad_tokens,
            "slots": before.slots - after.slots,
            "padding_rate_pp": round(100 * (before.padding_rate - after.padding_rate), 4),
            "waste_rate_pp": round(100 * (before.waste_rate - after.waste_rate), 4),
            "special_tokens_added": (before.bos_added + before.end_added) - (after.bos_added + after.end_added),
        },
        "risks": risks,
    }
    out = Outcome(data, _lines(data))
    out.check("before.padding_rate", before.padding_rate, args.max_padding_rate)
    out.check("before.duplicate_end", before.duplicate_end, args.max_duplicate_end)
    return out


def _lines(d: dict) -> list[str]:
    b, a, inf = d["before"], d["after"], d["inflation"]
    lines = [
        f"padding {d['tokenizer']} on {b['sequences']} texts ({d['batch']}), max_length {d['max_length']}, "
        f"micro-batches of {d['batch_size']} padded to {d['pad_to']}, padding_side={d['padding_side']}",
        f"  add_bos_token={d['add_bos_token']} ({d['bos_token']}), add_eos_token={d['add_eos_token']} "
        f"({d['end_token']}), pad_token={d['pad_token']}; texts already ending with an end token: "
        f"{d['texts_ending_with_end_token']}",
        f"  {'':24}{'before (as configured)':>24}{'after (fix)':>14}",
    ]
    for key, label in (("content_tokens", "content tokens"), ("bos_added", "BOS added"),
                       ("end_added", "end tokens added"), ("duplicate_end", "duplicate end tokens"),
                       ("duplicate_bos", "duplicate BOS"), ("tokens", "tokens"), ("truncated", "truncated"),
                       ("pad_tokens", "pad tokens"), ("slots", "padded slots"), ("mean_length", "mean length")):
        lines.append(f"  {label:24}{b[key]:>24}{a[key]:>14}")
    lines.append(f"  {'padding rate':24}{b['padding_rate']:>24.2%}{a['padding_rate']:>14.2%}")
    lines.append(f"  {'waste (pad + duplicates)':24}{b['waste_rate']:>24.2%}{a['waste_rate']:>14.2%}")
    share = inf["tokens"] / a["tokens"] if a["tokens"] else 0.0
    lines.append(f"  inflation removed by the fix: {inf['tokens']} tokens ({share:.2%} of the fixed total), "
                 f"{inf['slots']} padded slots, waste {inf['waste_rate_pp']:+.2f} pp")
    lines += [f"  RISK: {r}" for r in d["risks"]]
    return lines
