"""The project's argparse ``type=`` callables: every command line (Locust options, the simulator, the scripted
server, tokenizer_checks, scripts, benchmarks) takes its numbers, ports, URLs and length SPECs from here.

Each one returns the parsed value or raises ``argparse.ArgumentTypeError("expected <form>, got '<text>'")``,
so a bad value is one line naming the accepted form (argparse adds the option's name in front):

    parser.add_argument("--batch-size", type=positive_int, default=8)
    parser.add_argument("--stage-duration", type=as_text(seconds), default="60")   # validated, kept a string
    parser.add_argument("--spike-factor", type=number(above=1.0, form="a factor > 1 such as 2 or 2.5"))

Grammars of one domain (the route table, the sweep lists, the simulator's fault kinds) stay next to
their grammar and build on these.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from workload.lengths import parse_spec

T = TypeVar("T")

SECONDS_MAX = 1e7
"""Longest accepted duration (about 115 days): larger values overflow timers (gevent, asyncio)."""


def reject(form: str, text: object) -> argparse.ArgumentTypeError:
    """The one error shape: ``expected <form>, got '<text>'``."""
    return argparse.ArgumentTypeError(f"expected {form}, got {text!r}")


def _int(text: str) -> int | None:
    try:
        return int(str(text).strip())
    except ValueError:
        return None


def _float(text: str) -> float | None:
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _named(name: str, doc: str, check: Callable[[str], T]) -> Callable[[str], T]:
    check.__name__ = check.__qualname__ = name  # argparse names the type in some messages
    check.__doc__ = doc
    return check


def integer(*, least: int, at_most: int | None = None, form: str) -> Callable[[str], int]:
    """A type for whole numbers ``least <= value <= at_most``, rejecting with ``form``."""

    def check(text: str) -> int:
        value = _int(text)
        if value is None or value < least or (at_most is not None and value > at_most):
            raise reject(form, text)
        return value

    return check


def number(*, above: float | None = None, least: float | None = None, at_most: float | None = None,
           form: str) -> Callable[[str], float]:
    """A type for finite numbers with ``value > above``, ``value >= least`` and ``value <= at_most`` (each if given)."""

    def check(text: str) -> float:
        value = _float(text)
        if (
            value is None
            or (above is not None and not value > above)
            or (least is not None and not value >= least)
            or (at_most is not None and not value <= at_most)
        ):
            raise reject(form, text)
        return value

    return check


positive_int = _named("positive_int", "A count: 1, 2, 3, ...",
                      integer(least=1, form="a positive integer (a whole number >= 1)"))
non_negative_int = _named("non_negative_int", "A count that may be zero: 0, 1, 2, ...",
                          integer(least=0, form="an integer >= 0"))
seed = _named("seed", "A random seed (each worker adds its index).", integer(least=0, form="a seed: an integer >= 0"))
port = _named("port", "A TCP port (what 0 means is the option's: off, or pick a free one).",
              integer(least=0, at_most=65535, form="a TCP port number 0..65535"))
positive_number = _named("positive_number", "A finite number > 0 (a rate, a scale).",
                         number(above=0.0, form="a number > 0"))
seconds = _named("seconds", "A duration in seconds, > 0.",
                 number(above=0.0, at_most=SECONDS_MAX, form="a number of seconds > 0 such as 30 or 2.5"))
non_negative_seconds = _named("non_negative_seconds", "A duration in seconds that may be zero (none).",
                              number(least=0.0, at_most=SECONDS_MAX, form="a number of seconds >= 0 such as 0 or 10"))
milliseconds = _named("milliseconds", "A duration in milliseconds, > 0 (SLO thresholds).",
                      number(above=0.0, form="a number of milliseconds > 0 such as 800"))
fraction = _named("fraction", "A number in [0, 1]: a probability, a ratio, a share.",
                  number(least=0.0, at_most=1.0,
                         form="a fraction between 0 and 1 (a probability or ratio) such as 0.05"))


def url_or_off(text: str) -> str:
    """An ``http://`` or ``https://`` URL, or ``off``."""
    if str(text).strip().lower() == "off" or str(text).startswith(("http://", "https://")):
        return text
    raise reject("an http(s):// URL or 'off'", text)


def output_path(text: str) -> str:
    """A file (or file-name prefix) the run will write at its end: not a folder itself, and either in a writable
    folder or under one (the writers create missing folders, as ``mkdir -p``), so a typo fails at start and not
    after an hour of load. Empty: not set."""
    if not text:
        return text
    path = Path(str(text)).expanduser()
    if path.is_dir():
        raise reject("a file path, not a folder", text)
    base = path.parent
    while not base.exists() and base != base.parent:  # the nearest existing ancestor decides
        base = base.parent
    if not base.is_dir():
        raise reject(f"a path under a folder ({str(base)!r} is a file)", text)
    if not os.access(base, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise reject(f"a writable path ({str(path if path.exists() else base)!r} is not writable)", text)
    return str(text)


def json_object(reserved: tuple[str, ...] = ()) -> Callable[[str], str]:
    """A type for a JSON object given as text (``'{"top_k": 20}'``), none of whose keys is in ``reserved``; the
    value is the compact JSON text (it travels to workers and the web form as text; readers ``json.loads`` it).
    Empty: not set."""
    form = "a JSON object such as '{\"top_k\": 20}'"

    def check(text: str) -> str:
        if not str(text).strip():
            return ""
        try:
            obj = json.loads(str(text))
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected {form}, got {text!r} (not JSON: {e})") from None
        if not isinstance(obj, dict):
            raise reject(form, text)
        if taken := sorted(k for k in obj if k in reserved):
            raise argparse.ArgumentTypeError(f"expected {form} without {', '.join(reserved)} (the client sets them), "
                                             f"got {', '.join(taken)}")
        return json.dumps(obj, separators=(",", ":"), sort_keys=True)

    return _named("json_object", "A JSON object (text).", check)


def name_list(choices: tuple[str, ...]) -> Callable[[str], str]:
    """A type for a comma list of names from ``choices`` (at least one); the value is the normalized list text
    (``"batching,slo"``), so the web UI's form round-trips it; readers split on commas."""
    form = f"a comma list of {', '.join(choices)} such as {','.join(choices)}"

    def check(text: str) -> str:
        parts = [p.strip().lower() for p in str(text).split(",") if p.strip()]
        if not parts or any(p not in choices for p in parts):
            raise reject(form, text)
        return ",".join(dict.fromkeys(parts))

    return _named("name_list", f"A comma list of names from {', '.join(choices)}.", check)


def length_spec(text: str) -> str:
    """A length SPEC (``workload.lengths``), normalized; the message lists the SPEC forms."""
    try:
        return str(parse_spec(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def as_text(check: Callable[[str], T]) -> Callable[[str], str]:
    """The type ``check`` validates with, but the value stays the (stripped) string.

    For options the web UI writes back into ``parsed_options`` as text: their readers parse again anyway.
    """

    def validated(text: str) -> str:
        check(text)
        return str(text).strip()

    validated.__name__ = getattr(check, "__name__", "value")
    return validated


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or ``taskset``'s limit), else the machine's
    count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def processes(text: str) -> int:
    """Locust's ``--processes``, plus ``auto``: one process per usable core (:func:`usable_cores`); ``-1`` stays
    Locust's own "one per CPU of the machine"."""
    if str(text).strip().lower() == "auto":
        return usable_cores()
    value = _int(text)
    if value is None or value < -1 or value == 0:
        raise reject("a process count >= 1, -1 or auto", text)
    return value
