"""The live cockpit: charts and the stage / detector view, at ``/llm/charts`` and inside the LLM tab.

``/llm/charts`` is a page (offline: inline CSS and one inline script, nothing fetched from elsewhere) that polls
``/llm/charts/data`` every POLL_MS and swaps in what it answers: the stage view as HTML and the charts as SVG.
The SVG is drawn here, on the server, by the HTML report's own plotting module (telemetry/outputs/report: the
latency and throughput timelines, the server's KV usage and queue, throughput and latency against load) from the summary
as of now — so the live charts and the report are the same drawings of the same numbers, and the browser holds no
drawing code. ``/llm/cockpit.js``, loaded into Locust's own page, puts the charts page into the LLM tab (an iframe
under the tab's table; Locust's tab API renders plain-text tables only).

The stage view: the sweep's current step (its stage, users or rate, phase and the seconds left in it, from the
shape's ``progress()``), Locust's user count and state, the saturation verdict (the summary's ``saturation``) and
the live detectors (``live()["detectors"]``, telemetry/control/detectors.py) when they run.

    from webui.charts import install
    install(environment)   # needs environment.llm.telemetry and a web UI; else does nothing
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from html import escape

from flask import Blueprint, Response, request
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner

from run.context import attach
from telemetry.outputs.report.capacity_view import capacity_charts
from telemetry.outputs.report.fmt import num
from telemetry.outputs.report.render import CSS
from telemetry.outputs.report.sections import load_charts
from telemetry.outputs.report.timeline import latency_timeline, server_chart, throughput_timeline
from telemetry.outputs.summary import timeseries
from telemetry.slo import verdict_line
from webui.table import detector_text

log = logging.getLogger(__name__)

ROUTE = "/llm/charts"
DATA_ROUTE = "/llm/charts/data"
SCRIPT_ROUTE = "/llm/cockpit.js"
INDEX_ENDPOINT = "locust.index"
POLL_MS = 2000
CACHE_S = 1.0
"""Several viewers polling within this many seconds share one summary."""
SETTLE_S = 2.0
"""While the run goes, windows ending less than this long ago are not drawn: a request is counted when it ends and
reaches the merged store up to a report later (the local pump runs every second), so the newest windows would read
low and the lines would dip at their right end."""
SETTLE_MASTER_S = 4.0
"""The same on a master: a worker reports every 3 s."""

FIGURES: tuple[tuple[str, Callable[[Mapping], str | list[str]]], ...] = (
    ("latency", latency_timeline),
    ("throughput", throughput_timeline),
    ("server", server_chart),
    ("load", load_charts),
    ("capacity", capacity_charts),
)
"""Chart id -> the report's drawing function (one SVG, or a list of them; "" / [] = nothing to draw yet)."""

ACTIVE = (STATE_SPAWNING, STATE_RUNNING)
LIVE_WINDOWS = 5
"""The live charts draw the run's windows (``--attribution-window``) once the settled run holds this many of them;
before, the longest of SHORT_WINDOWS_S that does (2 s windows at 12 s into a run with the default 10 s windows, so
the over-time charts show from then on, not from the second 10 s window at ~22 s)."""
SHORT_WINDOWS_S = (5.0, 2.0, 1.0)


def live_window(seconds: float, window_s: float) -> float:
    """The window length the live charts draw ``seconds`` of (settled) run with."""
    for w in (window_s, *(w for w in SHORT_WINDOWS_S if w < window_s)):
        if seconds >= LIVE_WINDOWS * w:
            return w
    return min(window_s, SHORT_WINDOWS_S[-1])


