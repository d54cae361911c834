"""Wires telemetry into a Locust environment: ``install(environment)`` from the ``init`` listener.

The process's role is chosen once, from its runner, when it installs:

- :class:`WorkerRole` records its users' results (``request`` events carrying ``context["llm_result"]``)
  and ships ``recorder.take()`` under ``llm`` in ``report_to_master``; it never builds a summary.
- :class:`MasterRole` merges the workers' reports (``worker_report``), watches for dead workers and, at
  quit, drains the last reports and finalizes.
- :class:`LocalRole` records its own users and pumps its recorder into the same merge every second.

Master and local run share :class:`SummarizingRole`: the Prometheus exporter, the server scraper, the
model label and, at quit, the sinks: SLO gate, console table, summary JSON, CSV, then the ``on_summary``
sinks. Each role registers only the handlers that mean something for it.

    role = install(environment)       # environment.llm_telemetry is role.hub
    role.close()                      # detach (tests)
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request

import gevent
from locust.runners import MasterRunner, WorkerRunner

from telemetry.detectors import LiveDetectors
from telemetry.distributed import WorkerWatch, drain_final_reports
from telemetry.exporter import Exporter
from telemetry.hooks import deliver_to
from telemetry.hub import TelemetryHub
from telemetry.options import LLM_PROGRESS_INTERVAL_DEFAULT, PROMETHEUS_HOST_DEFAULT, SERVER_METRICS_INTERVAL_DEFAULT
from telemetry.progress import progress_line
from telemetry.requestlog import REPORT_KEY as REQUESTS_KEY
from telemetry.requestlog import RequestLog, read_records, record_of, request_log_for, wants_request_log
from telemetry.routing import (
    RouteFallback,
    announce,
    fallback_section,
    start_fallback,
    version_backends,
    versions_section,
)
from telemetry.runrecord import RunRecorder, fetch_block_size
from telemetry.scraper import ServerScraper, metrics_url
from telemetry.sinks import console_table, write_csv, write_json
from telemetry.slo import EXIT_CODE, failure_lines, verdict_line
from telemetry.vllmbench import write_vllm_bench

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
        me = gevent.getcurrent()
        while True:
            gevent.sleep(self.interval_s)
            if self._g is not me:  # stopped while asleep: the kill has not landed yet
                return
            try:
                self.fn()
            except Exception as e:  # a sampling hiccup must not kill the loop
                log.warning(f"telemetry loop {self.fn.__name__}: {type(e).__name__}: {e}")

    def stop(self) -> None:
        g, self._g = self._g, None
        if g is not None:
            g.kill(block=False)


class Role:
    """What every process does: record its users' results, read the options at each test start."""

    def __init__(self, environment, hub: TelemetryHub) -> None:
        self.environment = environment
        self.hub = hub
        self.merger = hub.merger
        self._bad_results = 0
        self._listeners: list[tuple[object, object]] = []
        self.request_lines: list[dict] | None = None
        """Per-request records waiting for the next report (worker) or the file (local run); None: not wanted."""

    def _on(self, event, fn) -> None:
        event.add_listener(fn)
        self._listeners.append((event, fn))

    def register(self) -> Role:
        ev = self.environment.events
        self._on(ev.request, self.on_request)
        self._on(ev.test_start, self.on_test_start)
        self._on(ev.test_stop, self.on_test_stop)
        return self

    def close(self) -> None:
        """Detach every listener and stop every loop (tests; a process just exits)."""
        for event, fn in self._listeners:
            event.remove_listener(fn)
        self._listeners.clear()

    def on_request(self, context=None, **_kw) -> None:
        result = context.get("llm_result") if isinstance(context, dict) else None
        if result is None:
            return
        try:
            self.merger.recorder.record(result)
            if self.request_lines is not None:
                self.request_lines.append(record_of(result))
        except Exception as e:  # a malformed result is counted and reported once, never raised into the user
            self._bad_results += 1
            if self._bad_results == 1:
                log.error(f"telemetry could not record a result ({type(e).__name__}: {e}); counting such results")

    def on_test_start(self, environment=None, **_kw) -> None:
        self.merger.configure(self.environment.parsed_options)
        self.merger.recorder.reset()
        self.request_lines = [] if wants_request_log(self.environment.parsed_options) else None

    def on_test_stop(self, environment=None, **_kw) -> None:
        pass


