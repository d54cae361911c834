"""Engine imbalance: one engine (a data-parallel rank or a replica) far off the rest of the fleet, window by window.

In each window every engine's figures are read from its own series (the scraper keeps every series per target and
engine): the mean of the requests waiting in its scrapes, the queue-time p99 and the mean inter-token latency (from
the growth of its histograms), and the requests it finished. An engine is *flagged* in a window when, against the
median of the *other* engines (with two engines, the other one):

- ``waiting``: its mean waiting is ``factor`` times theirs and at least ``WAITING_GAP`` requests more (a mean:
  a queue that stays, not the moment a burst lands);
- ``queue_p99_ms``: its queue-time p99 is ``factor`` times theirs and at least ``QUEUE_GAP_MS`` more;
- ``itl_mean_ms``: its mean inter-token latency is ``factor`` times theirs (a straggling engine);
- ``finished``: it finished ``factor`` times fewer (or more) requests than they did, when they finished at least
  ``FINISHED_MIN`` (requests unevenly spread).

Engines are compared with their peers only: a prefill/decode pair's prefill engines with each other, its decode
engines with each other. The fleet is *imbalanced* while the same engine is flagged in each of the last
``consecutive`` windows (``--imbalance-windows``; ``--imbalance-factor``). The live detector
(telemetry/control/detectors.py) judges the trailing windows every second; the post-run verdict
(``attribution.bottleneck``: ``engine_imbalance``) takes the run's first such streak.

    state = judge(series, until_s=30.0, window_s=5.0, rule=ImbalanceRule(factor=2.0, consecutive=2))
    state["imbalanced"], state["engine"], state["evidence"]
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from statistics import median

from telemetry.attribution.histogram import CumulativeHistogram
from telemetry.attribution.options import IMBALANCE_FACTOR_DEFAULT, IMBALANCE_WINDOWS_DEFAULT
from telemetry.measure.scraper import engine_keys, engine_series

WAITING_GAP = 2
"""Requests an engine's waiting max must exceed the others' by (besides the factor)."""
QUEUE_GAP_MS = 50.0
"""Milliseconds an engine's queue-time p99 must exceed the others' by (besides the factor)."""
FINISHED_MIN = 4
"""The others' finished requests in a window below which the spread is not judged."""


@dataclass(frozen=True)
class ImbalanceRule:
    factor: float = IMBALANCE_FACTOR_DEFAULT
    consecutive: int = IMBALANCE_WINDOWS_DEFAULT


def _hist(sample: dict, name: str) -> CumulativeHistogram | None:
    h = (sample.get("hist") or {}).get(name)
    if not h:
        return None
    return CumulativeHistogram.from_buckets(dict(zip(h["le"], h["cum"], strict=True)), total_sum=h.get("sum"))


def _growth(first: dict, last: dict, name: str) -> CumulativeHistogram | None:
    a, b = _hist(first, name), _hist(last, name)
    if a is None or b is None:
        return None
    try:
        return b - a
    except ValueError:
        return None


def window_figures(own: list[dict], start_s: float, end_s: float) -> dict | None:
    """One engine's figures over [start_s, end_s] from its samples (None without two samples around it)."""
    times = [s["t"] for s in own]
    i, j = bisect_right(times, start_s), bisect_right(times, end_s)  # own[:i] at or before the start, own[i:j] inside
    first = own[i - 1] if i else (own[i] if i < len(own) else None)
    last = own[j - 1] if j else None
    if first is None or last is None or last["t"] <= first["t"]:
        return None
    waiting = [s["requests_waiting"] for s in own[i:j] if s.get("requests_waiting") is not None]
    queue, itl = _growth(first, last, "queue"), _growth(first, last, "itl")
    a, b = first.get("request_success_total"), last.get("request_success_total")
    q99 = queue.quantile(0.99) if queue is not None and queue.count > 0 else None
    itl_mean = itl.mean() if itl is not None and itl.count > 0 else None
    return {
        "waiting": sum(waiting) / len(waiting) if waiting else None,
        "queue_p99_ms": q99 * 1000.0 if q99 is not None else None,
        "itl_mean_ms": itl_mean * 1000.0 if itl_mean is not None else None,
        "finished": (b - a if b >= a else b) if a is not None and b is not None else None,
    }


def _above(v: float, med: float, factor: float, gap: float) -> bool:
    return v >= factor * med and v - med >= gap


