"""A dataset's conversations replayed by a user without a server (``--dataset``): turns in order with the record's
system message, the dataset's answers in the history (or the model's with ``--history live``), each turn's
max_tokens from its answer (``--output-len`` changed overrides), the record's delay as think time, the run
record's selection, and completions users' first turns."""

from __future__ import annotations

import json
from types import SimpleNamespace

import orjson
import pytest

from shapes.stage import MAIN
from users.adapters import adapter_named
from users.conversation import Conversation
from users.options import check_dataset_options
from users.request import draw
from users.settings import RunSettings

CHAT = adapter_named("chat")


def _file(tmp_path) -> str:
    rows = [
        {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "first question"},
                      {"role": "assistant", "content": "a dataset answer of several tokens here"},
                      {"role": "user", "content": "second question"},
                      {"role": "assistant", "content": "ok"}]},
        {"messages": [{"role": "user", "content": "lonely question"}]},
    ]
    p = tmp_path / "o.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(p)


def _settings(path: str, **over) -> RunSettings:
    opts = {"tokenizer": "deepseek-v2", "dataset": path, "think_time": "fixed:2", "seed": 1, **over}
    return RunSettings.from_options(SimpleNamespace(**opts))


def _answer(conv: Conversation, text: str) -> None:
    tally = conv.answer.tally(0)
    tally.add([orjson.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}), b"[DONE]"], 1.0)


def test_turns_follow_the_record_with_the_datasets_answers_and_lengths(tmp_path):
    s = _settings(_file(tmp_path))
    conv = Conversation(s)
    first = conv.draw(CHAT, MAIN)
    assert first.meta.turn == 1
    assert first.model_input == [{"role": "system", "content": "Be terse."},
                                 {"role": "user", "content": "first question"}]
    assert first.max_tokens == s.count_text("a dataset answer of several tokens here") == first.sampling["max_tokens"]
    assert first.prompt_tokens == s.count_messages(first.model_input)
    _answer(conv, "what the model said instead")
    assert conv.after(True) == 2.0  # --think-time: the record has no delay
    second = conv.draw(CHAT, MAIN)
    assert second.meta.turn == 2
    assert second.model_input[2] == {"role": "assistant", "content": "a dataset answer of several tokens here"}
    assert second.max_tokens == s.count_text("ok")
    assert second.prompt_tokens == s.count_messages(second.model_input) > first.prompt_tokens
    _answer(conv, "x")
    assert conv.after(True) == 0.0  # the record is over
    third = conv.draw(CHAT, MAIN)  # the next record: no answer, so --output-len's draw
    assert third.meta.turn == 1 and third.model_input == [{"role": "user", "content": "lonely question"}]
    assert third.max_tokens == 256
    _answer(conv, "x")
    conv.after(True)
    assert conv.draw(CHAT, MAIN).model_input[1]["content"] == "first question"  # from the start again


def test_live_history_and_an_output_len_override(tmp_path):
    s = _settings(_file(tmp_path), history="live", output_len="fixed:9")
    conv = Conversation(s)
    assert conv.draw(CHAT, MAIN).max_tokens == 9
    _answer(conv, "the model's own words")
    conv.after(True)
    second = conv.draw(CHAT, MAIN)
    assert second.model_input[2] == {"role": "assistant", "content": "the model's own words"}
    assert second.max_tokens == 9


def test_aiperf_delay_is_the_think_time_and_a_failed_turn_ends_the_record(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps({"session_id": "s", "turns": [{"text": "a"}, {"text": "b", "delay": 250},
                                                           {"text": "c"}]}) + "\n", encoding="utf-8")
    s = _settings(str(p))
    conv = Conversation(s)
    conv.draw(CHAT, MAIN)
    _answer(conv, "x")
    assert conv.after(True) == 0.25
    assert conv.draw(CHAT, MAIN).meta.turn == 2
    _answer(conv, "y")
    assert conv.after(False) == 0.0
    assert conv.draw(CHAT, MAIN).meta.turn == 1


def test_the_run_record_counts_the_selection_and_completions_send_first_turns(tmp_path):
    s = _settings(_file(tmp_path), dataset_output_len="3:")
    rec = s.dataset_record()
    assert rec["format"] == "openai" and rec["records"] == 2
    assert rec["selected"] == 2 and rec["skipped"] == {}  # the second record has no answer: the filter passes it
    s = _settings(_file(tmp_path), dataset_input_len=":12")
    assert s.dataset_record()["skipped"] == {"input_len": 1}
    assert [d.turns[0].text for d in s.selection().dialogs] == ["lonely question"]
    comp = adapter_named("completions")
    texts = {draw(s, comp, MAIN).texts[0] for _ in range(20)}
    assert texts == {"lonely question"}  # the selected records' first turns
    s = _settings(_file(tmp_path))
    inp = [draw(s, comp, MAIN) for _ in range(2)]  # the records in order, each with its answer's length
    assert [i.texts[0] for i in inp] == ["first question", "lonely question"]
    assert inp[0].max_tokens == s.count_text("a dataset answer of several tokens here") and inp[1].max_tokens == 256
    assert inp[0].prompt_tokens == len(s.tokenizer.encode("first question").ids)


def test_workers_replay_disjoint_shares_of_the_same_sample(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n" for i in range(30)), encoding="utf-8")
    opts = SimpleNamespace(tokenizer="deepseek-v2", dataset=str(p), dataset_sample=9, dataset_shuffle=True, seed=4)
    shares = [RunSettings.from_options(opts, worker_index=i, workers=3).selection() for i in range(3)]
    lines = [d.line for sel in shares for d in sel.dialogs]
    assert len(lines) == len(set(lines)) == 9 and all(sel.selected == 9 for sel in shares)
    alone = RunSettings.from_options(opts).selection()
    assert sorted(d.line for d in alone.dialogs) == sorted(lines)  # the same sample wherever it is drawn
    s = RunSettings.from_options(opts, worker_index=1, workers=3)
    mine = [s.next_dialog().line for _ in range(7)]
    assert mine == [d.line for d in shares[1].dialogs] * 2 + [shares[1].dialogs[0].line]  # its share, cycled


def test_dataset_excludes_turns_and_a_prompt_file(tmp_path):
    path = _file(tmp_path)
    check_dataset_options(SimpleNamespace(dataset=path, turns="", prompt_file=""))
    for other in ({"turns": "fixed:3"}, {"prompt_file": path}):
        with pytest.raises(ValueError, match="exclude each other"):
            check_dataset_options(SimpleNamespace(dataset=path, **other))