class _RunsUsers(Role):
    """A process with users of its own (worker, local run): samples their KV fill, hands over its recorder."""

    def __init__(self, environment, hub: TelemetryHub) -> None:
        super().__init__(environment, hub)
        self._kv = _Loop(self.sample_kv_fill, 1.0)

    def sample_kv_fill(self) -> None:
        inflight = getattr(self.environment, "llm_inflight", None)
        if inflight is None:
            return
        board = getattr(self.environment, "llm_stage_board", None)
        self.merger.recorder.record_kv_fill(board.current.name if board else "main", inflight.snapshot())

    def read_block_size(self) -> None:
        """The server's KV block size for the client block fill, read once per run (in the background)."""
        options = self.environment.parsed_options
        url = metrics_url(getattr(options, "server_metrics_url", None), self.environment.host)
        key = getattr(options, "api_key", None)
        recorder = self.merger.recorder

        def fetch() -> None:
            recorder.kv_block, recorder.kv_block_source = fetch_block_size(url, {"Authorization": f"Bearer {key}"}
                                                                           if key else None)  # fmt: skip

        gevent.spawn(fetch)

    def take(self) -> dict:
        """The recorder's state plus the model this process's users send (resolved from /v1/models or --model)."""
        state = self.merger.recorder.take()
        model = getattr(getattr(self.environment, "llm_users", None), "model", None)
        if model:
            state["model"] = str(model)
        return state

    def close(self) -> None:
        super().close()
        self._kv.stop()


class WorkerRole(_RunsUsers):
    """Records and ships; the master merges and summarizes."""

    def register(self) -> Role:
        super().register()
        self._on(self.environment.events.report_to_master, self.on_report_to_master)
        return self

    def on_test_start(self, environment=None, **_kw) -> None:
        super().on_test_start()
        self.read_block_size()
        self._kv.start()

    def on_test_stop(self, environment=None, **_kw) -> None:
        self._kv.stop()

    def on_report_to_master(self, client_id=None, data=None, **_kw) -> None:
        if data is not None:
            data[REPORT_KEY] = self.take()
            if self.request_lines:
                data[REQUESTS_KEY], self.request_lines = self.request_lines, []


