"""Stage propagation on real Locust runners: local, and a master with two in-process workers over zmq."""

from __future__ import annotations

from argparse import Namespace

import gevent
import pytest
from locust import User, constant, task
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from locust.env import Environment

from shapes.options import add_arguments
from shapes.plugin import install
from shapes.propagation import OPTION_KEY
from shapes.stage import MAIN, Stage
from shapes.sweep import ConcurrencySweepShape, RateSweepShape
from tests.support import free_port


class _Idle(User):
    wait_time = constant(0.05)

    @task
    def nothing(self):
        pass


def _options(**kw) -> Namespace:
    """Locust's own defaults plus this package's options (and a --seed, which the users package owns)."""
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    add_arguments(parser)
    ns = parser.parse_args(["--headless", "--arrival", "constant", "--max-concurrency", "8"])
    ns.seed = 5
    vars(ns).update(kw)
    return ns


def _env(**kw):
    env = Environment(user_classes=[_Idle], parsed_options=_options(**kw), events=None)
    return env


def _wait(cond, timeout=5.0):
    deadline = gevent.get_hub().loop.now() + timeout
    while not cond():
        if gevent.get_hub().loop.now() > deadline:
            return False
        gevent.sleep(0.05)
    return True


def test_local_rate_stage_creates_pacer_with_full_rate():
    env = _env()
    env.create_local_runner()
    install(env)
    assert env.llm.pacer is None and env.shape_class is None
    env.llm.stage_board.set(Stage("rate=8", rate=8.0, users=8))
    assert env.llm.pacer is not None and env.llm.pacer.rate == 8.0
    env.llm.stage_board.set(Stage("users=4", users=4))  # closed loop again: pacer paused
    assert env.llm.pacer.rate is None


def test_no_shape_run_is_one_main_stage():
    env = _env()
    runner = env.create_local_runner()
    install(env)
    runner.start(2, 100)
    try:
        assert env.shape_class is None
        assert _wait(lambda: env.llm.stage_board.history)
        assert [s for s, *_ in env.llm.stage_board.history] == [MAIN]
    finally:
        runner.quit()


def test_shape_option_installs_sweep_and_none_does_not():
    env = _env(shape="concurrency-sweep", sweep_users="1,2")
    env.create_local_runner()
    install(env)
    assert isinstance(env.shape_class, ConcurrencySweepShape) and env.shape_class.runner is env.runner
    assert "RateSweepShape" in env.available_shape_classes  # listed for --class-picker
    env2 = _env(request_rate="4")  # a lone sweep option implies its shape
    env2.create_local_runner()
    install(env2)
    assert isinstance(env2.shape_class, RateSweepShape)


def test_bad_shape_options_exit_with_message(caplog):
    env = _env(shape="length-sweep")
    env.create_local_runner()
    with pytest.raises(SystemExit):
        install(env)
    assert "--length-sweep is required" in caplog.text


def test_local_sweep_runs_stages_and_stamps_pacer():
    env = _env(shape="rate-sweep", request_rate="20,40", stage_duration="1.5", max_concurrency="4")
    runner = env.create_local_runner()
    install(env)
    runner.start_shape()
    assert _wait(lambda: env.llm.stage_board.current.name == "rate=40", timeout=10)
    assert env.llm.pacer is not None and env.llm.pacer.rate == 40.0
    runner.shape_greenlet.join(timeout=10)
    names = [s.name for s, *_ in env.llm.stage_board.history]
    assert names == ["warmup rate=20", "rate=20", "rate=40"]  # the pool spawns in a twin of its own
    assert env.llm.pacer is None  # test stopped: closed loop again
    runner.quit()


@pytest.fixture
def cluster():
    port = free_port()
    master_env = _env(shape="rate-sweep", request_rate="12", max_concurrency="4")
    master = master_env.create_master_runner("127.0.0.1", port)
    install(master_env)
    workers = []

    def add_worker():
        env = _env()
        env.create_worker_runner("127.0.0.1", port)
        install(env)
        workers.append(env)
        return env

    yield master_env, add_worker, workers
    master.quit()
    for w in workers:
        w.runner.quit()


def test_master_sends_stage_and_worker_share(cluster):
    master_env, add_worker, _ = cluster
    w1, w2 = add_worker(), add_worker()
    assert _wait(lambda: master_env.runner.worker_count == 2)
    master_env.llm.stage_board.set(Stage("rate=12", rate=12.0, users=4))
    assert _wait(lambda: w1.llm.stage_board.current.name == "rate=12" and w2.llm.stage_board.current.name == "rate=12")
    assert w1.llm.pacer.rate == pytest.approx(6.0) and w2.llm.pacer.rate == pytest.approx(6.0)
    assert getattr(master_env.parsed_options, OPTION_KEY)["workers"] == 2
    assert master_env.llm.pacer is None  # no users on the master


def test_late_worker_gets_current_stage_and_shares_update(cluster):
    master_env, add_worker, _ = cluster
    w1 = add_worker()
    assert _wait(lambda: master_env.runner.worker_count == 1)
    master_env.runner.start(4, 100)  # a run is going on
    master_env.llm.stage_board.set(Stage("rate=12", rate=12.0, users=4))
    assert _wait(lambda: w1.llm.pacer is not None and w1.llm.pacer.rate == pytest.approx(12.0))
    w2 = add_worker()  # joins mid-run; Locust moves half of the users to it
    assert _wait(lambda: w2.runner.user_count == 2, timeout=10)
    assert w2.llm.stage_board.current.name == "rate=12"
    assert _wait(lambda: w1.llm.pacer.rate == pytest.approx(6.0) and w2.llm.pacer is not None
                 and w2.llm.pacer.rate == pytest.approx(6.0), timeout=10)


def test_worker_without_users_does_not_take_a_share(cluster):
    master_env, add_worker, _ = cluster
    w1, w2 = add_worker(), add_worker()
    assert _wait(lambda: master_env.runner.worker_count == 2)
    master_env.runner.start(1, 100)  # one user: only one worker runs
    assert _wait(lambda: w1.runner.user_count + w2.runner.user_count == 1)
    gevent.sleep(1.5)  # heartbeats report the worker states
    master_env.llm.stage_board.set(Stage("rate=12", rate=12.0, users=1))
    busy = w1 if w1.runner.user_count else w2
    assert _wait(lambda: busy.llm.pacer is not None and busy.llm.pacer.rate == pytest.approx(12.0), timeout=10)
