"""Wires telemetry into a Locust environment: ``install(environment)`` from the ``init`` listener.

Every role records its own users' results (``request`` events carrying ``context["llm_result"]``).
A worker ships ``recorder.take()`` under ``llm`` in ``report_to_master``; the master merges in
``worker_report``; a local run pumps its recorder into the same merge every second. The master
(or local process) runs the Prometheus exporter, the server scraper, the dead-worker watch and,
at quit, the sinks: SLO gate, console table, summary JSON, CSV, then ``on_summary`` sinks.
"""

from __future__ import annotations

import json
import logging
import urllib.request

import gevent
from flask import Response
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

from telemetry.distributed import WorkerWatch, drain_final_reports
from telemetry.exporter import CONTENT_TYPE, Exporter
from telemetry.hub import TelemetryHub
from telemetry.scraper import ServerScraper, metrics_url
from telemetry.sinks import console_table, write_csv, write_json
from telemetry.slo import EXIT_CODE, failure_lines
from telemetry.versions import versions_section

log = logging.getLogger(__name__)
REPORT_KEY = "llm"
LOCAL_ID = "local"


class _Loop:
    """A greenlet calling ``fn`` every ``interval_s`` until stopped."""

    def __init__(self, fn, interval_s: float) -> None:
        self.fn, self.interval_s = fn, interval_s
        self._g: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._g is None:
            self._g = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            gevent.sleep(self.interval_s)
            try:
                self.fn()
            except Exception as e:  # a sampling hiccup must not kill the loop
                log.warning(f"telemetry loop {self.fn.__name__}: {type(e).__name__}: {e}")

    def stop(self) -> None:
        g, self._g = self._g, None
        if g is not None:
            g.kill(block=False)


