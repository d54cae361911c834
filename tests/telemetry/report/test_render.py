"""render(summary): every plot present, nothing external, valid-ish HTML, graceful with missing parts."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from telemetry.outputs.report import render
from tests.telemetry.report.synthetic import single_stage_no_server, sweep_summary

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "source", "wbr", "area", "base", "embed", "track"}
SVG_LEAVES = {"path", "circle", "line", "rect", "text", "title", "desc"}


class _Checker(HTMLParser):
    """Balanced tags (HTML void elements and self-closed SVG leaves aside) and the attributes of every tag."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.attrs += [(tag, k, v or "") for k, v in attrs]

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
        else:
            self.stack.pop()


def _check(html: str) -> _Checker:
    c = _Checker()
    c.feed(html)
    c.close()
    assert c.errors == [] and c.stack == [], (c.errors[:5], c.stack[-5:])
    return c


def _titles(html: str) -> list[str]:
    return re.findall(r'<svg class="chart"[^>]*><title>([^<]*)</title>', html)


def test_sweep_report_has_every_plot():
    html = render(sweep_summary())
    _check(html)
    titles = _titles(html)
    for expected in ("Throughput against load", "TTFT against load", "ITL and TPOT against load", "TTFT distribution",
                     "ITL distribution", "TPOT distribution", "E2E distribution", "Throughput per 10 s window",
                     "Server KV-cache usage and queue", "Client latency per 10 s window", "Where the mean TTFT went"):
        assert expected in titles, expected
    # the knee is marked on the three plots against load and its table row is highlighted
    assert html.count(">knee: users=16</text>") == 3
    assert re.search(r'<tr class="knee"><td>users=16</td>', html)
    # stage table, SLO verdicts and attribution text
    assert html.count("<td>users=") == 6
    # users=8: server KV mean 0.24 then max 0.28, each in its own column
    assert "<th>server KV mean</th><th>server KV max</th>" in html and "<td>0.24</td><td>0.28</td>" in html
    assert "ttft_p99_ms" in html and '<span class="badge bad">FAIL</span>' in html
    assert "TTFT p99 3.1× at t=160–170s with 41 waiting, KV 0.99, 12 preemptions" in html
    assert "client TTFT mean 860 ms = server queue 580" in html
    assert '<div class="k">latency spikes</div><div class="v">1</div><div class="s">1 preemption</div>' in html


def test_plots_hold_the_data():
    s = sweep_summary()
    html = render(s)
    ttft_plot = html[html.index("<title>TTFT against load</title>"):]
    ttft_plot = ttft_plot[: ttft_plot.index("</svg>")]
    # one point per stage for p50 and p99
    assert ttft_plot.count("<circle") == 2 * len(s["stages"])
    # the spike window is shaded on the server timeline with its cause as tooltip
    assert re.search(r'class="band"><title>TTFT p99 3.1×', html)


def test_nothing_external():
    html = render(sweep_summary())
    c = _check(html)
    for tag, attr, value in c.attrs:
        if attr in ("src", "href", "xlink:href", "action", "data"):
            assert not re.match(r"\s*(https?:)?//", value), (tag, attr, value)
            assert value.startswith("#"), (tag, attr, value)  # only in-page anchors
    assert not re.search(r"<(script|link|img|iframe|object)\b", html)
    assert "url(" not in html and "@import" not in html


def test_text_is_escaped():
    s = sweep_summary()
    s["model"] = '<script>alert("x")</script>'
    s["stages"][0]["name"] = "<b>stage</b>"
    html = render(s)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;stage&lt;/b&gt;" in html
    _check(html)


def test_single_stage_without_server_metrics():
    html = render(single_stage_no_server())
    _check(html)
    assert "One stage only: no curve against concurrency" in html
    assert "No server metrics were scraped" in html
    assert "No attribution in this summary." in html
    assert "No SLO configured" in html
    assert "could not be drawn" not in html
    assert len(_titles(html)) >= 3  # the distributions still plot


@pytest.mark.parametrize("summary", [{}, {"schema": 1, "stages": None, "histograms": {"ttft": {"edges_ms": []}}}])
def test_empty_summaries_still_render(summary):
    html = render(summary)
    _check(html)
    assert "No latency histograms in the summary." in html


def test_a_failed_attribution_section_is_stated():
    s = sweep_summary()
    s["attribution"] = {"error": "ValueError: boom"}
    html = render(s)
    _check(html)
    assert "The attribution failed: ValueError: boom" in html


