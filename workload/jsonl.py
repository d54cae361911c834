"""JSON Lines input: each non-blank line one JSON value, a line that is not JSON refused as ``file:line: not JSON``.

The prompt files, datasets and request traces (``workload/``) and the tokenizer CLI's logs and text files read
their lines through here, so a bad line reads the same everywhere:

    for no, obj in json_lines(path, path.read_text(encoding="utf-8").splitlines()):
        ...   # raise ValueError(f"{path}:{no}: why") for a record that is JSON but not what the reader wants
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def json_lines(path: Path | str, lines: Iterable[str], *, comments: bool = False, error: type[ValueError] = ValueError,
               hint: str = "") -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of ``lines`` (the text of ``path``; with ``comments`` lines
    starting with ``#`` are skipped too); ``error`` ``"<path>:<line>: not JSON (<why>)[; <hint>]"`` at the first
    line that does not parse."""
    for no, line in enumerate(lines, 1):
        if not line.strip() or (comments and line.startswith("#")):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{no}: not JSON ({e.msg})" + (f"; {hint}" if hint else "")) from None
        yield no, value
