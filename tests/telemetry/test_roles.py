"""The process's role is chosen once from its runner; the run view is read-only; a summary needs only a view."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from locust.env import Environment
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

import telemetry.hub
import telemetry.plugin
from run.context import attach
from run.hooks import SummaryHooks
from shapes.plugin import NO_SATURATION
from shapes.saturation import section as saturation_section
from shapes.stage import Stage, StageBoard
from telemetry.measure.recorder import Recorder
from telemetry.measure.runstate import RunState
from telemetry.measure.view import RunView
from telemetry.outputs.summary import build_summary
from telemetry.plugin import LocalRole, MasterRole, Role, WorkerRole, install, role_for
from tests.telemetry.helpers import _Nobody, fire, local_env, options
from tests.telemetry.synthetic import make_result


def _bare(cls):
    """A runner of that class without its sockets (the role depends only on the class)."""
    runner = cls.__new__(cls)
    runner.greenlet = None  # what Locust's __del__ looks at
    return runner


def _env_with(runner_cls) -> Environment:
    env = Environment(user_classes=[_Nobody], parsed_options=options(), host="http://127.0.0.1:9")
    env.runner = _bare(runner_cls)
    attach(env).stage_board = StageBoard()
    return env


@pytest.mark.parametrize(
    ("runner_cls", "role_cls"), [(LocalRunner, LocalRole), (WorkerRunner, WorkerRole), (MasterRunner, MasterRole)]
)
def test_each_runner_gets_its_role_once(runner_cls, role_cls):
    assert role_for(_bare(runner_cls)) is role_cls
    env = _env_with(runner_cls)
    role = install(env)
    try:
        assert type(role) is role_cls and env.llm.telemetry is role.hub
    finally:
        role.close()


def test_no_runner_is_a_local_run():
    assert role_for(None) is LocalRole


def test_handlers_exist_only_where_they_mean_something():
    assert hasattr(WorkerRole, "on_report_to_master") and not hasattr(WorkerRole, "on_worker_report")
    assert not hasattr(WorkerRole, "on_quitting") and not hasattr(WorkerRole, "finalize")
    assert hasattr(MasterRole, "on_worker_report") and not hasattr(MasterRole, "on_report_to_master")
    assert not hasattr(MasterRole, "pump_local") and not hasattr(MasterRole, "sample_kv_fill")
    assert hasattr(LocalRole, "pump_local") and not hasattr(LocalRole, "on_worker_report")
    assert not hasattr(LocalRole, "on_report_to_master")
    for cls in (LocalRole, WorkerRole, MasterRole):
        assert issubclass(cls, Role)
        source = inspect.getsource(cls)
        assert "isinstance" not in source and "is_worker" not in source and "is_master" not in source


def test_worker_ships_its_results_and_never_builds_a_summary(monkeypatch, capsys):
    def no_summary(*_a, **_kw):
        raise AssertionError("a worker built a summary")

    monkeypatch.setattr(telemetry.hub, "build_summary", no_summary)
    env = _env_with(WorkerRunner)
    role = install(env)
    try:
        env.events.test_start.fire(environment=env)
        for _ in range(3):
            fire(env, make_result(ttft=0.1))
        data: dict = {}
        env.events.report_to_master.fire(client_id="w1", data=data)
        assert sum(sum(c["outcomes"].values()) for c in data["llm"]["cells"]) == 3
        assert role.merger.recorder.cells == {}  # shipped, then reset
        env.events.test_stop.fire(environment=env)
        env.events.quitting.fire(environment=env, reverse=True)
        assert role.hub.final_summary is None and role.merger.merged.cells == {}
        assert capsys.readouterr().out == ""  # no console table on a worker
    finally:
        role.close()


def test_master_merges_reports_and_its_own_recorder_stays_out():
    env = _env_with(MasterRunner)
    role = install(env)
    try:
        env.events.test_start.fire(environment=env)
        worker = Recorder()
        for _ in range(4):
            worker.record(make_result(ttft=0.2))
        env.events.worker_report.fire(client_id="w1", data={"llm": worker.take()})
        view = role.hub.view()
        assert view.worker_count == 1 and sum(c.requests for c in view.merged.cells.values()) == 4
    finally:
        role.watch.stop()
        role.close()


def _view_of(merger: RunState) -> RunView:
    return merger.view(options=None, host="http://h:1")


def test_run_view_is_read_only():
    assert dataclasses.is_dataclass(RunView) and RunView.__dataclass_params__.frozen
    env, hub, role = local_env()
    role.on_test_start()
    fire(env, make_result(ttft=0.1))
    role.pump_local()
    view = hub.view()
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.duration_s = 0.0
    public = {n for n, v in vars(RunView).items() if callable(v) and not n.startswith("_")}
    assert public == {"stage_spans", "windows", "warmup_stages", "version_windows", "sent_by_version",
                      "server_kv_usages", "client_kv_fill_of", "delivered_tokens"}  # queries only
    before = view.merged.to_dict()
    build_summary(view, hub.hooks)
    view.windows(1.0)
    view.stage_spans()
    view.version_windows("v1", 1.0, 0.0, 3)
    view.sent_by_version(since_s=0.0)
    view.server_kv_usages(0.0, 10.0)
    view.client_kv_fill_of("main")
    assert view.merged.to_dict() == before
    # a view is a snapshot of the bookkeeping: later merger changes do not reach it
    duration, workers, lost = view.duration_s, view.worker_count, view.lost_workers
    role.merger.absorb("w2", Recorder().take())
    role.merger.mark_lost("w2")
    assert (view.duration_s, view.worker_count, view.lost_workers) == (duration, workers, lost) == (
        duration, 1, frozenset())
    assert hub.view().worker_count == 2 and hub.view().lost_workers == {"w2"}
    role.close()


def test_summary_from_a_view_built_without_an_environment():
    merger = RunState()
    merger.start_run()
    board = StageBoard()
    board.set(Stage("users=2", index=0, users=2))
    rec = Recorder()
    for i in range(10):
        rec.record(make_result(ttft=0.1 + 0.01 * i, tokens=5, stage="users=2"))
    rec.record(make_result(ok=False, error_kind="http_5xx", stage="users=2"))
    merger.absorb("w1", rec.take())
    merger.model = "m"
    merger.end_run()
    seen = []
    hooks = SummaryHooks()
    hooks.add_section("saturation", saturation_section, empty=lambda _view: dict(NO_SATURATION))
    hooks.add_section("probe", lambda view, summary: seen.append((view, [st["name"] for st in summary["stages"]])),
                      empty=lambda _view: None)
    view = merger.view(options=None, host="http://h:1", stage_board=board)
    s = build_summary(view, hooks)
    assert s["requests"]["total"] == 11 and s["requests"]["errors"] == {"http_5xx": 1}
    assert s["host"] == "http://h:1" and s["model"] == "m" and s["workers"] == 1
    assert [st["name"] for st in s["stages"]] == ["users=2"] and s["stages"][0]["requests"] == 11
    assert s["saturation"]["stage"] is None and "1 measured stage(s)" in s["saturation"]["reason"]
    assert seen == [(view, ["users=2"])]
    assert build_summary(_view_of(merger))["requests"]["total"] == 11  # no hooks: the base summary


def test_worker_watch_bookkeeping_goes_through_the_merger():
    merger = RunState()
    assert merger.mark_lost("w1") is True and merger.mark_lost("w1") is False
    assert _view_of(merger).lost_workers == {"w1"}
    assert merger.mark_back("w1") is True and merger.mark_back("w1") is False
    assert _view_of(merger).lost_workers == frozenset()


class _Part:
    """Stands in for one of the summarizing role's parts: records what the role asked of it."""

    def __init__(self, calls: list, name: str) -> None:
        self.calls, self.name = calls, name

    def start(self) -> None:
        self.calls.append(f"{self.name}.start")

    def stop(self, final: bool) -> None:
        self.calls.append(f"{self.name}.stop(final={final})")


