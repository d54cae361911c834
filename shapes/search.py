"""Capacity under SLO: ``--shape slo-search`` brackets then bisects for the highest load whose stage meets every SLO.

The load is a user count (closed loop, ``--search-users LO:HI``) or a total request rate (open loop,
``--search-rate LO:HI`` with ``--arrival`` and the ``--max-concurrency`` pool). Each probe is one measured stage
with its warm-up twin (``probe 3 users=8``, ``warmup probe 3 users=8``), held ``--stage-duration`` seconds.

The search (:class:`Search`, pure): probe LO; while every probe passed, double the load (capped at HI); once a
probe failed, bisect between the highest passing and the lowest failing load until they are ``--search-precision``
apart (users, or a fraction of the rate); then repeat the highest passing load once, so one noisy pass is not the
answer (a failed repeat moves the boundary down and the search goes on). ``--search-max-probes`` bounds it all.

The verdict of a probe comes from above: this package cannot import telemetry, so telemetry puts a judge on the
stage board (``board.judge``, :class:`Judge`): stage name and a wall-clock time -> the stage's SLO checks and
figures, and whether every process has reported past that time. The shape asks it while a probe is held (a probe
that clearly breaches, or is over-saturated — output flat while TTFT climbs over its trailing windows,
``shapes.saturation.over_saturated`` — stops early and fails; its record's ``early_stop`` says why) and once after
(waiting until the data is complete, at most ``JUDGE_WAIT_S``).

The summary's ``capacity`` section (:func:`capacity_section`) is the search's record: the load found or a plain
statement that none / the largest allowed one meets the SLOs, the binding SLO, goodput, output tok/s, the
per-probe figures, and with ``--gpus`` / ``--gpu-hour-price`` tokens/s per GPU and dollars per million output
tokens.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from shapes.plan import PlanError, Step, _checked, _opt, _spawn_rate, _timing
from shapes.saturation import OVERSAT_WINDOWS, over_saturated
from shapes.stage import Stage
from shapes.sweep import StepPhase, SweepShape
from shapes.values import (
    ARRIVAL_DEFAULT,
    MAX_CONCURRENCY_DEFAULT,
    SEARCH_MAX_PROBES_DEFAULT,
    SEARCH_RATE_PRECISION_DEFAULT,
    SEARCH_USERS_PRECISION_DEFAULT,
    parse_arrival,
    parse_gpu_hour_price,
    parse_gpus,
    parse_pool,
    parse_search_max_probes,
    parse_search_precision,
    parse_search_rate,
    parse_search_users,
)

logger = logging.getLogger(__name__)

USERS, RATE = "users", "rate"
JUDGE_GRACE_S = 1.0
"""Seconds after a probe's end the judge waits for (requests sent just before the end finish and are reported)."""
JUDGE_WAIT_S = 20.0
"""Most seconds the shape waits for every process to report past a probe's end before judging what it has."""
EARLY_MIN_REQUESTS = 10
"""A probe stops early on a breach only once this many of its requests are in (a few slow first requests are no
verdict), as over-saturated only once its windows hold this many."""
EARLY_BREACH_FACTOR = 1.5
"""...and one objective is past this multiple of its threshold, after a third of the hold."""


class Judge(Protocol):
    """What telemetry installs on the stage board (``board.judge``)."""

    def __call__(self, stage: str, until_wall: float | None, windows: int = 0) -> dict:
        """The stage's verdict so far: ``{"complete": bool (every process reported past until_wall), "passed",
        "checks": [{"name", "threshold", "value", "passed"}], "requests", "errors", "goodput_rps",
        "output_per_s", "span_s", "e2e_p99_s", "windows", "energy_j", "energy_note"}`` (the GPUs' joules over the
        stage, None with the reason when there is no reading); ``windows``: the stage's reported span cut in that many
        equal windows (``[{"start_s", "end_s", "requests", "output_per_s", "ttft_p50_ms"}]``, [] when too short)."""
        ...


