"""Registry of the CLI's commands: name -> module with ``HELP``, ``add_arguments(parser)``, ``run(args)``."""

from __future__ import annotations

from types import ModuleType

from tokenizer_checks.commands import consistency, diff, difflog, drift, fallback, fingerprint, padding, profile

COMMANDS: dict[str, ModuleType] = {
    "drift": drift,
    "consistency": consistency,
    "padding": padding,
    "fallback": fallback,
    "difflog": difflog,
    "diff": diff,
    "fingerprint": fingerprint,
    "profile": profile,
}
