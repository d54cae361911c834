"""Gray routing's report: the summary's ``versions`` section.

The users route each request by its fingerprint (``--route-table``, :mod:`workload.routing`) and
stamp ``GenerationResult.version``; telemetry records per (user class, stage, version). This adds
``summary["versions"]`` on the master: per route version its requests, share of traffic next to the
share its bucket ranges promise, base URL, token counts, the client/server prompt mismatch, its tokenizer
(``--route-tokenizers``: name, hash, compat level), its own backend's server figures (KV usage, running, waiting,
preemptions, prefix-cache hit rate from that backend's /metrics) and latency quantiles (ms; the ``versions``
metrics of :mod:`telemetry.metrics`), so one run compares two deployments side by side:

    "versions": {"v1": {"requests": 812, "ok": 812, "share": 0.79, "expected_share": 0.8,
                        "base_url": "http://a:8000", "ttft_ms": Q, "itl_ms": Q, "tpot_ms": Q, "e2e_ms": Q, ...}}
"""

from __future__ import annotations

from telemetry.metrics import having
from telemetry.recorder import Recorder
from telemetry.summary import q_ms
from telemetry.view import RunView
from users.options import route_table_from


def server_figures(server: dict | None) -> dict | None:
    """One version's backend over the run, from its own scrapes: KV usage, running and waiting (mean, max, last),
    preemptions and prefix-cache queries/hits (counter deltas between the first and last scrape) and the hit
    rate; None when the version's backend was not scraped."""
    if server is None:
        return None
    series = [x for x in server.get("series", ()) if isinstance(x, dict)]

    def gauge(key: str) -> dict:
        vals = [float(x[key]) for x in series if x.get(key) is not None]
        return {"mean": sum(vals) / len(vals) if vals else None, "max": max(vals) if vals else None,
                "last": vals[-1] if vals else None}  # fmt: skip

    def delta(key: str) -> float | None:
        vals = [float(x[key]) for x in series if x.get(key) is not None]
        return vals[-1] - vals[0] if len(vals) >= 2 else None

    queries, hits = delta("prefix_cache_queries_total"), delta("prefix_cache_hits_total")
    return {
        "metrics_url": server.get("url"),
        "scrapes": int(server.get("scrapes", 0)),
        "scrape_failures": int(server.get("failures", 0)),
        "kv_cache_usage": gauge("kv_cache_usage"),
        "requests_running": gauge("requests_running"),
        "requests_waiting": gauge("requests_waiting"),
        "preemptions": delta("preemptions_total"),
        "prefix_cache_queries": queries,
        "prefix_cache_hits": hits,
        "prefix_cache_hit_rate": hits / queries if queries and hits is not None else None,
    }


def versions_section(view: RunView, _summary: dict | None = None, tokenizers: dict | None = None) -> dict:
    """``{version: {...}}`` from the merged recorder (warm-up stages left out, like the rest of the summary);
    ``tokenizers``: each version's tokenizer record (users/versions.py)."""
    warmup = view.warmup_stages()
    try:
        table = route_table_from(view.options)
    except ValueError:
        table = None
    expected = table.buckets().shares() if table else {}
    urls = {r.version: r.base_url for _lo, _hi, r in table.spans} if table else {}
    by_version: dict[str, list] = {}
    for (_cls, stage, version), cell in view.merged.cells.items():
        if version is not None and stage not in warmup:
            by_version.setdefault(version, []).append(cell)
    total = sum(c.requests for cells in by_version.values() for c in cells)
    duration = view.duration_s
    out: dict[str, dict] = {}
    for version in sorted(by_version, key=lambda v: (list(urls).index(v) if v in urls else len(urls), v)):
        cells = by_version[version]
        n = sum(c.requests for c in cells)
        output = sum(c.output_tokens for c in cells)
        mismatch = [sum(c.mismatch[0] for c in cells), sum(c.mismatch[1] for c in cells)]
        out[version] = {
            "requests": n,
            "ok": sum(c.ok for c in cells),
            "failed": n - sum(c.ok for c in cells),
            "share": n / total if total else None,
            "expected_share": expected.get(version),
            "base_url": urls.get(version),
            "prompt_tokens": sum(c.prompt_tokens for c in cells),
            "output_tokens": output,
            "output_per_s": output / duration if duration and duration > 0 else None,
            "prompt_mismatch_ratio": mismatch[0] / mismatch[1] if mismatch[1] else None,
            "tokenizer": (tokenizers or {}).get(version),
            "server": server_figures(view.version_servers.get(version)),
            **{m.summary_key: q_ms(Recorder.merged_sketch(cells, m.key)) for m in having("versions")},
        }
    return out
