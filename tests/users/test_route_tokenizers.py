"""--route-tokenizers: the option, each version's tokenizer (users/routing.py), draws counted with it, headers."""

from __future__ import annotations

import argparse
from collections import Counter

import pytest

from run.context import RunContext
from shapes.stage import Stage
from users.adapters import ADAPTERS
from users.request import draw
from users.routing import resolve_versions, route_tokenizers_arg, route_tokenizers_from
from users.settings import RunSettings
from workload.prompts import TokenCounter
from workload.routing.table import ROUTE_TOKENIZERS_FORM, RouteTable
from workload.tokenizers import chat_renderer, load_tokenizer, tokenizer_hash

TABLE = "v1=http://127.0.0.1:8001@0-49,beta=http://127.0.0.1:8002@50-99"
TOKS = {"v1": "deepseek-v2", "beta": "deepseek-v3"}


def _settings(**kw) -> RunSettings:
    opts = {"seed": 3, "input_len": "uniform:16:64", "output_len": "fixed:8", "tokenizer": "deepseek-v4",
            "model": "m", "route_table": TABLE, **kw}
    s = RunSettings.from_options(argparse.Namespace(**opts))
    s.versions = resolve_versions(s.route_table, s.route_tokenizers, "auto", lambda url: None)
    return s


@pytest.mark.parametrize("text, says", [
    ("v1", "bad entry"), ("v1=", "bad entry"), ("v1=deepseek-v2,v1=deepseek-v3", "given twice"),
    ("v 1=deepseek-v2", "bad version name"), ("beta=no-such-tokenizer", "unknown tokenizer"),
])
def test_bad_values_are_one_argparse_error_naming_the_form(text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as e:
        route_tokenizers_arg(text)
    assert says in str(e.value) and ROUTE_TOKENIZERS_FORM in str(e.value)


def test_a_version_the_table_does_not_have_is_refused_with_the_tables_versions() -> None:
    assert route_tokenizers_arg(" v1=deepseek-v2 , beta=auto") == "v1=deepseek-v2,beta=auto"
    with pytest.raises(ValueError, match=r"'canary', not in --route-table \(versions: v1, beta\)"):
        route_tokenizers_from(argparse.Namespace(route_table=TABLE, route_tokenizers="canary=deepseek-v3"))
    with pytest.raises(ValueError, match="needs --route-table"):
        route_tokenizers_from(argparse.Namespace(route_table=None, route_tokenizers="v1=deepseek-v3"))


def test_unnamed_versions_take_the_auto_choice_for_their_backends_model() -> None:
    table = RouteTable.parse(TABLE)
    models = {"http://127.0.0.1:8001": "deepseek-ai/DeepSeek-V2-Lite-Chat", "http://127.0.0.1:8002": "DeepSeek-V3"}
    vt = resolve_versions(table, {}, "auto", models.get)
    assert (vt["v1"].name, vt["v1"].source, vt["beta"].name) == ("deepseek-v2", "model", "deepseek-v3")
    assert vt["v1"].compat_level == "full" and vt["beta"].compat_level == "none"  # V2 -> V3 lengthens some texts
    named = resolve_versions(table, {"beta": "deepseek-v4"}, "deepseek-v3", models.get)
    assert (named["v1"].name, named["v1"].source) == ("deepseek-v3", "option")  # --tokenizer named one
    assert (named["beta"].name, named["beta"].compat_level) == ("deepseek-v4", "forward")  # V3 but <think>


def test_each_versions_prompts_are_counted_with_its_tokenizer_and_carry_its_headers() -> None:
    s = _settings(route_tokenizers="v1=deepseek-v2,beta=deepseek-v3")
    counters = {v: TokenCounter(load_tokenizer(t), chat=True, render=chat_renderer(t)) for v, t in TOKS.items()}
    seen = Counter()
    for _ in range(60):
        inp = draw(s, ADAPTERS["chat"], Stage("main"))
        v = inp.meta.version
        seen[v] += 1
        assert inp.prompt_tokens == counters[v](inp.texts[0]), v  # what that version's server counts
        assert inp.route.headers["X-Tokenizer-Hash"] == tokenizer_hash(TOKS[v])
        assert inp.route.headers["X-Compat-Level"] == ("full" if v == "v1" else "none")
    assert seen["v1"] > 15 and seen["beta"] > 15  # both keep a share near their 50 buckets


def test_a_fallback_moves_the_buckets_and_the_tokenizer() -> None:
    s = _settings(route_tokenizers="v1=deepseek-v2,beta=deepseek-v3")
    assert s.fall_back("beta", "v1") and not s.fall_back("beta", "v1")  # once; the table no longer has beta
    assert s.draw_tokenizers() == ["deepseek-v2"]  # only v1 is left: its tokenizer cuts every prompt
    for _ in range(20):
        inp = draw(s, ADAPTERS["chat"], Stage("main"))
        assert inp.meta.version == "v1" and inp.route.base_url == "http://127.0.0.1:8001"
        assert inp.route.headers["X-Tokenizer-Hash"] == tokenizer_hash("deepseek-v2")
    assert not _settings().fall_back("v1", "canary")  # a version the table does not have: nothing moves


def test_the_masters_message_moves_this_processs_table() -> None:
    from types import SimpleNamespace

    from users.routing import apply_fallback

    env = SimpleNamespace(llm=RunContext(settings=_settings()))
    assert apply_fallback(env, {"from": "beta", "to": "v1"}) and env.llm.settings.route_table.versions == ["v1"]
    assert not apply_fallback(env, {"from": "beta", "to": "v1"}) and not apply_fallback(env, None)
    assert not apply_fallback(SimpleNamespace(llm=RunContext()), {"from": "beta", "to": "v1"})  # the master: no users
