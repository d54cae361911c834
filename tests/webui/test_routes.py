"""Every Flask route of the project is added by webui/ (telemetry and shapes have none), over the real telemetry."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from shapes.plugin import install as install_shapes
from telemetry.outputs.report.plugin import install as install_report
from telemetry.plugin import install as install_telemetry
from tests.telemetry.helpers import _Nobody, fire, options
from tests.telemetry.synthetic import make_result
from webui.plugin import install

ROOT = Path(__file__).resolve().parents[2]
ROUTES = {"/llm/metrics", "/llm/report", "/llm/live", "/llm/live.csv", "/llm/form.js"}


@pytest.fixture
def env(monkeypatch):
    from locust.env import Environment

    monkeypatch.setattr(sys, "argv", ["locust"])  # the web UI re-parses sys.argv for its extra options
    environment = Environment(user_classes=[_Nobody], host="http://127.0.0.1:9")
    environment.create_local_runner()
    environment.create_web_ui("127.0.0.1", 0, delayed_start=True)
    environment.parsed_options = options(headless=False)
    install_shapes(environment)
    role = install_telemetry(environment)
    install_report(environment)
    environment.routes_test_role = role
    yield environment
    role.close()
    environment.runner.quit()


def _rules(env) -> set[str]:
    return {r.rule for r in env.web_ui.app.url_map.iter_rules()}


def test_telemetry_and_shapes_add_no_route_webui_adds_them_all(env):
    assert not (_rules(env) & ROUTES)
    assert env.web_ui.app.before_request_funcs.get(None, []) == []  # no form hook before webui's install
    install(env)
    assert ROUTES <= _rules(env)
    hooks = [f.__qualname__ for f in env.web_ui.app.before_request_funcs[None]]
    # the option names Locust's page mangles are put back first, then a blank secret field is dropped (the start key
    # stays), then the form is read, then empty fields dropped
    assert hooks == ["install.<locals>.restore_option_names", "_keep_blank_secrets", "ShapeFormHook.before_request",
                     "LLMTab._drop_empty_unset_options"]


def test_metrics_and_report_read_the_live_run(env):
    install(env)
    role = env.routes_test_role
    role.on_test_start()
    for _ in range(3):
        fire(env, make_result(ttft=0.2))
    role.pump_local()
    client = env.web_ui.app.test_client()
    metrics = client.get("/llm/metrics")
    assert metrics.status_code == 200 and metrics.mimetype == "text/plain"
    assert 'llm_time_to_first_token_seconds_count{stage="main",user_class="SynthUser"} 3.0' in metrics.get_data(
        as_text=True)
    report = client.get("/llm/report")
    assert report.status_code == 200 and report.mimetype == "text/html"
    assert "TTFT distribution" in report.get_data(as_text=True)


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", ["telemetry", "shapes"])
def test_no_flask_below_webui(package):
    users = [p.relative_to(ROOT) for p in (ROOT / package).rglob("*.py") if {"flask", "werkzeug"} & _imports(p)]
    assert users == []
