"""The master's worker bookkeeping on its failure paths: the final-report drain giving up on a silent worker,
skipping a missing one, surviving a bad message (the RPC error branch), and the worker watch when a lost worker
sends heartbeats again — driven through a fake runner (no zmq), and once through real Locust runners."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

import gevent
import locust.runners
from locust import User, constant, task
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from locust.env import Environment
from locust.exception import RPCError
from locust.rpc import Message

from run.context import attach
from shapes.stage import StageBoard
from telemetry.measure.distributed import WorkerWatch, drain_final_reports, flush_to_master
from telemetry.measure.runstate import RunState, WorkerInfo
from telemetry.plugin import install
from tests.support import free_port, wait_until
from tests.telemetry.helpers import options


class _Server:
    """The master's RPC server: hands out the scripted messages (an exception is raised), then blocks."""

    def __init__(self, *script) -> None:
        self.script = list(script)

    def recv_from_client(self):
        if not self.script:
            gevent.sleep(3600)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item.node_id, item


class _Runner:
    def __init__(self, server: _Server, states: dict[str, str], live_greenlet: bool = False) -> None:
        self.server = server
        self.clients = SimpleNamespace(all=[SimpleNamespace(id=w, state=s) for w, s in states.items()])
        self.greenlet = [SimpleNamespace(dead=not live_greenlet)]
        self.quits = 0

    def quit(self) -> None:
        self.quits += 1
        self.greenlet = [SimpleNamespace(dead=True)]


def _env(runner: _Runner) -> tuple[Environment, list[tuple[str, dict]]]:
    env = Environment()
    env.runner = runner
    reports: list[tuple[str, dict]] = []
    env.events.worker_report.add_listener(lambda client_id, data, **_kw: reports.append((client_id, data)))
    return env, reports


def _stats(wid: str, n: int) -> Message:
    return Message("stats", {"llm": {"requests": n}}, wid)


def _quit(wid: str) -> Message:
    return Message("quit", None, wid)


def test_drain_fires_every_final_report_and_returns_when_all_workers_quit():
    server = _Server(_stats("w1", 3), _stats("w2", 4), Message("heartbeat", {}, "w2"), _quit("w2"), _quit("w1"))
    runner = _Runner(server, {"w1": "running", "w2": "stopped"})
    env, reports = _env(runner)
    t = time.monotonic()
    assert drain_final_reports(env, timeout_s=5) == set()
    assert time.monotonic() - t < 1.0  # did not wait for the timeout
    assert reports == [("w1", {"llm": {"requests": 3}}), ("w2", {"llm": {"requests": 4}})]
    assert runner.quits == 0  # Locust had quit the runner already


def test_drain_gives_up_on_a_silent_worker_at_the_timeout_and_names_it(caplog):
    server = _Server(_stats("w1", 3), _quit("w1"))  # w2 never sends its final report
    env, reports = _env(_Runner(server, {"w1": "running", "w2": "running"}))
    t = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert drain_final_reports(env, timeout_s=1.0) == {"w2"}
    assert 1.0 <= time.monotonic() - t < 2.0
    assert reports == [("w1", {"llm": {"requests": 3}})]
    assert "worker w2 sent no final report within 1 s" in caplog.text and "worker w1" not in caplog.text


def test_drain_does_not_wait_for_a_worker_already_missing():
    server = _Server(_quit("w1"))
    env, _ = _env(_Runner(server, {"w1": "running", "w2": "missing"}))
    t = time.monotonic()
    assert drain_final_reports(env, timeout_s=5) == set()
    assert time.monotonic() - t < 1.0


def test_drain_survives_a_bad_message_and_keeps_reading(caplog):
    bad = RPCError("unpacking a truncated frame")
    server = _Server(_stats("w1", 1), bad, _stats("w2", 2), _quit("w1"), _quit("w2"))
    env, reports = _env(_Runner(server, {"w1": "running", "w2": "running"}))
    with caplog.at_level(logging.WARNING):
        assert drain_final_reports(env, timeout_s=5) == set()
    assert [wid for wid, _ in reports] == ["w1", "w2"]
    assert "while waiting for the workers' final reports: unpacking a truncated frame" in caplog.text


def test_drain_quits_a_runner_locust_has_not_quit_yet():
    runner = _Runner(_Server(_quit("w1")), {"w1": "running"}, live_greenlet=True)  # e.g. SIGTERM to the master
    env, _ = _env(runner)
    assert drain_final_reports(env, timeout_s=5) == set()
    assert runner.quits == 1


def test_a_quitting_worker_writes_its_last_messages_before_its_socket_goes():
    # Locust's own RPC pair over a real zmq connection: what the worker sent just before its end reaches the master,
    # and its socket and context are closed by the flush (a process that exits right after loses nothing)
    from locust.rpc import zmqrpc

    port = free_port()
    server = zmqrpc.Server("127.0.0.1", port)
    client = zmqrpc.Client("127.0.0.1", port, "w1")
    try:
        client.send(_stats("w1", 7))
        client.send(_quit("w1"))
        assert flush_to_master(SimpleNamespace(client=client)) is True
        assert client.socket.closed and client.socket.context.closed
        got = [server.recv_from_client()[1] for _ in range(2)]
        assert [(m.type, m.data) for m in got] == [("stats", {"llm": {"requests": 7}}), ("quit", None)]
    finally:
        server.close(linger=0)
    assert flush_to_master(SimpleNamespace(client=client)) is False  # already flushed: nothing to do
    assert flush_to_master(SimpleNamespace()) is False  # a runner without a master connection (local, master)