# ------------------------------------------------------------------------------------------------ the search
@dataclass
class Search:
    """Bracket then bisect over one axis; ``next_load()`` -> the next probe's load or None (done)."""

    axis: str
    lo: float
    hi: float
    precision: float
    max_probes: int
    probes: list[tuple[float, bool]] = field(default_factory=list)
    """(load, passed) in run order."""

    def record(self, load: float, passed: bool) -> None:
        self.probes.append((load, passed))

    def _bounds(self) -> tuple[float | None, float | None]:
        """(highest load whose every probe passed, lowest failed load above it)."""
        failed = {x for x, ok in self.probes if not ok}
        passing = [x for x, _ok in self.probes if x not in failed]
        best = max(passing) if passing else None
        above = [x for x in failed if best is None or x > best]
        return best, (min(above) if above else None)

    def _times(self, load: float) -> int:
        return sum(1 for x, _ok in self.probes if x == load)

    def _close(self, best: float, fail: float) -> bool:
        if self.axis == USERS:
            return fail - best <= max(1.0, self.precision)
        return fail / best - 1.0 <= self.precision

    def _grow(self, best: float) -> float:
        return min(self.hi, max(best + 1, best * 2) if self.axis == USERS else best * 2)

    def _mid(self, best: float, fail: float) -> float:
        if self.axis == USERS:
            return float((int(best) + int(fail)) // 2)
        return float(f"{math.sqrt(best * fail):.4g}")

    def next_load(self) -> float | None:
        if len(self.probes) >= self.max_probes:
            return None
        if not self.probes:
            return self.lo
        best, fail = self._bounds()
        if best is None:
            return None
        if fail is None and best < self.hi:
            return self._grow(best)
        if fail is not None and not self._close(best, fail):
            mid = self._mid(best, fail)
            if best < mid < fail:
                return mid
        return best if self._times(best) < 2 else None

    def result(self) -> dict:
        """``{"status", "load", "confirmed"}``: ``found`` (boundary within the precision, its load passed twice),
        ``none`` (the lowest allowed load failed), ``max_allowed`` (HI passed: the capacity is at least HI),
        ``incomplete`` (probes ran out before the boundary was confirmed: load is the highest passing so far),
        ``not_run``."""
        if not self.probes:
            return {"status": "not_run", "load": None, "confirmed": False}
        best, fail = self._bounds()
        if best is None:
            return {"status": "none", "load": None, "confirmed": False}
        confirmed = self._times(best) >= 2
        if fail is None and best >= self.hi and confirmed:
            return {"status": "max_allowed", "load": best, "confirmed": True}
        if fail is not None and confirmed and (self._close(best, fail) or not best < self._mid(best, fail) < fail):
            return {"status": "found", "load": best, "confirmed": True}
        return {"status": "incomplete", "load": best, "confirmed": confirmed}


@dataclass(frozen=True)
class SearchConfig:
    """The search options, parsed: the axis and its range, precision, probe budget, and the probe's pool/timing."""

    axis: str
    lo: float
    hi: float
    precision: float
    max_probes: int
    duration: float
    warmup: float
    spawn_rate: float
    pool: int | None
    """The open loop's users (rate axis), else None."""

    def search(self) -> Search:
        return Search(self.axis, self.lo, self.hi, self.precision, self.max_probes)

    def option(self) -> str:
        return f"--search-{self.axis}"

    def step(self, load: float, probe: int) -> Step:
        """Probe number ``probe`` (1-based) at ``load``: its measured stage and its warm-up twin."""
        if self.axis == USERS:
            users, spawn, rate, label = int(load), self.spawn_rate, None, f"users={int(load)}"
        else:
            users, spawn, rate, label = self.pool or 1, float(self.pool or 1), load, f"rate={load:g}"
        stage = Stage(f"probe {probe} {label}", index=2 * probe - 1, users=users, rate=rate)
        warm = Stage(f"warmup probe {probe} {label}", index=2 * probe - 2, users=users, rate=rate, warmup=True)
        return Step(stage, users, spawn, self.duration, self.warmup, warm)


def search_config(options) -> SearchConfig:
    """The parsed search options; PlanError names the option at fault."""
    users, rate = _opt(options, "search_users"), _opt(options, "search_rate")
    if (users is None) == (rate is None):
        raise PlanError("--shape slo-search needs exactly one of --search-users LO:HI (closed loop) "
                        "or --search-rate LO:HI (open loop)")
    axis = USERS if users is not None else RATE
    if axis == USERS:
        lo, hi = _checked(parse_search_users, users, "--search-users")
        default_precision, pool = SEARCH_USERS_PRECISION_DEFAULT, None
    else:
        lo, hi = _checked(parse_search_rate, rate, "--search-rate")
        _checked(parse_arrival, _opt(options, "arrival", ARRIVAL_DEFAULT), "--arrival")
        default_precision = SEARCH_RATE_PRECISION_DEFAULT
        pool = _checked(parse_pool, _opt(options, "max_concurrency", MAX_CONCURRENCY_DEFAULT), "--max-concurrency")
    precision = _checked(parse_search_precision, _opt(options, "search_precision", default_precision),
                         "--search-precision")
    probes = _checked(parse_search_max_probes, _opt(options, "search_max_probes", SEARCH_MAX_PROBES_DEFAULT),
                      "--search-max-probes")
    duration, warmup = _timing(options)
    return SearchConfig(axis, float(lo), float(hi), precision, probes, duration, warmup, _spawn_rate(options), pool)


def search_plan(options) -> list[Step]:
    """The first probe (at LO): the rest of a search is decided by the probes' verdicts as it runs."""
    return [search_config(options).step(search_config(options).lo, 1)]


# ------------------------------------------------------------------------------------------------ the shape
@dataclass(slots=True)
class _Probe(StepPhase):
    """A probe's step in its phases (the sweep's, then ``judge``: the verdict awaited) and what judging it needs."""

    load: float = 0.0
    end_wall: float | None = None
    early: dict | None = None
    count: int = -1
    """The stage's request count at the last judge call, and since when (the judge phase waits for it to settle)."""
    count_since: float = 0.0


class SloSearchShape(SweepShape):
    """Runs one probe at a time; the next load is the search's answer to the last probe's verdict."""

    plan_name = "slo-search"
    build = staticmethod(search_plan)

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(clock)
        self._config: SearchConfig | None = None
        self.search: Search | None = None
        self.record: list[dict] = []
        """Per probe: load, stage, verdict (checks and figures), early stop; the capacity section's rows."""
        self._probe: _Probe | None = None
        self._begun = False
        self._stopped = False

    def finish(self) -> None:
        """A test stopped: the next tick starts a new search (this one's record stays for the summary)."""
        super().finish()
        self._probe = None
        self._begun = self._stopped = False

    @property
    def current_step(self) -> Step | None:
        return self._probe.step if self._probe is not None else None

    def progress(self) -> dict | None:
        if self._probe is None or self.search is None:
            return None
        return self._phase_view(self._probe, len(self.search.probes) + 1, self.search.max_probes)

    def _start(self) -> bool:
        try:
            self._config = search_config(self.runner.environment.parsed_options)
        except PlanError as e:
            logger.error("%s: %s; stopping the test", type(self).__name__, e)
            return False
        if getattr(self.board, "judge", None) is None:
            logger.error("--shape slo-search: no SLO judge on this process (telemetry is not installed)")
            return False
        self.board.reset()
        self.search = self._config.search()
        self.record = []
        c = self._config
        logger.info("slo-search over %s %g:%g (precision %g, at most %d probes)", c.axis, c.lo, c.hi, c.precision,
                    c.max_probes)
        return self._next()

    def _next(self) -> bool:
        """Set up the next probe; False when the search is done."""
        assert self.search is not None and self._config is not None
        load = self.search.next_load()
        if load is None:
            self._probe = None
            return False
        self._probe = _Probe(self._config.step(load, len(self.search.probes) + 1), load=load)
        logger.info("slo-search: %s", self._probe.step.stage.name)
        return True

    def tick(self) -> tuple[int, float] | None:
        if self._stopped:
            return None
        if not self._begun:
            self._begun = True
            if not self._start():
                return self._done()
        while self._probe is not None:
            p, step = self._probe, self._probe.step
            now = self._clock()
            if p.phase != "judge":
                if not self._advance(p, now, partial(self._breaches, p)):
                    return step.users, step.spawn_rate
                # the users keep running (stamped with a warm-up stage) while the probe is judged
                self.board.set(Stage(f"judging {step.stage.name}", index=step.stage.index, users=step.users,
                                     rate=step.stage.rate, warmup=True))
                p.phase, p.since, p.end_wall = "judge", now, time.time()
            verdict = self.board.judge(step.stage.name, (p.end_wall or time.time()) + JUDGE_GRACE_S)
            if not self._judged(p, verdict, now) and now - p.since < max(JUDGE_WAIT_S, step.duration):
                return step.users, step.spawn_rate
            self._decide(p, verdict)
            if not self._next():
                break
        return self._done()

    @staticmethod
    def _judged(p: _Probe, verdict: dict, now: float) -> bool:
        """The probe's data is in: every process reported past its end (plus the grace), it has requests, and their
        count has not grown for the stage's E2E p99 (a request sent before the end is counted when it finishes; at a
        breaching load those stragglers are the slowest ones, so judging without them would favour a pass)."""
        n = verdict.get("requests") or 0
        if n != p.count:
            p.count, p.count_since = n, now
        settle = max(JUDGE_GRACE_S, verdict.get("e2e_p99_s") or 0.0)
        rate = p.step.stage.rate
        if rate:  # open loop: a user stamps its request with the stage before it waits for its slot in the pacer,
            settle += p.step.users / rate  # so requests of this stage may still start up to pool / rate s later
        return bool(verdict.get("complete")) and n > 0 and now - p.count_since >= settle

    def _breaches(self, p: _Probe, held: float) -> bool:
        """True once the probe clearly breaches (an objective past EARLY_BREACH_FACTOR x its threshold over enough
        requests) or is over-saturated (output flat while TTFT p50 climbs over its trailing windows), after a third
        of the hold: it stops early and counts as failed; ``p.early`` says why."""
        if held < p.step.duration / 3:
            return False
        v = self.board.judge(p.step.stage.name, None, windows=OVERSAT_WINDOWS)
        worst = [c for c in v.get("checks") or []
                 if c["value"] is not None and c["value"] > c["threshold"] * EARLY_BREACH_FACTOR]
        windows = v.get("windows") or []
        if (v.get("requests") or 0) < EARLY_MIN_REQUESTS:
            worst = []  # a few slow first requests are no verdict
        if sum(w.get("requests") or 0 for w in windows) < EARLY_MIN_REQUESTS:
            windows = []  # (the windows count every request ending in them: a deep queue finishes few of the probe's)
        if worst:
            c = worst[0]
            p.early = {"at_s": held, "why": "slo_breach", "slo": c["name"], "value": c["value"],
                       "threshold": c["threshold"],
                       "reason": f"{c['name']} {c['value']:.4g} > {EARLY_BREACH_FACTOR:g} x {c['threshold']:g}"}
        elif (why := over_saturated(windows)) is not None:
            p.early = {"at_s": held, "why": "over_saturated", "slo": None, "value": None, "threshold": None,
                       "reason": why, "windows": v["windows"]}
        if p.early is not None:
            logger.warning("slo-search: %s stopped early after %.1f s: %s", p.step.stage.name, held,
                           p.early["reason"])
        return p.early is not None

    def _decide(self, p: _Probe, verdict: dict) -> None:
        assert self.search is not None
        passed = bool(verdict.get("passed")) and p.early is None
        self.search.record(p.load, passed)
        self.record.append({"probe": len(self.search.probes), "load": p.load, "stage": p.step.stage.name,
                            "users": p.step.users, "rate": p.step.stage.rate, "passed": passed,
                            "early_stop": p.early, "complete": bool(verdict.get("complete")),
                            **{k: verdict.get(k) for k in ("checks", "requests", "errors", "goodput_rps",
                                                           "output_per_s", "span_s", "energy_j", "energy_note")}})
        logger.info("slo-search: %s %s", p.step.stage.name, "meets every SLO" if passed else "breaches")

    def _done(self) -> None:
        self._stopped = True
        self.board.close()
        if self.search is not None and self.search.probes:
            logger.info("slo-search: %s", statement(self._config, self.search.result(), self.record))
        return None

    def capacity(self, options) -> dict | None:
        """The ``capacity`` summary section (None before the search started)."""
        if self._config is None or self.search is None:
            return None
        return capacity(self._config, self.search.result(), self.record, options)


# ------------------------------------------------------------------------------------------------ the section
def _load_text(config: SearchConfig, load: float) -> str:
    return f"{config.axis}={int(load) if config.axis == USERS else format(load, 'g')}"


def _range_text(config: SearchConfig) -> str:
    fmt = (lambda x: str(int(x))) if config.axis == USERS else (lambda x: format(x, "g"))
    return f"{config.option()} {fmt(config.lo)}:{fmt(config.hi)}"


def _breach_text(row: dict) -> str:
    bad = [c for c in row.get("checks") or [] if not c["passed"]]
    if row.get("early_stop"):
        return f"{row['early_stop']['reason']} (stopped early)"
    if not bad:
        return "no data" if not row.get("requests") else "failed"
    return ", ".join(f"{c['name']} {'no data' if c['value'] is None else format(c['value'], '.4g')} > "
                     f"{c['threshold']:g}" for c in bad)


def statement(config: SearchConfig | None, result: dict, record: list[dict]) -> str:
    """The search's answer in one plain sentence (no number the probes did not measure)."""
    if config is None or result["status"] == "not_run":
        return "the search ran no probe"
    status, load = result["status"], result["load"]
    if status == "none":
        first = record[0] if record else {}
        return (f"no load in {_range_text(config)} meets the SLOs: the lowest, {_load_text(config, config.lo)}, "
                f"breached {_breach_text(first)}")
    if status == "max_allowed":
        return (f"the largest allowed load, {_load_text(config, load)}, still meets every SLO: the capacity is at "
                f"least that; raise HI of {config.option()} to find it")
    fails = [r for r in record if not r["passed"] and r["load"] > load]
    above = min(fails, key=lambda r: r["load"]) if fails else None
    why = f"; {_load_text(config, above['load'])} breached {_breach_text(above)}" if above else ""
    if status == "found":
        return f"capacity {_load_text(config, load)}: the highest load meeting every SLO (passed twice){why}"
    return (f"probes ran out (--search-max-probes {config.max_probes}) before the boundary was confirmed: "
            f"{_load_text(config, load)} is the highest load that met every SLO so far{why}")


def binding_slo(row: dict) -> dict | None:
    """The objective closest to its threshold (highest value / threshold) at a probe, with its value."""
    checks = [c for c in row.get("checks") or [] if c["value"] is not None and c["threshold"] > 0]
    if not checks:
        return None
    c = max(checks, key=lambda c: c["value"] / c["threshold"])
    return {"name": c["name"], "threshold": c["threshold"], "value": c["value"], "ratio": c["value"] / c["threshold"]}


def costs(output_per_s: float | None, options) -> dict:
    """tokens/s per GPU (``--gpus``) and US dollars per million output tokens (``--gpu-hour-price`` x GPUs over
    the output tokens of one hour at ``output_per_s``); None where an input is missing."""
    gpus = _opt(options, "gpus")
    price = _opt(options, "gpu_hour_price")
    gpus = parse_gpus(gpus) if gpus is not None else None
    price = parse_gpu_hour_price(price) if price is not None else None
    per_gpu = output_per_s / gpus if output_per_s is not None and gpus else None
    usd = None
    if output_per_s and price is not None:
        usd = (gpus or 1) * price / (output_per_s * 3600.0) * 1e6
    return {"gpus": gpus, "gpu_hour_price_usd": price, "output_per_s_per_gpu": per_gpu,
            "usd_per_million_output_tokens": usd}


def energy_per_token(row: dict) -> tuple[float | None, str]:
    """(joules per output token at a probe: the GPUs' energy over its span / its output tokens (output tok/s x span),
    how it was read) or (None, why not)."""
    if not row:
        return None, "no load met the SLOs: no probe to read the energy at"
    joules, out_s, span_s = row.get("energy_j"), row.get("output_per_s"), row.get("span_s")
    if joules is None:
        return None, row.get("energy_note") or "no GPU energy reading"
    if not out_s or not span_s:
        return None, "the probe delivered no output tokens"
    return joules / (out_s * span_s), f"{joules:.6g} J over {span_s:.3g} s / {out_s * span_s:.6g} output tokens " \
                                      f"({row.get('energy_note')})"


def capacity(config: SearchConfig, result: dict, record: list[dict], options) -> dict:
    load = result["load"]
    at = [r for r in record if r["load"] == load and r["passed"]] if load is not None else []
    row = at[-1] if at else {}
    out_s = row.get("output_per_s")
    j_per_token, energy_note = energy_per_token(row)
    return {
        "axis": config.axis,
        "range": [config.lo, config.hi],
        "precision": config.precision,
        "max_probes": config.max_probes,
        "probes_used": len(record),
        "status": result["status"],
        "confirmed": result["confirmed"],
        "statement": statement(config, result, record),
        "users": int(load) if load is not None and config.axis == USERS else None,
        "rate": load if config.axis == RATE else None,
        "binding_slo": binding_slo(row) if row else None,
        "goodput_rps": row.get("goodput_rps"),
        "output_per_s": out_s,
        **costs(out_s, options),
        "energy_j_per_output_token": j_per_token,
        "energy_note": energy_note,
        "probes": record,
    }
