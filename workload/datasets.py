"""Prompt datasets for ``--prompt-file``: JSONL, one request per line.

Accepted lines: ``{"prompt": "..."}`` (also ``text`` / ``input``), or ShareGPT style
``{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}]}`` (also ``messages``
with ``role`` / ``content``), whose first human/user turn is the prompt.

    prompts = load_prompt_file("data.jsonl")   # list[str], never empty (else ValueError)

Datasets for ``--dataset`` (conversations, replayed turn by turn): ShareGPT (a JSON array or JSONL of
``{"conversations": [{"from": "human"|"gpt"|"system", "value": ...}]}``), OpenAI messages JSONL (``messages`` with
``role``/``content``), vLLM bench's custom JSONL (``{"prompt": ..., "output_tokens": N}``), AIPerf's single-turn
(``text``/``texts``, ``delay`` ms, ``max_tokens``) and multi-turn (``session_id``, ``turns[]`` of those) JSONL.

    ds = load_dataset("chats.json")            # Dataset; ValueError "chats.json:17: why" on a bad record
    ds.format, ds.sha256, ds.dialogs[0].turns  # ("sharegpt", "ab12...", (DialogTurn(text, answer, ...), ...))
    sel = select(ds, seed=0, sample=100, place=0, workers=2, measure=..., input_range=(4, 1024))
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from workload.jsonl import json_lines

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
    for no, obj in json_lines(p, p.read_text(encoding="utf-8").splitlines()):
        text = prompt_of(obj) if isinstance(obj, dict) else None
        if text is None:
            raise ValueError(f'{p}:{no}: expected {{"prompt": ...}} or ShareGPT "conversations" with a human turn')
        if text.strip():
            prompts.append(text)
    if not prompts:
        raise ValueError(f"{p}: no prompts")
    return prompts


# ---------------------------------------------------------------------------------------------------------------
# --dataset: conversations in the formats peers use
# ---------------------------------------------------------------------------------------------------------------

FORMATS = ("sharegpt", "openai", "custom", "aiperf")
"""``--dataset-format`` choices (``auto``: detected from the first record): ShareGPT (``conversations`` with
``from``/``value``; a JSON array or JSONL), OpenAI messages (``messages`` with ``role``/``content``), vLLM bench's
custom JSONL (``prompt``, optional ``output_tokens``), AIPerf's single- and multi-turn JSONL (``text``/``texts``,
or ``session_id`` + ``turns[]``, ``delay`` in milliseconds)."""
AUTO_FORMAT = "auto"
_USER_ROLES = {"human", "user"}
_ASSISTANT_ROLES = {"gpt", "chatgpt", "assistant", "bard", "model", "bot"}
_SYSTEM_ROLES = {"system"}


@dataclass(frozen=True, slots=True)
class DialogTurn:
    """One user turn of a conversation and what the dataset says about its answer."""

    text: str
    """The user message."""
    answer: str | None = None
    """The dataset's assistant answer to it (None: the dataset has none)."""
    output_tokens: int | None = None
    """An explicit output length the record gives (vLLM custom ``output_tokens``, AIPerf ``max_tokens``)."""
    delay_s: float | None = None
    """Seconds to wait before sending this turn (AIPerf ``delay``, milliseconds in the file); None: --think-time."""


@dataclass(frozen=True, slots=True)
class Dialog:
    """One record of a dataset: a conversation of one or more user turns."""

    line: int
    """Its line in the file (1-based; a JSON array's records count from 1 in the array's order)."""
    turns: tuple[DialogTurn, ...]
    system: str = ""
    """The record's system message ("" for none)."""


@dataclass(frozen=True, slots=True)
class Dataset:
    path: str
    format: str
    sha256: str
    dialogs: tuple[Dialog, ...]
    """Every usable record in file order."""
    skipped: dict[str, int]
    """Records left out at reading, by reason (``no_user_turn``)."""

    def record(self) -> dict:
        """What the run record keeps: path, format, record count, sha256."""
        return {"path": self.path, "format": self.format, "records": len(self.dialogs), "sha256": self.sha256}


def _detect(obj: dict) -> str | None:
    if "conversations" in obj:
        return "sharegpt"
    if "messages" in obj:
        return "openai"
    if "turns" in obj or "session_id" in obj or "text" in obj or "texts" in obj:
        return "aiperf"
    if "prompt" in obj:
        return "custom"
    return None


