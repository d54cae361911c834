"""Gray routing's report: the summary's ``versions`` section.

The users route each request by its fingerprint (``--route-table``, :mod:`workload.routing`) and
stamp ``GenerationResult.version``; telemetry records per (user class, stage, version). This adds
``summary["versions"]`` on the master: per route version its requests, share of traffic next to the
share its bucket ranges promise, base URL, token counts and latency quantiles (ms; the ``versions`` metrics of
:mod:`telemetry.metrics`), so one run compares
two deployments side by side:

    "versions": {"v1": {"requests": 812, "ok": 812, "share": 0.79, "expected_share": 0.8,
                        "base_url": "http://a:8000", "ttft_ms": Q, "itl_ms": Q, "tpot_ms": Q, "e2e_ms": Q, ...}}
"""

from __future__ import annotations

from telemetry.metrics import having
from telemetry.recorder import Recorder
from telemetry.summary import q_ms
from telemetry.view import RunView
from users.options import route_table_from


def versions_section(view: RunView, _summary: dict | None = None) -> dict:
    """``{version: {...}}`` from the merged recorder (warm-up stages left out, like the rest of the summary)."""
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
            **{m.summary_key: q_ms(Recorder.merged_sketch(cells, m.key)) for m in having("versions")},
        }
    return out
