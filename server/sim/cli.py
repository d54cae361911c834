"""Command line of the simulator: vLLM's flag names over a profile, then serve until SIGTERM/SIGINT.

    python -m server.sim --port 8000 --profile deepseek-v2-lite-a100
    python -m server.sim --port 0 --profile cpu-tiny --time-scale 20 --num-gpu-blocks 64
    python -m server.sim --fault-rate 0.05 --fault-kinds cut,junk --batch-cap-at 15:1

A bad flag prints one line (``server.sim: error: ...``) and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from dataclasses import dataclass, field, replace

import numpy as np

from server.core.faults import KINDS, parse_faults
from server.core.http import Connection, WriteBatcher
from server.sim.api import REASONING_FIELDS, SimApp
from server.sim.engine import BatchCap, Engine
from server.sim.faults import DEFAULT_KINDS, Faults
from server.sim.fleet import Fleet, FleetCollector
from server.sim.metrics import EngineMetrics, SimCollector, make_registry
from server.sim.pd import KvTransfer
from server.sim.profiles import DEFAULT_PROFILE, Profile, ProfileError, available, load_profile
from server.sim.scheduler import Scheduler, SchedulerConfig
from server.sim.textgen import build_vocabulary
from server.sim.tracing import SimTracer
from workload.argtypes import (
    fraction,
    length_spec,
    non_negative_int,
    non_negative_seconds,
    port,
    positive_int,
    positive_number,
    reject,
    url_or_off,
)
from workload.lengths import parse_spec
from workload.tokenizers import AUTO, TokenizerNotFound, chat_renderer, choose_tokenizer, load_tokenizer

log = logging.getLogger("server.sim")


KV_TRANSFER_DELAY_DEFAULT = 0.05
"""--kv-transfer-delay: seconds a request's KV takes from the prefill instance to this decode instance."""


class UsageError(Exception):
    """A flag value the simulator cannot run with (reported in one line, exit 2)."""


class EngineFailed(Exception):
    """The engine loop raised (logged with its traceback); the server stopped."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        self.exit(2, f"server.sim: error: {message}\n")


def _fault_kinds(text: str) -> tuple[str, ...]:
    try:
        return parse_faults(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _batch_cap(text: str) -> BatchCap:
    t, sep, n = text.partition(":")
    after_first = t.startswith("+")
    try:
        if sep:
            return BatchCap(non_negative_seconds(t[1:] if after_first else t), positive_int(n), after_first)
    except argparse.ArgumentTypeError:
        pass
    raise reject("T:N or +T:N (from second T of simulated time, or T seconds after the first request with +T; at "
                 "most N running sequences, N >= 1)", text)


SPEC_ACCEPTANCE_DEFAULT = 0.7
"""--spec-acceptance's default: each draft token accepted with this probability after an accepted one."""


def _speculative_config(text: str) -> dict:
    """vLLM's ``--speculative-config`` JSON: an object with ``num_speculative_tokens`` >= 1 (``method`` a label)."""
    try:
        cfg = json.loads(text)
    except ValueError:
        cfg = None
    k = cfg.get("num_speculative_tokens") if isinstance(cfg, dict) else None
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise reject('a JSON object with "num_speculative_tokens" >= 1 such as '
                     '\'{"method":"mtp","num_speculative_tokens":1}\'', text)
    return cfg


def _acceptance(text: str) -> tuple[float, ...]:
    """A comma list of shares in [0, 1], non-increasing (a later draft position is never accepted more often)."""
    try:
        values = tuple(fraction(v) for v in str(text).split(","))
    except argparse.ArgumentTypeError:
        values = ()
    if not values or any(b > a for a, b in zip(values, values[1:], strict=False)):
        raise reject("a comma list of non-increasing fractions in [0, 1] such as 0.8,0.6,0.4", text)
    return values