def _opt_count(obj: dict, keys: tuple[str, ...], where: str) -> int | None:
    for key in keys:
        if key in obj and obj[key] is not None:
            v = obj[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{where}: {key} must be an integer >= 1, got {v!r}")
            return v
    return None


def _text(value: object, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key} must be a string, got {type(value).__name__}")
    return value


def _pairs(messages: list, who: str, what: str, where: str) -> tuple[str, list[DialogTurn]]:
    """System text and user turns (each with the assistant message that follows it) of a message list."""
    system, turns = "", []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ValueError(f"{where}: message {i} is not an object")
        role = m.get(who)
        text = _text(m.get(what), f"message {i} {what!r}", where)
        if role in _SYSTEM_ROLES and not turns:
            system = text
        elif role in _USER_ROLES:
            if turns and turns[-1].answer is None:  # two user messages in a row: one turn
                turns[-1] = DialogTurn(turns[-1].text + "\n" + text)
            else:
                turns.append(DialogTurn(text))
        elif role in _ASSISTANT_ROLES:
            if turns and turns[-1].answer is None:
                turns[-1] = DialogTurn(turns[-1].text, answer=text)
            # an assistant message before any user turn (or a second one) is not part of a replayable turn
        elif role not in _SYSTEM_ROLES:
            raise ValueError(f"{where}: message {i} has an unknown {who} {role!r}")
    return system, turns


def _aiperf_turn(t: object, where: str) -> DialogTurn:
    if not isinstance(t, dict):
        raise ValueError(f"{where}: a turn must be an object")
    if "texts" in t:
        texts = t["texts"]
        if not isinstance(texts, list) or not all(isinstance(x, str) for x in texts):
            raise ValueError(f"{where}: texts must be a list of strings")
        text = "\n".join(texts)
    else:
        text = _text(t.get("text"), "text", where)
    delay = t.get("delay")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0):
        raise ValueError(f"{where}: delay must be milliseconds >= 0, got {delay!r}")
    return DialogTurn(text, output_tokens=_opt_count(t, ("max_tokens", "output_length"), where),
                      delay_s=None if delay is None else delay / 1000.0)


def parse_dialog(obj: object, fmt: str, where: str, line: int) -> Dialog:
    """One record in ``fmt``; ValueError naming ``where`` (``file:line``) when it does not fit."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object")
    system = ""
    if fmt == "sharegpt":
        conv = obj.get("conversations")
        if not isinstance(conv, list):
            raise ValueError(f'{where}: expected "conversations": [{{"from": ..., "value": ...}}, ...]')
        system, turns = _pairs(conv, "from", "value", where)
    elif fmt == "openai":
        msgs = obj.get("messages")
        if not isinstance(msgs, list):
            raise ValueError(f'{where}: expected "messages": [{{"role": ..., "content": ...}}, ...]')
        system, turns = _pairs(msgs, "role", "content", where)
    elif fmt == "custom":
        turns = [DialogTurn(_text(obj.get("prompt"), "prompt", where),
                            output_tokens=_opt_count(obj, ("output_tokens",), where))]
    elif fmt == "aiperf":
        if "turns" in obj:
            raw = obj["turns"]
            if not isinstance(raw, list) or not raw:
                raise ValueError(f"{where}: turns must be a non-empty list")
            turns = [_aiperf_turn(t, where) for t in raw]
        else:
            turns = [_aiperf_turn(obj, where)]
    else:
        raise ValueError(f"unknown dataset format {fmt!r}; expected one of {', '.join(FORMATS)}")
    kept = tuple(t for t in turns if t.text.strip())
    return Dialog(line, kept, system)


def _records(p: Path, raw: bytes):
    """``(line, object or JSON error)`` of a JSON array file or a JSONL file."""
    text = raw.decode("utf-8")
    if text.lstrip().startswith("["):
        try:
            array = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}:{e.lineno}: not JSON ({e.msg})") from None
        yield from ((i, obj) for i, obj in enumerate(array, 1))
        return
    yield from json_lines(p, text.splitlines())


def load_dataset(path: str | Path, fmt: str = AUTO_FORMAT) -> Dataset:
    """Every record of a dataset file; ValueError ``file:line: why`` on the first bad record (or an unknown
    format, an empty file). A file read before and unchanged since (size and modification time) is not parsed
    again: the start check, the master and the users' settings all read it."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"no such dataset file {str(p)!r}")
    st = p.stat()
    return _load(str(p), fmt, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4)
