"""The API key never leaves the process: a real ``locust`` with the web UI runs with a known key, the
server sees it on every request, and no output of the run holds it — the log, the summary, the report, the CSVs,
the per-request records, the start page, the form's answer and every ``/llm/*`` route."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.support import LOCUST, PY, Proc, free_port, http_get, wait_http

pytestmark = pytest.mark.slow

KEY = "sk-test-7f3a9c1e5b2d4068a1c3e5f7b9d1f3a5"
LOAD = ["--prometheus-port", "0", "--server-metrics-url", "off", "--input-len", "fixed:16", "--output-len", "fixed:8"]


def _text(url: str, data: bytes | None = None) -> str:
    return http_get(url, data).decode(errors="replace")


def _outputs(tmp: Path) -> dict[str, list[str]]:
    return {"summary": ["--llm-summary-json", str(tmp / "s.json")], "report": ["--llm-report", str(tmp / "r.html")],
            "csv": ["--llm-csv", str(tmp / "llm")], "locust-csv": ["--csv", str(tmp / "locust")],
            "locust-html": ["--html", str(tmp / "locust.html")],
            "requests": ["--llm-requests-jsonl", str(tmp / "req.jsonl")]}


def _files(tmp: Path) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in sorted(tmp.iterdir()) if p.is_file()}


def test_the_key_reaches_the_server_and_no_output_of_the_run(tmp_path):
    srv_port, port = free_port(), free_port()
    host, base = f"http://127.0.0.1:{srv_port}", f"http://127.0.0.1:{port}"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    outputs = [a for args in _outputs(out_dir).values() for a in args]
    server = Proc([PY, "-m", "tests.users.hostile_server", "--port", str(srv_port), "--modes", "ok"], name="hostile")
    ui = Proc([LOCUST, "-f", "locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(port), "--host", host,
               "--api-key", KEY, *LOAD, *outputs, "StreamingChatUser"], name="webui")
    seen: dict[str, str] = {}
    with server, ui:
        wait_http(f"{host}/health", proc=server)
        wait_http(f"{base}/", proc=ui)
        seen["start page"] = _text(f"{base}/")
        form = {"user_count": "2", "spawn_rate": "2", "host": host, "api_key": "", "input_len": "fixed:16"}
        seen["form answer"] = _text(f"{base}/swarm", urllib.parse.urlencode(form).encode())
        # the run under way (was a 3 s sleep): the server has seen a few requests, the client-load sampler a report
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (sum(json.loads(_text(f"{host}/stats"))["auth"].values()) < 5
                                               or not json.loads(_text(f"{base}/llm/client-load"))["workers"]):
            time.sleep(0.2)
        routes = ("/llm/live", "/llm/live.csv", "/llm/metrics", "/llm/report", "/llm/client-load", "/stats/requests",
                  "/logs", "/")
        for route in routes:
            try:
                seen[route] = _text(base + route)
            except urllib.error.HTTPError as e:
                raise AssertionError(f"{route}: HTTP {e.code}\n{ui.output()[-3000:]}") from None
        seen["refused form"] = _text(f"{base}/swarm", urllib.parse.urlencode({**form, "input_len": "x"}).encode())
        _text(f"{base}/stop", b"")
        auth = json.loads(_text(f"{host}/stats"))["auth"]
        ui.signal(signal.SIGTERM)
        ui.wait(30)
        log = ui.output()
    assert json.loads(seen["form answer"])["success"] is True, seen["form answer"]
    assert list(json.loads(seen["/llm/client-load"])["workers"]) == ["local"], seen["/llm/client-load"]
    # a blank secret field keeps the key given at start: every request carried it
    assert set(auth) == {f"Bearer {KEY}"} and auth[f"Bearer {KEY}"] >= 5, auth
    files = _files(out_dir)
    names = set(files)
    assert {"s.json", "r.html", "llm_llm_stats.csv", "locust_stats.csv"} <= names, names  # (--html: headless only)
    assert files["req.jsonl"].count("\n") >= 5
    assert "LLM summary" in log and len(files["s.json"]) > 1000
    for where, text in {**seen, **files, "log": log}.items():
        assert KEY not in text and KEY[:16] not in text, where


def test_the_key_from_locust_api_key_or_api_key_file_reaches_the_server_and_no_output(tmp_path):
    key_env, key_file = KEY + "-env", KEY + "-file"
    (tmp_path / "key.txt").write_text(f"\n  {key_file}  \nsecond line ignored\n")
    srv_port = free_port()
    host = f"http://127.0.0.1:{srv_port}"
    run = ["-f", "locustfile.py", "--headless", "-u", "1", "-r", "1", "-t", "3s", "--host", host, *LOAD,
           "StreamingChatUser"]
    server = [PY, "-m", "tests.users.hostile_server", "--port", str(srv_port), "--modes", "ok"]
    with Proc(server, name="hostile") as srv:
        wait_http(f"{host}/health", proc=srv)
        env = Proc([LOCUST, *run, "--llm-summary-json", str(tmp_path / "env.json")], name="env",
                   env={"LOCUST_API_KEY": key_env})
        file = Proc([LOCUST, *run, "--api-key-file", str(tmp_path / "key.txt"), "--llm-summary-json",
                     str(tmp_path / "file.json")], name="file")
        with env, file:
            assert env.wait(60) == 0 and file.wait(60) == 0, (env.output()[-2000:], file.output()[-2000:])
        auth = json.loads(_text(f"{host}/stats"))["auth"]
    assert set(auth) == {f"Bearer {key_env}", f"Bearer {key_file}"} and min(auth.values()) >= 3, auth
    summaries = [(tmp_path / name).read_text() for name in ("env.json", "file.json")]
    for text in (env.output(), file.output(), *summaries):
        assert KEY[:16] not in text
    missing = Proc([LOCUST, *run, "--api-key-file", str(tmp_path / "nope.txt")], name="missing")
    with missing:
        assert missing.wait(60) == 2
    assert missing.output().strip().splitlines()[-1] == (
        f"locust: error: argument --api-key-file: cannot read '{tmp_path / 'nope.txt'}': FileNotFoundError"
    )