def _dp_skew(text: str) -> tuple[int, float]:
    e, sep, f = text.partition(":")
    try:
        if sep:
            return non_negative_int(e), positive_number(f)
    except argparse.ArgumentTypeError:
        pass
    raise reject("ENGINE:FACTOR (engine index >= 0, its steps FACTOR times slower, FACTOR > 0)", text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m server.sim", description="A vLLM-compatible OpenAI server that simulates the engine.")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default %(default)s)")
    p.add_argument("--port", type=port, default=8000, help="port; 0 picks a free one (printed at start)")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"profile name ({', '.join(available())}) or path to a profile .json")
    p.add_argument("--served-model-name", help="model id served (default: the profile's)")
    p.add_argument("--tokenizer", default=AUTO,
                   help="bundled tokenizer name or path to tokenizer.json; auto (default): the served model's, as vLLM "
                   "loads the model's own (DeepSeek-V2-Lite -> deepseek-v2), the users' default for an unknown one")
    engine = p.add_argument_group("engine (vLLM's flags; default: the profile's)")
    engine.add_argument("--max-num-seqs", type=positive_int, help="most sequences running in one step")
    engine.add_argument("--max-num-batched-tokens", type=positive_int,
                        help="token budget of one step (decodes first, then chunked prefill)")
    engine.add_argument("--block-size", type=positive_int, help="tokens per KV block")
    engine.add_argument("--num-gpu-blocks", "--num-gpu-blocks-override", dest="num_gpu_blocks", type=positive_int,
                        help="KV blocks in the pool (a smaller pool gives KV pressure and preemption)")
    engine.add_argument("--max-model-len", type=positive_int,
                        help="longest prompt + output; lowered to the pool size when the profile's does not fit")
    engine.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None,
                        help="reuse cached full blocks of shared prompt prefixes")
    engine.add_argument("--data-parallel-size", "-dp", type=positive_int, default=1,
                        help="engines behind the one API server, each with its own scheduler and KV pool of "
                        "--num-gpu-blocks, dealt requests least-loaded as vLLM's DP balancer; every series carries "
                        "its engine label (default %(default)s)")
    sim = p.add_argument_group("simulation")
    sim.add_argument("--time-scale", type=positive_number, default=1.0,
                     help="run the simulated clock S times faster than real time: a step the profile prices at t "
                     "seconds takes t/S real seconds (default %(default)g). Clocks: the streams, /metrics' latency "
                     "histograms and the OTLP spans are in wall-clock seconds, the time clients experience; "
                     "only --batch-cap-at's T is simulated seconds")
    sim.add_argument("--tokens-per-chunk", type=positive_int, default=1,
                     help="tokens produced per decode step and sent per chunk (multi-token prediction)")
    sim.add_argument("--num-speculative-tokens", type=positive_int,
                     help="draft tokens per decode step (with --spec-accept-rate)")
    sim.add_argument("--spec-accept-rate", type=fraction,
                     help="probability each draft token is accepted; a chunk carries 1 + accepted tokens")
    sim.add_argument("--speculative-config", type=_speculative_config, metavar="JSON",
                     help="speculative decoding in vLLM's form, e.g. "
                     "'{\"method\":\"mtp\",\"num_speculative_tokens\":1}' (the method is a label; the acceptance "
                     "is --spec-acceptance's)")
    sim.add_argument("--spec-acceptance", type=_acceptance, metavar="A0,A1,...",
                     help="per draft position, the share of verify steps that accept it (non-increasing, one per "
                     "speculative token; vLLM's accepted_tokens_per_pos / num_drafts), e.g. 0.8,0.6,0.4; drawn with "
                     f"--seed (default with --speculative-config: {SPEC_ACCEPTANCE_DEFAULT:g} per position, geometric)")
    sim.add_argument("--enable-per-request-metrics", action="store_true",
                     help="vLLM's per-request metrics object on the last streamed chunk and a whole answer")
    sim.add_argument("--per-request-spec-decode-metrics", choices=("summary", "detailed"),
                     help="add speculative_decoding to the per-request metrics (detailed: per-step arrays)")
    sim.add_argument("--enable-prompt-tokens-details", action="store_true",
                     help="usage.prompt_tokens_details.cached_tokens: the prompt tokens the prefix cache served")
    sim.add_argument("--eos-probability", type=fraction,
                     help="per-token EOS probability when ignore_eos is off (default: the profile's)")
    sim.add_argument("--reasoning", type=length_spec, metavar="SPEC",
                     help="reasoning tokens per request, a length SPEC (fixed:200, uniform:50:400, ...): the first "
                     "that many output tokens are thinking, as DeepSeek-R1 served by vLLM (default: no reasoning)")
    sim.add_argument("--reasoning-field", choices=REASONING_FIELDS, default=REASONING_FIELDS[0],
                     help="where the thinking goes: the chat delta's reasoning_content (vLLM's --reasoning-parser "
                     "deepseek_r1), reasoning (newer vLLM), or think-tags (no parser: <think>...</think> inside "
                     "content; completions always use think-tags) (default %(default)s)")
    sim.add_argument("--seed", type=non_negative_int, default=0, help="seed of every random draw (default %(default)s)")
    sim.add_argument("--legacy-metrics", action="store_true",
                     help="also export vllm:gpu_cache_usage_perc and vllm:time_per_output_token_seconds")
    faults = p.add_argument_group("fault injection")
    faults.add_argument("--fault-rate", type=fraction, default=0.0,
                        help="probability that a generation request fails (default %(default)g)")
    faults.add_argument("--fault-kinds", type=_fault_kinds, default=DEFAULT_KINDS,
                        help=f"comma list of {','.join(KINDS)} (server/core/faults.py; hang is stall) "
                        f"(default: {','.join(DEFAULT_KINDS)})")
    faults.add_argument("--dp-skew", type=_dp_skew, action="append", default=[], metavar="ENGINE:FACTOR",
                        help="engine ENGINE's steps take FACTOR times the profile's time (a straggling data-parallel "
                        "rank); repeatable")
    faults.add_argument("--batch-cap-at", type=_batch_cap, metavar="T:N",
                        help="from simulated second T on (wall second T/S with --time-scale S), admit no more than N "
                        "running sequences; +T:N counts T from the first request the engine is given (a load whose "
                        "start-up time is unknown still gets T seconds uncapped)")
    pd = p.add_argument_group("prefill/decode disaggregation (this simulator as the decode instance)")
    pd.add_argument("--kv-transfer-from", type=url_or_off, metavar="URL",
                    help="the prefill instance's base URL: each request is prefilled there (max_tokens=1), its KV "
                    "'transferred' for --kv-transfer-delay, then decoded here at no prefill cost; exports vLLM's "
                    "vllm:nixl_* metrics and waiting_by_reason{reason=deferred}")
    pd.add_argument("--kv-transfer-delay", type=non_negative_seconds, default=KV_TRANSFER_DELAY_DEFAULT,
                    metavar="SECONDS", help="how long each request's KV transfer takes (default %(default)g)")
    p.add_argument("--otlp-traces-endpoint", type=url_or_off, metavar="URL",
                   help="post vLLM's llm_request span of every finished request to this OTLP/HTTP protobuf URL, "
                   "e.g. http://127.0.0.1:4318/v1/traces (as vllm serve --otlp-traces-endpoint with "
                   "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)")
    return p