def flags(figures: dict[str, dict], factor: float) -> dict[str, dict]:
    """``{engine: {signal: {"value", "others_median"}}}`` for every engine flagged in one window."""
    out: dict[str, dict] = {}
    for key, mine in figures.items():
        fired = {}
        others = [f for k, f in figures.items() if k != key]
        for signal in ("waiting", "queue_p99_ms", "itl_mean_ms", "finished"):
            v = mine.get(signal)
            rest = [f[signal] for f in others if f.get(signal) is not None]
            if v is None or not rest:
                continue
            med = median(rest)
            if signal == "waiting":
                hit = _above(v, med, factor, WAITING_GAP)
            elif signal == "queue_p99_ms":
                hit = _above(v, med, factor, QUEUE_GAP_MS)
            elif signal == "itl_mean_ms":
                hit = med > 0 and v >= factor * med
            else:
                hit = med >= FINISHED_MIN and (v * factor <= med or _above(v, med, factor, FINISHED_MIN))
            if hit:
                fired[signal] = {"value": v, "others_median": med}
        if fired:
            out[key] = fired
    return out


def judge_windows(series: list[dict], starts: list[float], window_s: float, rule: ImbalanceRule) -> list[dict]:
    """Per window starting at each of ``starts``: its engines' figures and the flagged engines."""
    keys = engine_keys(series)
    own = {k: engine_series(series, k) for k in keys}
    role = {k: own[k][-1].get("role") if own[k] else None for k in keys}
    out = []
    for start in starts:
        figs = {k: f for k in keys if (f := window_figures(own[k], start, start + window_s)) is not None}
        flagged: dict[str, dict] = {}
        for r in {role[k] for k in figs}:  # prefill engines against prefill engines, decode against decode
            peers = {k: f for k, f in figs.items() if role[k] == r}
            if len(peers) >= 2:
                flagged.update(flags(peers, rule.factor))
        out.append({"start_s": start, "end_s": start + window_s, "engines": len(figs), "flagged": flagged})
    return out


def _streak(windows: list[dict]) -> str | None:
    """The engine flagged in every one of ``windows`` (the one with the most signals when several are)."""
    common = set(windows[0]["flagged"]) if windows else set()
    for w in windows[1:]:
        common &= set(w["flagged"])
    if not common:
        return None
    return max(sorted(common), key=lambda k: sum(len(w["flagged"][k]) for w in windows))


def evidence(engine: str, windows: list[dict]) -> str:
    """One line: the engine, its signals in the streak's last window and how long it lasted."""
    last = windows[-1]["flagged"][engine]
    parts = [f"{sig} {v['value']:.4g} vs the others' median {v['others_median']:.4g}" for sig, v in last.items()]
    return (f"engine {engine} off the fleet for {len(windows)} windows from {windows[0]['start_s']:.0f} s: "
            + ", ".join(parts))


def judge(series: list[dict], until_s: float, window_s: float, rule: ImbalanceRule) -> dict:
    """The live state over the last ``rule.consecutive`` windows ending at ``until_s``."""
    n = rule.consecutive
    origin = until_s - n * window_s
    state: dict = {"judged": False, "imbalanced": False, "engine": None, "evidence": None, "windows": []}
    if origin < -1e-9:
        return state
    recent = [s for s in series if isinstance(s.get("t"), int | float) and s["t"] >= origin - window_s]
    windows = judge_windows(recent, [origin + i * window_s for i in range(n)], window_s, rule)
    state["windows"] = windows
    if any(w["engines"] < 2 for w in windows):
        return state
    state["judged"] = True
    engine = _streak(windows)
    if engine is not None:
        state.update(imbalanced=True, engine=engine, evidence=evidence(engine, windows))
    return state


def first_streak(series: list[dict], window_s: float, rule: ImbalanceRule) -> dict | None:
    """After the run: the first ``consecutive`` windows of the run's grid in which one engine stays flagged, as
    ``{"engine", "from_s", "evidence", "flags"}``; None when no engine ever was."""
    if not series or len(engine_keys(series)) < 2:
        return None
    end = max(s["t"] for s in series)
    starts = [i * window_s for i in range(int(end // window_s))]
    windows = judge_windows(series, starts, window_s, rule)
    n = rule.consecutive
    for i in range(len(windows) - n + 1):
        run = windows[i:i + n]
        engine = _streak(run)
        if engine is not None:
            return {"engine": engine, "from_s": run[0]["start_s"], "evidence": evidence(engine, run),
                    "flags": run[-1]["flagged"][engine]}
    return None