def test_the_worker_role_flushes_on_locusts_quit_event(monkeypatch):
    import telemetry.plugin as plugin

    flushed = []
    monkeypatch.setattr(plugin, "flush_to_master", flushed.append)
    env = Environment(parsed_options=options())
    runner = SimpleNamespace(client=None)
    env.runner = runner
    plugin.WorkerRole(env, plugin.TelemetryHub(env)).register()
    env.events.quit.fire(exit_code=0)
    assert flushed == [runner]


def test_worker_watch_warns_once_when_lost_and_forgets_it_when_it_heartbeats_again(caplog):
    runner = _Runner(_Server(), {"w1": "running", "w2": "running"})
    env, _ = _env(runner)
    merger = RunState()
    merger.workers["w1"] = WorkerInfo(reports=2, last_report_wall=time.time() - 7, requests=42)
    watch = WorkerWatch(env, merger)
    w1, w2 = runner.clients.all
    caplog.set_level(logging.INFO, logger="telemetry.measure.distributed")

    watch.check()
    assert caplog.text == "" and merger.lost_workers == set()

    w1.state = w2.state = "missing"
    watch.check()
    watch.check()  # once per loss, not once per poll
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and merger.lost_workers == {"w1", "w2"}
    assert warnings[0] == ("WARNING: worker w1 stopped sending heartbeats (killed or hung); the LLM summary keeps "
                           "the 42 requests it reported, last report 7 s ago; its later results are lost")
    assert "worker w2 stopped sending heartbeats" in warnings[1]
    assert "nothing from it (it never reported)" in warnings[1]

    caplog.clear()
    w1.state = "running"  # heartbeats again
    watch.check()
    watch.check()
    assert [r.getMessage() for r in caplog.records] == ["worker w1 is sending heartbeats again"]
    assert merger.lost_workers == {"w2"}  # the summary no longer lists it as lost

    caplog.clear()
    w1.state = "missing"  # and lost a second time: warned again
    watch.check()
    assert [r.levelno for r in caplog.records] == [logging.WARNING] and merger.lost_workers == {"w1", "w2"}


def test_worker_watch_polls_on_its_own_until_stopped():
    runner = _Runner(_Server(), {"w1": "missing"})
    env, _ = _env(runner)
    merger = RunState()
    watch = WorkerWatch(env, merger, interval_s=0.05)
    watch.start()
    try:
        assert wait_until(lambda: merger.lost_workers == {"w1"}, timeout=2)
        runner.clients.all[0].state = "ready"
        assert wait_until(lambda: merger.lost_workers == set(), timeout=2)
    finally:
        watch.stop()
    gevent.sleep(0.1)  # the kill lands (a poll already due when stop() was called may still run)
    runner.clients.all[0].state = "missing"
    wait_until(lambda: False, timeout=0.3)  # several poll intervals
    assert merger.lost_workers == set()  # stopped: no more polling


def _options(**kw):
    """Locust's own defaults (the runners read them) plus the telemetry test options."""
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    ns = parser.parse_args(["--headless"])
    vars(ns).update(vars(options(**kw)))
    return ns


class _Idle(User):
    wait_time = constant(0.05)

    @task
    def nothing(self) -> None:
        pass


def test_real_master_warns_when_a_worker_goes_silent_and_forgets_it_when_it_heartbeats_again(
    monkeypatch, caplog, tmp_path
):
    # a master and two workers (Locust runners over zmq, in this process) with telemetry installed; one
    # worker's heartbeats are dropped for a while, then let through again
    monkeypatch.setattr(locust.runners, "HEARTBEAT_INTERVAL", 0.2)  # missing after ~1 s instead of ~4 s
    caplog.set_level(logging.INFO, logger="telemetry.measure.distributed")
    summary_path = tmp_path / "summary.json"
    port = free_port()
    master_env = Environment(user_classes=[_Idle], parsed_options=_options(llm_summary_json=str(summary_path)))
    attach(master_env).stage_board = StageBoard()
    master = master_env.create_master_runner("127.0.0.1", port)
    install(master_env)
    workers = []
    for _ in range(2):
        env = Environment(user_classes=[_Idle], parsed_options=_options())
        attach(env).stage_board = StageBoard()
        env.create_worker_runner("127.0.0.1", port)
        install(env)
        workers.append(env)
    silent = {"on": False}
    quiet = workers[0].runner
    send = quiet.client.send
    quiet.client.send = lambda msg: None if silent["on"] and msg.type == "heartbeat" else send(msg)
    try:
        assert wait_until(lambda: master.worker_count == 2)
        master.start(2, 100)
        assert wait_until(lambda: master.user_count == 2)
        silent["on"] = True
        lost = f"WARNING: worker {quiet.client_id} stopped sending heartbeats"
        assert wait_until(lambda: lost in caplog.text, timeout=6), caplog.text
        silent["on"] = False
        assert wait_until(lambda: f"worker {quiet.client_id} is sending heartbeats again" in caplog.text, timeout=6)
        assert caplog.text.count(lost) == 1
        # what each process's Locust main does at the end: the master quits the run, every process fires
        # `quitting` (a worker's sends its quit, which the master's drain waits for)
        master.quit()
        for w in workers:
            w.events.quitting.fire(environment=w, reverse=True)
        t = time.monotonic()
        master_env.events.quitting.fire(environment=master_env, reverse=True)
        assert time.monotonic() - t < 3  # the drain got both workers' quit: no wait for its timeout
        assert summary_path.exists()
        summary = json.loads(summary_path.read_text())
        assert summary["workers"] == 2 and summary["workers_lost"] == []  # back: not reported as lost
    finally:
        master.quit()
        for w in workers:
            w.runner.quit()
