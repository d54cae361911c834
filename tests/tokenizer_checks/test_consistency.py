"""consistency on real tokenizers: the default multilingual cases and the shipped set."""

from __future__ import annotations

from tests.tokenizer_checks.helpers import run_json

FAMILY = "deepseek-v3,deepseek-v4,qwen2.5,r1-distill-llama"


def test_seed_cases_give_a_consistency_report(capsys):
    code, d = run_json(capsys, "consistency", "--tokenizers", FAMILY)
    assert code == 0
    assert d["cases"] >= 40
    results = {r["id"]: r for r in d["results"]}
    texts = {r["text"] for r in d["results"]}
    assert {"AI模型v2.0发布", "こんにちはWorld", "订单#123已完成"} <= texts
    cats = set(d["by_category"])
    wanted = {"chinese", "english", "japanese", "korean", "arabic", "cyrillic", "emoji", "code", "numbers", "dates"}
    assert wanted <= cats
    # V3 and V4 share the BPE: same ids on every case; the other families disagree somewhere
    assert d["disagree_with_reference"]["deepseek-v4"] == 0
    assert all(["deepseek-v3", "deepseek-v4"] in [g[:2] for g in r["id_groups"]] for r in d["results"])
    assert d["disagree_with_reference"]["qwen2.5"] > 5 and d["disagree_with_reference"]["r1-distill-llama"] > 5
    # Qwen 2.5 splits digits one by one; DeepSeek V3 keeps "123" together
    order = results["seed-3"]
    assert order["tokens"]["deepseek-v3"] == ["订单", "#", "123", "已完成"]
    assert order["tokens"]["qwen2.5"] == ["订单", "#", "1", "2", "3", "已完成"]
    diff = next(x for x in order["differences"] if x["tokenizer"] == "qwen2.5")
    assert diff["spans"] == [{"start": 3, "end": 6, "text": "123", "a": ["123"], "b": ["1", "2", "3"]}]
    assert not order["consistent"] and not order["ids_equal"]


def test_consistent_case_and_threshold(capsys, tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("Hello世界\n", encoding="utf-8")
    code, d = run_json(capsys, "consistency", "--tokenizers", "deepseek-v3,deepseek-v4", "--cases", str(cases),
                       "--max-inconsistent", "0")
    assert code == 0 and d["consistent"] == 1 and d["ids_equal"] == 1
    cases.write_text("订单#123已完成\n", encoding="utf-8")
    code, d = run_json(capsys, "consistency", "--tokenizers", "deepseek-v3,qwen2.5", "--cases", str(cases),
                       "--max-inconsistent", "0")
    assert code == 1 and d["inconsistent"] == 1
