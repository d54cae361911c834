"""Open-loop counts summed across workers: a master running a rate sweep with two workers (real Locust runners
over zmq, in this process). Each worker's users take slots from their own pacer (a share of the stage's rate);
the master's ``open_loop`` section must hold, per stage, exactly the slots the workers' users took."""

from __future__ import annotations

from collections import Counter

import gevent
import pytest
from locust import User, constant, task
from locust.env import Environment

from shapes.plugin import install
from tests.shapes.runners import runner_options
from tests.support import free_port, wait_until

TAKEN: dict[int, Counter] = {}
"""id(environment) -> stage name -> slots its users took."""


class _Paced(User):
    """Takes the pacer's slots (a request that costs 5 ms); idles in closed loop."""

    wait_time = constant(0)

    @task
    def send(self) -> None:
        pacer = self.environment.llm.pacer
        if pacer is None or pacer.rate is None:
            gevent.sleep(0.02)
            return
        pacer.wait_slot()
        TAKEN.setdefault(id(self.environment), Counter())[pacer.stage] += 1  # no yield since the slot
        gevent.sleep(0.005)


def _env(**kw) -> Environment:
    return Environment(user_classes=[_Paced], parsed_options=runner_options(**kw), events=None)


@pytest.fixture
def sweep():
    port = free_port()
    master_env = _env(shape="rate-sweep", request_rate="20,40", stage_duration="1.5", max_concurrency="2",
                      spawn_rate=100)
    master = master_env.create_master_runner("127.0.0.1", port)
    install(master_env)
    workers = []
    for _ in range(2):
        env = _env()
        env.create_worker_runner("127.0.0.1", port)
        install(env)
        workers.append(env)
    TAKEN.clear()
    yield master_env, workers
    master.quit()
    for w in workers:
        w.runner.quit()


def test_master_sums_each_workers_open_loop_counts_per_stage(sweep):
    master_env, workers = sweep
    assert wait_until(lambda: master_env.runner.worker_count == 2)
    master_env.runner.start_shape()
    assert wait_until(lambda: master_env.runner.shape_greenlet is not None)
    master_env.runner.shape_greenlet.join(timeout=15)
    assert [s.name for s, *_ in master_env.llm.stage_board.history] == ["warmup rate=20", "rate=20", "rate=40"]
    per_worker = [TAKEN.get(id(w), Counter()) for w in workers]
    assert all(c["rate=20"] > 0 and c["rate=40"] > 0 for c in per_worker), per_worker  # both workers took slots
    want = sum(per_worker, Counter())
    tally = master_env.llm.shape_tally

    def merged() -> dict[str, int]:
        return {stage: c["scheduled"] for stage, c in tally.counts.items() if c["scheduled"]}

    # the workers' final reports (sent when they stop) carry their last counts to the master
    assert wait_until(lambda: merged() == dict(want), timeout=10), (merged(), want)
    section = tally.section()
    rows = {r["name"]: r for r in section["stages"]}
    assert set(rows) == {"warmup rate=20", "rate=20", "rate=40"}
    for name in ("rate=20", "rate=40"):
        row = rows[name]
        assert row["scheduled"] == want[name]
        # the last stage too ends where the sweep finished it (its span is known, so is its offered rate);
        # Locust ticks a shape once a second, so a 1.5 s stage holds 1.5 to 2 s
        assert 1.5 <= row["duration_s"] < 2.6, row
        # every slot of the stage's whole rate, over both workers, was either taken or counted unsent
        assert row["offered_rps"] == pytest.approx(row["rate"], rel=0.2), row
    # each worker paced half of each stage's rate: half of the slots, within 10 % (0.487-0.513 measured)
    shares = [c[n] / want[n] for c in per_worker for n in ("rate=20", "rate=40")]
    assert all(s == pytest.approx(0.5, rel=0.1) for s in shares), shares
