"""``--route-table`` paths: invalid version names, batch prompts fingerprinted as the list sent, and a route
URL with a base path — the last two through real users against in-process servers (tests/users/hostile.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from tests.users.hostile import hostile, http, run_user
from users import BatchCompletionUser
from users.routing import route_table_arg
from workload.routing.table import ROUTE_TABLE_FORM, RouteTable, fingerprint

MODEL = "m"


@pytest.mark.parametrize("version", ["", "-beta", ".v1", "v 1", "v/1", "v1:x", "bêta", "v1!", "_v"])
def test_route_table_refuses_a_bad_version_name(version):
    text = f"{version}=http://127.0.0.1:8000@0-49,ok=http://127.0.0.1:8001@50-99"
    with pytest.raises(ValueError) as info:
        RouteTable.parse(text)
    msg = str(info.value)
    assert "bad version name" in msg and repr(version.strip()) in msg and ROUTE_TABLE_FORM in msg
    with pytest.raises(argparse.ArgumentTypeError) as opt:  # and the option says so at start
        route_table_arg(text)
    assert str(opt.value).startswith("--route-table: bad version name")


@pytest.mark.parametrize("version", ["v1", "beta-2", "canary_3", "V.1.2", "0"])
def test_route_table_accepts_the_documented_version_names(version):
    table = RouteTable.parse(f"{version}=http://127.0.0.1:8000@0-99")
    assert table.versions == [version] and table.pick(7).version == version


def _answer(name: str, seen: list):
    body = json.dumps({"choices": [{"index": i, "text": "tok tok"} for i in range(3)],
                       "usage": {"prompt_tokens": 30, "completion_tokens": 6}}).encode()

    def answer(sock, req):
        seen.append((name, req))
        sock.sendall(http(200, body))
        return True

    return answer


def test_batch_prompts_are_fingerprinted_as_the_list_sent():
    seen: list = []
    with hostile(_answer("v1", seen)) as (a, _), hostile(_answer("beta", seen)) as (b, _):
        table = f"v1={a}@0-49,beta={b}@50-99"
        run = run_user(BatchCompletionUser, a, "--model", MODEL, "--batch-size", "3", "--route-table", table,
                       requests=16)
    seen = seen[:16]  # one user sends one request at a time: the first 16 are the 16 events (a 17th may be out)
    assert {name for name, _ in seen} == {"v1", "beta"}
    by_element = 0
    for (server, req), event in zip(seen, run.events, strict=True):
        prompts = req.json()["prompt"]
        assert isinstance(prompts, list) and len(prompts) == 3
        _fp, bucket = fingerprint(MODEL, prompts)
        want = "v1" if bucket < 50 else "beta"
        assert server == want, (bucket, server)
        assert req.headers["x-tokenizer-version"] == want and len(req.headers["x-tokenizer-hash"]) == 64
        r = event["context"]["llm_result"]
        assert r.ok and r.meta.version == want and r.meta.batch_size == 3
        by_element += ("v1" if fingerprint(MODEL, prompts[0])[1] < 50 else "beta") != want
    # the list's bucket is not its first prompt's: routing by an element would have sent some elsewhere
    assert by_element > 0


def test_route_url_base_path_prefixes_the_endpoint():
    seen: list = []
    with hostile(_answer("v1", seen)) as (a, _), hostile(_answer("beta", seen)) as (b, _):
        table = f"v1={a}/gateway/v1-pool/@0-49,beta={b}/beta@50-99"
        run = run_user(BatchCompletionUser, a, "--model", MODEL, "--batch-size", "3", "--route-table", table,
                       requests=12)
    assert {name for name, _ in seen} == {"v1", "beta"}
    paths = {name: {req.path for n, req in seen if n == name} for name in ("v1", "beta")}
    assert paths == {"v1": {"/gateway/v1-pool/v1/completions"}, "beta": {"/beta/v1/completions"}}
    # the request event names the endpoint, not the routed path
    assert {e["name"] for e in run.events} == {"POST /v1/completions [batch]"}
    assert all(e["context"]["llm_result"].ok for e in run.events)
