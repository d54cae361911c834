"""The start form refuses every invalid option value with the option's name and the accepted forms, and starts
nothing: HTTP POSTs to a real ``locust`` web UI process, as the browser's start form sends them."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

import pytest

from tests.support import LOCUST, PY, Proc, free_port, wait_http

pytestmark = pytest.mark.slow

# (form field, bad value, what the message must say after "--<flag>: ")
BAD = [
    ("input_len", "foo:1", "unknown length SPEC 'foo:1'; expected one of fixed:N"),
    ("output_len", "fixed:-3", "fixed:-3"),
    ("batch_size", "0", "expected"),
    ("request_timeout", "soon", "expected"),
    ("seed", "x1", "expected"),
    ("route_table", "a=http://a:8000@0-59,b=http://b:8000@50-99", "bucket 50 is in both 'a' and 'b'"),
    ("shape", "bogus", "'bogus' is not one of none, concurrency-sweep, length-sweep, rate-sweep"),
    ("sweep_users", "1,,x", "expected"),
    ("stage_duration", "-5", "expected"),
    ("length_sweep", "fixed:", "expected"),
    ("request_rate", "fast", "expected"),
    ("arrival", "sometimes", "'sometimes' is not one of poisson, constant or gamma:CV"),
    ("max_concurrency", "-1", "expected"),
    ("server_metrics_interval", "0", "expected"),
    ("slo_ttft_p99_ms", "abc", "expected"),
    ("slo_error_rate", "2", "expected"),
    ("slo_preset", "nope", "'nope' is not one of none, interactive, seed"),
    ("llm_stop_on", "batching,nope", "nope"),
    ("attribution_window", "0", "expected"),
    ("batching_p99_rise", "-1", "expected"),
    ("spike_factor", "0.5", "expected"),
    ("batching_windows", "zero", "expected"),
]


@pytest.fixture(scope="module")
def web():
    srv_port, port = free_port(), free_port()
    host = f"http://127.0.0.1:{srv_port}"
    server = Proc([PY, "-m", "tests.users.hostile_server", "--port", str(srv_port), "--modes", "ok"], name="hostile")
    ui = Proc([LOCUST, "-f", "locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(port), "--host", host,
               "--prometheus-port", "0", "--server-metrics-url", "off", "--input-len", "fixed:16",
               "--output-len", "fixed:8", "StreamingChatUser"], name="webui")
    with server, ui:
        wait_http(f"{host}/health", proc=server)
        wait_http(f"http://127.0.0.1:{port}/", proc=ui)
        yield f"http://127.0.0.1:{port}", ui


def _post(base: str, path: str, form: dict) -> tuple[int, dict]:
    data = urllib.parse.urlencode({"user_count": "2", "spawn_rate": "2", **form}).encode()
    req = urllib.request.Request(base + path, data=data, method="POST",
                                 headers={"content-type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.loads(r.read())


def _state(base: str) -> dict:
    with urllib.request.urlopen(base + "/stats/requests", timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.parametrize(("field", "value", "says"), BAD, ids=[b[0] for b in BAD])
def test_invalid_option_is_refused_with_its_name_and_nothing_starts(web, field, value, says):
    base, ui = web
    status, body = _post(base, "/swarm", {field: value})
    flag = "--" + field.replace("_", "-")
    # Locust's own convention for a refused form (its user_count/run_time checks): success false and the message,
    # which the start form shows under the button
    assert status == 200 and body["success"] is False, body
    assert body["message"].startswith(f"{flag}: "), body
    assert says in body["message"] and "\n" not in body["message"], body
    time.sleep(0.2)
    state = _state(base)
    assert state["state"] in ("ready", "stopped") and state["user_count"] == 0, state
    assert ui.alive()


def test_input_len_message_names_every_accepted_form(web):
    base, _ui = web
    _status, body = _post(base, "/swarm", {"input_len": "foo:1"})
    assert body["message"] == (
        "--input-len: unknown length SPEC 'foo:1'; expected one of fixed:N, uniform:LO:HI, normal:MEAN:STD[:LO:HI], "
        "lognormal:MEDIAN:SIGMA[:LO:HI], zipf:ALPHA:LO:HI, file:PATH (or a bare integer N)"
    ), body


def test_valid_form_after_the_refusals_still_starts(web):
    base, ui = web
    status, body = _post(base, "/swarm", {"input_len": "fixed:16", "output_len": "fixed:8", "request_timeout": "5"})
    assert status == 200 and body["success"] is True, body
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _state(base)["state"] != "running":
        time.sleep(0.2)
    assert _state(base)["state"] == "running" and ui.alive()
    with urllib.request.urlopen(urllib.request.Request(base + "/stop", method="POST"), timeout=10) as r:
        assert r.status == 200


def test_an_option_with_digits_in_its_name_reaches_the_run(web):
    """Locust's page posts --slo-ttft-p99-ms as slo_ttft_p9_9ms (its snake-casing splits digits): set from the form,
    the run still gets it."""
    base, ui = web
    status, body = _post(base, "/swarm", {"slo_ttft_p9_9ms": "4321", "batching_p9_9rise": "0.5", "run_time": "3s"})
    assert status == 200 and body["success"] is True, body
    with urllib.request.urlopen(base + "/llm/summary.json", timeout=10) as r:
        options = json.loads(r.read())["run"]["options"]
    # (Locust keeps the type of an option's default: the rise is a float)
    assert (options["slo_ttft_p99_ms"], options["batching_p99_rise"]) == ("4321", 0.5), options
    urllib.request.urlopen(urllib.request.Request(base + "/stop", method="POST"), timeout=10).read()
