"""A steady run against the simulator, its report in headless Chromium: the TPOT and E2E histograms are binned over
the data's own range (at least 8 non-empty bins each, drawn as bars) and their p50/p99 labels do not overlap
(issue #19). The screenshot: results/webui/report-histograms.png (docs/img/ holds one)."""

from __future__ import annotations

import json

import pytest

from telemetry.outputs.report.svg import label_width
from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http
from tests.webui.chromium import chromium, require_chromium

pytestmark = pytest.mark.slow
SHOT = ROOT / "results" / "webui" / "report-histograms.png"
"""docs/img/report-histograms.png shows the same section of a `make run` report (a test run does not rewrite a tracked
file)."""

CHARTS = """
return Array.from(document.querySelectorAll('#distributions svg.chart')).map(function (s) {
  var bars = Array.from(s.querySelectorAll('rect.bar')).filter(function (b) { return b.getBBox().height > 0; });
  var labels = Array.from(s.querySelectorAll('text.mk')).map(function (t) {
    var b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height, t.textContent]; });
  s.scrollIntoView();
  return {title: s.querySelector('title').textContent, bars: bars.length, labels: labels};
});
"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_steady_run_report_histograms_show_their_shape(tmp_path):
    require_chromium()
    port = free_port()
    sim_argv = [PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(port), "--profile",
                "deepseek-v2-lite-a100"]
    with Proc(sim_argv, name="sim") as sim:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        out, report = tmp_path / "summary.json", tmp_path / "report.html"
        argv = [LOCUST, "-f", "locustfile.py", "--headless", "--host", f"http://127.0.0.1:{port}", "--only-summary",
                "--prometheus-port", "0", "--llm-summary-json", str(out), "--llm-report", str(report),
                "--input-len", "fixed:256", "--output-len", "fixed:64", "-u", "4", "-r", "4", "-t", "10s",
                "StreamingCompletionUser"]
        with Proc(argv, name="locust") as loc:
            loc.wait(60)
            log = loc.output()
    assert out.exists() and report.exists(), log[-3000:]
    hists = json.loads(out.read_text())["histograms"]
    for key in ("tpot", "e2e"):
        nonempty = sum(1 for c in hists[key]["counts"] if c > 0)
        print(f"{key}: {hists[key]['count']} requests, {nonempty} non-empty bins over "
              f"{hists[key]['edges_ms'][0]:.2f}–{hists[key]['edges_ms'][-1]:.2f} ms")
        assert nonempty >= 8, hists[key]
    with chromium(tmp_path) as driver:
        driver.get(report.as_uri())
        charts = {c["title"]: c for c in driver.execute_script(CHARTS)}
        for title, key in (("TPOT distribution", "tpot"), ("E2E distribution", "e2e")):
            c = charts[title]
            assert c["bars"] == sum(1 for n in hists[key]["counts"] if n > 0) >= 8, c
            assert len(c["labels"]) == 2, c  # p50 and p99
            assert not _overlap(*c["labels"]), c
        for c in charts.values():  # every distribution's labels, not only these two
            boxes = c["labels"]
            # the placement's width estimate bounds what the browser draws (a flat 7 px a character did not)
            assert all(b[2] - b[0] <= label_width(b[4]) for b in boxes), c
            assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), c
        driver.execute_script("document.getElementById('distributions').scrollIntoView()")
        driver.set_window_size(1400, 1100)
        SHOT.parent.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(SHOT))
    print(f"report screenshot: {SHOT}")