@dataclass(frozen=True)
class SimSettings:
    host: str
    port: int
    profile: Profile
    model_name: str
    tokenizer: str
    sched: SchedulerConfig
    time_scale: float
    eos_probability: float
    seed: int
    legacy_metrics: bool
    fault_rate: float
    fault_kinds: tuple[str, ...]
    batch_cap_at: BatchCap | None
    notes: list[str] = field(default_factory=list)
    otlp_traces_endpoint: str | None = None
    reasoning: str | None = None
    reasoning_field: str = REASONING_FIELDS[0]
    per_request_metrics: bool = False
    spec_metrics: str | None = None
    prompt_details: bool = False
    data_parallel_size: int = 1
    dp_skew: tuple[tuple[int, float], ...] = ()
    kv_transfer_from: str | None = None
    kv_transfer_delay: float = 0.0


def settings_from_args(a: argparse.Namespace) -> SimSettings:
    try:
        profile = load_profile(a.profile)
    except ProfileError as e:
        raise UsageError(str(e)) from None
    eng = dict(profile.engine)
    notes: list[str] = []
    for key in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_gpu_blocks", "max_model_len",
                "enable_prefix_caching"):
        if getattr(a, key) is not None:
            eng[key] = getattr(a, key)
    spec_cfg = a.speculative_config
    legacy = a.spec_accept_rate is not None or a.num_speculative_tokens is not None
    if a.tokens_per_chunk > 1 and (legacy or spec_cfg is not None):
        raise UsageError("--tokens-per-chunk and speculative decoding flags are exclusive")
    if spec_cfg is not None and legacy:
        raise UsageError("--speculative-config replaces --num-speculative-tokens/--spec-accept-rate: give one form")
    if a.num_speculative_tokens is not None and a.spec_accept_rate is None:
        raise UsageError("--num-speculative-tokens needs --spec-accept-rate")
    if a.spec_acceptance is not None and spec_cfg is None:
        raise UsageError("--spec-acceptance needs --speculative-config")
    width, accept, per_position = a.tokens_per_chunk, None, None
    if a.spec_accept_rate is not None:
        width, accept = 1 + (a.num_speculative_tokens or 3), a.spec_accept_rate
    if spec_cfg is not None:
        k = spec_cfg["num_speculative_tokens"]
        width = 1 + k
        per_position = a.spec_acceptance or tuple(SPEC_ACCEPTANCE_DEFAULT ** (i + 1) for i in range(k))
        if len(per_position) != k:
            raise UsageError(f"--spec-acceptance gives {len(per_position)} positions; --speculative-config drafts {k}")
    pool_tokens = eng.get("num_gpu_blocks", 4096) * eng.get("block_size", 16)
    if eng.get("max_model_len", 4096) > pool_tokens:
        if a.max_model_len is not None:
            raise UsageError(f"--max-model-len {a.max_model_len} exceeds the KV pool ({pool_tokens} tokens = "
                             f"num_gpu_blocks x block_size); lower it or add blocks")
        notes.append(f"max_model_len lowered from {eng['max_model_len']} to the KV pool size {pool_tokens}")
        eng["max_model_len"] = pool_tokens
    try:
        sched = SchedulerConfig(decode_width=width, spec_accept_rate=accept, spec_acceptance=per_position, **eng)
    except TypeError as e:
        raise UsageError(f"profile {profile.name}: {e}") from None
    model_name = a.served_model_name or profile.served_model_name
    for index, _factor in a.dp_skew:
        if index >= a.data_parallel_size:
            raise UsageError(f"--dp-skew {index}:...: engine {index} does not exist with --data-parallel-size "
                             f"{a.data_parallel_size} (engines 0..{a.data_parallel_size - 1})")
    kv_from = a.kv_transfer_from if a.kv_transfer_from and a.kv_transfer_from.lower() != "off" else None
    if kv_from and a.data_parallel_size > 1:
        raise UsageError("--kv-transfer-from runs one decode engine: drop --data-parallel-size")
    otlp = a.otlp_traces_endpoint if a.otlp_traces_endpoint and a.otlp_traces_endpoint.lower() != "off" else None
    return SimSettings(
        otlp_traces_endpoint=otlp,
        host=a.host, port=a.port, profile=profile, model_name=model_name,
        tokenizer=_tokenizer(a.tokenizer, model_name), sched=sched, time_scale=a.time_scale,
        eos_probability=profile.eos_probability if a.eos_probability is None else a.eos_probability,
        seed=a.seed, legacy_metrics=a.legacy_metrics, fault_rate=a.fault_rate, fault_kinds=a.fault_kinds,
        batch_cap_at=a.batch_cap_at, notes=notes, reasoning=a.reasoning, reasoning_field=a.reasoning_field,
        per_request_metrics=a.enable_per_request_metrics, spec_metrics=a.per_request_spec_decode_metrics,
        prompt_details=a.enable_prompt_tokens_details,
        data_parallel_size=a.data_parallel_size, dp_skew=tuple(a.dp_skew),
        kv_transfer_from=kv_from, kv_transfer_delay=a.kv_transfer_delay,
    )


