"""The real locustfile in web UI mode: --shape is a drop-down among the custom options, -u/-r stay visible."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from tests.support import LOCUST, ROOT, Proc, free_port, wait_http


def _template_args(*extra: str) -> dict:
    port = free_port()
    argv = [LOCUST, "-f", str(ROOT / "locustfile.py"), "--web-host", "127.0.0.1", "--web-port", str(port),
            "--host", "http://127.0.0.1:9", "--prometheus-port", "0", "--server-metrics-url", "off", *extra]
    with Proc(argv, name="locust-web") as proc:
        wait_http(f"http://127.0.0.1:{port}/", timeout=60, proc=proc)
        html = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
    return json.loads(re.search(r"window\.templateArgs = (\{.*\})", html).group(1))


@pytest.mark.slow
def test_shape_drop_down_and_plain_user_form():
    args = _template_args()
    shape = args["extra_options"]["shape"]
    assert shape["choices"] == ["none", "concurrency-sweep", "length-sweep", "rate-sweep", "trace-replay", "slo-search"]
    assert shape["default_value"] == "none"
    for name in ("sweep_users", "length_sweep", "request_rate", "arrival", "stage_duration", "max_concurrency", "trace",
                 "trace_speedup"):
        assert name in args["extra_options"], name
    assert not args["hide_common_options"]  # no shape by default: Locust's user count / spawn rate form

    args = _template_args("--shape", "concurrency-sweep", "--sweep-users", "1,2")
    assert not args["hide_common_options"]  # sweeps read -r (ramp) and -u (length sweep)