def test_a_broken_section_is_noted_not_fatal():
    s = sweep_summary()
    s["stages"][2]["start_s"] = "soon"  # malformed
    html = render(s)
    _check(html)
    assert "could not be drawn from the summary" in html
    assert "TTFT distribution" in _titles(html)


def test_first_bucket_server_quantiles_show_as_upper_bounds():
    s = sweep_summary()
    s["attribution"]["decomposition"]["queue_ms"] = {
        "count": 10, "mean": 4.0, "p50": 150.0, "p90": 270.0, "p95": 285.0, "p99": 297.0, "max": None,
        "bucket": {"p50": [0.0, 300.0], "p90": [0.0, 300.0], "p95": [0.0, 300.0], "p99": [300.0, 500.0]}}
    html = render(s)
    row = re.search(r"<tr><td>server queue</td>(.*?)</tr>", html).group(1)
    assert re.findall(r"<td>([^<]*)</td>", row) == ["10", "4.0", "≤300", "≤300", "≤300", "297", "–"]


def test_batching_badge_follows_the_verdict():
    s = sweep_summary()
    assert '<span class="badge ok">batching OK</span>' in render(s)
    base = {"windows": [0, 1, 2], "p99_ms": 120.0, "batch_size_median": 16}
    s["attribution"]["batching_failure"] = {"verdict": True, "flagged_windows": [4, 5, 6], "baseline": base}
    html = render(s)
    assert '<span class="badge bad">batching FAILED</span>' in html and "flagged windows: [4, 5, 6]" in html
    s["attribution"]["batching_failure"] = {"verdict": False, "flagged_windows": [], "baseline": None}
    assert '<span class="badge na">not judged</span>' in render(s)


def test_numbers_for_people():
    from telemetry.outputs.report.fmt import ms

    assert [ms(-0.04), ms(-0.2), ms(12.345), ms(1234.5), ms(None), ms(float("nan"))] == \
        ["0.0", "-0.2", "12.3", "1,234", "–", "–"]


def test_a_fleet_has_a_row_per_engine_and_names_the_imbalanced_one():
    s = single_stage_no_server()

    def engine(name: str, finished: int) -> dict:
        return {"target": "vllm:8000", "role": None, "engine": name, "requests_finished": finished,
                "kv_cache_usage": {"mean": 0.25, "max": 0.5}, "requests_running": {"mean": 2.0, "max": 4},
                "requests_waiting_max": 1, "queue_time_ms": {"p50": 12.0, "p99": 80.0}, "preemptions": 0,
                "prefix_cache_hit_rate": None, "num_gpu_blocks": 512}

    s["server"] = {**s["server"], "engines": [engine("0", 40), engine("1", 7)], "kv_blocks_total": 1024}
    s["attribution"] = {**(s.get("attribution") or {}),
                        "bottleneck": {"cause": "engine_imbalance", "engine": "1", "evidence": "engine 1 off <b>",
                                       "source": "server_metrics"}}
    html = render(s)
    _check(html)
    part = html[html.index('id="engines"'):]
    assert part.count("<tr>") >= 3 and ">40<" in part and ">7<" in part and "1,024 KV blocks" in part
    assert "engine 1 off &lt;b&gt;" in part  # the evidence is text, escaped
    one = single_stage_no_server()
    one["server"] = {**one["server"], "engines": [engine("0", 40)]}
    assert 'id="engines"' not in render(one)


def test_reasoning_only_metrics_shown_only_when_something_reasoned():
    """Without reasoning TTFA equals TTFT: the report leaves its card, columns, series and distribution out; once a
    request reasoned they are all there."""
    plain = sweep_summary()
    for st in plain["stages"]:
        st["ttfa_ms"] = st["ttft_ms"]
    plain["ttfa_ms"], plain["histograms"]["ttfa"] = plain["ttft_ms"], plain["histograms"]["ttft"]
    html = render(plain)
    assert "TTFA" not in html and "<th>thinking span p50</th>" not in html
    thought = {**plain, "tokens": {**plain["tokens"], "reasoning": 1000, "answer": 383000}}
    html = render(thought)
    assert '<div class="k">TTFA p99</div>' in html and "<th>TTFA p50</th>" in html
    assert "<th>thinking span p50</th>" in html
    assert "TTFA distribution" in _titles(html) and ">TTFA p99</text>" in html