def _load(path: str, fmt: str, _size: int, _mtime_ns: int) -> Dataset:
    p = Path(path)
    raw = p.read_bytes()
    try:
        records = list(_records(p, raw))
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not UTF-8 text ({e.reason})") from None
    if fmt == AUTO_FORMAT:
        first = next((obj for _no, obj in records if isinstance(obj, dict)), None)
        fmt = _detect(first) if first is not None else None  # type: ignore[assignment]
        if fmt is None:
            no = records[0][0] if records else 1
            raise ValueError(f"{p}:{no}: cannot tell the dataset format; pass --dataset-format "
                             f"({', '.join(FORMATS)})")
    dialogs, skipped = [], {}
    for no, obj in records:
        d = parse_dialog(obj, fmt, f"{p}:{no}", no)
        if d.turns:
            dialogs.append(d)
        else:
            skipped["no_user_turn"] = skipped.get("no_user_turn", 0) + 1
    if not dialogs:
        raise ValueError(f"{p}: no record with a user turn")
    return Dataset(str(p), fmt, hashlib.sha256(raw).hexdigest(), tuple(dialogs), skipped)


LENGTH_RANGE_FORM = "LO:HI tokens, either side may be empty (e.g. 4:1024, :2048, 16:)"


def parse_length_range(text: str) -> tuple[int, int | None] | None:
    """``LO:HI`` (inclusive; empty LO = 0, empty HI = no bound) -> (lo, hi); "" -> None (no filter)."""
    text = str(text or "").strip()
    if not text:
        return None
    lo_s, sep, hi_s = text.partition(":")
    try:
        lo = int(lo_s) if lo_s.strip() else 0
        hi = int(hi_s) if hi_s.strip() else None
    except ValueError:
        raise ValueError(f"bad length range {text!r}; expected {LENGTH_RANGE_FORM}") from None
    if not sep or lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"bad length range {text!r}; expected {LENGTH_RANGE_FORM}")
    return lo, hi


def _within(n: int | None, rng: tuple[int, int | None] | None) -> bool:
    if rng is None or n is None:
        return True
    return rng[0] <= n and (rng[1] is None or n <= rng[1])


@dataclass(frozen=True, slots=True)
class Selection:
    dialogs: tuple[Dialog, ...]
    """The records this process replays, in replay order."""
    selected: int
    """Records selected over all processes (after filters and sampling)."""
    skipped: dict[str, int]
    """Records left out and why: ``no_user_turn`` (at reading), ``input_len``, ``output_len`` (the filters)."""


def select(ds: Dataset, *, seed: int, sample: int = 0, shuffle: bool = False, place: int = 0, workers: int = 1,
           measure=None, input_range: tuple[int, int | None] | None = None,
           output_range: tuple[int, int | None] | None = None) -> Selection:
    """The records one process replays. Filters first (``measure(dialog) -> (input tokens, output tokens or
    None)`` with the served model's tokenizer), then ``sample`` of them drawn with ``seed`` alone (the same records
    in every process; 0 = all, in file order unless ``shuffle``), then this process's share: every ``workers``-th
    record from ``place`` (disjoint shares; a process whose share would be empty replays them all)."""
    skipped = dict(ds.skipped)
    kept: list[Dialog] = []
    for d in ds.dialogs:
        if measure is not None and (input_range is not None or output_range is not None):
            n_in, n_out = measure(d)
            if not _within(n_in, input_range):
                skipped["input_len"] = skipped.get("input_len", 0) + 1
                continue
            if not _within(n_out, output_range):
                skipped["output_len"] = skipped.get("output_len", 0) + 1
                continue
        kept.append(d)
    if not kept:
        raise ValueError(f"{ds.path}: no record passes the length filters (skipped: {skipped})")
    rng = np.random.default_rng([int(seed), 0xDA7A5E7])
    if sample and sample < len(kept):
        idx = rng.choice(len(kept), size=sample, replace=False)
        kept = [kept[i] for i in (idx if shuffle else sorted(idx))]
    elif shuffle:
        kept = [kept[i] for i in rng.permutation(len(kept))]
    share = kept[place % workers :: workers] if workers > 1 else kept
    return Selection(tuple(share or kept), len(kept), skipped)
