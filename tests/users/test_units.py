"""Unit tests of the users' small parts: options, settings/request bodies, routing hook, in-flight board,
stall watch, server alignment. No network."""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import gevent
import numpy as np
import pytest
from locust.argument_parser import LocustArgumentParser

from users.align import check
from users.inflight import Inflight, LiveRequest
from users.options import add_arguments
from users.routing import add_arguments as add_route_arguments
from users.settings import RunSettings
from users.tally import StreamTally
from users.watchdog import Stalled, StallWatch
from workload.prompts import SyntheticPrompts
from workload.tokenizers import load_tokenizer


def parse(*argv: str) -> argparse.Namespace:
    p = LocustArgumentParser()
    add_arguments(p)
    add_route_arguments(p, None)
    return p.parse_args(list(argv))


def test_option_defaults_and_values() -> None:
    o = parse()
    assert (o.input_len, o.output_len, o.ignore_eos, o.tokenizer) == ("fixed:512", "fixed:256", True, "auto")
    o = parse("--input-len", "300", "--output-len", "zipf:1.2:16:64", "--no-ignore-eos", "--batch-size", "4",
              "--request-timeout", "2.5", "--seed", "7", "--align-prompts")
    assert (o.input_len, o.output_len, o.ignore_eos, o.batch_size) == ("fixed:300", "zipf:1.2:16:64", False, 4)
    assert (o.request_timeout, o.seed, o.align_prompts) == (2.5, 7, True)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--input-len", "foo:1"], "fixed:N"),
        (["--output-len", "uniform:9"], "uniform:LO:HI"),
        (["--batch-size", "0"], ">= 1"),
        (["--request-timeout", "-1"], "seconds > 0"),
        (["--seed", "x"], "integer >= 0"),
        (["--tokenizer", "no-such-tok"], "deepseek-v4"),
        (["--tokenizer", "no-such-tok"], "or auto (the served model's, the default)"),
        (["--prompt-file", "/no/such.jsonl"], "JSONL"),
    ],
)
def test_bad_option_values_exit_2_naming_option_and_forms(argv, needle, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        parse(*argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert argv[0] in err and needle in err


def settings(**kw) -> RunSettings:
    opts = argparse.Namespace(input_len="16", output_len="8", seed=0, **kw)
    return RunSettings.from_options(opts)


def test_sampling_asks_exact_lengths_with_ignore_eos_and_names_the_model() -> None:
    s = settings(model="m")
    assert s.sampling(8) == {"max_tokens": 8, "ignore_eos": True, "min_tokens": 8, "model": "m"}
    s = settings(ignore_eos=False)
    assert s.sampling(8) == {"max_tokens": 8}


def test_api_key_from_option_or_environment(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert settings().headers(True)["Authorization"] == "Bearer sk-env"
    assert settings(api_key="sk-opt").headers(False)["Authorization"] == "Bearer sk-opt"
    assert "sk-opt" not in repr(settings(api_key="sk-opt"))
    monkeypatch.delenv("OPENAI_API_KEY")
    assert "Authorization" not in settings().headers(True)


def test_stage_input_len_overrides_the_option_and_worker_seeds_differ() -> None:
    s = settings()
    assert s.prompt(True, None).tokens == 16
    assert s.prompt(True, "fixed:40").tokens == 40
    a = RunSettings.from_options(argparse.Namespace(input_len="uniform:1:100000", seed=3), worker_index=0)
    b = RunSettings.from_options(argparse.Namespace(input_len="uniform:1:100000", seed=3), worker_index=1)
    assert a.input_len.sample(a.rng, 5).tolist() != b.input_len.sample(b.rng, 5).tolist()


def test_route_hook_picks_version_url_and_headers_by_fingerprint() -> None:
    table = "v1=http://127.0.0.1:8001@0-49,beta=http://127.0.0.1:8002/base@50-99"
    s = settings(model="m", route_table=table)
    seen = set()
    for i in range(40):
        messages = [{"role": "user", "content": f"q{i}"}]
        version, url, headers = s.route(messages)
        # the bucket as workload/routing/table.py's docstring defines it, computed here from the messages sent
        canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        bucket = int(hashlib.sha256(canonical).hexdigest()[:16], 16) % 100
        assert version == ("v1" if bucket <= 49 else "beta"), (i, bucket)
        assert url == {"v1": "http://127.0.0.1:8001", "beta": "http://127.0.0.1:8002/base"}[version]
        assert headers["X-Tokenizer-Version"] == version and len(headers["X-Tokenizer-Hash"]) == 64
        seen.add(version)
    assert seen == {"v1", "beta"}
    assert settings().route([]) is None


def test_inflight_snapshot_follows_tallies() -> None:
    board = Inflight()
    a, b = StreamTally(100), StreamTally(7)
    board.add(a)
    board.add(b)
    a.output_tokens = 5
    assert sorted(board.snapshot()) == [(7, 0), (100, 5)]
    board.discard(a)
    assert board.snapshot() == [(7, 0)] and len(board) == 1


def test_stall_watch_throws_into_a_silent_request_only() -> None:
    board = Inflight()
    watch = StallWatch(board, timeout_s=1.0)
    caught: list[str] = []

    def request(silent: bool) -> None:
        t = LiveRequest(StreamTally())
        t.owner, t.live, t.last = gevent.getcurrent(), True, time.perf_counter()
        board.add(t)
        try:
            for _ in range(40 if silent else 10):  # silent: 4 s without a byte; talking: a byte every 50 ms
                gevent.sleep(0.1 if silent else 0.05)
                if not silent:
                    t.last = time.perf_counter()
            caught.append("finished")
        except Stalled:
            caught.append("stalled")
        finally:
            t.live = False
            board.discard(t)

    watch.start()
    gevent.joinall([gevent.spawn(request, True), gevent.spawn(request, False)], timeout=30)
    watch.stop()
    assert sorted(caught) == ["finished", "stalled"]


def test_alignment_warns_and_recuts_to_the_servers_count(caplog) -> None:
    tok = load_tokenizer("deepseek-v4")
    src = SyntheticPrompts(tok, chat=False)

    def server(path, body):  # a server that counts 6 tokens more than the client
        return 200, {"count": len(tok.encode(body["prompt"]).ids) + 6}

    report = check(server, src, np.random.default_rng(0), model="m", align=True)
    assert report is not None
    assert (report.client, report.server) == ((32, 128, 512), (38, 134, 518))  # the sample lengths, +6 each
    assert report.ratio == pytest.approx(6 / ((32 + 128 + 512) / 3))  # mean |server - client| / mean client
    assert report.fit == pytest.approx((1.0, 6.0))
    assert "mismatch ratio" in caplog.text and "re-cutting" in caplog.text
    assert src.build(np.random.default_rng(1), 100).tokens == 94  # the server will count 100


def test_alignment_is_quiet_without_tokenize_and_when_counts_agree(caplog) -> None:
    tok = load_tokenizer("deepseek-v4")
    src = SyntheticPrompts(tok, chat=True)
    assert check(lambda p, b: (404, None), src, np.random.default_rng(0)) is None
    report = check(lambda p, b: (200, {"count": src.count(b["messages"][0]["content"])}), src,
                   np.random.default_rng(0))
    assert report is not None and report.ratio == 0.0
    assert "mismatch" not in caplog.text
