"""workload.trace: Mooncake trace lines are read with file:line errors, and equal hash ids become byte-identical
prompt blocks of 512 tokens (the last one partial) whose count is the line's input_length."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from workload.tokenizers import load_tokenizer
from workload.trace import BLOCK_TOKENS, BlockPrompts, TraceRecord, load_trace


def _write(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def test_lines_are_read_in_time_order_on_the_traces_clock(tmp_path):
    trace = load_trace(_write(tmp_path / "t.jsonl", [
        {"timestamp": 1500, "input_length": 700, "output_length": 9, "hash_ids": [0, 1]},
        "",
        {"timestamp": 500, "input_length": 30, "output_length": 5},
        {"timestamp": 1500.5, "input_length": 512, "output_length": 1, "hash_ids": [7]},
    ]))
    assert [(r.line, r.at_s, r.input_length, r.output_length, r.hash_ids) for r in trace.records] == [
        (3, 0.0, 30, 5, ()), (1, 1.0, 700, 9, (0, 1)), (4, 1.0005, 512, 1, (7,))]
    assert trace.span_s == pytest.approx(1.0005)


@pytest.mark.parametrize(("line", "says"), [
    ("{not json", "not JSON"),
    ('["timestamp", 0]', "expected a JSON object"),
    ('{"input_length": 10, "output_length": 1}', "timestamp must be"),
    ('{"timestamp": -1, "input_length": 10, "output_length": 1}', "timestamp must be"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 1}', "input_length must be an integer >= 1"),
    ('{"timestamp": 0, "input_length": 10.5, "output_length": 1}', "input_length must be an integer >= 1"),
    ('{"timestamp": 0, "input_length": 10, "output_length": true}', "output_length must be an integer >= 1"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ["a"]}', "list of integers"),
    ('{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1, 2, 3]}', "at most 2 blocks"),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, says):
    path = _write(tmp_path / "bad.jsonl", ['{"timestamp": 0, "input_length": 10, "output_length": 1}', line])
    with pytest.raises(ValueError) as e:
        load_trace(path)
    assert f"{path}:2: " in str(e.value) and says in str(e.value)


def test_an_empty_or_missing_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no requests"):
        load_trace(_write(tmp_path / "empty.jsonl", ["", " "]))
    with pytest.raises(ValueError, match="no such trace file"):
        load_trace(tmp_path / "absent.jsonl")


@pytest.mark.parametrize("tokenizer", ["deepseek-v2", "deepseek-v3"])
@pytest.mark.parametrize("chat", [True, False])
def test_equal_hash_ids_give_byte_identical_blocks_and_the_exact_count(tokenizer, chat):
    tok = load_tokenizer(tokenizer)
    blocks = BlockPrompts(tok, chat, seed=3)
    rng = np.random.default_rng(0)
    a = blocks.build(TraceRecord(1, 0.0, 1300, 4, (10, 11, 12)), rng)   # last block: 276 tokens
    b = blocks.build(TraceRecord(2, 0.0, 1800, 4, (10, 11, 13, 14)), rng)
    c = blocks.build(TraceRecord(3, 0.0, 900, 4, (10, 11)), rng)        # block 11 cut to 388 tokens
    d = blocks.build(TraceRecord(4, 0.0, 1300, 4, (20, 21, 22)), rng)
    e = blocks.build(TraceRecord(5, 0.0, 700, 4, ()), rng)              # no ids: all fresh words
    count = blocks._count
    for p, n in ((a, 1300), (b, 1800), (c, 900), (d, 1300), (e, 700)):
        assert p.tokens == n == count(p.text)
    words = len(tok.encode(a.text[: len(os.path.commonprefix([a.text, b.text]))], add_special_tokens=False).ids)
    assert 2 * BLOCK_TOKENS <= words < 2 * BLOCK_TOKENS + 2  # two shared blocks (a word may start alike)
    assert b.text.startswith(c.text)  # a partial block is the head of the full one
    assert len(os.path.commonprefix([a.text, d.text])) < 12 and len(os.path.commonprefix([a.text, e.text])) < 12
    again = BlockPrompts(tok, chat, seed=3).build(TraceRecord(9, 0.0, 1024, 1, (10, 11)), np.random.default_rng(7))
    assert b.text.startswith(again.text)  # the same bytes in another process (another rng, same seed)
    other = BlockPrompts(tok, chat, seed=4).build(TraceRecord(9, 0.0, 1024, 1, (10, 11)), rng)
    assert len(os.path.commonprefix([other.text, again.text])) < 12
