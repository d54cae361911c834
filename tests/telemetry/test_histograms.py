"""The summary's ``histograms`` are binned over the data's own range, and the report draws them with p50/p99 labels
that do not overlap (issue #19): a steady TPOT at 8.3 ± 0.1 ms shows its shape, not two bars."""

from __future__ import annotations

import re

import numpy as np

from telemetry.measure.recorder import FINE_ALPHA, Recorder
from telemetry.measure.runstate import RunState
from telemetry.measure.sketch import LogSketch
from telemetry.outputs.report.svg import Marker, histogram_chart, label_width
from telemetry.outputs.report.timeline import hist_bins
from telemetry.outputs.summary import HIST_BINS, build_summary
from tests.telemetry.synthetic import make_result


def _summary_of(results) -> dict:
    merger = RunState()
    rec = Recorder()
    for r in results:
        rec.record(r)
    merger.absorb("local", rec.take())
    return build_summary(merger.view(options=None, host="http://x"))


def test_steady_tpot_keeps_its_shape():
    rng = np.random.default_rng(7)
    tpots = rng.uniform(0.0082, 0.0084, 400)  # 8.3 ± 0.1 ms
    s = _summary_of(make_result(ttft=0.05, itl=float(t), tokens=65) for t in tpots)
    h = s["histograms"]["tpot"]
    edges, counts = np.asarray(h["edges_ms"]), np.asarray(h["counts"])
    assert h["count"] == 400 and counts.sum() == 400
    assert (counts > 0).sum() >= 8, counts  # the old 20-per-decade bins: 1 or 2
    # over the data's own range: the outer edges are the exact min and max (ms), and every bin is a run of whole
    # 0.2 % buckets, so neighbouring bins are never a bucket split in two
    assert abs(edges[0] - tpots.min() * 1000) < 1e-9 and abs(edges[-1] - tpots.max() * 1000) < 1e-9
    inner = np.diff(np.log(edges[1:-1]))
    gamma = np.log((1 + FINE_ALPHA) / (1 - FINE_ALPHA))
    assert np.allclose(inner, inner[0]) and abs(inner[0] / gamma - round(inner[0] / gamma)) < 1e-6


def test_wide_distribution_is_capped_at_the_bin_count():
    s = LogSketch(FINE_ALPHA)
    s.add_many(np.random.default_rng(1).lognormal(np.log(0.2), 1.0, 5000))
    edges, counts = s.bins(HIST_BINS)
    assert HIST_BINS - 1 <= len(counts) <= HIST_BINS
    assert counts.sum() == 5000 and edges[0] == s.min and edges[-1] == s.max


def _label_boxes(svg: str) -> list[tuple[float, float, float]]:
    """(x0, x1, baseline) of each marker label, from its x, anchor and length."""
    boxes = []
    for x, y, anchor, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" class="mk"[^>]*text-anchor="(\w+)">([^<]*)',
                                         svg):
        w = label_width(text)
        x0 = float(x) if anchor == "start" else float(x) - w
        boxes.append((x0, x0 + w, float(y)))
    return boxes


def test_p50_and_p99_labels_do_not_overlap():
    rng = np.random.default_rng(3)
    vals = rng.normal(8.3, 0.05, 2000)
    edges = np.linspace(8.1, 8.5, 17)
    counts = np.histogram(vals, edges)[0]
    for p50, p99 in ((8.30, 8.31), (8.30, 8.42), (8.45, 8.49), (8.11, 8.12)):
        svg = histogram_chart("TPOT", edges.tolist(), counts.tolist(), x_label="ms", y_label="%",
                              markers=[Marker(p50, f"p50 {p50} ms"), Marker(p99, f"p99 {p99} ms")])
        (a0, a1, ay), (b0, b1, by) = _label_boxes(svg)
        # apart side by side, or on rows a line of 11.5 px text apart (ascent + descent about 15 px)
        assert abs(ay - by) >= 15 or a1 <= b0 or b1 <= a0, (p50, p99, svg)


def test_report_bins_come_through():
    edges, counts = hist_bins({"edges_ms": [8.2, 8.25, 8.3], "counts": [3, 4], "count": 7})
    assert edges == [8.2, 8.25, 8.3] and counts == [3.0, 4.0]
