"""Request budget: ``--num-requests N`` ends the run after exactly N LLM requests were sent and finished, across
every worker (vllm bench's ``--num-prompts``); ``--max-errors N`` stops a run once N LLM requests have failed
(GuideLLM's constraint). Why the run stopped is ``environment.llm.stopped_by`` (the summary's
``run.stopped_by``).

Exactness across workers: at ``test_start`` the master splits N over the workers it starts (``split``: the first
``N % W`` get one more) and sends each its quota (message ``llm_budget``, sent before Locust's spawn message on the
same socket, so a worker has it before its first user runs). A worker's user claims one unit before it sends and
returns it when the request has finished (ok or failed); with none left it idles until the run ends. A worker whose
claimed requests have all finished says so (``llm_budget_done``); when every worker has, the master ends the run. A
worker lost mid-run (Locust marks it missing when its heartbeats stop) will never say so: the master counts it out
within a second, its unsent share stays unsent, and the run ends when the others are done (``stopped_by`` names the
lost workers) rather than at ``-t``. A worker that joins later has no quota and sends nothing. A local run holds all
N itself.

    budget = Budget(100, on_done=stop)
    if budget.claim():
        try: send() finally: budget.finish()
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from run.context import attach

log = logging.getLogger(__name__)

MSG_QUOTA = "llm_budget"
MSG_DONE = "llm_budget_done"
LLM_REQUEST_TYPE = "LLM"
"""The Locust ``request_type`` of every LLM request event (users/base.py)."""


def split(n: int, workers: int) -> list[int]:
    """N requests over W workers: each gets N // W, the first N % W one more (sums to N exactly)."""
    if workers <= 0:
        return []
    q, r = divmod(n, workers)
    return [q + (1 if i < r else 0) for i in range(workers)]


class Budget:
    """A process's quota of LLM requests: ``claim`` before sending, ``finish`` once the request has ended."""

    def __init__(self, quota: int, on_done: Callable[[int], None] | None = None) -> None:
        self.quota = quota
        self.claimed = 0
        self.finished = 0
        self._on_done = on_done
        self._told = False
        if quota == 0:
            self._done()

    def claim(self) -> bool:
        if self.claimed >= self.quota:
            return False
        self.claimed += 1
        return True

    def finish(self) -> None:
        self.finished += 1
        if self.finished >= self.quota:
            self._done()

    @property
    def done(self) -> bool:
        return self.finished >= self.quota

    def _done(self) -> None:
        if not self._told and self._on_done is not None:
            self._told = True
            self._on_done(self.finished)


def stop_run(environment, stopped_by: dict) -> None:
    """End the run (headless: quit, as --run-time does; web UI: stop) and say why, once."""
    if environment.llm.stopped_by is not None:
        return
    environment.llm.stopped_by = stopped_by
    runner = environment.runner
    if runner is None:
        return
    quit_ = getattr(environment.parsed_options, "headless", False)
    gevent.spawn(runner.quit if quit_ else runner.stop)  # never from the greenlet that the stop kills


def llm_failures(environment) -> int:
    """LLM requests failed so far (the master's stats hold the workers' reports, every 3 s)."""
    stats = getattr(environment.runner, "stats", None)
    if stats is None:
        return 0
    return sum(e.num_failures for (_name, method), e in stats.entries.items() if method == LLM_REQUEST_TYPE)


