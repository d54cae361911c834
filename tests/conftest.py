"""Shared fixtures, the per-test time limit, the ``slow`` marker's rule and the order tests run in.

Integration helpers: tests/support.py.

Every test has a finite time limit (pytest-timeout): a hang fails with the test's name instead of eating the suite's
budget. A test without a real process gets ``QUICK_TIMEOUT_S``; one marked ``slow`` gets the ``timeout`` of
pyproject.toml, which also covers a real-engine start (up to 300 s) inside a fixture. A test that needs more says so
with ``@pytest.mark.timeout(N)``.

A test that starts a real process (its own or a fixture's) must be marked ``slow``: the README's quick loop
(``-m "not slow and not vllm"``) stays quick only so. A test without the mark that starts one fails, naming the
command.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gevent.subprocess
import pytest
import pytest_timeout  # noqa: F401  the plugin must be installed: without it a hang would stall the suite
import xdist  # noqa: F401  make test spreads the suite over processes (-n): see ENGINE_TESTS

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

def _poll_for_work(queue) -> int:
    """An xdist worker's wait for its next test, by polling instead of a blocking ``threading.Event.wait``.

    Importing Locust monkey-patches ``threading`` with gevent in the worker, whose test queue is filled by execnet's
    receiver thread (a real thread). A real ``Event.wait`` then blocks on a gevent lock that nothing in the worker's
    own hub will release, and gevent ends the worker with ``LoopExit``. ``time.sleep`` (gevent's, once patched) keeps
    the hub alive with a timer, and the queue's lock, made before the patch, is a real one."""
    while True:
        with queue.lock() as items:
            if items:
                return items.popleft()
        time.sleep(0.002)


def pytest_sessionstart(session):
    """Locust (its gevent monkey-patching) is imported before any test module, whatever the collection order: a module
    that imports ``requests`` (ssl) first and Locust later fails with a RecursionError in ssl. Here, not at this
    file's import, so an xdist worker's queue is built with real locks first; that queue then waits by polling
    (:func:`_poll_for_work`)."""
    import locust  # noqa: F401
    for plugin in session.config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is not None and hasattr(queue, "lock"):  # xdist's WorkerInteractor and its TestQueue
            queue.get = functools.partial(_poll_for_work, queue)


QUICK_TIMEOUT_S = 120
"""A test that starts no real process: seconds of work at most, even on a loaded 2-core box."""


ENGINE_TESTS = "tests/vllm/"
"""Where every test of the engine pool lives (its fixtures are tests/vllm/conftest.py's). Under xdist they form one
work unit (EngineGroupScheduling): one worker runs them all, in order, so the package-scoped pool starts the engine
once for the suite, as it does without xdist. (``vllm bench`` against the simulator is marked ``vllm`` too but needs
only the engine's venv: it runs on any worker.)"""


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


def _unit(nodeid: str) -> str:
    """The xdist work unit a test belongs to: the engine group, else its module."""
    return ENGINE_TESTS if nodeid.startswith(ENGINE_TESTS) else nodeid.split("::", 1)[0]


ENGINE_ENV_UNITS = "engine_env_units.json"
"""In the run's shared temporary folder: the work units with a test marked ``vllm`` (they use .venv-vllm), written
by each worker at collection for the controller's scheduler."""


def _schedule_rank(item, exclusive_modules: set[str]) -> int:
    """Where a test goes in the run: the engine group first (the longest unit), then the other tests with real
    processes, then the quick ones, which fill the workers' idle ends, then the modules with an ``exclusive`` test.
    An exclusive test waits until every running test with a process has ended and holds off new ones: mid-run that
    idled the other workers behind the longest running test (box waits of 35-64 s were seen behind a 220 s engine
    test); last, only the run's tail waits. Within a rank the collection order stays."""
    if item.nodeid.startswith(ENGINE_TESTS):
        return 0
    if _module(item) in exclusive_modules:
        return 3
    return 1 if item.get_closest_marker("slow") is not None else 2


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.timeout(QUICK_TIMEOUT_S))
    exclusive = {_module(i) for i in items if i.get_closest_marker("exclusive") is not None}
    # stable: the engine tests keep their file order (tests/vllm/test_a_… first)
    items.sort(key=lambda item: _schedule_rank(item, exclusive))
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        units = sorted({_unit(i.nodeid) for i in items if i.get_closest_marker("vllm") is not None})
        folder = config._tmp_path_factory.getbasetemp().parent
        tmp = folder / f"{ENGINE_ENV_UNITS}.{os.getpid()}"
        tmp.write_text(json.dumps(units))
        os.replace(tmp, folder / ENGINE_ENV_UNITS)


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling: a test module is one work unit, so its module-scoped fixtures (a simulator, a
    300-request master + workers run) start once and tests that share a server's state (a fault every 5th request)
    see it in their file's order; the real-engine package is one unit too. Units go out in the collection order
    above (not xdist's largest-first), the engine first. (xdist's own ``xdist_group`` marks are lost under pytest 9,
    whose node ids no longer read the ``_nodeid`` xdist rewrites.)"""
    from xdist.scheduler import LoadScopeScheduling

    from tests import engine_build

    class EngineGroupScheduling(LoadScopeScheduling):
        _env_units: set[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            """While make test still builds the engine's venv (tests/engine_build.py), the units that use it stay
            queued, in their place, and the next other unit goes out; once it is built (or nothing else is left)
            they go in order."""
            if self._env_units is None:
                path = self.config._tmp_path_factory.getbasetemp() / ENGINE_ENV_UNITS
                self._env_units = set(json.loads(path.read_text())) if path.exists() else set()
            held = [u for u in self.workqueue if u in self._env_units]
            if not held or len(held) == len(self.workqueue) or not engine_build.pending():
                super()._assign_work_unit(node)
                return
            order = list(self.workqueue)
            kept = {u: self.workqueue.pop(u) for u in held}
            try:
                super()._assign_work_unit(node)
            finally:
                rest = {**self.workqueue, **kept}
                self.workqueue.clear()
                self.workqueue.update((u, rest[u]) for u in order if u in rest)

    config.option.loadscopereorder = False
    return EngineGroupScheduling(config, log)


@pytest.fixture(autouse=True)
def _the_box(request, tmp_path_factory):
    """Under xdist a test with real processes holds the box shared, an ``exclusive`` one alone (tests/boxlock.py)."""
    from tests import boxlock  # noqa: PLC0415

    global _HANDED
    exclusive = _exclusive(request.node)
    nextitem = _NEXT.pop(request.node.nodeid, None)
    if not boxlock.sharing() or not (exclusive or request.node.get_closest_marker("slow") is not None):
        yield
        return
    t = time.monotonic()
    hold = _HANDED[1] if _HANDED is not None else None
    _HANDED = None
    if hold is None or not exclusive:
        if hold is not None:
            hold.close()
        hold = contextlib.ExitStack()
        hold.enter_context(boxlock.hold(tmp_path_factory.getbasetemp().parent, exclusive))
    _BOX_WAIT[request.node.nodeid] = time.monotonic() - t
    try:
        yield
    finally:
        if exclusive and nextitem is not None and _exclusive(nextitem):
            _HANDED = (nextitem.nodeid, hold)  # the next test wants the box alone too: hand it over, no queueing
        else:
            hold.close()


def _exclusive(item) -> bool:
    return item.get_closest_marker("exclusive") is not None


_HANDED: tuple[str, contextlib.ExitStack] | None = None
"""An exclusive hold kept from this worker's previous test for its next one (by node id), also exclusive: released
and taken again, the box went to the other worker's next test in between, and the second exclusive test waited for
that one (12-18 s each in CI). A test that never reached the box fixture (a failed module fixture) releases it at
the end of its run (pytest_runtest_protocol)."""
_NEXT: dict = {}
"""Each running test's next test on this worker (pytest_runtest_protocol's ``nextitem``)."""
_BOX_WAIT: dict[str, float] = {}
_STARTED: dict[str, float] = {}
TIMELINE = "timeline.jsonl"
"""Under xdist, one line per test in the run's shared temporary folder: its worker, start and end (monotonic, its
module's fixtures included), and how long it waited for the box; the run's end prints the waits (where the suite's
time goes)."""


def pytest_runtest_logstart(nodeid, location):
    _STARTED[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid, location):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or _TIMELINE_DIR is None:
        return
    line = {"worker": worker, "test": nodeid, "start": _STARTED.pop(nodeid, None), "end": time.monotonic(),
            "box_wait": _BOX_WAIT.pop(nodeid, 0.0)}
    with open(_TIMELINE_DIR / TIMELINE, "a") as f:
        f.write(json.dumps(line) + "\n")


_TIMELINE_DIR: Path | None = None


@pytest.fixture(autouse=True, scope="session")
def _timeline(tmp_path_factory):
    global _TIMELINE_DIR
    _TIMELINE_DIR = tmp_path_factory.getbasetemp().parent
    yield


def pytest_terminal_summary(terminalreporter, config):
    """The box waits of the run (tests/boxlock.py): their sum per worker and the five longest."""
    if os.environ.get("PYTEST_XDIST_WORKER") is not None or getattr(config.option, "numprocesses", None) in (None, 0):
        return
    path = config._tmp_path_factory.getbasetemp() / TIMELINE
    if not path.exists():
        return
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    per = {}
    for r in rows:
        per[r["worker"]] = per.get(r["worker"], 0.0) + r["box_wait"]
    longest = sorted(rows, key=lambda r: -r["box_wait"])[:5]
    terminalreporter.write_line(
        "box waits (tests/boxlock.py): " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(per.items()))
        + "; longest: " + ", ".join(f"{r['test'].rsplit('::', 1)[-1][:50]} {r['box_wait']:.0f} s" for r in longest)
        + f" (timeline: {path})")


QUICK_COMMANDS = {"git"}
"""Commands that are no real process in this sense: the run record's ``git rev-parse`` (milliseconds), which every
summary built in a test runs."""
_POPEN_CLASSES = (subprocess.Popen, gevent.subprocess.Popen)  # locust's monkey-patching swaps in gevent's


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Keeps each test's next one (the box hand-over above); outside ``slow`` tests (setup, call and teardown,
    fixtures included) starting a process fails the test."""
    global _HANDED
    _NEXT[item.nodeid] = nextitem
    try:
        yield from _refuse_processes_outside_slow(item)
    finally:
        if _HANDED is not None and _HANDED[0] == item.nodeid:  # handed to this test, which never took it
            _HANDED[1].close()
            _HANDED = None


def _refuse_processes_outside_slow(item):
    if item.get_closest_marker("slow") is not None:
        yield
        return
    originals = {cls: cls._execute_child for cls in _POPEN_CLASSES}

    def refuse(self, args, *rest, **kw):
        argv = [args] if isinstance(args, str) else [str(a) for a in args]
        if Path(argv[0]).name in QUICK_COMMANDS:
            return originals[type(self)](self, args, *rest, **kw)
        raise pytest.fail.Exception(f"this test starts a real process ({' '.join(argv)[:120]}): mark it slow")

    for cls in _POPEN_CLASSES:
        cls._execute_child = refuse
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls._execute_child = original
