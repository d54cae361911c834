"""``python -m tokenizer_checks <command>``: tokenizer-upgrade checks from the seed's chapters 2 and 4.

Commands live in a registry (:data:`tokenizer_checks.commands.COMMANDS`), one module each, with
``add_arguments(parser)`` and ``run(args) -> Outcome``. Exit codes: 0 ok, 1 a threshold given on the
command line was crossed, 2 bad input (one line on stderr, no traceback).

    python -m tokenizer_checks drift --old deepseek-v2 --new deepseek-v3 --json
    python -m tokenizer_checks consistency --tokenizers deepseek-v3,qwen2.5,r1-distill-llama
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tokenizer_checks.commands import COMMANDS
from tokenizer_checks.texts import InputError
from workload.tokenizers import NAMES

EPILOG = (
    f"TOK is a bundled name (one of {', '.join(NAMES)}) or a path to a "
    "tokenizer.json or its folder. Exit codes: 0 ok, 1 a threshold given on the command line was crossed, "
    "2 bad input."
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2) instead of usage + error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m tokenizer_checks",
        description="Guard tokenizer upgrades with real tokenizers (seed chapters 2 and 4).",
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser, required=True)
    for name, module in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=(module.__doc__ or module.HELP).strip(),
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of the text report")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        outcome = COMMANDS[args.command].run(args)
    except (InputError, OSError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"tokenizer_checks {args.command}: error: {msg}", file=sys.stderr)
        return 2
    text = json.dumps(outcome.to_json(), ensure_ascii=False) if args.json else "\n".join(outcome.lines)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # e.g. piped into head: the reader left, the exit code still counts
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1 if outcome.failed else 0
