"""A user's own locustfile, written outside the checkout, gets the project's users, options, telemetry, shapes and
web UI with one import (``import deepseek_locust``), run by the project's ``locust`` from its own folder."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support import LOCUST, ROOT, Proc
from tests.users.e2e import scripted

pytestmark = pytest.mark.slow  # every test here starts a real process

OWN = '''
import deepseek_locust  # noqa: F401
import users


class MyChat(users.StreamingChatUser):
    pass
'''


def _own_locustfile(tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "my_locustfile.py").write_text(OWN)
    assert not folder.resolve().is_relative_to(ROOT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # found through the venv, not a path we set
    return folder, env


def test_own_locustfile_lists_only_its_user_class(tmp_path):
    folder, env = _own_locustfile(tmp_path)
    out = subprocess.run([LOCUST, "-f", "my_locustfile.py", "--list"], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Available", "Users:", "MyChat"], out.stdout


def test_own_locustfile_runs_with_the_projects_options_and_telemetry(tmp_path):
    folder, env = _own_locustfile(tmp_path)
    with scripted("--ttft-ms", "20", "--itl-ms", "5") as (host, stats):
        argv = [LOCUST, "-f", "my_locustfile.py", "--headless", "-r", "2", "-t", "20s", "--host", host,
                "--output-len", "fixed:8", "--input-len", "fixed:32", "--shape", "concurrency-sweep",
                "--sweep-users", "1,2", "--stage-duration", "2", "--prometheus-port", "0",
                "--server-metrics-url", "off", "--llm-summary-json", "summary.json",
                "--stop-timeout", "5"]  # in-flight requests finish, so every one is counted
        with Proc(argv, name="own-locustfile", env=env, cwd=folder) as proc:
            rc = proc.wait(60)
            out = proc.output()
        served = stats()["requests"]
    assert rc == 0, out
    summary = json.loads((folder / "summary.json").read_text())
    r = summary["requests"]
    assert r["total"] + r["warmup"] == served > 0, out  # our users and telemetry: every request accounted
    assert r["failed"] == 0 and summary["tokens"]["output"] == 8 * r["ok"]
    names = [st["name"] for st in summary["stages"]]
    assert names == ["users=1", "users=2"]  # our shapes
    assert "LLM summary" in out  # our console table