class TelemetryPlugin:
    """The listeners of one process; ``register()`` once, ``close()`` to detach (tests)."""

    def __init__(self, environment, hub: TelemetryHub) -> None:
        self.environment = environment
        self.hub = hub
        self.exporter: Exporter | None = None
        self.watch: WorkerWatch | None = None
        self._kv = _Loop(self.sample_kv_fill, 1.0)
        self._pump = _Loop(self.pump_local, 1.0)
        self._finalized = False
        self._bad_results = 0
        self._listeners: list[tuple[object, object]] = []

    # ---- roles -------------------------------------------------------------------------------------
    @property
    def runner(self):
        return self.environment.runner

    @property
    def is_worker(self) -> bool:
        return isinstance(self.runner, WorkerRunner)

    @property
    def is_master(self) -> bool:
        return isinstance(self.runner, MasterRunner)

    @property
    def is_local(self) -> bool:
        return isinstance(self.runner, LocalRunner)

    def _on(self, event, fn) -> None:
        event.add_listener(fn)
        self._listeners.append((event, fn))

    def register(self) -> None:
        ev = self.environment.events
        self._on(ev.request, self.on_request)
        self._on(ev.report_to_master, self.on_report_to_master)
        self._on(ev.worker_report, self.on_worker_report)
        self._on(ev.test_start, self.on_test_start)
        self._on(ev.test_stop, self.on_test_stop)
        self._on(ev.quitting, self.on_quitting)
        options = self.environment.parsed_options
        if options is not None and not self.is_worker:
            port = getattr(options, "prometheus_port", 0)
            if port:
                self.exporter = Exporter(self.hub, getattr(options, "prometheus_host", "127.0.0.1"), port)
                if not self.exporter.start():
                    self.exporter = None
            self._add_web_routes()

    def close(self) -> None:
        for event, fn in self._listeners:
            event.remove_listener(fn)
        self._listeners.clear()
        self._kv.stop()
        self._pump.stop()
        if self.watch:
            self.watch.stop()
        if self.hub.scraper:
            self.hub.scraper.stop(final_scrape=False)
        if self.exporter:
            self.exporter.stop()

    def _add_web_routes(self) -> None:
        web_ui = getattr(self.environment, "web_ui", None)
        if web_ui is None:
            return
        registry = Exporter(self.hub, port=0).registry  # same collector, no server of its own

        def llm_metrics():
            from prometheus_client import generate_latest

            return Response(generate_latest(registry), mimetype=CONTENT_TYPE)

        auth = getattr(web_ui, "auth_required_if_enabled", lambda f: f)
        web_ui.app.add_url_rule("/llm/metrics", "llm_metrics", auth(llm_metrics))

    # ---- every process -------------------------------------------------------------------------------
    def on_request(self, context=None, **_kw) -> None:
        result = context.get("llm_result") if isinstance(context, dict) else None
        if result is None:
            return
        try:
            self.hub.recorder.record(result)
        except Exception as e:  # a malformed result is counted and reported once, never raised into the user
            self._bad_results += 1
            if self._bad_results == 1:
                log.error(f"telemetry could not record a result ({type(e).__name__}: {e}); counting such results")

    def sample_kv_fill(self) -> None:
        inflight = getattr(self.environment, "llm_inflight", None)
        if inflight is None:
            return
        board = getattr(self.environment, "llm_stage_board", None)
        self.hub.recorder.record_kv_fill(board.current.name if board else "main", inflight.snapshot())

    def on_test_start(self, environment=None, **_kw) -> None:
        self.hub.configure(self.environment.parsed_options)
        self.hub.recorder.reset()
        if self.is_worker:
            self._kv.start()
            return
        self.hub.start_run()
        self._finalized = False
        self._start_scraper()
        self._discover_model()
        if self.is_master:
            self.watch = WorkerWatch(self.environment, self.hub)
            self.watch.start()
        else:
            self._kv.start()
            self._pump.start()

    def on_test_stop(self, environment=None, **_kw) -> None:
        self._kv.stop()
        if self.is_local or (not self.is_worker and not self.is_master):
            self._pump.stop()
            self.pump_local()
        if not self.is_worker:
            self.hub.end_run()

    # ---- worker ---------------------------------------------------------------------------------------
    def on_report_to_master(self, client_id=None, data=None, **_kw) -> None:
        if data is not None:
            data[REPORT_KEY] = self._take()

    def _take(self) -> dict:
        """The recorder's state plus the model this process's users send (resolved from /v1/models or --model)."""
        state = self.hub.recorder.take()
        model = getattr(getattr(self.environment, "llm_users", None), "model", None)
        if model:
            state["model"] = str(model)
        return state

    # ---- master / local --------------------------------------------------------------------------------
    def on_worker_report(self, client_id=None, data=None, **_kw) -> None:
        state = (data or {}).get(REPORT_KEY)
        if state is None:
            return
        try:
            self.hub.absorb(str(client_id), state)
        except Exception as e:  # a malformed report is dropped with a line, the run goes on
            log.error(f"dropped an LLM report from worker {client_id}: {type(e).__name__}: {e}")

    def pump_local(self) -> None:
        self.hub.absorb(LOCAL_ID, self._take())

    def _start_scraper(self) -> None:
        if self.hub.scraper is not None:
            self.hub.scraper.stop(final_scrape=False)
            self.hub.scraper = None
        options = self.environment.parsed_options
        url = metrics_url(getattr(options, "server_metrics_url", None), self.environment.host)
        if url is None:
            return
        self.hub.scraper = ServerScraper(url, float(getattr(options, "server_metrics_interval", 2.0) or 2.0))
        self.hub.scraper.start(self.hub.t0_wall)

    def _discover_model(self) -> None:
        if self.hub.model or not self.environment.host:
            return
        url = self.environment.host.rstrip("/").removesuffix("/v1") + "/v1/models"

        def fetch() -> None:
            try:
                with urllib.request.urlopen(url, timeout=3) as r:
                    data = json.loads(r.read())
                self.hub.model = self.hub.model or str(data["data"][0]["id"])
            except Exception:  # the model name is a label only; the users report a wrong host loudly
                pass

        gevent.spawn(fetch)

    def on_quitting(self, environment=None, **_kw) -> None:
        if self.is_worker or self._finalized:
            return
        self._finalized = True
        if self.is_master:
            drain_final_reports(self.environment)
            if self.watch:
                self.watch.check()
                self.watch.stop()
        else:
            self._pump.stop()
            self.pump_local()
        self._kv.stop()
        if self.hub.scraper:
            self.hub.scraper.stop(final_scrape=True)
        self.hub.end_run()
        self.finalize()
        if self.exporter:
            self.exporter.stop()

    def finalize(self) -> dict:
        """Summary, SLO gate, console table and file sinks, then the ``on_summary`` sinks."""
        hub = self.hub
        hub.model = hub.sent_model() or hub.model or getattr(self.environment, "llm_model", None) or ""
        summary = hub.summary()
        hub.final_summary = summary
        for line in failure_lines(summary["slo"]["checks"]):
            log.error(line)
        if not summary["slo"]["passed"]:
            self.environment.process_exit_code = EXIT_CODE
        for wid in summary["workers_lost"]:
            log.warning(f"WARNING: worker {wid} was lost mid-run; the summary holds only what it reported")
        print(console_table(summary), flush=True)
        options = self.environment.parsed_options
        if getattr(options, "llm_summary_json", None):
            self._sink("summary JSON", lambda: write_json(summary, options.llm_summary_json))
        if getattr(options, "llm_csv", None):
            self._sink("CSV", lambda: write_csv(summary, options.llm_csv))
        for fn in hub.sinks:
            self._sink(getattr(fn, "__qualname__", repr(fn)), lambda fn=fn: fn(summary))
        return summary

    @staticmethod
    def _sink(name: str, fn) -> None:
        try:
            fn()
        except Exception as e:  # one failing sink must not stop the others
            log.error(f"LLM {name} sink failed: {type(e).__name__}: {e}")


def install(environment) -> TelemetryHub:
    """Create ``environment.llm_telemetry`` and register the listeners of this process."""
    hub = TelemetryHub(environment)
    environment.llm_telemetry = hub
    hub.add_section("versions", versions_section)
    plugin = TelemetryPlugin(environment, hub)
    plugin.register()
    hub.plugin = plugin
    return hub