class SummarizingRole(Role):
    """Master or local run: owns the merge, the exporter, the scraper, and the summary at quit."""

    def __init__(self, environment, hub: TelemetryHub) -> None:
        super().__init__(environment, hub)
        self.exporter: Exporter | None = None
        self.request_log: RequestLog | None = None
        self._finalized = False
        self.detectors = LiveDetectors()
        self._detect = _Loop(self.check_detectors, 1.0)
        self._progress: _Loop | None = None
        self.fallback: RouteFallback | None = None

    def register(self) -> Role:
        super().register()
        self._on(self.environment.events.quitting, self.on_quitting)
        options = self.environment.parsed_options
        port = getattr(options, "prometheus_port", 0) if options is not None else 0
        if port:
            self.exporter = Exporter(self.hub.view, getattr(options, "prometheus_host", PROMETHEUS_HOST_DEFAULT), port)
            if not self.exporter.start():
                self.exporter = None
        return self

    def close(self) -> None:
        super().close()
        self._detect.stop()
        self._stop_progress()
        if self.merger.scraper:
            self.merger.scraper.stop(final_scrape=False)
        self._stop_version_scrapers(final_scrape=False)
        if self.exporter:
            self.exporter.stop()

    def on_test_start(self, environment=None, **_kw) -> None:
        super().on_test_start()
        self.merger.start_run()
        self._finalized = False
        self.request_log = request_log_for(self.environment.parsed_options)
        if self.request_log is not None:
            self.request_log.open()
        self._start_scraper()
        self._start_version_scrapers()
        self._start_fallback()
        self._discover_model()
        self.detectors.reset()
        self._detect.start()
        self._start_progress()

    def on_test_stop(self, environment=None, **_kw) -> None:
        self._detect.stop()
        self._stop_progress()
        self.merger.end_run()
        if not getattr(self.environment.parsed_options, "headless", False):
            self.log_slo_verdict()

    def log_slo_verdict(self) -> None:
        """A web UI run ends without the console table (the process goes on): its SLO verdict goes to the log (a
        headless run's is in the table and the CHECK FAILED lines at quit)."""
        line = verdict_line(self.hub.summary()["slo"])
        if line is not None:
            (log.info if line.startswith("SLO passed") else log.error)(line)

    def _start_progress(self) -> None:
        """--llm-progress-interval: one progress line per interval in a headless run (telemetry/progress.py)."""
        self._stop_progress()
        options = self.environment.parsed_options
        interval = getattr(options, "llm_progress_interval", None)
        interval = LLM_PROGRESS_INTERVAL_DEFAULT if interval is None else float(interval)
        if interval > 0 and getattr(options, "headless", False):
            self._progress = _Loop(lambda: self.print_progress(interval), interval)
            self._progress.start()

    def print_progress(self, interval: float) -> None:
        print(progress_line(self.hub.view(), interval, self.merger.reported_until()), flush=True)

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def check_detectors(self) -> None:
        """One live check (every second): judge the data up to where every live process has reported (a worker
        ships every 3 s; its report holds every request finished before it); end the run when a detector named in
        --llm-stop-on fires."""
        until = self.merger.reported_until()
        if until is None or self._finalized:
            return
        view = self.hub.view()
        until = min(until, view.duration_s)
        if until <= 0:
            return
        stopped = self.detectors.stopped_by
        self.merger.detectors = self.detectors.check(view, until)
        self.check_fallback(view, until)
        if stopped is None and self.detectors.stopped_by is not None:
            why = self.detectors.stopped_by
            log.error(f"--llm-stop-on: stopping the run, live detector {why['detector']} fired at "
                      f"{why['at_s']:.0f} s ({why['reason']})")  # fmt: skip
            gevent.spawn(self._stop_run)  # not from this loop's greenlet: quitting stops the loop

    def _stop_run(self) -> None:
        runner = self.environment.runner
        options = self.environment.parsed_options
        if runner is None:
            return
        if getattr(options, "headless", False):
            runner.quit()
        else:
            runner.stop()

    def _start_fallback(self) -> None:
        """--route-fallback: the rule, checked against the route table's versions (a bad one is logged, not run)."""
        self.fallback, self.merger.route_fallback = start_fallback(self.environment.parsed_options,
                                                                   self.merger.attribution_window)  # fmt: skip

    def check_fallback(self, view, until_s: float) -> None:
        """Judge the fallback rule; when it fires, move the buckets (this process's users, or every worker's)."""
        fb = self.fallback
        if fb is None:
            return
        if fb.check(view, until_s, time.time() - self.merger.t0_wall):
            announce(self.environment, fb)
        self.merger.route_fallback = dict(fb.state)

    def _start_version_scrapers(self) -> None:
        """With --route-table: scrape every version's backend (its own /metrics) unless --server-metrics-url off."""
        self._stop_version_scrapers(final_scrape=False)
        options = self.environment.parsed_options
        interval = float(getattr(options, "server_metrics_interval", None) or SERVER_METRICS_INTERVAL_DEFAULT)
        for version, url in version_backends(options).items():
            if version not in self.merger.version_scrapers:
                scraper = ServerScraper(url, interval)
                self.merger.version_scrapers[version] = scraper
                scraper.start(self.merger.t0_wall)

    def _stop_version_scrapers(self, final_scrape: bool) -> None:
        for scraper in self.merger.version_scrapers.values():
            scraper.stop(final_scrape=final_scrape)
        if not final_scrape:
            self.merger.version_scrapers = {}

    def _start_scraper(self) -> None:
        if self.merger.scraper is not None:
            self.merger.scraper.stop(final_scrape=False)
            self.merger.scraper = None
        options = self.environment.parsed_options
        url = metrics_url(getattr(options, "server_metrics_url", None), self.environment.host)
        if url is None:
            return
        interval = float(getattr(options, "server_metrics_interval", None) or SERVER_METRICS_INTERVAL_DEFAULT)
        self.merger.scraper = ServerScraper(url, interval)
        self.merger.scraper.start(self.merger.t0_wall)

    def _discover_model(self) -> None:
        if self.merger.model or not self.environment.host:
            return
        url = self.environment.host.rstrip("/").removesuffix("/v1") + "/v1/models"

        def fetch() -> None:
            try:
                with urllib.request.urlopen(url, timeout=3) as r:
                    data = json.loads(r.read())
                self.merger.model = self.merger.model or str(data["data"][0]["id"])
            except Exception:  # the model name is a label only; the users report a wrong host loudly
                pass

        gevent.spawn(fetch)

    def collect_last(self) -> None:
        """At quit, before the summary: bring in the results still on their way."""

    def write_request_lines(self) -> None:
        """A local run's own per-request records (the master writes each worker's as its report arrives)."""

    def on_quitting(self, environment=None, **_kw) -> None:
        if self._finalized:
            return
        self._finalized = True
        self._detect.stop()
        self._stop_progress()
        self.collect_last()
        if self.merger.scraper:
            self.merger.scraper.stop(final_scrape=True)
        self._stop_version_scrapers(final_scrape=True)
        self.merger.end_run()
        self.finalize()
        if self.exporter:
            self.exporter.stop()

    def finalize(self) -> dict:
        """Summary, SLO gate, console table and file sinks, then the ``on_summary`` sinks."""
        self.hub.hooks.prepare_final()
        if self.request_log is not None:
            self.write_request_lines()
            self.request_log.close()
        summary = self.hub.summary()
        self.merger.final_summary = summary
        for line in failure_lines(summary["slo"]["checks"]):
            log.error(line)
        if not summary["slo"]["passed"]:
            self.environment.process_exit_code = EXIT_CODE
        for wid in summary["workers_lost"]:
            log.warning(f"WARNING: worker {wid} was lost mid-run; the summary holds only what it reported")
        print(console_table(summary), flush=True)
        options = self.environment.parsed_options
        if getattr(options, "llm_summary_json", None):
            deliver_to("summary JSON", lambda: write_json(summary, options.llm_summary_json))
        if getattr(options, "llm_csv", None):
            deliver_to("CSV", lambda: write_csv(summary, options.llm_csv))
        if getattr(options, "vllm_bench_json", None) and self.request_log is not None:
            deliver_to("vLLM bench JSON", lambda: self.write_vllm_bench(summary, options))
        self.hub.hooks.deliver(summary)
        return summary


    def write_vllm_bench(self, summary: dict, options) -> None:
        path = self.request_log.path
        write_vllm_bench(summary, read_records(path), options, options.vllm_bench_json)
        if not getattr(options, "llm_requests_jsonl", None):
            path.unlink(missing_ok=True)  # the records were only the bench file's input


