"""Tokenizer loading for the CLI: bundled names or paths, with errors turned into one-line InputErrors."""

from __future__ import annotations

from tokenizers import Tokenizer

from tokenizer_checks.texts import InputError
from workload.tokenizers import load_tokenizer, tokenizer_config


def load(name_or_path: str) -> Tokenizer:
    try:
        return load_tokenizer(name_or_path)
    except ValueError as exc:  # TokenizerNotFound names the accepted forms
        raise InputError(str(exc)) from None
    except Exception as exc:  # the Rust loader raises a plain Exception on a malformed tokenizer.json
        raise InputError(f"cannot load tokenizer {name_or_path!r}: {str(exc).splitlines()[0]}") from None


def config(name_or_path: str) -> dict:
    try:
        return tokenizer_config(name_or_path)
    except ValueError as exc:
        raise InputError(f"bad tokenizer_config.json beside {name_or_path!r}: {exc}") from None


def token_text(value: object) -> str | None:
    """A config's ``bos_token``/``eos_token`` entry (a string or an AddedToken dict) as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None
