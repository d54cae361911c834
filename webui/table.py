"""The LLM tab's table: columns, and rows built from the telemetry hub's ``live()`` dict.

``live()`` (the hub's live view) gives, per stage in run order, ``{"stage", "requests", "output_tok_s"}`` and
``<key>_p50_ms`` / ``<key>_p99_ms`` for each live metric of telemetry.metrics (TTFT, ITL, TPOT... merged across
workers; quantiles from merged sketches), and for the run ``server_kv_usage`` (the latest scrape, 0..1),
``client_kv_block_fill`` (0..1), ``workers`` and ``detectors``. The table has one row per stage and a last row
"now" with the current users, all requests so far, the two KV figures (latest) and the live detectors' states; a
stage row's KV figures are the stage's means. Quantiles
are never averaged or summed across stages, so the "now" row leaves them empty. Anything missing shows as an em dash.

    rows = llm_rows(environment.llm.telemetry.live(), users=runner.user_count)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telemetry.metrics import BY_KEY, shown
from telemetry.outputs.live import LIVE

TAB_KEY = "llm"
MISSING = "—"
NO_REASONING = "no reasoning"
"""A reasoning-only metric's cell (TTFA) in a run in which no request reasoned (``telemetry.metrics.shown``)."""

# (key, title); Locust's web UI shows the columns in this order. Keys are snake_case: the UI camel-cases
# both the table structure and the row keys it receives, so they keep matching.
COLUMNS: list[tuple[str, str]] = [
    ("stage", "Stage"),
    ("users", "Users"),
    ("requests", "Requests"),
    *((f"{k}_{q}", f"{BY_KEY[k].label} {q} (ms)") for k in LIVE for q in ("p50", "p99")),
    ("output_tok_s", "Output tok/s"),
    ("server_kv", "Server KV usage"),
    ("client_kv", "Client KV fill"),
    ("detectors", "Live detectors"),
]
STRUCTURE = [{"key": key, "title": title} for key, title in COLUMNS]
LATENCIES = LIVE
NOW = "now"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None  # NaN -> None


def _fixed(value: Any, digits: int) -> str:
    v = _num(value)
    return MISSING if v is None else f"{v:,.{digits}f}"


def _percent(value: Any) -> str:
    v = _num(value)
    return MISSING if v is None else f"{100.0 * v:.1f}%"


def _empty(name: str) -> dict[str, str]:
    return {key: (name if key == "stage" else MISSING) for key, _ in COLUMNS}


def stage_row(stage: Mapping, did_reason: bool = True) -> dict[str, str]:
    """One row from a ``live()["stages"]`` entry; a reasoning-only metric says NO_REASONING when nothing reasoned
    (``did_reason``: the run's ``live()["reasoned"]``; Locust's table has fixed columns)."""
    out = _empty(str(stage.get("stage", "?")))
    out["users"] = _fixed(stage.get("users"), 0)
    out["requests"] = _fixed(stage.get("requests"), 0)
    kept = shown(LATENCIES, did_reason)
    for m in LATENCIES:
        for q in ("p50", "p99"):
            out[f"{m}_{q}"] = _fixed(stage.get(f"{m}_{q}_ms"), 1) if m in kept else NO_REASONING
    out["output_tok_s"] = _fixed(stage.get("output_tok_s"), 1)
    out["server_kv"] = _percent(stage.get("server_kv_usage"))
    out["client_kv"] = _percent(stage.get("client_kv_block_fill"))
    return out


def now_row(live: Mapping, stages: list[Mapping], users: int | None) -> dict[str, str]:
    out = _empty(NOW)
    out["users"] = _fixed(users, 0)
    counts = [_num(s.get("requests")) for s in stages]
    if counts and all(c is not None for c in counts):
        out["requests"] = _fixed(sum(counts), 0)  # counts add up across stages; quantiles do not
    out["server_kv"] = _percent(live.get("server_kv_usage"))
    out["client_kv"] = _percent(live.get("client_kv_block_fill"))
    out["detectors"] = detector_text(live.get("detectors"))
    return out


def detector_text(state: Mapping | None) -> str:
    """The live detectors in one cell: ``batching ok · ttft_p99_ms BREACHED 950 > 800``
    (telemetry/control/detectors.py)."""
    if not isinstance(state, Mapping):
        return MISSING
    b = state.get("batching") or {}
    parts = ["batching DEGRADED" if b.get("degraded") else "batching ok" if b.get("judged") else "batching pending"]
    for c in state.get("slo") or []:
        value = _num(c.get("value"))
        shown = "—" if value is None else f"{value:.4g}"
        parts.append(f"{c.get('name')} {'BREACHED' if c.get('breached') else 'ok'} {shown} / {c.get('threshold'):g}")
    im = state.get("imbalance") or {}
    if im.get("imbalanced"):
        parts.append(f"IMBALANCED engine {im.get('engine')}")
    elif im.get("judged"):
        parts.append("engines balanced")
    if state.get("stopped_by"):
        parts.append(f"stopped by {state['stopped_by'].get('detector')}")
    return " · ".join(parts)


def engine_rows(live: Mapping) -> list[dict[str, str]]:
    """With a fleet (two engines or more), one row per target and engine: its KV usage and, in the detectors'
    column, its running and waiting requests and whether the imbalance detector names it."""
    engines = live.get("engines") or {}
    if len(engines) < 2:
        return []
    flagged = ((live.get("detectors") or {}).get("imbalance") or {})
    out = []
    for key, e in engines.items():
        row = _empty(f"engine {key}")
        row["server_kv"] = _percent(e.get("kv_cache_usage"))
        text = f"running {_fixed(e.get('requests_running'), 0)} · waiting {_fixed(e.get('requests_waiting'), 0)}"
        if flagged.get("imbalanced") and flagged.get("engine") == key:
            text += " · OFF THE FLEET"
        row["detectors"] = text
        out.append(row)
    return out


def llm_rows(live: Mapping | None, users: int | None = None) -> list[dict[str, str]]:
    """Rows for the LLM tab: one per stage in run order, then "now", then one per engine of a fleet; no rows before
    the hub has anything."""
    if not live:
        return []
    stages = [s for s in live.get("stages") or [] if isinstance(s, Mapping)]
    did_reason = bool(live.get("reasoned", True))
    return [*(stage_row(s, did_reason) for s in stages), now_row(live, stages, users), *engine_rows(live)]