def _tokenizer(option: str, model_name: str) -> str:
    """``--tokenizer`` as given, or for auto the one the users' ``--tokenizer auto`` picks for the served model."""
    chosen = choose_tokenizer(option, model_name)
    if chosen.source == "fallback":
        log.info(f"model {model_name!r} has no bundled tokenizer: counting with {chosen.name} (--tokenizer to choose)")
    return chosen.name


def cache_info(s: SimSettings, engine: str) -> dict[str, str]:
    """vllm:cache_config_info's labels as vLLM 0.32 exports them (tests/contract/server_env/cache_config_info.txt)."""
    return {"block_size": str(s.sched.block_size), "cache_dtype": "auto", "engine": engine,
            "enable_prefix_caching": str(s.sched.enable_prefix_caching),
            "gpu_memory_utilization": "0.9", "num_cpu_blocks": "None",
            "num_gpu_blocks": str(s.sched.num_gpu_blocks), "num_gpu_blocks_override": "None",
            "kv_cache_size_tokens": str(s.sched.num_gpu_blocks * s.sched.block_size),
            "prefix_caching_hash_algo": "sha256", "sliding_window": "None", "user_specified_block_size": "True"}


def build_app(s: SimSettings) -> tuple[SimApp, Engine | Fleet]:
    """Everything but the socket: tokenizer, vocabulary, scheduler, engine, metrics, API."""
    try:
        tok = load_tokenizer(s.tokenizer)
        render = chat_renderer(s.tokenizer)  # its own chat template: the client's --tokenizer auto renders the same
    except (TokenizerNotFound, OSError, ValueError) as e:
        raise UsageError(f"--tokenizer: {e}") from None
    seeds = np.random.SeedSequence(s.seed).spawn(4)
    vocab = build_vocabulary(tok, np.random.default_rng(seeds[0]))
    if not vocab.round_trip_ok:
        log.warning("re-encoding generated text does not give back the same ids with this tokenizer")
    batcher = WriteBatcher()
    skew = dict(s.dp_skew)
    kv = KvTransfer(s.kv_transfer_from, s.kv_transfer_delay, s.model_name) if s.kv_transfer_from else None
    engines, collectors = [], []
    for i in range(s.data_parallel_size):  # engine 0 draws as a single engine does
        rng = np.random.default_rng(seeds[1] if i == 0 else np.random.SeedSequence([s.seed, i]))
        cost = s.profile.cost.scaled(skew[i]) if i in skew else s.profile.cost
        if kv is not None:  # the prompt's KV arrives from the prefill instance: its prefill costs nothing here
            cost = replace(cost, per_prefill_token_ms=0.0)
        metrics = EngineMetrics(s.sched.max_model_len)
        engine = Engine(Scheduler(s.sched, vocab.ids, rng), cost, metrics, s.time_scale, s.batch_cap_at,
                        flush=batcher.flush)
        engines.append(engine)
        collectors.append(SimCollector(metrics, engine.gauges, s.model_name, cache_info(s, str(i)),
                                       s.legacy_metrics, engine=str(i), kv=kv))
    engine = engines[0] if len(engines) == 1 else Fleet(engines)
    collector = collectors[0] if len(collectors) == 1 else FleetCollector(collectors)
    faults = Faults(s.fault_rate, s.fault_kinds, np.random.default_rng(seeds[2])) if s.fault_rate > 0 else None
    app = SimApp(engine, tok, vocab, s.model_name, s.sched.max_model_len, s.eos_probability,
                 np.random.default_rng(seeds[3]), make_registry(collector), faults, batcher, render)
    app.reasoning = parse_spec(s.reasoning) if s.reasoning else None
    app.reasoning_field = s.reasoning_field
    app.per_request_metrics, app.spec_metrics, app.prompt_details = (s.per_request_metrics, s.spec_metrics,
                                                                     s.prompt_details)
    for e in engines:
        e.sched.spec_detailed = s.spec_metrics == "detailed"
    app.kv = kv
    if s.otlp_traces_endpoint:
        engine.tracer = SimTracer(s.otlp_traces_endpoint).start()
    return app, engine


