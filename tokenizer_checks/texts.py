"""Read the texts the checks run on: plain text (one text per line) or JSONL (``{"id", "text", ...}`` per line).

    >>> texts = load_texts("workload/data/drift_corpus.txt")   # Text(id="L1", text=..., meta={})
    >>> texts = load_texts(shipped("multilingual_cases.jsonl"))

Plain lines get ids ``L<line number>``; blank lines and lines starting with ``#`` are skipped. In a plain file a
literal ``\\n`` stands for a newline inside a text. A ``.jsonl`` file (or a file whose first text line starts
with ``{``) is read as JSONL; ``id`` defaults to ``L<line>``, other keys go to ``meta``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workload.jsonl import json_lines

DATA_DIR = Path(__file__).resolve().parent / "data"


class InputError(ValueError):
    """Bad input file or argument; the CLI prints it as one line and exits 2."""


@dataclass(frozen=True)
class Text:
    id: str
    text: str
    meta: dict = field(default_factory=dict)


def shipped(name: str) -> Path:
    """Path of a data file shipped in ``tokenizer_checks/data``."""
    return DATA_DIR / name


def load_texts(path: str | Path) -> list[Text]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"no such file: {p}")
    try:
        raw = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = raw.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")), "")
    texts = _jsonl(p, lines) if p.suffix == ".jsonl" or first.startswith("{") else _plain(lines)
    if not texts:
        raise InputError(f"{p} holds no texts")
    ids = [t.id for t in texts]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InputError(f"{p}: id {dup!r} appears more than once")
    return texts


def _plain(lines: list[str]) -> list[Text]:
    return [
        Text(f"L{n}", line.replace("\\n", "\n"))
        for n, line in enumerate(lines, 1)
        if line.strip() and not line.startswith("#")
    ]


def _jsonl(path: Path, lines: list[str]) -> list[Text]:
    out: list[Text] = []
    for n, obj in json_lines(path, lines, comments=True, error=InputError):
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise InputError(f'{path}:{n}: expected an object with a string "text"')
        meta = {k: v for k, v in obj.items() if k not in ("id", "text")}
        out.append(Text(str(obj.get("id", f"L{n}")), obj["text"], meta))
    return out


def parse_names(text: str, least: int = 2) -> list[str]:
    """``"a,b,c"`` -> ``["a", "b", "c"]``; at least ``least`` distinct names."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if len(names) < least:
        raise InputError(f"need at least {least} distinct tokenizers, comma-separated (got {text!r})")
    return names
