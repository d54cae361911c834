"""Wire the users into a Locust Environment: ``install(environment)`` from the locustfile's init listener.

Fills the run context's users fields: ``environment.llm.inflight`` and, at every ``test_start`` on a process
that runs users (local or worker, not the master), ``environment.llm.settings``
(:class:`~users.settings.RunSettings`): options parsed, the model resolved once per process from
``GET /v1/models`` unless ``--model`` names it, the tokenizer chosen for it (``--tokenizer auto``:
:func:`workload.tokenizers.choose_tokenizer`; logged, and kept as ``environment.llm.tokenizer`` for the summary's
``run.tokenizer``: name, hash, source, model), and the client/server prompt-token counts compared through
``/tokenize`` (:mod:`users.align`).
"""

from __future__ import annotations

import gc
import inspect
import logging
import sys

import gevent
from locust.runners import MasterRunner, WorkerRunner

from run.context import attach
from users.align import check
from users.budget import install as install_budget
from users.inflight import Inflight
from users.options import (
    RESOLVED_SALT,
    check_dataset_options,
    resolve_prompt_salt,
)
from users.routing import apply_fallback, check_route_options, resolve_versions, route_tokenizers_from
from users.server_info import ServerUnreachable, first_model, json_poster, unreachable
from users.settings import RunSettings
from users.watchdog import StallWatch
from workload.prompts import SyntheticPrompts
from workload.routing.table import ROUTE_FALLBACK_MESSAGE, ROUTE_FALLBACK_OPTION, RouteTable
from workload.tokenizers import AUTO, Chosen, choose_tokenizer

log = logging.getLogger(__name__)


