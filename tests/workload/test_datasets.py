"""Dataset readers (``--dataset``): each format, detection, ``file:line`` errors, the run record, selection."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

from tests.support import LOCUST, ROOT
from workload.datasets import Dataset, Dialog, DialogTurn, load_dataset, parse_length_range, select


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


SHAREGPT = [
    {"id": "a", "conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"},
                                  {"from": "gpt", "value": "Hello!"}, {"from": "human", "value": "2+2?"},
                                  {"from": "gpt", "value": "4"}]},
    {"id": "b", "conversations": [{"from": "gpt", "value": "no user here"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "你好"}, {"from": "gpt", "value": "你好！"}]},
]


def test_sharegpt_jsonl_and_array_read_the_same_turns(tmp_path):
    jl = load_dataset(_jsonl(tmp_path / "s.jsonl", SHAREGPT))
    arr_path = tmp_path / "s.json"
    arr_path.write_text(json.dumps(SHAREGPT, indent=1), encoding="utf-8")
    arr = load_dataset(arr_path)
    assert jl.format == arr.format == "sharegpt"
    assert [d.turns for d in jl.dialogs] == [d.turns for d in arr.dialogs]
    first = jl.dialogs[0]
    assert first.system == "Be brief." and first.line == 1
    assert first.turns == (DialogTurn("Hi", "Hello!"), DialogTurn("2+2?", "4"))
    assert jl.dialogs[1].turns == (DialogTurn("你好", "你好！"),) and jl.dialogs[1].line == 3
    assert jl.skipped == {"no_user_turn": 1}
    rec = jl.record()
    assert rec == {"path": str(tmp_path / "s.jsonl"), "format": "sharegpt", "records": 2,
                   "sha256": hashlib.sha256((tmp_path / "s.jsonl").read_bytes()).hexdigest()}


def test_openai_custom_and_aiperf_formats_are_detected(tmp_path):
    openai = load_dataset(_jsonl(tmp_path / "o.jsonl", [{"messages": [
        {"role": "system", "content": "S"}, {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"}]}]))
    assert openai.format == "openai"
    assert openai.dialogs[0].system == "S"
    assert openai.dialogs[0].turns == (DialogTurn("q1", "a1"), DialogTurn("q2", None))
    custom = load_dataset(_jsonl(tmp_path / "c.jsonl", [{"prompt": "p", "output_tokens": 12}, {"prompt": "q"}]))
    assert custom.format == "custom"
    assert [d.turns for d in custom.dialogs] == [(DialogTurn("p", output_tokens=12),), (DialogTurn("q"),)]
    multi = load_dataset(_jsonl(tmp_path / "m.jsonl", [
        {"session_id": "s1", "turns": [{"text": "t1"}, {"text": "t2", "delay": 1500}]},
        {"session_id": "s2", "turns": [{"texts": ["x", "y"], "max_tokens": 7}]}]))
    assert multi.format == "aiperf"
    assert multi.dialogs[0].turns == (DialogTurn("t1"), DialogTurn("t2", delay_s=1.5))
    assert multi.dialogs[1].turns == (DialogTurn("x\ny", output_tokens=7),)
    single = load_dataset(_jsonl(tmp_path / "a.jsonl", [{"text": "only", "delay": 0}]))
    assert single.format == "aiperf" and single.dialogs[0].turns == (DialogTurn("only", delay_s=0.0),)


@pytest.mark.parametrize(
    ("lines", "fmt", "where", "why"),
    [
        (['{"prompt": "ok"}', "{not json"], "auto", 2, "not JSON"),
        (['{"prompt": "ok"}', "", '{"prompt": 3}'], "auto", 3, "prompt must be a string"),
        (['{"prompt": "ok", "output_tokens": 0}'], "auto", 1, "output_tokens must be an integer >= 1"),
        (['{"conversations": [{"from": "human", "value": "x"}]}', '{"conversations": "x"}'], "auto", 2,
         '"conversations"'),
        (['{"conversations": [{"from": "alien", "value": "x"}]}'], "auto", 1, "unknown from 'alien'"),
        (['{"turns": [{"text": "x", "delay": -1}]}'], "auto", 1, "delay must be milliseconds"),
        (['{"what": 1}'], "auto", 1, "cannot tell the dataset format"),
        (['{"prompt": "x"}'], "sharegpt", 1, "conversations"),
    ],
)
def test_a_bad_record_names_file_and_line(tmp_path, lines, fmt, where, why):
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as e:
        load_dataset(p, fmt)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{where}: "), msg
    assert why in msg, msg
    assert "\n" not in msg


@pytest.mark.slow
def test_a_bad_record_stops_locust_at_start_with_one_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"prompt": "ok"}\n{"prompt": null}\n', encoding="utf-8")
    r = subprocess.run([LOCUST, "-f", "locustfile.py", "--headless", "--host", "http://127.0.0.1:9", "-t", "1s",
                        "--dataset", str(p)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [line for line in r.stderr.splitlines() if f"{p}:2:" in line]
    assert len(lines) == 1 and "prompt must be a string" in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def _dialogs(n: int) -> tuple[Dialog, ...]:
    return tuple(Dialog(i + 1, (DialogTurn("x" * (i + 1), "y" * (i + 1)),)) for i in range(n))


def test_sample_is_seeded_the_same_everywhere_and_workers_get_disjoint_shares(tmp_path):
    ds = Dataset("d", "custom", "0" * 64, _dialogs(40), {})
    shares = [select(ds, seed=7, sample=10, place=i, workers=3).dialogs for i in range(3)]
    lines = [d.line for share in shares for d in share]
    assert len(lines) == len(set(lines)) == 10
    again = {d.line for i in range(3) for d in select(ds, seed=7, sample=10, place=i, workers=3).dialogs}
    assert again == set(lines)
    other = {d.line for d in select(ds, seed=8, sample=10).dialogs}
    assert other != set(lines)
    in_order = [d.line for d in select(ds, seed=7, sample=10).dialogs]
    assert in_order == sorted(in_order)
    shuffled = [d.line for d in select(ds, seed=7, sample=10, shuffle=True).dialogs]
    assert sorted(shuffled) == in_order and shuffled != in_order
    whole = [d.line for d in select(ds, seed=7, shuffle=True).dialogs]
    assert sorted(whole) == list(range(1, 41)) and whole != sorted(whole)


def test_length_filters_count_skips_by_reason():
    ds = Dataset("d", "custom", "0" * 64, _dialogs(10), {"no_user_turn": 2})
    sel = select(ds, seed=0, measure=lambda d: (len(d.turns[0].text), len(d.turns[0].answer) * 10),
                 input_range=parse_length_range("3:"), output_range=parse_length_range(":80"))
    assert [d.line for d in sel.dialogs] == [3, 4, 5, 6, 7, 8]
    assert sel.selected == 6
    assert sel.skipped == {"no_user_turn": 2, "input_len": 2, "output_len": 2}
    with pytest.raises(ValueError, match="no record passes"):
        select(ds, seed=0, measure=lambda d: (1, None), input_range=(5, None))


@pytest.mark.parametrize("bad", ["5", "a:b", "9:3", "-1:4"])
def test_length_range_refuses_bad_forms(bad):
    with pytest.raises(ValueError, match="LO:HI"):
        parse_length_range(bad)
