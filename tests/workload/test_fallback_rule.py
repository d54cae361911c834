"""--route-fallback's grammar (workload/routing/fallback.py) and its argparse type (users/routing.py), which takes
the metrics telemetry judges per window (telemetry/control/routing.py)."""

from __future__ import annotations

import argparse

import pytest

from telemetry.control.routing import FALLBACK_METRICS
from users.routing import route_fallback_type
from workload.routing.fallback import FALLBACK_FORM, FallbackRule

route_fallback_arg = route_fallback_type(FALLBACK_METRICS)


def test_the_issues_rule_parses_into_versions_conditions_and_windows() -> None:
    rule = FallbackRule.parse("beta->v1 when ttft_p99>+20% or error_rate>1% for 2 windows", FALLBACK_METRICS)
    assert (rule.source, rule.target, rule.windows, rule.window_s) == ("beta", "v1", 2, None)
    rel, err = rule.conditions
    assert (rel.metric, rel.quantile, rel.relative, rel.limit) == ("ttft", 0.99, True, pytest.approx(0.2))
    assert (err.metric, err.quantile, err.relative, err.limit) == ("error_rate", None, False, pytest.approx(0.01))


def test_absolute_latency_in_ms_its_own_window_and_spaces() -> None:
    rule = FallbackRule.parse("  canary -> v1  when e2e_p90 > 2500ms of 4.5s ", FALLBACK_METRICS)
    (c,) = rule.conditions
    assert (c.metric, c.quantile, c.relative, c.limit) == ("e2e", 0.9, False, pytest.approx(2.5))
    assert rule.windows == 1 and rule.window_s == 4.5


def test_conditions_judge_windows_and_say_when_they_cannot() -> None:
    rel, err = FallbackRule.parse("b->a when ttft_p99>+20% or error_rate>0.05").conditions
    assert rel.breached(0.130, 0.100) is True and rel.breached(0.110, 0.100) is False
    assert rel.breached(0.5, None) is None and rel.breached(None, 0.1) is None  # no reference / no value
    assert err.breached(0.06, None) is True and err.breached(0.05, None) is False


@pytest.mark.parametrize("text, says", [
    ("beta->v1", "bad fallback rule"),
    ("beta->v1 when", "bad fallback rule"),
    ("beta=>v1 when ttft_p99>+20%", "bad fallback rule"),
    ("beta->beta when ttft_p99>+20%", "same version"),
    ("beta->v1 when ttft>+20%", "bad metric"),
    ("beta->v1 when ttft_p99>20%", "latency limit is in ms"),
    ("beta->v1 when ttft_p99>+20ms", "relative test is +P%"),
    ("beta->v1 when error_rate>2ms", "error_rate is a %"),
    ("beta->v1 when error_rate>150%", "at most 100%"),
    ("beta->v1 when itl_p99>+20%", "not judged per window"),
    ("beta->v1 when ttft_p99>+20% for 0 windows", "windows must be >= 1"),
])
def test_bad_rules_are_one_argparse_error_naming_the_accepted_form(text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as e:
        route_fallback_arg(text)
    msg = str(e.value)
    assert msg.startswith("--route-fallback: ") and says in msg and FALLBACK_FORM in msg


def test_the_option_keeps_the_rule_as_text_for_the_workers() -> None:
    assert route_fallback_arg("beta->v1  when ttft_p99>+20%   for 2 windows") == (
        "beta->v1 when ttft_p99>+20% for 2 windows")


@pytest.mark.slow
def test_bad_rule_stops_locust_at_start_with_the_form() -> None:
    """Through Locust's real parser: exit 2, one line naming the form, no traceback."""
    import subprocess

    from tests.support import LOCUST, ROOT

    p = subprocess.run([LOCUST, "-f", "locustfile.py", "--headless", "--route-fallback", "beta to v1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "argument --route-fallback: --route-fallback: bad fallback rule 'beta to v1'" in p.stderr
    assert "FROM->TO when" in p.stderr


@pytest.mark.slow
def test_a_version_the_route_table_lacks_stops_locust_at_start() -> None:
    """--route-fallback and --route-tokenizers naming a version not in --route-table: exit 2 with one line
    before any user starts (the web UI's test start checks the same function again)."""
    import subprocess

    from tests.support import LOCUST, ROOT

    table = ["--route-table", "v1=http://127.0.0.1:9@0-49,beta=http://127.0.0.1:9@50-99"]
    cases = {
        "--route-fallback": ("gamma->v1 when error_rate>1%", "--route-fallback names 'gamma', not in --route-table"),
        "--route-tokenizers": ("v1=deepseek-v2,gamma=deepseek-v3", "--route-tokenizers names 'gamma', not in"),
    }
    for option, (value, says) in cases.items():
        p = subprocess.run([LOCUST, "-f", "locustfile.py", "--headless", "-t", "2s", "--host", "http://127.0.0.1:9",
                            *table, option, value], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "Traceback" not in p.stderr, (option, p.stderr[-2000:])
        assert says in p.stderr.strip().splitlines()[-1] and "Ramping" not in p.stderr, (option, p.stderr[-2000:])
