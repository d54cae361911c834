"""Options of the P99 attribution (``--attribution-window`` itself is telemetry's), with their defaults.

    locust ... --attribution-window 10 --batching-p99-rise 0.4 --batching-size-ratio 0.35 \
               --batching-windows 3 --spike-factor 2
"""

from __future__ import annotations

from workload.argtypes import number, positive_int

BATCHING_P99_RISE_DEFAULT = 0.4
"""--batching-p99-rise: a window's TTFT p99 at least +40 % over the baseline ..."""
BATCHING_SIZE_RATIO_DEFAULT = 0.35
"""--batching-size-ratio: ... and its median batch size below 35 % of the baseline's."""
BATCHING_WINDOWS_DEFAULT = 3
"""--batching-windows: flagged windows in a row that give the verdict; also the baseline's windows."""
IMBALANCE_FACTOR_DEFAULT = 2.0
"""--imbalance-factor: an engine is off the fleet when a figure is this many times the other engines' median."""
IMBALANCE_WINDOWS_DEFAULT = 2
"""--imbalance-windows: windows in a row the same engine must be off the fleet."""
SPIKE_FACTOR_DEFAULT = 2.0
"""--spike-factor: a spike is a window whose p99 exceeds this many times the median window p99."""

rise = number(above=0.0, form="a relative rise > 0 (0.4 = +40 %) such as 0.4")
size_ratio = number(above=0.0, at_most=1.0,
                    form="a ratio in (0, 1] (0.35 = batch below 35 % of the baseline) such as 0.35")
factor = number(above=1.0, form="a factor > 1 such as 2 or 2.5")


def add_arguments(parser) -> None:
    a = parser.add_argument
    a("--batching-p99-rise", type=rise, metavar="RATIO", env_var="LOCUST_BATCHING_P99_RISE",
      default=BATCHING_P99_RISE_DEFAULT,
      help="Batching-failure rule: a window's TTFT p99 rose by at least RATIO over the baseline "
           f"(default {BATCHING_P99_RISE_DEFAULT:g} = +{BATCHING_P99_RISE_DEFAULT * 100:g} %%)")
    a("--batching-size-ratio", type=size_ratio, metavar="RATIO", env_var="LOCUST_BATCHING_SIZE_RATIO",
      default=BATCHING_SIZE_RATIO_DEFAULT,
      help="Batching-failure rule: ... and its median batch size (server requests running) fell below RATIO "
           f"of the baseline (default {BATCHING_SIZE_RATIO_DEFAULT:g})")
    a("--batching-windows", type=positive_int, metavar="N", env_var="LOCUST_BATCHING_WINDOWS",
      default=BATCHING_WINDOWS_DEFAULT,
      help="Batching-failure rule: N flagged windows in a row give the verdict; the baseline is the first N "
           f"windows with traffic (default {BATCHING_WINDOWS_DEFAULT})")
    a("--imbalance-factor", type=factor, metavar="K", env_var="LOCUST_IMBALANCE_FACTOR",
      default=IMBALANCE_FACTOR_DEFAULT,
      help="Engine-imbalance rule: an engine's waiting, queue-time p99 or mean ITL is K times the other engines' "
           f"median, or its finished requests K times off theirs (default {IMBALANCE_FACTOR_DEFAULT:g})")
    a("--imbalance-windows", type=positive_int, metavar="N", env_var="LOCUST_IMBALANCE_WINDOWS",
      default=IMBALANCE_WINDOWS_DEFAULT,
      help="Engine-imbalance rule: the same engine off the fleet in N windows in a row "
           f"(--attribution-window each) (default {IMBALANCE_WINDOWS_DEFAULT})")
    a("--spike-factor", type=factor, metavar="K", env_var="LOCUST_SPIKE_FACTOR", default=SPIKE_FACTOR_DEFAULT,
      help="Spike report: windows whose TTFT or ITL p99 exceeds K times the median window p99 "
           f"(default {SPIKE_FACTOR_DEFAULT:g})")
