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


def add_arguments(parser) -> None:
    parser.add_argument(
        "--shape",
        choices=shape_names(),
        default=NONE,
        env_var="LOCUST_SHAPE",
        help=shape_help(),
    )
    parser.add_argument(
        "--sweep-users",
        type=as_text(parse_users_list),
        default=None,
        env_var="LOCUST_SWEEP_USERS",
        help="Concurrency sweep levels, e.g. 1,2,4,8,16,32,64 (total users across workers). -r sets the ramp rate.",
    )
    parser.add_argument(
        "--stage-duration",
        type=as_text(seconds),
        default=STAGE_DURATION_DEFAULT,
        env_var="LOCUST_STAGE_DURATION",
        help="Seconds each stage is held (measured), counted from when its user count is running",
    )
    parser.add_argument(
        "--stage-warmup",
        type=as_text(non_negative_seconds),
        default=STAGE_WARMUP_DEFAULT,
        env_var="LOCUST_STAGE_WARMUP",
        help="Seconds of warm-up before each stage, left out of its numbers (a separate 'warmup ...' stage that "
        "also holds the ramp to the stage's users); 0: no warm-up stage, the ramp counts in the stage",
    )
    parser.add_argument(
        "--length-sweep",
        type=as_text(parse_length_sweep),
        default=None,
        env_var="LOCUST_LENGTH_SWEEP",
        help="Input-length sweep: one stage per SPEC, e.g. uniform:128:1024,zipf:1.2:16:4096 (at -u users)",
    )
    parser.add_argument(
        "--request-rate",
        type=as_text(parse_rates),
        default=None,
        env_var="LOCUST_REQUEST_RATE",
        help="Open loop: total requests/s across all workers; a list R,R,... sweeps them (one stage per rate)",
    )
    parser.add_argument(
        "--arrival",
        type=as_text(parse_arrival),
        default=ARRIVAL_DEFAULT,
        env_var="LOCUST_ARRIVAL",
        help="Open-loop arrival process: poisson, constant or gamma:CV",
    )
    parser.add_argument(
        "--max-concurrency",
        type=as_text(positive_int),
        default=MAX_CONCURRENCY_DEFAULT,
        env_var="LOCUST_MAX_CONCURRENCY",
        help="Open loop: users (in-flight requests) across all workers; when all are busy, scheduled sends wait "
        "and their client queue time is measured",
    )
    parser.add_argument(
        "--trace",
        type=as_text(parse_trace),
        default=None,
        env_var="LOCUST_TRACE",
        help="Replay a request trace (Mooncake JSONL: timestamp ms, input_length, output_length, hash_ids of "
        "512-token blocks; equal ids give byte-identical prompt blocks) open loop on its own clock, "
        "--max-concurrency users across all workers; lateness shows as client queue time",
    )
    parser.add_argument(
        "--trace-speedup",
        type=as_text(parse_speedup),
        default=TRACE_SPEEDUP_DEFAULT,
        env_var="LOCUST_TRACE_SPEEDUP",
        help="Replay --trace this many times faster than recorded (0.5: half speed)",
    )
    parser.add_argument(
        "--search-users",
        type=as_text(parse_search_users),
        default=None,
        env_var="LOCUST_SEARCH_USERS",
        help="--shape slo-search, closed loop: the user counts LO:HI (total across workers) the capacity search "
        "may probe; it finds the highest meeting every --slo-* objective",
    )
    parser.add_argument(
        "--search-rate",
        type=as_text(parse_search_rate),
        default=None,
        env_var="LOCUST_SEARCH_RATE",
        help="--shape slo-search, open loop: the total requests/s LO:HI the capacity search may probe "
        "(--arrival, --max-concurrency users)",
    )
    parser.add_argument(
        "--search-precision",
        type=as_text(parse_search_precision),
        default=None,
        env_var="LOCUST_SEARCH_PRECISION",
        help=f"--shape slo-search stops once the highest passing and lowest failing loads are this close: users "
        f"(default {SEARCH_USERS_PRECISION_DEFAULT}) or a fraction of the rate (default "
        f"{SEARCH_RATE_PRECISION_DEFAULT})",
    )
    parser.add_argument(
        "--search-max-probes",
        type=as_text(parse_search_max_probes),
        default=SEARCH_MAX_PROBES_DEFAULT,
        env_var="LOCUST_SEARCH_MAX_PROBES",
        help="--shape slo-search: most probes (stages), the repeat of the boundary probe included",
    )
    parser.add_argument(
        "--gpus",
        type=as_text(parse_gpus),
        default=None,
        env_var="LOCUST_GPUS",
        help="GPUs the deployment under test runs on: the capacity section gives output tokens/s per GPU",
    )
    parser.add_argument(
        "--gpu-hour-price",
        type=as_text(parse_gpu_hour_price),
        default=None,
        env_var="LOCUST_GPU_HOUR_PRICE",
        help="US dollars per GPU-hour: the capacity section gives dollars per million output tokens at the "
        "load found (x --gpus, 1 without it)",
    )
