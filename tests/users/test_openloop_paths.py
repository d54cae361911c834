"""Open loop: a request's clock starts at its scheduled send time (the pacer's slot), so when every user is
busy, the wait for a free user is client queue time inside TTFT and E2E — not hidden (t0 in the README's definitions).

One user, a constant 50 req/s schedule (a slot every 20 ms) and a server that takes 200 ms to the first
token: from the second request on, each slot is long past when the user is free to take it.
"""

from __future__ import annotations

import time

import gevent
import numpy as np

from run.context import attach
from shapes.pacer import Pacer
from tests.users.hostile import LAST_CHUNK, chunk, hostile, run_user, sse_head
from users import StreamingChatUser

FIRST_TOKEN_S = 0.2


def _slow_stream(sock, _req):
    sock.sendall(sse_head())
    gevent.sleep(FIRST_TOKEN_S)
    sock.sendall(chunk(b'{"choices":[{"index":0,"delta":{"content":"a"}}],'
                       b'"usage":{"prompt_tokens":16,"completion_tokens":1}}'))
    sock.sendall(chunk(b'{"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"length"}],'
                       b'"usage":{"prompt_tokens":16,"completion_tokens":2}}', b"[DONE]") + LAST_CHUNK)
    return True


def test_ttft_e2e_and_client_queue_count_from_the_scheduled_slot():
    slots: list[tuple[float, float]] = []  # (slot handed out, when it was handed out)

    def setup(env) -> None:
        pacer = Pacer(("constant", 0.0), np.random.default_rng(0))
        wait = pacer.wait_slot

        def recorded() -> float:
            t = wait()
            slots.append((t, time.perf_counter()))
            return t

        pacer.wait_slot = recorded
        attach(env).pacer = pacer  # paused: the user waits for the stage, started once it is spawned
        env.events.spawning_complete.add_listener(lambda **_kw: pacer.start_stage("rate=50", 50.0))

    with hostile(_slow_stream) as (host, _):
        run = run_user(StreamingChatUser, host, requests=3, setup=setup)
    results = [e["context"]["llm_result"] for e in run.events]
    assert all(r.ok and r.output_tokens == 2 for r in results)
    for k, (r, (slot, handed)) in enumerate(zip(results, slots, strict=False)):
        assert r.t0 == slot  # the clock starts at the slot, not at the send
        assert r.client_queue_s == r.t_sent - slot >= 0
        server_s = r.chunk_times[0] - r.t_sent
        assert FIRST_TOKEN_S <= server_s < FIRST_TOKEN_S + 0.15
        assert r.ttft_s == r.chunk_times[0] - slot == r.client_queue_s + server_s
        assert r.e2e_s == r.t_end - slot
        assert run.events[k]["response_time"] == r.e2e_s * 1000.0
        if k == 0:  # a free user: sent on time (give or take a busy box's scheduling delay)
            assert r.client_queue_s < 0.1 and handed - slot < 0.1
        else:  # the slot (k * 20 ms after the first) was due ~k * 180 ms before the user was free
            assert handed - slot > 0.15 * k and r.client_queue_s > 0.15 * k
            assert r.ttft_s > FIRST_TOKEN_S + 0.15 * k
    assert [round(b[0] - slots[0][0], 6) for b in slots[:3]] == [0.0, 0.02, 0.04]  # the schedule kept its rate


def test_closed_loop_clock_starts_at_the_send():
    with hostile(_slow_stream) as (host, _):
        run = run_user(StreamingChatUser, host, requests=2)
    for e in run.events:
        r = e["context"]["llm_result"]
        assert r.ok and r.t0 == r.t_sent and r.client_queue_s == 0.0
        assert FIRST_TOKEN_S <= r.ttft_s < FIRST_TOKEN_S + 0.15