class MasterRole(SummarizingRole):
    """Merges the workers' reports; warns about dead workers; waits for the last reports at quit."""

    def __init__(self, environment, hub: TelemetryHub) -> None:
        super().__init__(environment, hub)
        self.watch: WorkerWatch | None = None

    def register(self) -> Role:
        super().register()
        self._on(self.environment.events.worker_report, self.on_worker_report)
        return self

    def close(self) -> None:
        super().close()
        if self.watch:
            self.watch.stop()

    def on_test_start(self, environment=None, **_kw) -> None:
        super().on_test_start()
        if self.watch:
            self.watch.stop()
        self.watch = WorkerWatch(self.environment, self.merger)
        self.watch.start()

    def on_worker_report(self, client_id=None, data=None, **_kw) -> None:
        state = (data or {}).get(REPORT_KEY)
        if state is None:
            return
        try:
            self.merger.absorb(str(client_id), state)
        except Exception as e:  # a malformed report is dropped with a line, the run goes on
            log.error(f"dropped an LLM report from worker {client_id}: {type(e).__name__}: {e}")
        lines = (data or {}).get(REQUESTS_KEY)
        if self.request_log is not None:
            self.request_log.write(lines, self.environment.runner.get_worker_index(str(client_id)))

    def collect_last(self) -> None:
        drain_final_reports(self.environment)
        if self.watch:
            self.watch.check()
            self.watch.stop()


class LocalRole(SummarizingRole, _RunsUsers):
    """One process: records its users and pumps its recorder into the merge every second."""

    def __init__(self, environment, hub: TelemetryHub) -> None:
        super().__init__(environment, hub)
        self._pump = _Loop(self.pump_local, 1.0)

    def close(self) -> None:
        super().close()
        self._pump.stop()

    def on_test_start(self, environment=None, **_kw) -> None:
        super().on_test_start()
        self.read_block_size()
        self._kv.start()
        self._pump.start()

    def on_test_stop(self, environment=None, **_kw) -> None:
        self._kv.stop()
        self._pump.stop()
        self.pump_local()
        super().on_test_stop()

    def pump_local(self) -> None:
        self.merger.absorb(LOCAL_ID, self.take())
        self.write_request_lines()

    def write_request_lines(self) -> None:
        if self.request_lines and self.request_log is not None:
            lines, self.request_lines = self.request_lines, []
            self.request_log.write(lines, 0)

    def collect_last(self) -> None:
        self._pump.stop()
        self.pump_local()
        self._kv.stop()


def role_for(runner) -> type[Role]:
    """The role of a process, from its Locust runner (no runner or a local one: a local run)."""
    if isinstance(runner, WorkerRunner):
        return WorkerRole
    if isinstance(runner, MasterRunner):
        return MasterRole
    return LocalRole


def install(environment) -> Role:
    """Create ``environment.llm_telemetry`` and register this process's role; returns the role."""
    hub = TelemetryHub(environment)
    hub.hooks.add_section("versions", lambda view, summary: versions_section(
        view, summary, getattr(environment, "llm_route_tokenizers", None)))
    hub.hooks.add_section("route_fallback", fallback_section)
    hub.hooks.add_section("detectors", lambda view, _summary: view.detectors)
    environment.llm_telemetry = hub
    role = role_for(environment.runner)(environment, hub).register()
    if not isinstance(role, WorkerRole):
        RunRecorder(environment).register()
    return role
