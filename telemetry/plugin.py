"""Wires telemetry into a Locust environment: ``install(environment)`` from the ``init`` listener.

The process's role is chosen once, from its runner, when it installs:

- :class:`WorkerRole` records its users' results (``request`` events carrying ``context["llm_result"]``)
  and ships ``recorder.take()`` under ``llm`` in ``report_to_master``; it never builds a summary.
- :class:`MasterRole` merges the workers' reports (``worker_report``), watches for dead workers and, at
  quit, drains the last reports and finalizes.
- :class:`LocalRole` records its own users and pumps its recorder into the same merge every second.

Master and local run share :class:`SummarizingRole`: the merge, the Prometheus exporter, the request log and, at
quit, the final summary handed to the ``on_summary`` sinks (run/hooks.py): first this package's outputs
(telemetry/outputs/end_of_run.py: SLO gate, console table, summary JSON, CSV, vLLM-bench JSON),
then the other packages'.
What else runs there is a part of its own (telemetry/parts.py: server scrapes, model label, live check, progress
line; telemetry/control/routing.py: the route switch) that the role starts, stops and calls on its loops. Each role
registers only the handlers that mean something for it.

    role = install(environment)       # environment.llm.telemetry is role.hub
    role.close()                      # detach (tests)
"""

from __future__ import annotations

import logging

import gevent
from locust.runners import MasterRunner, WorkerRunner

from run.context import attach
from telemetry.control.capacity import StageJudge
from telemetry.control.routing import RouteSwitch, fallback_section, versions_section
from telemetry.hub import TelemetryHub
from telemetry.measure.distributed import WorkerWatch, drain_final_reports, flush_to_master
from telemetry.measure.targets import metrics_url
from telemetry.options import PROMETHEUS_HOST_DEFAULT
from telemetry.outputs.end_of_run import RunOutputs
from telemetry.outputs.exporter import Exporter
from telemetry.outputs.requestlog import REPORT_KEY as REQUESTS_KEY
from telemetry.outputs.requestlog import RequestLog, record_of, request_log_for, wants_request_log
from telemetry.outputs.runrecord import RunRecorder, fetch_block_size
from telemetry.outputs.speculative import speculative_section
from telemetry.parts import LiveCheck, ModelLabel, ProgressLine, ServerScrapes
from telemetry.slo import verdict_line

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
        ctx = self.environment.llm
        inflight = ctx.inflight
        if inflight is None:
            return
        board = ctx.stage_board
        self.merger.recorder.record_kv_fill(board.current.name if board else "main", inflight.snapshot())

    def read_block_size(self) -> None:
        """The server's KV block size for the client block fill, read once per run (in the background)."""
        options = self.environment.parsed_options
        url = metrics_url(getattr(options, "server_metrics_url", None), self.environment.host)
        key = getattr(options, "api_key", None)
        recorder = self.merger.recorder

        def fetch() -> None:
            recorder.kv_block, recorder.kv_block_source = fetch_block_size(url, {"Authorization": f"Bearer {key}"}
                                                                           if key else None)

        gevent.spawn(fetch)

    def take(self) -> dict:
        """The recorder's state plus the model this process's users send (resolved from /v1/models or --model)."""
        state = self.merger.recorder.take()
        settings = self.environment.llm.settings
        model = settings.model if settings is not None else None
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
        self._on(self.environment.events.quit, self.on_quit)
        return self

    def on_quit(self, exit_code=None, **_kw) -> None:
        flush_to_master(self.environment.runner)

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
    """Master or local run: owns the merge, the exporter and the summary at quit; schedules its parts
    (telemetry/parts.py: server scrapes, model label, live check, progress line; telemetry/control/routing.py: the route
    switch)."""

    def __init__(self, environment, hub: TelemetryHub) -> None:
        super().__init__(environment, hub)
        self.exporter: Exporter | None = None
        self.request_log: RequestLog | None = None
        self._finalized = False
        self.scrapes = ServerScrapes(environment, self.merger)
        self.model_label = ModelLabel(environment, self.merger)
        self.route_switch = RouteSwitch(environment, self.merger)
        self.live_check = LiveCheck(environment, hub, self.route_switch.check)
        self.progress = ProgressLine(environment, hub)
        self._detect = _Loop(self.check_live, 1.0)
        self._progress: _Loop | None = None

    def register(self) -> Role:
        super().register()
        self._on(self.environment.events.quitting, self.on_quitting)
        board = self.environment.llm.stage_board
        if board is not None:  # the capacity search's probes are judged here (shapes cannot import telemetry)
            board.judge = StageJudge(self.hub.view, self.merger.reported_until)
        options = self.environment.parsed_options
        port = getattr(options, "prometheus_port", 0) if options is not None else 0
        if port:
            self.exporter = Exporter(self.hub.view, getattr(options, "prometheus_host", PROMETHEUS_HOST_DEFAULT), port)
            if not self.exporter.start():
                self.exporter = None
        RunOutputs(self.environment, lambda: self.request_log).register(self.hub.hooks)
        return self

    def close(self) -> None:
        super().close()
        self._detect.stop()
        self._stop_progress()
        self.scrapes.stop(final=False)
        if self.exporter:
            self.exporter.stop()

    def on_test_start(self, environment=None, **_kw) -> None:
        super().on_test_start()
        self.merger.start_run()
        self._finalized = False
        self.request_log = request_log_for(self.environment.parsed_options)
        if self.request_log is not None:
            self.request_log.open()
        self.scrapes.start()
        self.route_switch.start()
        self.model_label.start()
        self.live_check.start()
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

    def check_live(self) -> None:
        """Every second until the run is finalized: the live check (detectors, route switch, --llm-stop-on)."""
        if not self._finalized:
            self.live_check()

    def _start_progress(self) -> None:
        self._stop_progress()
        interval = self.progress.interval()
        if interval > 0:
            self._progress = _Loop(lambda: self.progress(interval), interval)
            self._progress.start()

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

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
        self.scrapes.stop(final=True)
        self.merger.end_run()
        self.finalize()
        if self.exporter:
            self.exporter.stop()

    def finalize(self) -> dict:
        """The final summary (after the ``before_final`` preparers and the last request lines), handed to every
        ``on_summary`` sink: this package's outputs (telemetry/outputs/end_of_run.py), then the other packages'."""
        self.hub.hooks.prepare_final()
        if self.request_log is not None:
            self.write_request_lines()
            self.request_log.close()
        summary = self.hub.summary()
        self.merger.final_summary = summary
        self.hub.hooks.deliver(summary)
        return summary


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
    """Set ``environment.llm.telemetry``, add this package's summary sections and register this process's role
    (which adds the output sinks); returns the role."""
    ctx = attach(environment)
    hub = ctx.telemetry = TelemetryHub(environment)
    hub.hooks.add_section("versions", lambda view, summary: versions_section(view, summary, ctx.route_tokenizers),
                          empty=lambda _view: {})
    hub.hooks.add_section("route_fallback", fallback_section, empty=lambda _view: None)
    hub.hooks.add_section("detectors", lambda view, _summary: view.detectors, empty=lambda _view: None)
    hub.hooks.add_section("speculative", speculative_section, empty=lambda _view: None)
    role = role_for(environment.runner)(environment, hub).register()
    if not isinstance(role, WorkerRole):
        record = RunRecorder(environment).register()
        judge = ctx.stage_board.judge if ctx.stage_board is not None else None
        if isinstance(judge, StageJudge):  # a capacity probe's energy: the GPU watch of --gpu-metrics-url
            judge.energy = record.energy_between
    return role
