"""Command line: bad flags give one line and exit 2 (no traceback); port 0 picks a port and prints it."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.support import PY, ROOT, Proc, wait_http

pytestmark = pytest.mark.slow  # every test here starts a real process


@pytest.mark.parametrize("flags, fragment", [
    (["--time-scale", "0"], "--time-scale"),
    (["--fault-kinds", "500,boom"], "boom"),
    (["--fault-rate", "1.5"], "probability"),
    (["--batch-cap-at", "15"], "T:N"),
    (["--batch-cap-at", "15:0"], "T:N"),
    (["--max-num-seqs", "-3"], "positive integer"),
    (["--port", "http"], "--port"),
    (["--port", "70000"], "0..65535"),
    (["--seed", "-1"], "--seed"),
    (["--profile", "no-such-profile"], "no-such-profile"),
    (["--profile", "cpu-tiny", "--num-gpu-blocks", "4", "--max-model-len", "4096"], "KV pool"),
    (["--tokenizer", "/nonexistent/tok.json"], "--tokenizer"),
    (["--num-speculative-tokens", "3"], "--spec-accept-rate"),
    (["--bogus-flag"], "unrecognized"),
])
def test_bad_flags_exit_2_with_one_line(flags, fragment):
    r = subprocess.run([PY, "-m", "server.sim", "--port", "0", *flags], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("server.sim: error:") and fragment in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_port_zero_prints_the_chosen_port_and_sigterm_stops_it():
    with Proc([PY, "-m", "server.sim", "--port", "0", "--profile", "cpu-tiny"], name="sim") as proc:
        for _ in range(300):
            if "listening on" in proc.output():
                break
            time.sleep(0.1)
        line = next(ln for ln in proc.output().splitlines() if "listening on" in ln)
        assert line.startswith("server.sim listening on http://127.0.0.1:") and "profile=cpu-tiny" in line
        port = int(line.split("http://127.0.0.1:")[1].split()[0])
        wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
        proc.signal(15)
        assert proc.wait(10) == 0