class BudgetPlugin:
    """Wires the budget into one process (local, master or worker) by its runner."""

    def __init__(self, environment) -> None:
        self.environment = environment
        self.pending: set[str] = set()
        """Workers with a quota that have not said they are done (master)."""
        self.lost: list[str] = []
        """Workers counted out because Locust marked them missing (master)."""
        self.sent = 0
        self._watch: gevent.Greenlet | None = None
        self._lost_watch: gevent.Greenlet | None = None
        ctx = attach(environment)
        ctx.budget = None
        ctx.stopped_by = None

    def register(self) -> BudgetPlugin:
        env, runner = self.environment, self.environment.runner
        env.events.test_start.add_listener(self._on_test_start)
        env.events.test_stop.add_listener(self._on_test_stop)
        if isinstance(runner, WorkerRunner):
            runner.register_message(MSG_QUOTA, self._on_quota)
        elif isinstance(runner, MasterRunner):
            runner.register_message(MSG_DONE, self._on_worker_done)
        return self

    @staticmethod
    def _options(env) -> tuple[int, int]:
        o = env.parsed_options
        return int(getattr(o, "num_requests", 0) or 0), int(getattr(o, "max_errors", 0) or 0)

    def _on_test_start(self, environment=None, **_kw) -> None:
        env, runner = self.environment, self.environment.runner
        num, max_errors = self._options(env)
        if isinstance(runner, WorkerRunner):
            if num and env.llm.budget is None:  # joined after the master split the budget: no share
                log.warning("--num-requests: this worker got no share of the budget (it joined late); it sends none")
                env.llm.budget = Budget(0, self._tell_master)
            return
        env.llm.stopped_by = None
        if isinstance(runner, MasterRunner):
            if num:
                workers = sorted(c.id for c in runner.clients.ready + runner.clients.running + runner.clients.spawning)
                self.pending, self.lost, self.sent = set(workers), [], 0
                for wid, quota in zip(workers, split(num, len(workers)), strict=True):
                    runner.send_message(MSG_QUOTA, {"quota": quota}, client_id=wid)
                log.info(f"--num-requests {num}: {', '.join(map(str, split(num, len(workers))))} per worker")
                self._lost_watch = gevent.spawn(self._watch_lost)
        elif num:
            env.llm.budget = Budget(num, lambda n: self._all_done(n))
        if max_errors:
            self._watch = gevent.spawn(self._watch_errors, max_errors)

    def _on_test_stop(self, environment=None, **_kw) -> None:
        for g in (self._watch, self._lost_watch):
            if g is not None:
                g.kill(block=False)
        self._watch = self._lost_watch = None
        if isinstance(self.environment.runner, WorkerRunner):
            self.environment.llm.budget = None  # the next run's quota comes before its test_start

    def _on_quota(self, environment=None, msg=None, **_kw) -> None:
        self.environment.llm.budget = Budget(int(msg.data["quota"]), self._tell_master)

    def _tell_master(self, finished: int) -> None:
        runner = self.environment.runner
        gevent.spawn(runner.send_message, MSG_DONE, {"finished": finished})

    def _on_worker_done(self, environment=None, msg=None, **_kw) -> None:
        self.pending.discard(msg.node_id)
        self.sent += int((msg.data or {}).get("finished", 0))
        if not self.pending:
            self._all_done(self.sent)

    def _watch_lost(self) -> None:
        """Master: count out each worker with a quota that Locust marks missing; end the run when the rest are done."""
        while self.pending:
            gevent.sleep(1.0)
            missing = {c.id for c in self.environment.runner.clients.all if c.state == STATE_MISSING} & self.pending
            for wid in sorted(missing):
                self.pending.discard(wid)
                self.lost.append(wid)
                log.warning(f"--num-requests: worker {wid} was lost; its unsent share stays unsent and the run ends "
                            "when the other workers are done")
            if missing and not self.pending:
                self._all_done(self.sent)

    def _all_done(self, finished: int) -> None:
        num, _ = self._options(self.environment)
        lost = f" (workers lost: {', '.join(self.lost)})" if self.lost else ""
        log.info(f"--num-requests {num}: all {finished} requests finished{lost}; ending the run")
        stopped_by = {"reason": "num_requests", "requests": finished, "limit": num}
        if self.lost:
            stopped_by["workers_lost"] = list(self.lost)
        stop_run(self.environment, stopped_by)

    def _watch_errors(self, max_errors: int) -> None:
        while True:
            gevent.sleep(1.0)
            failed = llm_failures(self.environment)
            if failed >= max_errors:
                log.error(f"--max-errors {max_errors}: {failed} LLM requests failed; stopping the run")
                stop_run(self.environment, {"reason": "max_errors", "errors": failed, "limit": max_errors})
                return


def install(environment) -> BudgetPlugin:
    return BudgetPlugin(environment).register()
