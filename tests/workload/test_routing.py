"""Fingerprint routing and metadata headers: reproducible hashes, table validation, distribution."""

from __future__ import annotations

import argparse
import hashlib

import numpy as np
import pytest

from users.routing import route_table_arg, route_table_from
from workload.routing.table import (
    DEFAULT_BUCKET_TABLE,
    BucketTable,
    Route,
    RouteTable,
    canonical_json,
    fingerprint,
    metadata_headers,
)
from workload.tokenizers import tokenizer_json_bytes


def test_fingerprint_matches_hand_computed_sha256():
    # printf '%s' '[{"content":"你好 world","role":"user"}]' | sha256sum -> bce6d041a2e5883e...
    messages = [{"role": "user", "content": "你好 world"}]
    assert canonical_json(messages) == '[{"content":"你好 world","role":"user"}]'.encode()
    fp, bucket = fingerprint("deepseek-v4", messages)
    assert fp == "deepseek-v4:bce6d041a2e5883e"
    assert bucket == int("bce6d041a2e5883e", 16) % 100 == 10
    # a completions prompt is fingerprinted as the JSON string: printf '%s' '"Hello"' | sha256sum
    assert fingerprint("m", "Hello") == ("m:c25bf945aaff8fe1", 61)


def test_fingerprint_ignores_key_order_but_not_content():
    a = fingerprint("m", [{"role": "user", "content": "x"}])
    b = fingerprint("m", [{"content": "x", "role": "user"}])
    assert a == b
    assert fingerprint("m", [{"role": "user", "content": "y"}])[0] != a[0]
    assert fingerprint("other", [{"role": "user", "content": "x"}])[0].startswith("other:")


def test_bucket_distribution_follows_default_table_within_1pp():
    rng = np.random.default_rng(7)
    table = BucketTable.parse(DEFAULT_BUCKET_TABLE)
    n = 10_000
    counts = {"v1": 0, "beta": 0, "canary": 0}
    for _ in range(n):
        words = rng.integers(0, 50_000, size=int(rng.integers(1, 12)))
        prompt = [{"role": "user", "content": " ".join(f"w{w}" for w in words)}]
        counts[table.version(fingerprint("deepseek-v4", prompt)[1])] += 1
    for version, share in table.shares().items():
        assert abs(counts[version] / n - share) < 0.01, (version, counts)


def test_route_table_parse_and_pick():
    table = RouteTable.parse("v1=http://a:8000@0-79, beta=https://b:8001/x/@80-99")
    assert table.pick(0) == Route("v1", "http://a:8000")
    assert table.pick(79).version == "v1"
    assert table.pick(80) == Route("beta", "https://b:8001/x")
    assert table.versions == ["v1", "beta"]
    assert table.buckets().shares() == {"v1": 0.8, "beta": 0.2}
    # several ranges for one version are fine
    split = RouteTable.parse("a=http://h:1@0-9,b=http://h:2@10-89,a=http://h:1@90-99")
    assert split.pick(95).version == "a" and split.buckets().shares()["a"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("v1=http://a:8000@0-79", "80-99 are not covered"),
        ("v1=http://a:8000@0-79,beta=http://b:8000@70-99", "bucket 70 is in both"),
        ("v1=ftp://a@0-99", "bad URL"),
        ("v1=http://a:99999@0-99", "bad URL"),
        ("v1=http://a:8000", "bad entry"),
        ("v1=http://a@0-100", "0 <= LO <= HI <= 99"),
        ("v1=http://a@50-10", "0 <= LO <= HI <= 99"),
        ("", "empty table"),
        ("v1=http://a@0-49,v1=http://b@50-99", "two URLs"),
    ],
)
def test_route_table_rejects_with_expected_form(text, needle):
    with pytest.raises(ValueError) as info:
        RouteTable.parse(text)
    assert needle in str(info.value)
    assert "VERSION=URL@LO-HI" in str(info.value)


def test_bucket_table_parse():
    table = BucketTable.parse("0-49=a,50-99=b")
    assert table.version(49) == "a" and table.version(50) == "b"
    with pytest.raises(ValueError, match="LO-HI=VERSION"):
        BucketTable.parse("0-49=a")


def test_option_type_validator_and_reader():
    assert route_table_arg(" v1=http://a:1@0-79 , b=http://b:2@80-99 ") == "v1=http://a:1@0-79,b=http://b:2@80-99"
    with pytest.raises(argparse.ArgumentTypeError, match="--route-table: .*VERSION=URL@LO-HI"):
        route_table_arg("nonsense")
    assert route_table_from(argparse.Namespace(route_table=None)) is None
    table = route_table_from(argparse.Namespace(route_table="v1=http://a:1@0-99"))
    assert table.pick(42) == Route("v1", "http://a:1")


def test_option_registered_on_locust_parser(monkeypatch):
    from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments

    from users.routing import add_arguments

    def get_parser():
        # Locust's own parser without firing the global init_command_line_parser event: another test may
        # have imported locustfile.py, whose listener would register --route-table a second time.
        parser = get_empty_argument_parser(add_help=True)
        setup_parser_arguments(parser)
        return parser

    parser = get_parser()
    add_arguments(parser, None)
    opts = parser.parse_args(["--route-table", "v1=http://a:1@0-99"])
    assert opts.route_table == "v1=http://a:1@0-99"
    monkeypatch.setenv("LOCUST_ROUTE_TABLE", "x=http://c:3@0-99")
    parser = get_parser()
    add_arguments(parser, None)
    assert parser.parse_args([]).route_table == "x=http://c:3@0-99"


def test_metadata_headers_carry_real_tokenizer_hash():
    headers = metadata_headers("beta", "deepseek-v3")
    assert headers["X-Tokenizer-Version"] == "beta"
    assert headers["X-Tokenizer-Hash"] == hashlib.sha256(tokenizer_json_bytes("deepseek-v3")).hexdigest()
    assert headers["X-Tokenizer-Hash"] != metadata_headers("beta", "deepseek-v4")["X-Tokenizer-Hash"]
    assert headers["X-Compat-Level"] == "backward"
    with pytest.raises(ValueError):
        metadata_headers("v1", "deepseek-v4", compat_level="sideways")


def test_every_route_option_is_registered_in_one_module() -> None:
    """The gray-routing options (--route-*) are registered by users/routing.py alone, which also parses them."""
    import ast
    import re

    from tests.support import project_modules

    where: dict[str, set[str]] = {}
    for mod, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and re.fullmatch(
                    r"--route-[a-z-]+", str(node.args[0].value)):
                where.setdefault(str(node.args[0].value), set()).add(mod)
    assert where == {o: {"users.routing"} for o in ("--route-table", "--route-tokenizers", "--route-fallback")}