class UsersPlugin:
    def __init__(self, environment) -> None:
        self.environment = environment
        self._models: dict[str, str | None] = {}

    def register(self) -> None:
        attach(self.environment).inflight = Inflight()
        if isinstance(self.environment.runner, WorkerRunner):
            self.environment.runner.register_message(ROUTE_FALLBACK_MESSAGE, self._on_fallback)
        self.environment.events.test_start.add_listener(self._on_test_start)
        self.environment.events.test_stop.add_listener(self._on_test_stop)

    def close(self) -> None:
        self.environment.events.test_start.remove_listener(self._on_test_start)
        self.environment.events.test_stop.remove_listener(self._on_test_stop)
        self._on_test_stop()

    def _on_test_stop(self, **_kw) -> None:
        watch = self.environment.llm.stall_watch
        if watch is not None:
            watch.stop()
            self.environment.llm.stall_watch = None

    def _on_test_start(self, environment, **_kw) -> None:
        try:
            self._start(environment)
        finally:
            settle_gc()

    def _start(self, environment) -> None:
        if not isinstance(environment.runner, WorkerRunner) and environment.parsed_options is not None:
            # one salt per run, drawn where the run starts; workers get it with the options Locust ships them
            salt = resolve_prompt_salt(getattr(environment.parsed_options, "prompt_salt", None))
            setattr(environment.parsed_options, RESOLVED_SALT, salt)
        if isinstance(environment.runner, MasterRunner):
            self._master_tokenizer(environment)
            return
        try:
            route_tokenizers_from(environment.parsed_options)  # names only versions of --route-table
            runner = environment.runner
            workers = int(getattr(environment.parsed_options, "expect_workers", 1) or 1)
            settings = off_loop(RunSettings.from_options, environment.parsed_options,
                                getattr(runner, "worker_index", 0), workers if isinstance(runner, WorkerRunner) else 1)
        except ValueError as e:  # values typed in the web UI skip argparse's validators
            log.error("LLM users: %s", e)
            if environment.runner is not None:
                gevent.spawn_later(0, environment.runner.quit)
            return
        environment.llm.settings = settings
        _prime_inspect()
        self._on_test_stop()
        environment.llm.stall_watch = StallWatch(environment.llm.inflight, settings.request_timeout).start()
        host = environment.host or ""
        if not host and settings.route_table is not None:
            host = settings.route_table.spans[0][2].base_url
        if not host:
            return
        if settings.model is None:
            settings.model = self._model(host, settings.headers(False))
        self._use(environment, choose_tokenizer(self._option(environment), settings.model))
        settings.use_tokenizer(environment.llm.tokenizer.name)
        if settings.route_table is not None:
            settings.versions = self._versions(environment, settings)
            if isinstance(environment.runner, WorkerRunner):  # joined after the master's fallback
                apply_fallback(environment, getattr(environment.parsed_options, ROUTE_FALLBACK_OPTION, None))
        settings.opens_thinking = environment.llm.tokenizer.opens_thinking
        if not self._select_dataset(environment, settings):
            return
        post = json_poster(host, settings.headers(False))
        for chat in (True, False):
            source = off_loop(settings.source, chat)
            if isinstance(source, SyntheticPrompts):
                check(post, source, settings.rng, settings.model, settings.align_prompts)

    def _versions(self, environment, settings: RunSettings) -> dict:
        """Each route version's tokenizer (users/routing.py), logged once and kept as
        ``environment.llm.route_tokenizers`` for the run record."""
        headers = settings.headers(False)
        versions = resolve_versions(settings.route_table, settings.route_tokenizers, self._option(environment),
                                    lambda url: self._model(url, headers))
        if environment.llm.route_tokenizers is None:
            for v, vt in versions.items():
                log.info("LLM users: version %s counts with %s (%s), sha256 %s, X-Compat-Level %s against %s",
                         v, vt.name, vt.source, vt.hash[:16], vt.compat_level, vt.reference)
        environment.llm.route_tokenizers = {v: vt.record() for v, vt in versions.items()}
        return versions

    def _on_fallback(self, environment, msg, **_kw) -> None:
        """The master's fallback: move the failing version's buckets here too (``--route-fallback``)."""
        apply_fallback(environment, msg.data)

    @staticmethod
    def _option(environment) -> str:
        return str(getattr(environment.parsed_options, "tokenizer", None) or AUTO)

    def _use(self, environment, chosen: Chosen) -> None:
        """Say which tokenizer counts (a warning for a fallback) and keep it for the run record."""
        if environment.llm.tokenizer != chosen:
            if chosen.warning:
                log.warning("LLM users: %s", chosen.warning)
            why = {"option": "--tokenizer", "model": f"for the served model {chosen.model!r}",
                   "hub": f"Hugging Face {chosen.model!r}", "fallback": "fallback"}[chosen.source]
            log.info("LLM users: tokenizer %s (%s), sha256 %s", chosen.name, why, chosen.hash[:16])
        environment.llm.tokenizer = chosen  # the summary's run.tokenizer (telemetry/outputs/runrecord.py)

    def _master_tokenizer(self, environment) -> None:
        """The master runs no users but writes the summary: it makes the same choice as the workers (the same
        model look-up; a worker's own choice is logged on the worker)."""
        option = self._option(environment)
        model = getattr(environment.parsed_options, "model", None) or None
        if option == AUTO and model is None and environment.host:
            try:
                settings = off_loop(RunSettings.from_options, environment.parsed_options)
            except ValueError:
                return
            model = self._model(environment.host, settings.headers(False))
        self._use(environment, choose_tokenizer(option, model))
        try:
            route_tokenizers_from(environment.parsed_options)
            settings = off_loop(RunSettings.from_options, environment.parsed_options)
        except ValueError as e:
            log.error("LLM users: %s", e)
            if environment.runner is not None:
                gevent.spawn_later(0, environment.runner.quit)
            return
        if settings.route_table is not None:
            self._versions(environment, settings)
        settings.use_tokenizer(environment.llm.tokenizer.name)
        self._select_dataset(environment, settings)

    @staticmethod
    def _select_dataset(environment, settings: RunSettings) -> bool:
        """Select --dataset's records with the chosen tokenizer (the length filters count with it) and keep the
        run record's ``dataset`` as ``environment.llm.dataset``; False (the run quits) when none is left."""
        try:
            environment.llm.dataset = settings.dataset_record()
        except ValueError as e:
            log.error("LLM users: %s", e)
            if environment.runner is not None:
                gevent.spawn_later(0, environment.runner.quit)
            return False
        if environment.llm.dataset is not None:
            d = environment.llm.dataset
            log.info("LLM users: dataset %s (%s, %d records, sha256 %s): %d selected, skipped %s", d["path"],
                     d["format"], d["records"], d["sha256"][:16], d["selected"], d["skipped"] or "none")
        return True

    def _model(self, host: str, headers: dict[str, str]) -> str | None:
        if host not in self._models:
            try:
                self._models[host] = first_model(host, headers)
                log.info("LLM users: model %r (first of %s/v1/models)", self._models[host], host.rstrip("/"))
            except ServerUnreachable as e:
                log.error("LLM users: %s. Requests go out without a model name; pass --model to set one.", e)
                self._models[host] = None
        return self._models[host]


