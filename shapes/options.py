"""Command-line options of the load shapes (``--shape`` and the sweep settings).

Values stay strings in ``parsed_options`` (validated here, parsed again by :mod:`shapes.plan`), because
the web UI writes form fields back into ``parsed_options`` as strings without running ``type=``. Their
grammar and defaults are in :mod:`shapes.values`; ``--shape``'s choices come from :mod:`shapes.registry`.

    locust --headless --shape concurrency-sweep --sweep-users 1,4,16 --stage-duration 30 -r 16
    locust --headless --shape length-sweep -u 16 --length-sweep "uniform:128:1024,zipf:1.2:16:4096"
    locust --headless --shape rate-sweep --request-rate 2,4,8 --arrival poisson --max-concurrency 256
    locust --headless --trace mooncake.jsonl --trace-speedup 2 --max-concurrency 256 --stop-timeout 60
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shapes.registry import NONE, shape_help, shape_names
from shapes.values import (
    ARRIVAL_DEFAULT,
    MAX_CONCURRENCY_DEFAULT,
    SEARCH_MAX_PROBES_DEFAULT,
    SEARCH_RATE_PRECISION_DEFAULT,
    SEARCH_USERS_PRECISION_DEFAULT,
    STAGE_DURATION_DEFAULT,
    STAGE_WARMUP_DEFAULT,
    TRACE_SPEEDUP_DEFAULT,
    parse_arrival,
    parse_gpu_hour_price,
    parse_gpus,
    parse_length_sweep,
    parse_rates,
    parse_search_max_probes,
    parse_search_precision,
    parse_search_rate,
    parse_search_users,
    parse_speedup,
    parse_trace,
    parse_users_list,
)
from workload.argtypes import as_text, non_negative_seconds, positive_int, seconds


@dataclass(frozen=True)
class _Text:
    """An option whose value stays the (validated) text: ``type=as_text(check)``, ``env_var=LOCUST_<NAME>``."""

    flag: str
    check: Callable[[str], object]
    default: str | None
    help: str

    @property
    def env_var(self) -> str:
        return "LOCUST_" + self.flag.lstrip("-").upper().replace("-", "_")


TEXT_OPTIONS = (
    _Text("--sweep-users", parse_users_list, None,
          "Concurrency sweep levels, e.g. 1,2,4,8,16,32,64 (total users across workers). -r sets the ramp rate."),
    _Text("--stage-duration", seconds, STAGE_DURATION_DEFAULT,
          "Seconds each stage is held (measured), counted from when its user count is running"),
    _Text("--stage-warmup", non_negative_seconds, STAGE_WARMUP_DEFAULT,
          "Seconds of warm-up before each stage, left out of its numbers (a separate 'warmup ...' stage that "
          "also holds the ramp to the stage's users); 0: no warm-up stage, the ramp counts in the stage"),
    _Text("--length-sweep", parse_length_sweep, None,
          "Input-length sweep: one stage per SPEC, e.g. uniform:128:1024,zipf:1.2:16:4096 (at -u users)"),
    _Text("--request-rate", parse_rates, None,
          "Open loop: total requests/s across all workers; a list R,R,... sweeps them (one stage per rate)"),
    _Text("--arrival", parse_arrival, ARRIVAL_DEFAULT,
          "Open-loop arrival process: poisson, constant or gamma:CV"),
    _Text("--max-concurrency", positive_int, MAX_CONCURRENCY_DEFAULT,
          "Open loop: users (in-flight requests) across all workers; when all are busy, scheduled sends wait "
          "and their client queue time is measured"),
    _Text("--trace", parse_trace, None,
          "Replay a request trace (Mooncake JSONL: timestamp ms, input_length, output_length, hash_ids of "
          "512-token blocks; equal ids give byte-identical prompt blocks) open loop on its own clock, "
          "--max-concurrency users across all workers; lateness shows as client queue time"),
    _Text("--trace-speedup", parse_speedup, TRACE_SPEEDUP_DEFAULT,
          "Replay --trace this many times faster than recorded (0.5: half speed)"),
    _Text("--search-users", parse_search_users, None,
          "--shape slo-search, closed loop: the user counts LO:HI (total across workers) the capacity search "
          "may probe; it finds the highest meeting every --slo-* objective"),
    _Text("--search-rate", parse_search_rate, None,
          "--shape slo-search, open loop: the total requests/s LO:HI the capacity search may probe "
          "(--arrival, --max-concurrency users)"),
    _Text("--search-precision", parse_search_precision, None,
          f"--shape slo-search stops once the highest passing and lowest failing loads are this close: users "
          f"(default {SEARCH_USERS_PRECISION_DEFAULT}) or a fraction of the rate (default "
          f"{SEARCH_RATE_PRECISION_DEFAULT})"),
    _Text("--search-max-probes", parse_search_max_probes, SEARCH_MAX_PROBES_DEFAULT,
          "--shape slo-search: most probes (stages), the repeat of the boundary probe included"),
    _Text("--gpus", parse_gpus, None,
          "GPUs the deployment under test runs on: the capacity section gives output tokens/s per GPU"),
    _Text("--gpu-hour-price", parse_gpu_hour_price, None,
          "US dollars per GPU-hour: the capacity section gives dollars per million output tokens at the "
          "load found (x --gpus, 1 without it)"),
)
"""The shape options after ``--shape``, in the order ``--help`` lists them."""


def add_arguments(parser) -> None:
    parser.add_argument(
        "--shape",
        choices=shape_names(),
        default=NONE,
        env_var="LOCUST_SHAPE",
        help=shape_help(),
    )
    for o in TEXT_OPTIONS:
        parser.add_argument(o.flag, type=as_text(o.check), default=o.default, env_var=o.env_var, help=o.help)
