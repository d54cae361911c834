"""The LLM tab's table: columns, and rows built from the telemetry hub's ``live()`` dict.

``live()`` follows the summary JSON's schema (DESIGN.md, schema 1) for the parts it has so far:
``stages`` (each with ``name``, ``users``, ``requests``, ``ttft_ms``/``itl_ms``/``tpot_ms`` quantile dicts,
``output_per_s``, ``client_kv_block_fill``, ``server_kv_usage_mean``), run totals at the top level
(``ttft_ms``... ``tokens.output_per_s``, ``client_kv_block_fill.mean``) and current server signals under
``server``. Anything missing shows as an em dash; nothing is invented.

    rows = llm_rows(environment.llm_telemetry.live())
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TAB_KEY = "llm"
MISSING = "—"

# (key, title); Locust's web UI shows the columns in this order. Keys are snake_case: the UI camel-cases
# both the table structure and the row keys it receives, so they keep matching.
COLUMNS: list[tuple[str, str]] = [
    ("stage", "Stage"),
    ("users", "Users"),
    ("requests", "Requests"),
    ("ttft_p50", "TTFT p50 (ms)"),
    ("ttft_p99", "TTFT p99 (ms)"),
    ("itl_p50", "ITL p50 (ms)"),
    ("itl_p99", "ITL p99 (ms)"),
    ("tpot_p50", "TPOT p50 (ms)"),
    ("tpot_p99", "TPOT p99 (ms)"),
    ("output_tok_s", "Output tok/s"),
    ("server_kv", "Server KV usage"),
    ("client_kv", "Client KV fill"),
]
STRUCTURE = [{"key": key, "title": title} for key, title in COLUMNS]
LATENCIES = {"ttft": "ttft_ms", "itl": "itl_ms", "tpot": "tpot_ms"}


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


def _quantile(section: Mapping, key: str, q: str) -> Any:
    block = section.get(key)
    if not isinstance(block, Mapping) or not block.get("count"):
        return None
    return block.get(q)


def _mean(value: Any) -> Any:
    return value.get("mean") if isinstance(value, Mapping) else value


def row(name: str, section: Mapping, server_kv: Any = None) -> dict[str, str]:
    """One table row from a stage entry (or the run totals) of ``live()``."""
    out: dict[str, str] = {"stage": name}
    users = section.get("users")
    out["users"] = MISSING if users is None else str(users)
    requests = section.get("requests")
    if isinstance(requests, Mapping):  # run totals: {"total": n, "ok": n, ...}
        requests = requests.get("total")
    out["requests"] = _fixed(requests, 0)
    for short, key in LATENCIES.items():
        out[f"{short}_p50"] = _fixed(_quantile(section, key, "p50"), 1)
        out[f"{short}_p99"] = _fixed(_quantile(section, key, "p99"), 1)
    rate = section.get("output_per_s")
    if rate is None and isinstance(section.get("tokens"), Mapping):
        rate = section["tokens"].get("output_per_s")
    out["output_tok_s"] = _fixed(rate, 1)
    out["server_kv"] = _percent(server_kv if server_kv is not None else section.get("server_kv_usage_mean"))
    out["client_kv"] = _percent(_mean(section.get("client_kv_block_fill")))
    return out


def _current_server_kv(live: Mapping) -> Any:
    server = live.get("server")
    if not isinstance(server, Mapping):
        return None
    usage = server.get("kv_cache_usage")
    if isinstance(usage, Mapping):
        return usage.get("last", usage.get("mean"))
    return usage


def llm_rows(live: Mapping | None) -> list[dict[str, str]]:
    """Rows for the LLM tab: the run totals first ("all"), then one per stage in run order."""
    if not live:
        return []
    rows = [row("all", live, server_kv=_current_server_kv(live))]
    for stage in live.get("stages") or []:
        if isinstance(stage, Mapping):
            rows.append(row(str(stage.get("name", "?")), stage))
    return rows
