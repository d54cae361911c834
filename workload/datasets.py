"""Prompt datasets for ``--prompt-file``: JSONL, one request per line.

Accepted lines: ``{"prompt": "..."}`` (also ``text`` / ``input``), or ShareGPT style
``{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}]}`` (also ``messages``
with ``role`` / ``content``), whose first human/user turn is the prompt.

    prompts = load_prompt_file("data.jsonl")   # list[str], never empty (else ValueError)
"""

from __future__ import annotations

import json
from pathlib import Path

_TEXT_KEYS = ("prompt", "text", "input")
_HUMAN = {"human", "user"}


def prompt_of(obj: dict) -> str | None:
    """The prompt text of one dataset record, or None when the record has none."""
    for key in _TEXT_KEYS:
        if isinstance(obj.get(key), str):
            return obj[key]
    turns = obj.get("conversations") or obj.get("messages")
    if isinstance(turns, list):
        for turn in turns:
            if not isinstance(turn, dict):
                continue
            who = turn.get("from", turn.get("role"))
            text = turn.get("value", turn.get("content"))
            if who in _HUMAN and isinstance(text, str):
                return text
    return None


def load_prompt_file(path: str | Path) -> list[str]:
    """All prompts of a JSONL file; raise ValueError with the line number on a bad line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"no such prompt file {str(p)!r}")
    prompts: list[str] = []
    for no, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}:{no}: not JSON ({e.msg})") from None
        text = prompt_of(obj) if isinstance(obj, dict) else None
        if text is None:
            raise ValueError(f'{p}:{no}: expected {{"prompt": ...}} or ShareGPT "conversations" with a human turn')
        if text.strip():
            prompts.append(text)
    if not prompts:
        raise ValueError(f"{p}: no prompts")
    return prompts
