"""Wires the trace join and export into a Locust environment: ``install(environment)`` after telemetry's.

- every process with users: with ``--otlp-receiver`` set, each result's client record is kept — without it, each
  result that carries the server's in-band record (``--enable-per-request-metrics``) — (a local run hands it to the
  join, a worker ships its records under ``llm_traces`` in ``report_to_master``); with ``--otlp-endpoint``, each
  result becomes a span (:mod:`~telemetry.traces.export`).
- the master (or local run): the OTLP receiver, the join, the ``traces`` summary section (its ``source``: spans,
  in-band records or both), and before the final summary a wait of up to ``--otlp-grace`` seconds for the spans of
  completed requests, then the in-band join of those that got none.

    install(environment)       # environment.llm.traces is the TraceJoin
"""

from __future__ import annotations

import logging
import time

import gevent
from locust.runners import MasterRunner, WorkerRunner

from run.context import attach
from telemetry.traces.export import SpanExport
from telemetry.traces.join import ClientRecord, TraceJoin, client_record
from telemetry.traces.options import OTLP_GRACE_DEFAULT, OTLP_RECEIVER_HOST_DEFAULT
from telemetry.traces.receiver import OtlpReceiver
from telemetry.traces.tail import traces_section

log = logging.getLogger(__name__)
REPORT_KEY = "llm_traces"


def _opt(options, name: str, default=None):
    v = getattr(options, name, None) if options is not None else None
    return default if v is None else v


class TracesPlugin:
    def __init__(self, environment) -> None:
        self.environment = environment
        self.join = TraceJoin()
        self.receiver: OtlpReceiver | None = None
        self.exporter: SpanExport | None = None
        self.collect = False
        self._outbox: list[ClientRecord] = []
        runner = environment.runner
        self.is_worker = isinstance(runner, WorkerRunner)
        self.is_master = isinstance(runner, MasterRunner)

    def register(self) -> TracesPlugin:
        ev = self.environment.events
        ev.test_start.add_listener(self.on_test_start)
        ev.quitting.add_listener(self.on_quitting)
        if not self.is_master:
            ev.request.add_listener(self.on_request)
        if self.is_worker:
            ev.report_to_master.add_listener(self.on_report_to_master)
        else:
            hooks = self.environment.llm.hooks
            hooks.add_section("traces", self.section, empty=lambda _view: None)
            hooks.before_final(self.wait_for_spans)
            hooks.on_summary(self.stop_receiver)  # after the final summary (Locust fires quitting in reverse)
        if self.is_master:
            ev.worker_report.add_listener(self.on_worker_report)
        return self

    # ---- options ---------------------------------------------------------------------------
    def on_test_start(self, environment=None, **_kw) -> None:
        options = self.environment.parsed_options
        port = int(_opt(options, "otlp_receiver", 0))
        self.collect = port > 0
        self._outbox.clear()
        self.join.spans_expected = self.collect
        if not self.is_worker:
            self.join.reset()
            self.environment.llm.traces = self.join
            if self.collect and self.receiver is None:
                host = str(_opt(options, "otlp_receiver_host", OTLP_RECEIVER_HOST_DEFAULT))
                rx = OtlpReceiver(self.join, host, port)
                self.receiver = rx if rx.start() else None
        endpoint = _opt(options, "otlp_endpoint", None)
        if not self.is_master and endpoint and str(endpoint).lower() != "off" and self.exporter is None:
            self.exporter = SpanExport(str(endpoint))

    # ---- users' side -----------------------------------------------------------------------
    def on_request(self, context=None, **_kw) -> None:
        result = context.get("llm_result") if isinstance(context, dict) else None
        if result is None:
            return
        if self.exporter is not None:
            try:
                self.exporter.record(result)
            except Exception as e:  # tracing must never fail a request
                log.warning(f"--otlp-endpoint: span not recorded: {type(e).__name__}: {e}")
        if not self.collect and result.server is None:  # nothing to join: the common case costs one test
            return
        rec = client_record(result)
        if rec is not None and (self.collect or rec.in_band is not None):
            if self.is_worker:
                self._outbox.append(rec)
            else:
                self.join.add_client(rec)

    def on_report_to_master(self, client_id=None, data=None, **_kw) -> None:
        if data is not None and self._outbox:
            data[REPORT_KEY] = [tuple(r) for r in self._outbox]
            self._outbox = []

    # ---- master's side ---------------------------------------------------------------------
    def on_worker_report(self, client_id=None, data=None, **_kw) -> None:
        recs = (data or {}).get(REPORT_KEY)
        if not recs:
            return
        for r in recs:
            try:
                self.join.add_client(ClientRecord(*r))
            except TypeError:  # a record of another version: counted as a bad export, the run goes on
                self.join.bad_exports += 1

    def wait_for_spans(self) -> None:
        """Before the final summary: up to ``--otlp-grace`` seconds for the spans of completed requests, then the
        in-band join of those that got none."""
        if not self.collect or self.receiver is None:
            self.join.settle_in_band()
            return
        grace = float(_opt(self.environment.parsed_options, "otlp_grace", OTLP_GRACE_DEFAULT))
        deadline = time.monotonic() + grace
        while self.join.waiting_ok() and time.monotonic() < deadline:
            gevent.sleep(0.1)
        self.join.settle_in_band()
        if self.join.waiting_ok():
            log.warning(f"{self.join.waiting_ok()} completed requests got no server span within --otlp-grace "
                        f"{grace:g} s (summary traces.requests_unjoined)")

    def section(self, _view, _summary) -> dict | None:
        """None without a receiver and without an in-band record."""
        if not self.collect and not self.join.joined_in_band:
            return None
        return traces_section(self.join, receiving=self.receiver is not None)

    def on_quitting(self, environment=None, **_kw) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None

    def stop_receiver(self, _summary=None) -> None:
        if self.receiver is not None:
            self.receiver.stop()
            self.receiver = None


def install(environment) -> TracesPlugin | None:
    """Register on ``environment`` (None without telemetry)."""
    ctx = attach(environment)
    if ctx.telemetry is None:
        return None
    ctx.traces = None
    return TracesPlugin(environment).register()