async def serve(s: SimSettings, ready: asyncio.Future | None = None) -> None:
    app, engine = build_app(s)
    loop = asyncio.get_running_loop()
    routes = app.routes()
    try:
        server = await loop.create_server(lambda: Connection(routes, app.batcher), s.host, s.port, backlog=1024)
    except OSError as e:
        raise UsageError(f"cannot listen on {s.host}:{s.port}: {e.strerror or e}") from None
    port = server.sockets[0].getsockname()[1]
    engine_task = asyncio.create_task(engine.run())
    stop = asyncio.Event()
    failure: list[BaseException] = []

    def _engine_done(task: asyncio.Task) -> None:  # a dead engine would hang every client: stop the server
        if not task.cancelled() and task.exception() is not None:
            failure.append(task.exception())
            log.error("engine loop failed", exc_info=task.exception())
            stop.set()

    engine_task.add_done_callback(_engine_done)
    for note in s.notes:
        log.info(note)
    print(f"server.sim listening on http://{s.host}:{port} profile={s.profile.name} model={s.model_name} "
          f"time_scale={s.time_scale:g}", flush=True)
    if ready is not None:
        ready.set_result(port)
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread (tests)
            pass
    try:
        await stop.wait()
    finally:
        engine.stop()
        server.close()
        engine_task.cancel()
    if failure:
        raise EngineFailed(str(failure[0]))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
        asyncio.run(serve(settings))
    except UsageError as e:
        print(f"server.sim: error: {e}", file=sys.stderr)
        return 2
    except EngineFailed as e:
        print(f"server.sim: engine failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
