"""Options of the P99 attribution (``--attribution-window`` itself is telemetry's).

    locust ... --attribution-window 10 --batching-p99-rise 0.4 --batching-size-ratio 0.35 \
               --batching-windows 3 --spike-factor 2
"""

from __future__ import annotations

import argparse


def _number(text: str, *, lo: float, hi: float | None, what: str, example: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")  # fails every comparison below
    if not (value > lo if hi is None else lo < value <= hi):
        raise argparse.ArgumentTypeError(f"expected {what} such as {example}, got {text!r}")
    return value


def rise(text: str) -> float:
    return _number(text, lo=0.0, hi=None, what="a relative rise > 0 (0.4 = +40 %)", example="0.4")


def size_ratio(text: str) -> float:
    return _number(text, lo=0.0, hi=1.0, what="a ratio in (0, 1] (0.35 = batch below 35 % of the baseline)",
                   example="0.35")


def factor(text: str) -> float:
    return _number(text, lo=1.0, hi=None, what="a factor > 1", example="2 or 2.5")


def windows(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of windows >= 1 such as 3, got {text!r}")
    return value


def add_arguments(parser) -> None:
    a = parser.add_argument
    a("--batching-p99-rise", type=rise, metavar="RATIO", env_var="LOCUST_BATCHING_P99_RISE", default=0.4,
      help="Batching-failure rule (seed 3.3): a window's TTFT p99 rose by at least RATIO over the baseline "
           "(default 0.4 = +40 %%)")
    a("--batching-size-ratio", type=size_ratio, metavar="RATIO", env_var="LOCUST_BATCHING_SIZE_RATIO", default=0.35,
      help="Batching-failure rule: ... and its median batch size (server requests running) fell below RATIO "
           "of the baseline (default 0.35)")
    a("--batching-windows", type=windows, metavar="N", env_var="LOCUST_BATCHING_WINDOWS", default=3,
      help="Batching-failure rule: N flagged windows in a row give the verdict; the baseline is the first N "
           "windows with traffic (default 3)")
    a("--spike-factor", type=factor, metavar="K", env_var="LOCUST_SPIKE_FACTOR", default=2.0,
      help="Spike report: windows whose TTFT or ITL p99 exceeds K times the median window p99 (default 2)")