def off_loop(fn, *args):
    """``fn(*args)`` on gevent's thread pool, the calling greenlet waiting for it. Loading a tokenizer and building
    the synthetic prompt pool take seconds of CPU at a run's start (3.3 s and 1.3 s on a loaded 2-core box); on the
    event loop they would stall a worker's heartbeats past Locust's 3 s liveness, and the master would drop the worker
    as missing and stop the run. In a thread they share the GIL with the loop, which keeps beating."""
    return gevent.get_hub().threadpool.apply(fn, args)


def install(environment) -> None:
    # gevent's timers count from the loop's cached clock, which has not moved since gevent was imported:
    # without a refresh, Locust's --run-time timer (armed after init) fires early by the import time.
    gevent.get_hub().loop.update_now()
    try:  # route options that name versions the table lacks, a bad dataset record: one line and exit 2 at start
        check_route_options(environment.parsed_options)
        check_dataset_options(environment.parsed_options)
    except ValueError as e:
        log.error("%s", e)
        sys.exit(2)
    if not isinstance(environment.runner, WorkerRunner) and _starts_now(environment.parsed_options):
        for url in _servers(environment):  # a server that is not there: one line and exit 2, not a failure storm
            if (why := unreachable(url)) is not None:
                log.error("LLM users: %s: %s", url, why)
                sys.exit(2)
    UsersPlugin(environment).register()
    install_budget(environment)


def _starts_now(options) -> bool:
    """A run that starts without the web form (--headless, --autostart): its host is known at init."""
    return options is not None and bool(getattr(options, "headless", False) or getattr(options, "autostart", False))


def _servers(environment) -> list[str]:
    """The base URLs requests go to: --host, and each backend of --route-table."""
    urls = [environment.host] if environment.host else []
    table = getattr(environment.parsed_options, "route_table", None)
    if table:
        urls += [span[2].base_url for span in RouteTable.parse(str(table)).spans]
    return list(dict.fromkeys(urls))


def settle_gc() -> None:
    """Collect once and freeze what start-up built (modules, tokenizer, prompt pools, settings) into the permanent
    generation: the collector's full passes during the run then walk only the run's own objects. With thousands of
    streams in a process a full pass over everything took 0.5-1.5 s (a 3,000-stream run on a loaded 2-core box),
    a pause every stream of the process waits through."""
    gc.collect()
    gc.freeze()


def _prime_inspect() -> None:
    """Locust's ``Runner.stop()`` logs its caller with ``inspect.stack()``. The first such call in a
    process maps every loaded module to its file (~70 ms with transformers and numpy loaded), blocking
    the gevent hub while the streams still in flight (``--stop-timeout``) wait unread; their chunks then
    arrive merged, stamped at the last one. Filling inspect's caches now, before any request, leaves
    ~7 ms for that call."""
    inspect.getframeinfo(inspect.stack()[0][0])
