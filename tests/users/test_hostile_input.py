"""Hostile input at start: each bad value is one line naming the option and what it accepts, and the
run never starts (real ``locust`` processes, started together)."""

from __future__ import annotations

import pytest

from tests.support import LOCUST, Proc

pytestmark = pytest.mark.slow

RUN = ["-f", "locustfile.py", "--headless", "-u", "1", "-t", "30s", "--host", "http://127.0.0.1:9", "--prometheus-port",
       "0", "--server-metrics-url", "off", "--input-len", "fixed:16", "--output-len", "fixed:8"]


def test_bad_start_options_are_one_line_each_and_nothing_runs(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hello"}\nnot json at all\n')
    no_prompt = tmp_path / "noprompt.jsonl"
    no_prompt.write_text('{"prompt": "hello"}\n{"nope": 1}\n')
    cases = {
        "prompt-file-junk": (["--prompt-file", str(prompts)],
                             f"argument --prompt-file: {prompts}:2: not JSON"),
        "prompt-file-no-prompt": (["--prompt-file", str(no_prompt)],
                                  f'argument --prompt-file: {no_prompt}:2: expected {{"prompt": ...}} or ShareGPT'),
        "tokenizer-missing": (["--tokenizer", "/nonexistent/tokenizer.json"],
                              "argument --tokenizer: unknown tokenizer '/nonexistent/tokenizer.json'"),
        "route-overlap": (["--route-table", "a=http://a:8000@0-59,b=http://b:8000@50-99"],
                          "bucket 50 is in both 'a' and 'b'"),
        "summary-under-a-file": (["--llm-summary-json", str(prompts / "s.json")],
                                 "argument --llm-summary-json: expected a path under a folder "
                                 f"('{prompts}' is a file), got '{prompts / 's.json'}'"),
        "summary-is-a-folder": (["--llm-summary-json", str(tmp_path)],
                                f"argument --llm-summary-json: expected a file path, not a folder, got '{tmp_path}'"),
    }
    procs = {name: Proc([LOCUST, *RUN, *args], name=name) for name, (args, _) in cases.items()}
    try:
        for name, (_args, says) in cases.items():
            rc = procs[name].wait(60)
            out = procs[name].output()
            lines = [line for line in out.splitlines() if line.strip()]
            assert rc == 2, (name, out[-2000:])
            assert "Traceback" not in out and "LLM summary" not in out, (name, out[-2000:])
            # argparse's usage line, then the one error line
            assert lines[-1].startswith("locust: error: ") and says in lines[-1], (name, lines[-3:])
    finally:
        for p in procs.values():
            p.stop()
