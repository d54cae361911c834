"""deploy/prometheus/: the recording and alerting rules load in Debian's promtool, their unit tests pass and can
fail, every alert has a firing and a quiet case, every metric a rule reads exists, and both the compose Prometheus
and a native one (deploy/prometheus.yml) load them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest
import yaml

from tests.deploy.compose import command, option, rendered
from tests.deploy.promql import KNOWN, names_in
from tests.requires import require_tool
from tests.support import ROOT

PROM_DIR = ROOT / "deploy" / "prometheus"
RULE_FILES = sorted((PROM_DIR / "rules").glob("*.yml"))
TEST_FILES = sorted((PROM_DIR / "tests").glob("*.yml"))
# The exporter's live detector gauges (telemetry/control/detectors.py, in promql.CLIENT_METRICS): the SLO-breach and
# batching-collapse alerts read them.
DETECTOR_GAUGES = {"llm_slo_breached", "llm_slo_value", "llm_slo_threshold", "llm_batching_degraded",
                   "llm_engine_imbalanced"}
PROMETHEUS_SERIES = {"up"}  # written by Prometheus itself for every target


def _promtool() -> str:
    return require_tool("promtool", "prometheus")


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([_promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def _rules() -> list[dict]:
    return [r for f in RULE_FILES for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"]]


def _alerts() -> dict[str, dict]:
    return {r["alert"]: r for r in _rules() if "alert" in r}


def _records() -> dict[str, dict]:
    return {r["record"]: r for r in _rules() if "record" in r}


# ---- which series an expression reads ---------------------------------------------------------------------------
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
             "group_right", "inf", "nan", "atan2"}


def series_in(expr: str) -> set[str]:
    """Metric names an expression selects: every identifier that is not a function, keyword, label or duration."""
    bare = _STRINGS.sub('""', expr)
    bare = _LABEL_LISTS.sub(" ", _RANGES.sub(" ", _MATCHERS.sub(" ", bare)))
    return {n for n in _IDENT.findall(bare) if n.lower() not in _KEYWORDS}


def test_series_in_reads_names_not_functions_labels_or_durations():
    expr = (
        'histogram_quantile(0.95, sum by (user_class, le) (rate(llm_ttft_bucket{job="x",le!="+Inf"}[1m])))'
        ' > on (job) group_left (slo) up{job="a:b"} offset 5m or vector(1) and llm_x unless 1e3 > bool nan'
    )
    assert series_in(expr) == {"llm_ttft_bucket", "up", "llm_x"}
    assert series_in("vllm:kv_cache_usage_perc > 0.9") == {"vllm:kv_cache_usage_perc"}


def _allowed(name: str) -> bool:
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    known = KNOWN | PROMETHEUS_SERIES | set(_records())
    return name in known or base in known


def test_every_series_a_rule_reads_is_a_known_metric():
    """A typo in a metric name makes a rule silently empty; here it fails (promql.KNOWN: the exporter's llm_*,
    vLLM's and server.sim's vllm:*, the GPU exporter's gpu_*)."""
    read = {n: r.get("alert") or r["record"] for r in _rules() for n in series_in(str(r["expr"]))}
    assert read, "no series found in the rules"
    # queries inside annotation templates ({{ query "..." }}) too
    read |= {n: r["alert"] for r in _alerts().values() for n in names_in(str(r.get("annotations", "")))}
    unknown = {n: where for n, where in read.items() if not _allowed(n)}
    assert not unknown, f"rules read metrics nothing exports: {unknown}"
    assert not _allowed("llm_request_total") and not _allowed("vllm:kv_cache_usage_percent")  # the check can fail
    # the detector gauges are used where the issue says, and the exporter serves them (promql.KNOWN)
    used = set(read)
    assert DETECTOR_GAUGES <= used and DETECTOR_GAUGES <= KNOWN


# ---- promtool ---------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(path):
    proc = _run("check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = len([r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]])
    assert f"SUCCESS: {n} rules found" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_promtool_unit_tests_pass():
    assert TEST_FILES and RULE_FILES
    proc = _run("test", "rules", *(str(p) for p in TEST_FILES))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert out.count("SUCCESS") == len(TEST_FILES), out


def test_unit_tests_cover_every_rule_with_a_firing_and_a_quiet_case():
    suites = [yaml.safe_load(p.read_text()) for p in TEST_FILES]
    loaded = {PurePosixPath(f).name for s in suites for f in s["rule_files"]}
    assert loaded == {p.name for p in RULE_FILES}
    cases = [c for s in suites for t in s["tests"] for c in t.get("alert_rule_test", [])]
    for name in _alerts():
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c.get("exp_alerts") for c in mine), f"{name}: no case where it fires"
        assert any(not c.get("exp_alerts") for c in mine), f"{name}: no case where it must stay quiet"
    tested = {c["expr"].split()[0] for s in suites for t in s["tests"] for c in t.get("promql_expr_test", [])}
    assert set(_records()) <= tested, f"recording rules without a test: {set(_records()) - tested}"


# Each mutation changes what a rule means; the unit tests must notice.
MUTATIONS = [
    ("alerts.yml", "vllm:kv_cache_usage_perc > 0.95", "vllm:kv_cache_usage_perc > 0.98"),  # threshold
    ("alerts.yml", "vllm:num_requests_waiting > 0", "vllm:num_requests_waiting >= 0"),  # waiting no longer needed
    ("alerts.yml", "for: 1m", "for: 0s"),  # the SLO alert fires on a blip
    ("alerts.yml", "unless on () vllm:num_preemptions_total", ""),  # one storm, two alerts
    ("alerts.yml", "llm_engine_imbalanced == 1", "max without (engine) (llm_engine_imbalanced) == 1"),  # unnamed
    ("alerts.yml", "increase(llm_requests_total[5m])) > 0", "increase(llm_requests_total[5m])) >= 0"),
    ("alerts.yml", 'up{job="locust"} == 0', 'up == 0'),  # any job's target down
    ("alerts.yml", '{outcome="error"}', ""),  # every request counted as an error
    ("latency.yml", "histogram_quantile(0.95, sum by (user_class", "histogram_quantile(0.9, sum by (user_class"),
    ("latency.yml", "sum by (model_name, le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))",
     "sum by (engine, model_name, le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))"),  # per engine
]


@pytest.mark.slow
@pytest.mark.parametrize("file,old,new", MUTATIONS, ids=[f"{f}:{o[:40]}" for f, o, _ in MUTATIONS])
def test_unit_tests_fail_when_a_rule_changes_meaning(tmp_path, file, old, new):
    copy = tmp_path / "prometheus"
    shutil.copytree(PROM_DIR, copy)
    target = copy / "rules" / file
    text = target.read_text()
    assert old in text, old
    target.write_text(text.replace(old, new))
    assert _run("check", "rules", str(target)).returncode == 0  # still valid: only the tests can tell
    proc = _run("test", "rules", *(str(copy / "tests" / p.name) for p in TEST_FILES))
    assert proc.returncode != 0, f"unit tests still pass with {old!r} -> {new!r}"


def test_alerts_carry_severity_and_text():
    assert set(_alerts()) == {
        "LLMSLOBreached",
        "LLMBatchingCollapsed",
        "LLMEngineImbalanced",
        "LLMServerKVCacheSaturated",
        "LLMServerPreemptionStorm",
        "LLMHighErrorRate",
        "LoadGeneratorStoppedReporting",
        "SpeculativeAcceptanceLow",
    }
    for name, rule in _alerts().items():
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        assert rule.get("for"), f"{name}: fires on a single evaluation"


def test_latency_percentiles_from_both_sides():
    records = _records()
    for side, hist in (("llm", "llm_time_to_first_token_seconds"), ("server", "vllm:time_to_first_token_seconds")):
        for q, phi in (("p50", "0.50"), ("p95", "0.95"), ("p99", "0.99")):
            expr = records[f"{side}:ttft_seconds:{q}"]["expr"]
            assert expr.startswith(f"histogram_quantile({phi},") and f"{hist}_bucket" in expr
    assert {f"{s}:{m}_seconds:{q}" for s in ("llm", "server") for m in ("ttft", "itl", "tpot")
            for q in ("p50", "p95", "p99")} == set(records)


# ---- loaded by the compose Prometheus and by deploy/prometheus.yml ----------------------------------------------
def test_prometheus_config_loads_every_rule_file():
    cfg = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    found = {p for pattern in cfg["rule_files"] for p in (ROOT / "deploy").glob(pattern)}
    assert found == set(RULE_FILES)


@pytest.mark.slow
def test_compose_mounts_the_rules_where_the_config_looks():
    cfg = rendered("sim")
    config_file = PurePosixPath(option(command(cfg, "prometheus"), "--config.file"))
    mounts = {}
    for v in cfg["services"]["prometheus"]["volumes"]:
        src, dst, *_ = str(v).split(":")
        mounts[PurePosixPath(dst)] = src
    (pattern,) = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())["rule_files"]
    rules_dir = config_file.parent / PurePosixPath(pattern).parent
    assert Path(mounts[rules_dir]).resolve() == PROM_DIR / "rules"


@pytest.mark.slow
def test_promtool_check_config_follows_the_rule_files():
    proc = _run("check", "config", str(ROOT / "deploy" / "prometheus.yml"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"SUCCESS: {len(RULE_FILES)} rule files found" in out
