"""Command-line options of the load shapes (``--shape`` and the sweep settings).

Values stay strings in ``parsed_options`` (validated here, parsed again by :mod:`shapes.plan`), because
the web UI writes form fields back into ``parsed_options`` as strings without running ``type=``.

    locust --headless --shape concurrency-sweep --sweep-users 1,4,16 --stage-duration 30 -r 16
    locust --headless --shape length-sweep -u 16 --length-sweep "uniform:128:1024,zipf:1.2:16:4096"
    locust --headless --shape rate-sweep --request-rate 2,4,8 --arrival poisson --max-concurrency 256
"""

from __future__ import annotations

import argparse
import math

SHAPE_NAMES = ("none", "concurrency-sweep", "length-sweep", "rate-sweep")
ARRIVAL_FORMS = "poisson, constant or gamma:CV (CV > 0)"


def _items(value: str) -> list[str]:
    return [p.strip() for p in str(value).split(",") if p.strip()]


def parse_users_list(value: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; every item a positive integer."""
    out = []
    for item in _items(value):
        try:
            n = int(item)
        except ValueError:
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(
                f"--sweep-users: {item!r} is not a positive integer (expected a list like 1,2,4,8,16)"
            )
        out.append(n)
    if not out:
        raise argparse.ArgumentTypeError("--sweep-users: empty list (expected a list like 1,2,4,8,16)")
    return out


def parse_rates(value: str) -> list[float]:
    """``"2,4.5"`` -> ``[2.0, 4.5]`` requests/s in total; every item finite and > 0."""
    out = []
    for item in _items(value):
        try:
            r = float(item)
        except ValueError:
            r = -1.0
        if not (r > 0 and math.isfinite(r)):
            raise argparse.ArgumentTypeError(
                f"--request-rate: {item!r} is not a positive number of requests/s (expected R or R,R,... like 2,4,8)"
            )
        out.append(r)
    if not out:
        raise argparse.ArgumentTypeError("--request-rate: empty list (expected R or R,R,... like 2,4,8)")
    return out


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
            cv = float(v.split(":", 1)[1])
        except ValueError:
            cv = -1.0
        if cv > 0 and math.isfinite(cv):
            return "gamma", cv
    raise argparse.ArgumentTypeError(f"--arrival: {value!r} is not one of {ARRIVAL_FORMS}")


def parse_length_sweep(value: str) -> list[str]:
    """``"uniform:128:1024,zipf:1.2:16:4096"`` -> the SPECs, each checked by ``workload.lengths``."""
    from workload.lengths import FORMS, parse_spec

    specs = _items(value)
    if not specs:
        raise argparse.ArgumentTypeError(f"--length-sweep: empty list (expected SPEC,SPEC,... with SPEC: {FORMS})")
    for spec in specs:
        try:
            parse_spec(spec)
        except (ValueError, OSError) as e:
            raise argparse.ArgumentTypeError(f"--length-sweep: bad SPEC {spec!r}: {e} (expected {FORMS})") from None
    return specs


def parse_seconds(value: str, option: str, allow_zero: bool) -> float:
    try:
        s = float(value)
    except (TypeError, ValueError):
        s = -1.0
    if not math.isfinite(s) or s < 0 or (s == 0 and not allow_zero):
        least = ">= 0" if allow_zero else "> 0"
        raise argparse.ArgumentTypeError(f"{option}: {value!r} is not a number of seconds {least}")
    return s


def _validated(parse):
    """argparse ``type=``: validate with ``parse`` but keep the (stripped) string."""

    def check(value: str) -> str:
        parse(value)
        return str(value).strip()

    check.__name__ = parse.__name__
    return check


def _seconds(option: str, allow_zero: bool):
    return _validated(lambda v: parse_seconds(v, option, allow_zero))


def _positive_int(option: str):
    def check(value: str) -> str:
        try:
            n = int(value)
        except (TypeError, ValueError):
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(f"{option}: {value!r} is not a positive integer")
        return str(n)

    return check


def add_arguments(parser) -> None:
    parser.add_argument(
        "--shape",
        choices=SHAPE_NAMES,
        default="none",
        env_var="LOCUST_SHAPE",
        help="Load shape: concurrency-sweep (--sweep-users), length-sweep (-u users, --length-sweep), rate-sweep "
        "(open loop, --request-rate). 'none' keeps Locust's plain -u/-r behaviour.",
    )
    parser.add_argument(
        "--sweep-users",
        type=_validated(parse_users_list),
        default=None,
        env_var="LOCUST_SWEEP_USERS",
        help="Concurrency sweep levels, e.g. 1,2,4,8,16,32,64 (total users across workers). -r sets the ramp rate.",
    )
    parser.add_argument(
        "--stage-duration",
        type=_seconds("--stage-duration", allow_zero=False),
        default="60",
        env_var="LOCUST_STAGE_DURATION",
        help="Seconds each stage is held (measured), counted from when its user count is running",
    )
    parser.add_argument(
        "--stage-warmup",
        type=_seconds("--stage-warmup", allow_zero=True),
        default="0",
        env_var="LOCUST_STAGE_WARMUP",
        help="Seconds of warm-up before each stage, left out of its numbers (a separate 'warmup ...' stage)",
    )
    parser.add_argument(
        "--length-sweep",
        type=_validated(parse_length_sweep),
        default=None,
        env_var="LOCUST_LENGTH_SWEEP",
        help="Input-length sweep: one stage per SPEC, e.g. uniform:128:1024,zipf:1.2:16:4096 (at -u users)",
    )
    parser.add_argument(
        "--request-rate",
        type=_validated(parse_rates),
        default=None,
        env_var="LOCUST_REQUEST_RATE",
        help="Open loop: total requests/s across all workers; a list R,R,... sweeps them (one stage per rate)",
    )
    parser.add_argument(
        "--arrival",
        type=_validated(parse_arrival),
        default="poisson",
        env_var="LOCUST_ARRIVAL",
        help="Open-loop arrival process: poisson, constant or gamma:CV",
    )
    parser.add_argument(
        "--max-concurrency",
        type=_positive_int("--max-concurrency"),
        default="256",
        env_var="LOCUST_MAX_CONCURRENCY",
        help="Open loop: users (in-flight requests) across all workers; when all are busy, scheduled sends wait "
        "and their client queue time is measured",
    )
