"""The parts of the master's (or a local run's) run that the summarizing role schedules but does not do itself.

Each is small, holds its own state and has the same life: ``start()`` at test start; the ones that run in the
background end with ``stop(final)`` (``final``: at quit, one last reading first). The role decides when; the part
decides what:

- :class:`ServerScrapes`: the ``--host`` server's ``/metrics`` and, with ``--route-table``, each version's backend
  (``merger.scraper``, ``merger.version_scrapers``);
- :class:`ModelLabel`: the served model's name for the summary, read once from ``GET /v1/models`` when no worker
  reported one;
- the route switch (``--route-fallback``) is gray routing's: :class:`telemetry.control.routing.RouteSwitch`, with the
  same life — built at start, judged by the live check;
- :class:`LiveCheck`: one check of the live detectors (telemetry/control/detectors.py) and of the route switch on the
  data every process has reported; ends the run when a detector named in ``--llm-stop-on`` fires (the role calls it
  every second);
- :class:`ProgressLine`: ``--llm-progress-interval``'s line in a headless run (the role calls it every interval).

    scrapes = ServerScrapes(environment, merger); scrapes.start(); ...; scrapes.stop(final=True)
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable

import gevent

from telemetry.control.detectors import LiveDetectors
from telemetry.control.routing import version_backends
from telemetry.measure.runstate import RunState
from telemetry.measure.scraper import ServerScraper
from telemetry.measure.targets import metrics_targets
from telemetry.measure.view import RunView
from telemetry.options import LLM_PROGRESS_INTERVAL_DEFAULT, SERVER_METRICS_INTERVAL_DEFAULT
from telemetry.outputs.progress import progress_line

log = logging.getLogger(__name__)


class ServerScrapes:
    """The server's ``/metrics`` scraper and, with ``--route-table``, one per version's backend."""

    def __init__(self, environment, merger: RunState) -> None:
        self.environment = environment
        self.merger = merger

    def start(self) -> None:
        self.stop(final=False)
        self.merger.scraper = None
        options = self.environment.parsed_options
        interval = float(getattr(options, "server_metrics_interval", None) or SERVER_METRICS_INTERVAL_DEFAULT)
        targets = metrics_targets(getattr(options, "server_metrics_url", None), self.environment.host)
        if targets:
            self.merger.scraper = ServerScraper(targets, interval)
            self.merger.scraper.start(self.merger.t0_wall)
        self._start_versions(options, interval)

    def _start_versions(self, options, interval: float) -> None:
        """With --route-table: every version's backend (its own /metrics) unless --server-metrics-url off."""
        for version, url in version_backends(options).items():
            if version not in self.merger.version_scrapers:
                scraper = ServerScraper(url, interval)
                self.merger.version_scrapers[version] = scraper
                scraper.start(self.merger.t0_wall)

    def stop(self, final: bool) -> None:
        """Stop every scraper; ``final``: after one last scrape, and the versions' kept for the summary."""
        if self.merger.scraper is not None:
            self.merger.scraper.stop(final_scrape=final)
        for scraper in self.merger.version_scrapers.values():
            scraper.stop(final_scrape=final)
        if not final:
            self.merger.version_scrapers = {}


class ModelLabel:
    """The summary's ``model`` when no worker reported one: the first id of ``GET /v1/models`` (in the background)."""

    def __init__(self, environment, merger: RunState) -> None:
        self.environment = environment
        self.merger = merger

    def start(self) -> None:
        if self.merger.model or not self.environment.host:
            return
        gevent.spawn(self.fetch, self.environment.host.rstrip("/").removesuffix("/v1") + "/v1/models")

    def fetch(self, url: str) -> None:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                data = json.loads(r.read())
            self.merger.model = self.merger.model or str(data["data"][0]["id"])
        except Exception:  # the model name is a label only; the users report a wrong host loudly
            pass


class LiveCheck:
    """One live check: the detectors and then ``also(view, until_s)`` (the route switch) on the data up to where
    every live process has reported (a worker ships every 3 s; its report holds every request finished before it);
    ends the run when a detector named in --llm-stop-on fires."""

    def __init__(self, environment, hub, also: Callable[[RunView, float], None]) -> None:
        self.environment = environment
        self.hub = hub
        self.merger: RunState = hub.merger
        self.also = also
        self.detectors = LiveDetectors()

    def start(self) -> None:
        self.detectors.reset()

    def __call__(self) -> None:
        until = self.merger.reported_until()
        if until is None:
            return
        view = self.hub.view()
        until = min(until, view.duration_s)
        if until <= 0:
            return
        stopped = self.detectors.stopped_by
        self.merger.detectors = self.detectors.check(view, until)
        self.also(view, until)
        if stopped is None and self.detectors.stopped_by is not None:
            why = self.detectors.stopped_by
            log.error(f"--llm-stop-on: stopping the run, live detector {why['detector']} fired at "
                      f"{why['at_s']:.0f} s ({why['reason']})")
            gevent.spawn(self.stop_run)  # not from the check loop's greenlet: quitting stops the loop

    def stop_run(self) -> None:
        runner = self.environment.runner
        if runner is None:
            return
        if getattr(self.environment.parsed_options, "headless", False):
            runner.quit()
        else:
            runner.stop()


class ProgressLine:
    """--llm-progress-interval: one progress line per interval in a headless run (telemetry/outputs/progress.py)."""

    def __init__(self, environment, hub) -> None:
        self.environment = environment
        self.hub = hub

    def interval(self) -> float:
        """Seconds between lines; 0 when off (the option is 0, or the run has a web UI)."""
        options = self.environment.parsed_options
        interval = getattr(options, "llm_progress_interval", None)
        interval = LLM_PROGRESS_INTERVAL_DEFAULT if interval is None else float(interval)
        return interval if interval > 0 and getattr(options, "headless", False) else 0.0

    def __call__(self, interval: float) -> None:
        print(progress_line(self.hub.view(), interval, self.hub.merger.reported_until()), flush=True)