PHASES = {"enter": "starting", "settle": "waiting for the users", "warmup": "warm-up", "hold": "measuring"}

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>deepseek-locust live</title><style>{css}
body.embed header, body.embed nav {{ display:none; }}
#status .card .v {{ font-size:18px; }}
</style></head><body class="{body_class}" data-polls="0">
<header><h1>deepseek-locust live</h1><p>charts and stage view, redrawn every {poll_s:g} s from the run so far
(<a style="color:#c9d3e6" href="./report">full report</a>)</p></header>
<main><section id="stage"><h2>Stage</h2><div id="status" class="cards"></div><p class="note" id="err"></p></section>
<section id="charts"><h2>Live charts</h2><div id="figures" class="grid"><p class="note">waiting for data…</p></div>
</section></main>
<script>
(function () {{
  var POLL = {poll_ms};
  function render(d) {{
    document.getElementById("status").innerHTML = d.status_html;
    var figs = d.figures.map(function (f) {{
      return '<figure class="plot-fig" data-chart="' + f.id + '">' + f.svg + "</figure>";
    }});
    document.getElementById("figures").innerHTML = figs.join("") ||
      '<p class="note">No chart yet: the first windows are still filling.</p>';
    document.getElementById("err").textContent = "";
    document.body.dataset.polls = String(Number(document.body.dataset.polls) + 1);
    if (window.parent !== window) {{
      window.parent.postMessage({{llmCockpitHeight: document.documentElement.scrollHeight}}, "*");
    }}
  }}
  function poll() {{
    fetch("./charts/data", {{cache: "no-store"}})
      .then(function (r) {{ if (!r.ok) {{ throw new Error("HTTP " + r.status); }} return r.json(); }})
      .then(render)
      .catch(function (e) {{ document.getElementById("err").textContent = "live data: " + e.message; }})
      .then(function () {{ setTimeout(poll, POLL); }});
  }}
  poll();
}})();
</script></body></html>
"""

COCKPIT_JS = """(function () {
  // Puts the live charts page (./llm/charts) under the LLM tab's table; removes it on the other tabs.
  function onLlmTab() { return new URLSearchParams(window.location.search).get("tab") === "llm"; }
  function sync() {
    var frame = document.getElementById("llm-cockpit");
    if (!onLlmTab()) { if (frame) { frame.remove(); } return; }
    if (frame && document.body.contains(frame)) { return; }
    var table = document.querySelector("table");
    if (!table) { return; }
    var box = table.closest(".MuiTableContainer-root") || table.parentElement;
    frame = document.createElement("iframe");
    frame.id = "llm-cockpit";
    frame.title = "LLM live charts";
    frame.src = "./llm/charts?embed=1";
    frame.style.cssText = "display:block;width:100%;height:1200px;border:0;margin-top:12px";
    box.parentNode.insertBefore(frame, box.nextSibling);
  }
  window.addEventListener("message", function (e) {
    var frame = document.getElementById("llm-cockpit");
    if (frame && e.source === frame.contentWindow && e.data && e.data.llmCockpitHeight) {
      frame.style.height = (e.data.llmCockpitHeight + 20) + "px";
    }
  });
  setInterval(sync, 500);
})();
"""


def settled(summary: Mapping, final: bool, lag_s: float = SETTLE_S) -> Mapping:
    """``summary`` with the client windows drawn live: while the run goes, not those that may still be filling
    (ending less than ``lag_s`` ago); once it stopped (``final``), not the last one, which the stop cut (the users
    were stopped inside it and their requests in flight are never counted, so its rate would dip towards 0), as
    long as two windows remain to draw."""
    ts = summary.get("timeseries")
    if not isinstance(ts, Mapping) or not isinstance(summary.get("duration_s"), int | float):
        return summary
    client = [w for w in ts.get("client") or [] if isinstance(w, Mapping)]
    if final:
        client = client[:-1] if len(client) > 2 else client
    else:
        cut = summary["duration_s"] - lag_s
        client = [w for w in client if w.get("end_s", cut + 1) <= cut]
    return {**summary, "timeseries": {**ts, "client": client}}


def _batching_verdict(att) -> str | None:
    """The post-run dynamic-batching verdict (the summary's ``attribution.batching_failure``) in a few words."""
    bf = att.get("batching_failure") if isinstance(att, Mapping) else None
    if not isinstance(bf, Mapping):
        return None
    if bf.get("baseline") is None:
        return "batching not judged (too few windows for a baseline)"
    if bf.get("verdict"):
        return f"batching FAILED from {num(bf.get('failed_at_s'))} s"
    return "batching ok"


def _card(key: str, value: str, sub: str = "") -> str:
    return (f'<div class="card" data-key="{escape(key)}"><div class="k">{escape(key)}</div>'
            f'<div class="v">{escape(value)}</div><div class="s">{escape(sub)}</div></div>')


def stage_view(progress: Mapping | None, live: Mapping, summary: Mapping, users: int | None,
               state: str | None, sweep: bool = False) -> dict:
    """The stage view's figures (plain data, also in the JSON) from the shape's progress, live() and the summary."""
    stages = live.get("stages") or []
    sat = summary.get("saturation") if isinstance(summary.get("saturation"), Mapping) else {}
    out: dict = {
        "state": state,
        "users": users,
        "elapsed_s": live.get("elapsed_s"),
        "stage": (progress or {}).get("stage") or (stages[-1].get("stage") if stages else None),
        "progress": dict(progress) if progress else None,
        "saturation": {"stage": sat.get("stage"), "reason": sat.get("reason")} if sat else None,
        "detectors": live.get("detectors"),
        "requests": sum(int(s.get("requests") or 0) for s in stages),
        "versions": live.get("versions") or {},
        "route_fallback": live.get("route_fallback"),
        "slo": summary.get("slo") if isinstance(summary.get("slo"), Mapping) else None,
        "sweep": sweep,
        "measured_stages": [st.get("name") for st in summary.get("stages") or []
                            if isinstance(st, Mapping) and not st.get("warmup")],
        "batching": _batching_verdict(summary.get("attribution")),
        "capacity": _search_view(summary.get("capacity")),
    }
    return out


def _search_view(cap) -> dict | None:
    """A capacity search's state (the summary's ``capacity``: the same probe records the report draws): its
    statement and each judged probe's stage, verdict and why it stopped early."""
    if not isinstance(cap, Mapping):
        return None
    probes = [{"stage": p.get("stage"), "passed": p.get("passed"),
               "early_stop": (p.get("early_stop") or {}).get("reason")} for p in cap.get("probes") or []]
    return {"status": cap.get("status"), "statement": cap.get("statement"), "probes": probes,
            "max_probes": cap.get("max_probes")}


def slo_card(slo: Mapping | None, running: bool) -> str:
    """The SLO verdict (the summary's ``slo``: the same checks as the end-of-run gate), "so far" while running."""
    line = verdict_line(slo) if slo else None
    if line is None:
        return _card("SLO", "none", "no objective set (--slo-preset, --slo-*)")
    verdict, _, checks = line.partition(": ")
    return _card("SLO", verdict.removeprefix("SLO ") + (" so far" if running else ""), checks)


def stage_html(v: Mapping) -> str:
    p = v.get("progress")
    cards = []
    if p:
        level = f"{p['users']} users" + (f" · {num(p['rate'], 2)} req/s" if p.get("rate") is not None else "")
        cards.append(_card("stage", str(p["stage"]), f"step {p['step']} of {p['steps']} · {level}"))
        phase = PHASES.get(p["phase"], p["phase"])
        if p.get("left_s") is None:
            cards.append(_card("time left", "–", f"{phase} ({p['phase_s']:.0f} s so far)"))
        else:
            cards.append(_card("time left", f"{p['left_s']:.0f} s", f"{phase}: {p['phase_s']:.0f} of "
                                                                     f"{p['phase_len_s']:.0f} s"))
    elif v.get("sweep") and v.get("measured_stages") and v.get("state") not in ACTIVE:
        measured = v["measured_stages"]
        cards.append(_card("stage", f"sweep {v.get('state') or 'done'}", f"{len(measured)} stage(s) measured: "
                                                                         f"{', '.join(map(str, measured))}"))
    else:
        cards.append(_card("stage", str(v.get("stage") or "–"), "no sweep shape: Locust's users and run time"))
    cards.append(_card("users", num(v.get("users")), f"{v.get('state') or '?'} · {num(v.get('elapsed_s'))} s · "
                                                     f"{num(v.get('requests'))} requests"))
    sat = v.get("saturation") or {}
    if sat.get("stage"):
        cards.append(_card("saturation", f"knee at {sat['stage']}", str(sat.get("reason") or "")))
    else:
        cards.append(_card("saturation", "no knee yet", str(sat.get("reason") or "no verdict yet")))
    search = v.get("capacity")
    if search:  # the capacity search: the probes judged so far (its charts are the "capacity" figures)
        probes = search["probes"]
        last = probes[-1] if probes else None
        verdict = "–" if last is None else f"{last['stage']}: {'met every SLO' if last['passed'] else 'breached'}"
        if last is not None and last.get("early_stop"):
            verdict += " (stopped early)"
        done = v.get("state") not in ACTIVE or search.get("status") not in ("not_run", "incomplete")
        sub = str(search.get("statement") or "") if done and probes else \
            f"{len(probes)} of at most {search.get('max_probes')} probes judged"
        cards.append(_card("capacity search", verdict, sub))
    cards.append(slo_card(v.get("slo"), v.get("state") in ACTIVE))
    det = v.get("detectors")
    if v.get("state") not in ACTIVE and v.get("batching") and v.get("requests"):  # the run is over: its verdict
        cards.append(_card("detectors", v["batching"], f"last live check: {detector_text(det)}" if det else ""))
    else:
        cards.append(_card("live detectors", detector_text(det) if det else "–",
                           "" if det else "no detector state yet (telemetry/control/detectors.py)"))
    for version, b in (v.get("versions") or {}).items():  # each route version's own backend (--route-table)
        kv = b.get("kv_cache_usage")
        cards.append(_card(f"version {version}", "–" if kv is None else f"KV {kv:.0%}",
                           f"{num(b.get('requests_running'))} running · {num(b.get('requests_waiting'))} waiting"
                           + (f" · {b['scrape_failures']} failed scrapes" if b.get("scrape_failures") else "")))
    fb = v.get("route_fallback")
    if fb:
        state = (f"switched at {fb['switched_at_s']:.0f} s" if fb.get("fired") else
                 "not run" if fb.get("error") else "watching")
        sub = fb.get("error") or (f"{fb['switch_after_breach_s']:.1f} s after the breach" if fb.get("fired") else "")
        cards.append(_card("route fallback", f"{fb.get('from')} → {fb.get('to')}: {state}", f"{fb['rule']} {sub}"))
    return "".join(cards)


class ChartsPage:
    """The page, its data and the tab script on one web UI."""

    def __init__(self, environment) -> None:
        self.environment = environment
        self._cache: tuple[float, dict] | None = None
        self._warned = False

    def data(self) -> dict:
        now = time.monotonic()
        if self._cache is not None and now - self._cache[0] < CACHE_S:
            return self._cache[1]
        env = self.environment
        hub = env.llm.telemetry
        final = hub.final_summary
        summary = final or hub.summary()
        live = hub.live() or {}
        shape = getattr(env, "shape_class", None)
        progress = shape.progress() if callable(getattr(shape, "progress", None)) else None
        runner = env.runner
        view = stage_view(progress, live, summary, getattr(runner, "user_count", None),
                          getattr(runner, "state", None), sweep=callable(getattr(shape, "progress", None)))
        figures = []
        lag = SETTLE_MASTER_S if isinstance(runner, MasterRunner) else SETTLE_S
        over = final is not None or getattr(runner, "state", None) not in ACTIVE  # a web run stopped: no final yet
        drawing = settled(self.with_live_windows(summary, over, lag), over, lag)
        for fid, draw in FIGURES:
            drawn = draw(drawing)
            for i, svg in enumerate([drawn] if isinstance(drawn, str) else drawn):
                if svg:
                    figures.append({"id": f"{fid}-{i}" if not isinstance(drawn, str) else fid, "svg": svg})
        out = {"status": view, "status_html": stage_html(view), "figures": figures}
        self._cache = (now, out)
        return out

    def with_live_windows(self, summary: dict, final: bool, lag: float) -> dict:
        """``summary`` with its client windows redrawn at :func:`live_window`'s length (the same windows when the
        run is long enough for its own)."""
        duration, window = summary.get("duration_s"), (summary.get("timeseries") or {}).get("window_s")
        if not isinstance(duration, int | float) or not isinstance(window, int | float) or window <= 0:
            return summary
        w = live_window(duration - (0.0 if final else lag), window)
        if w == window:
            return summary
        return {**summary, "timeseries": timeseries(self.environment.llm.telemetry.view(), w)}

    def data_response(self) -> Response:
        try:
            body = json.dumps(self.data(), default=str)
        except Exception as e:  # say what broke instead of Flask's bare 500 page
            if not self._warned:
                log.exception("%s failed", DATA_ROUTE)
                self._warned = True
            return Response(json.dumps({"error": f"{type(e).__name__}: {e}"}), status=500,
                            mimetype="application/json")
        return Response(body, mimetype="application/json", headers={"Cache-Control": "no-store"})

    def page(self) -> Response:
        embed = request.args.get("embed") == "1"
        html = PAGE.format(css=CSS, body_class="embed" if embed else "", poll_s=POLL_MS / 1000, poll_ms=POLL_MS)
        return Response(html, mimetype="text/html")

    @staticmethod
    def script() -> Response:
        return Response(COCKPIT_JS, mimetype="text/javascript")

    @staticmethod
    def add_script(response: Response) -> Response:
        """Load the tab script into Locust's own page (its index.html, served by ``locust.index``)."""
        if request.endpoint != INDEX_ENDPOINT or response.status_code != 200 or response.mimetype != "text/html":
            return response
        html = response.get_data(as_text=True)
        tag = '<script src="./llm/cockpit.js"></script>'
        if tag not in html and "</body>" in html:
            response.set_data(html.replace("</body>", f"{tag}</body>", 1))
        return response

    def register(self, web_ui) -> ChartsPage:
        bp = Blueprint("llm_charts", __name__)
        auth = getattr(web_ui, "auth_required_if_enabled", lambda f: f)
        bp.add_url_rule(ROUTE, "page", auth(self.page))
        bp.add_url_rule(DATA_ROUTE, "data", auth(self.data_response))
        bp.add_url_rule(SCRIPT_ROUTE, "script", self.script)
        web_ui.app.register_blueprint(bp)
        web_ui.app.after_request(self.add_script)
        return self


def install(environment) -> ChartsPage | None:
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None or attach(environment).telemetry is None:
        return None
    return ChartsPage(environment).register(web_ui)
