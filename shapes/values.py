"""The sweep options' values: their grammar (``parse_*``) and their defaults, defined once.

:mod:`shapes.options` registers the options with these as ``type=`` and ``default=``; :mod:`shapes.plan`
parses the same strings again (the web UI writes form fields back as text) and falls back to the same
defaults when a field is left empty. Every refusal names the option, since a plan error reaches the user
without argparse's ``argument --x:`` prefix.

    parse_users_list("1,2,4")              # [1, 2, 4]
    parse_arrival("gamma:0.5")             # ("gamma", 0.5)
    parse_stage_warmup("0")                # 0.0
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from workload import argtypes
from workload.lengths import FORMS, parse_spec
from workload.trace import Trace, load_trace

STAGE_DURATION_DEFAULT = "60"
"""--stage-duration: seconds each stage is held."""
STAGE_WARMUP_DEFAULT = "0"
"""--stage-warmup: seconds of warm-up before each stage."""
ARRIVAL_DEFAULT = "poisson"
"""--arrival: the open loop's arrival process."""
MAX_CONCURRENCY_DEFAULT = "256"
"""--max-concurrency: the open loop's user pool across all workers."""
TRACE_SPEEDUP_DEFAULT = "1"
"""--trace-speedup: the trace's own pace."""

T = TypeVar("T")

ARRIVAL_FORMS = "poisson, constant or gamma:CV (CV > 0)"


def _items(value: str) -> list[str]:
    return [p.strip() for p in str(value).split(",") if p.strip()]


def _named(option: str, doc: str, parse: Callable) -> Callable:
    parse.__name__ = parse.__qualname__ = "parse_" + option.lstrip("-").replace("-", "_")
    parse.__doc__ = doc
    return parse


def _for(option: str, check: Callable[[str], T], doc: str) -> Callable[[str], T]:
    """``check`` (a :mod:`workload.argtypes` type) as ``option``'s grammar: its refusal starts with the option's
    name, since a plan error reaches the user without argparse's ``argument --x:`` prefix."""

    def parse(value: str) -> T:
        try:
            return check(value)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{option}: {e}") from None

    return _named(option, doc, parse)


def _list_of(option: str, check: Callable[[str], T], item: str, expected: str, doc: str) -> Callable[[str], list[T]]:
    """A comma list for ``option``, every item passing ``check``; a refusal names the item (``is not <item>``) and
    the ``expected`` form."""

    def parse(value: str) -> list[T]:
        out = []
        for text in _items(value):
            try:
                out.append(check(text))
            except argparse.ArgumentTypeError:
                raise argparse.ArgumentTypeError(f"{option}: {text!r} is not {item} (expected {expected})") from None
        if not out:
            raise argparse.ArgumentTypeError(f"{option}: empty list (expected {expected})")
        return out

    return _named(option, doc, parse)


parse_users_list = _list_of("--sweep-users", argtypes.positive_int, "a positive integer", "a list like 1,2,4,8,16",
                            """``"1,2,4"`` -> ``[1, 2, 4]``; every item a positive integer.""")
parse_rates = _list_of("--request-rate", argtypes.positive_number, "a positive number of requests/s",
                       "R or R,R,... like 2,4,8",
                       """``"2,4.5"`` -> ``[2.0, 4.5]`` requests/s in total; every item finite and > 0.""")


_GAMMA_CV = argtypes.number(above=0.0, form=ARRIVAL_FORMS)


def parse_arrival(value: str) -> tuple[str, float]:
    """``poisson`` -> ("poisson", 1.0); ``constant`` -> ("constant", 0.0); ``gamma:0.5`` -> ("gamma", 0.5).

    The number is the coefficient of variation (std / mean) of the gaps between sends.
    """
    v = str(value).strip().lower()
    if v == "poisson":
        return "poisson", 1.0
    if v == "constant":
        return "constant", 0.0
    if v.startswith("gamma:"):
        try:
            return "gamma", _GAMMA_CV(v.split(":", 1)[1])
        except argparse.ArgumentTypeError:
            pass
    raise argparse.ArgumentTypeError(f"--arrival: {value!r} is not one of {ARRIVAL_FORMS}")