def test_the_summarizing_role_schedules_its_parts_and_does_not_do_their_work():
    env, hub, role = local_env()
    calls: list[str] = []
    for name in ("scrapes", "route_switch", "model_label", "live_check"):
        setattr(role, name, _Part(calls, name))
    try:
        role.on_test_start()
        assert calls == ["scrapes.start", "route_switch.start", "model_label.start", "live_check.start"]
        calls.clear()
        role.on_quitting()
        assert calls == ["scrapes.stop(final=True)"]  # one last scrape before the summary
        calls.clear()
        role.close()
        assert calls == ["scrapes.stop(final=False)"]
    finally:
        role.close()
    # the role's own code names no scraper, HTTP fetch, fallback rule or progress line: those live in the parts
    source = inspect.getsource(telemetry.plugin.SummarizingRole)
    assert not any(word in source for word in ("ServerScraper(", "urlopen", "RouteFallback(", "progress_line("))


def test_the_progress_line_runs_only_headless_and_when_asked():
    from telemetry.parts import ProgressLine

    env, hub, _role = local_env(llm_progress_interval=5.0)
    try:
        assert ProgressLine(env, hub).interval() == 5.0
        env.parsed_options.headless = False  # the web UI shows the figures itself
        assert ProgressLine(env, hub).interval() == 0.0
        env.parsed_options.headless, env.parsed_options.llm_progress_interval = True, 0
        assert ProgressLine(env, hub).interval() == 0.0
    finally:
        _role.close()


def test_a_result_the_recorder_cannot_take_is_counted_and_reported_once(caplog):
    """The failed-record guard: a malformed result never reaches the user as an exception; the first is one error
    line, later ones only counted, and the worker still ships its report."""
    env = _env_with(WorkerRunner)
    role = install(env)
    try:
        env.events.test_start.fire(environment=env)
        broken = dataclasses.replace(make_result(ttft=0.1), output_tokens=None)  # what no client produces
        fire(env, make_result(ttft=0.1))
        with caplog.at_level("ERROR"):
            for _ in range(3):
                env.events.request.fire(request_type="POST", name="x", response_time=1.0, response_length=0,
                                        exception=None, context={"llm_result": broken})
        fire(env, make_result(ttft=0.1))
        lines = [r.getMessage() for r in caplog.records if "could not record a result" in r.getMessage()]
        assert len(lines) == 1 and role._bad_results == 3, (lines, role._bad_results)
        data: dict = {}
        env.events.report_to_master.fire(client_id="w1", data=data)
        assert sum(sum(c["outcomes"].values()) for c in data["llm"]["cells"]) >= 2  # the good ones went out
    finally:
        role.close()
