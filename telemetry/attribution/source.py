"""Reads the run's view into the attribution's inputs: client windows and server samples.

The view (:class:`telemetry.measure.view.RunView`) has the merged client sketches in wall-clock slots and the
scraper's server samples (``t`` = seconds since the run start, gauges, counters, and cumulative
histogram buckets under ``hist``). This module is the only place that knows those shapes.

    client = client_windows(view, 10.0)
    server = server_samples(view.server_series)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from telemetry.attribution.histogram import CumulativeHistogram
from telemetry.attribution.window import SERVER_HISTOGRAMS, ClientWindow, ServerSample


def _ms(sketch, q: float) -> float | None:
    if sketch is None or sketch.count == 0:
        return None
    v = sketch.quantile(q)
    return None if v is None else v * 1000.0


def client_windows(view, seconds: float, origin_s: float = 0.0) -> list[ClientWindow]:
    """The view's merged client windows (from ``origin_s`` on) as :class:`ClientWindow` rows (TTFT/ITL p50 and
    p99 in ms)."""
    out = []
    for w in view.windows(seconds, origin_s):
        ttft, itl = w.sketches.get("ttft"), w.sketches.get("itl")
        out.append(
            ClientWindow(
                start_s=w.start_s,
                end_s=w.end_s,
                requests=int(w.requests),
                ttft_p50_ms=_ms(ttft, 0.5),
                ttft_p99_ms=_ms(ttft, 0.99),
                itl_p50_ms=_ms(itl, 0.5),
                itl_p99_ms=_ms(itl, 0.99),
            )
        )
    return out


def _hist(d: Mapping) -> CumulativeHistogram | None:
    les, cum = d.get("le"), d.get("cum")
    if not les or not cum or len(les) != len(cum):
        return None
    return CumulativeHistogram.from_buckets(dict(zip(les, cum, strict=True)), total_sum=d.get("sum"))


def server_sample(d: Mapping) -> ServerSample:
    """One scraper sample (``telemetry.measure.scraper.parse_server_metrics`` + ``t``) as a :class:`ServerSample`."""
    hists = {}
    for name in SERVER_HISTOGRAMS:
        raw = (d.get("hist") or {}).get(name)
        h = _hist(raw) if isinstance(raw, Mapping) else None
        if h is not None:
            hists[name] = h
    return ServerSample(
        t=float(d["t"]),
        running=d.get("requests_running"),
        waiting=d.get("requests_waiting"),
        kv_usage=d.get("kv_cache_usage"),
        preemptions_total=d.get("preemptions_total"),
        histograms=hists,
    )


def server_samples(series: Iterable[Mapping]) -> list[ServerSample]:
    return [server_sample(d) for d in series if isinstance(d.get("t"), int | float)]


def server_deltas(samples: list[ServerSample], start_s: float, end_s: float) -> dict[str, CumulativeHistogram]:
    """Each server histogram's growth over [start_s, end_s]: from the last scrape at or before ``start_s``
    (else the first one after it) to the last scrape at or before ``end_s``."""
    samples = sorted(samples, key=lambda s: s.t)
    before = [s for s in samples if s.t <= start_s]
    first = before[-1] if before else next((s for s in samples if s.t > start_s), None)
    upto = [s for s in samples if s.t <= end_s]
    last = upto[-1] if upto else None
    if first is None or last is None or last.t <= first.t:
        return {}
    out = {}
    for name, h in last.histograms.items():
        prev = first.histograms.get(name)
        if prev is None:
            continue
        try:
            out[name] = h - prev
        except ValueError:
            continue
    return out