def parse_length_sweep(value: str) -> list[str]:
    """``"uniform:128:1024,zipf:1.2:16:4096"`` -> the SPECs, each checked by ``workload.lengths``."""
    specs = _items(value)
    if not specs:
        raise argparse.ArgumentTypeError(f"--length-sweep: empty list (expected SPEC,SPEC,... with SPEC: {FORMS})")
    for spec in specs:
        try:
            parse_spec(spec)
        except (ValueError, OSError) as e:
            raise argparse.ArgumentTypeError(f"--length-sweep: bad SPEC {spec!r}: {e} (expected {FORMS})") from None
    return specs


parse_stage_duration = _for("--stage-duration", argtypes.seconds, "Seconds each stage is held, > 0.")
parse_stage_warmup = _for("--stage-warmup", argtypes.non_negative_seconds,
                          "Seconds of warm-up before each stage, >= 0 (0: none).")
parse_pool = _for("--max-concurrency", argtypes.positive_int,
                  "``--max-concurrency``: the open loop's users across all workers, an integer >= 1.")
parse_speedup = _for("--trace-speedup", argtypes.positive_number,
                     "``--trace-speedup``: how much faster than recorded the trace is replayed, a number > 0 "
                     "(0.5: half speed).")


def parse_trace(value: str) -> Trace:
    """``--trace``: the trace file, read whole; a bad line is refused with its ``file:line``."""
    try:
        return load_trace(value)
    except (ValueError, OSError) as e:
        raise argparse.ArgumentTypeError(f"--trace: {e}") from None


SEARCH_MAX_PROBES_DEFAULT = "12"
"""--search-max-probes: most probes (stages) one --shape slo-search runs, the repeat of the boundary included."""
SEARCH_USERS_PRECISION_DEFAULT = "1"
"""--search-precision on the users axis: the search stops once the last passing and the first failing user counts
are this many users apart."""
SEARCH_RATE_PRECISION_DEFAULT = "0.1"
"""--search-precision on the rate axis: the search stops once the first failing rate is at most this fraction
above the last passing one."""


def _range(value: str, option: str, parse):
    text = str(value).strip()
    lo_text, sep, hi_text = text.partition(":")
    try:
        if not sep:
            raise argparse.ArgumentTypeError("")
        lo, hi = parse(lo_text.strip()), parse(hi_text.strip())
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{option}: {value!r} is not LO:HI (two positive numbers, LO < HI)") from None
    if lo >= hi:
        raise argparse.ArgumentTypeError(f"{option}: {value!r}: LO must be below HI")
    return lo, hi


def parse_search_users(value: str) -> tuple[int, int]:
    """``--search-users 1:64`` -> (1, 64): the user counts the search may probe (total across workers)."""
    return _range(value, "--search-users", argtypes.positive_int)


def parse_search_rate(value: str) -> tuple[float, float]:
    """``--search-rate 0.5:32`` -> (0.5, 32.0): the total requests/s the search may probe."""
    return _range(value, "--search-rate", argtypes.positive_number)


parse_search_max_probes = _for(
    "--search-max-probes", argtypes.integer(least=2, form="an integer >= 2 (one probe cannot bracket anything)"),
    "``--search-max-probes``: an integer >= 2.")
parse_search_precision = _for("--search-precision", argtypes.positive_number,
                              "``--search-precision``: users (users axis) or a fraction of the rate (rate axis), "
                              "a number > 0.")
parse_gpus = _for("--gpus", argtypes.positive_int,
                  "``--gpus``: GPUs the deployment under test runs on (for tokens/s per GPU and the cost), an "
                  "integer >= 1.")
parse_gpu_hour_price = _for("--gpu-hour-price", argtypes.positive_number,
                            "``--gpu-hour-price``: US dollars per GPU-hour, a number > 0.")
