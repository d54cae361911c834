"""deploy/k8s: the manifests parse, their labels/selectors/ports connect, they run the same commands as the
compose file, and the ConfigMap's LOCUST_* settings are options Locust (with this project's options) accepts.
`kubectl kustomize` renders the base and the variants with the optional files; every rendered object of a built-in
kind validates against the Kubernetes JSON schemas (kubernetes-validate, strict, pinned versions). The Prometheus
Operator's kinds have no schema there (CRDs): their structure is checked against a schema of the fields used here,
and their selectors and ports against the objects they scrape. The HPA, its prometheus-adapter rule and the
metric they share are checked together. (No cluster here.)"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import subprocess
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy.compose import command, option, rendered
from tests.deploy.promql import VLLM_METRICS
from tests.requires import require_tool
from tests.support import ROOT

K8S = ROOT / "deploy" / "k8s"


def _docs() -> dict[str, list[dict]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(K8S.glob("*.yaml"))}


def _objects(kind: str | None = None) -> list[dict]:
    objs = [d for docs in _docs().values() for d in docs if d.get("kind") != "Kustomization"]
    return [o for o in objs if kind is None or o["kind"] == kind]


def _deployment(name: str) -> dict:
    (d,) = [o for o in _objects("Deployment") if o["metadata"]["name"] == name]
    return d


def _configmap(name: str) -> dict:
    (cm,) = [o for o in _objects("ConfigMap") if o["metadata"]["name"] == name]
    return cm


def _container(deployment: str, name: str | None = None) -> dict:
    containers = _deployment(deployment)["spec"]["template"]["spec"]["containers"]
    return containers[0] if name is None else next(c for c in containers if c["name"] == name)


def _argv(container: dict) -> list[str]:
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def _without(argv: list[str], flag: str) -> list[str]:
    i = argv.index(flag)
    return argv[:i] + argv[i + 2 :]


def test_every_document_is_a_named_kubernetes_object():
    for name, docs in _docs().items():
        assert docs, name
        for d in docs:
            assert d.get("apiVersion") and d.get("kind"), (name, d)
            if d["kind"] != "Kustomization":
                assert d["metadata"]["name"], (name, d)


def test_kustomization_lists_existing_files():
    (kust,) = _docs()["kustomization.yaml"]
    for res in kust["resources"]:
        assert (K8S / res).is_file(), res
    text = (K8S / "kustomization.yaml").read_text()
    for optional in ("sim.yaml", "vllm.yaml", "hpa.yaml", "monitoring.yaml", "prometheus-rules.yaml"):  # commented out
        assert f"# - {optional}" in text and (K8S / optional).is_file()
    images = {i["name"] for i in kust["images"]}
    used = {c["image"] for o in _objects("Deployment") for c in o["spec"]["template"]["spec"]["containers"]}
    assert "deepseek-locust" in images and "deepseek-locust" in used


def test_deployments_select_their_own_pods():
    for d in _objects("Deployment"):
        match = d["spec"]["selector"]["matchLabels"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert match.items() <= labels.items(), d["metadata"]["name"]


@pytest.mark.parametrize("files", [("master.yaml", "worker.yaml", "sim.yaml"), ("master.yaml", "vllm.yaml")])
def test_services_reach_named_container_ports(files):
    docs = [d for f in files for d in _docs()[f]]
    pods = [d["spec"]["template"] for d in docs if d["kind"] == "Deployment"]
    for svc in (d for d in docs if d["kind"] == "Service"):
        selected = [p for p in pods if svc["spec"]["selector"].items() <= p["metadata"]["labels"].items()]
        assert selected, f"Service {svc['metadata']['name']} selects no pod"
        names = {port["name"] for p in selected for c in p["spec"]["containers"] for port in c.get("ports", [])}
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in names, (svc["metadata"]["name"], port)


@pytest.mark.slow
def test_locust_commands_match_the_compose_file():
    cfg = rendered("gpu")
    # compose passes the server with --host; Kubernetes takes it from the ConfigMap (LOCUST_HOST)
    assert _argv(_container("locust-master")) == _without(command(cfg, "locust-master"), "--host")
    assert _argv(_container("locust-worker")) == command(cfg, "locust-worker")
    assert option(command(cfg, "locust-worker"), "--master-host") == "locust-master"  # the Service's name
    assert _argv(_container("llm-server-sim")) == command(cfg, "sim")
    assert _argv(_container("llm-server-vllm", "vllm")) == command(cfg, "vllm")
    assert _argv(_container("gpu-exporter")) == command(cfg, "gpu-exporter")
    assert _container("llm-server-vllm", "vllm")["image"] == cfg["services"]["vllm"]["image"]


def test_configmap_points_at_the_llm_server_service():
    cm = _configmap("locust-config")
    assert cm["data"]["LOCUST_HOST"] == "http://llm-server:8000"
    for f in ("sim.yaml", "vllm.yaml"):
        # vllm.yaml also has the GPU exporter's Service: exactly one llm-server, and it serves 8000
        (svc,) = [d for d in _docs()[f] if d["kind"] == "Service" and d["metadata"]["name"] == "llm-server"]
        assert 8000 in {p["port"] for p in svc["spec"]["ports"]}


def test_configmap_settings_are_accepted_locust_options(monkeypatch):
    """Parse the ConfigMap's LOCUST_* values with Locust's parser plus this project's options: an unknown name
    or a malformed value (say a bad length SPEC) fails here rather than in the pod."""
    from locust import argument_parser, events

    import locustfile  # noqa: F401  (registers the project's options on locust.events)

    cm = _configmap("locust-config")
    settings = {k: str(v) for k, v in cm["data"].items() if k.startswith("LOCUST_")}
    parser = argument_parser.get_empty_argument_parser(add_help=False)
    argument_parser.setup_parser_arguments(parser)
    events.init_command_line_parser.fire(parser=parser)
    known = {getattr(a, "env_var", None) for a in parser._actions} | {"LOCUST_USER_CLASSES"}
    assert set(settings) <= known, f"not Locust options: {set(settings) - known}"
    opts, unknown = parser.parse_known_args(args=[], env_vars=settings)
    assert not unknown
    assert opts.host == "http://llm-server:8000"
    assert (opts.input_len, opts.output_len, opts.slo_preset) == ("fixed:512", "fixed:256", "interactive")
    bad = {**settings, "LOCUST_INPUT_LEN": "often"}
    with pytest.raises(SystemExit):
        parser.parse_known_args(args=[], env_vars=bad)


# ---- rendered with kubectl kustomize, validated against the Kubernetes schemas ----------------------------------
K8S_VERSIONS = ("1.30.0", "1.35.0")  # kubernetes-validate's schemas: an older supported release and a current one
OPERATOR_GROUP = "monitoring.coreos.com/v1"
# the optional files a user uncomments in kustomization.yaml (sim.yaml and vllm.yaml both define llm-server)
VARIANTS = {
    "base": (),
    "sim+monitoring": ("sim.yaml", "monitoring.yaml"),
    "vllm+hpa+monitoring": ("vllm.yaml", "hpa.yaml", "monitoring.yaml", "prometheus-rules.yaml"),
    "vllm-mtp+monitoring": ("vllm-mtp.yaml", "monitoring.yaml"),
}


def _kubectl() -> str:
    return require_tool("kubectl", "kubectl")


def _kustomize(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_kubectl(), "kustomize", str(root)], capture_output=True, text=True, timeout=120)


@cache
def _rendered_variant(variant: str, tmp: Path) -> list[dict]:
    """`kubectl kustomize` of deploy/k8s with the variant's optional lines uncommented (in a copy)."""
    files = VARIANTS[variant]
    root = K8S
    if files:
        root = tmp / variant
        shutil.copytree(K8S, root)
        kust = root / "kustomization.yaml"
        text = kust.read_text()
        for f in files:
            text, n = re.subn(rf"^  # - {re.escape(f)}\b.*$", f"  - {f}", text, flags=re.M)
            assert n == 1, f"kustomization.yaml does not offer {f}"
        kust.write_text(text)
    proc = _kustomize(root)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.fixture(scope="module")
def render(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kustomize")
    return lambda variant: _rendered_variant(variant, tmp)


@pytest.mark.slow
def test_kustomize_renders_the_base_and_every_variant(render):
    base = render("base")
    assert {(o["kind"], o["metadata"]["name"]) for o in base} == {
        ("Namespace", "deepseek-locust"), ("ConfigMap", "locust-config"), ("Deployment", "locust-master"),
        ("Service", "locust-master"), ("Deployment", "locust-worker"),
    }
    full = render("vllm+hpa+monitoring")
    kinds = {(o["kind"], o["metadata"]["name"]) for o in full}
    assert {("HorizontalPodAutoscaler", "llm-server-vllm"), ("ConfigMap", "prometheus-adapter-rules"),
            ("Deployment", "gpu-exporter"), ("ServiceMonitor", "locust-master"), ("PodMonitor", "llm-server"),
            ("PodMonitor", "gpu-exporter")} <= kinds
    for o in full:
        if o["kind"] != "Namespace":
            assert o["metadata"]["namespace"] == "deepseek-locust", o["metadata"]["name"]
    deployments = [o for o in full if o["kind"] == "Deployment"]
    images = {c["image"] for o in deployments for c in o["spec"]["template"]["spec"]["containers"]}
    assert "deepseek-locust:0.1.0" in images  # the kustomization's `images` applied


@pytest.mark.slow
def test_kustomize_rejects_a_broken_kustomization(tmp_path):
    """The render above means something: a resource that is not there fails it."""
    root = tmp_path / "k8s"
    shutil.copytree(K8S, root)
    kust = root / "kustomization.yaml"
    kust.write_text(kust.read_text().replace("  - worker.yaml", "  - workers.yaml"))
    assert _kustomize(root).returncode != 0


@pytest.mark.slow
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rendered_builtin_object_validates(render, variant, version):
    objs = [o for o in render(variant) if o["apiVersion"] != OPERATOR_GROUP]
    assert objs
    for o in objs:
        try:
            kubernetes_validate.validate(o, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{o['kind']}/{o['metadata']['name']} invalid for Kubernetes {version}: {e.message}")


def test_schema_validation_can_fail():
    (hpa,) = [o for o in _objects("HorizontalPodAutoscaler")]
    broken = yaml.safe_load(yaml.safe_dump(hpa))
    broken["spec"]["behavior"]["scaleUp"]["stabilisationWindowSeconds"] = 60  # misspelt field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)
    dep = yaml.safe_load(yaml.safe_dump(_deployment("gpu-exporter")))
    dep["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSIONS[-1], strict=True)


# ---- Prometheus Operator objects (CRDs: no schema in kubernetes-validate) ---------------------------------------
_DURATION = r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"  # the Operator's Duration pattern
_ENDPOINT = {
    "type": "object", "additionalProperties": False, "required": ["port"],
    "properties": {
        "port": {"type": "string", "minLength": 1},
        "path": {"type": "string", "pattern": "^/"},
        "interval": {"type": "string", "pattern": _DURATION},
        "relabelings": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "action": {"enum": ["replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep",
                                    "lowercase", "uppercase", "keepequal", "dropequal"]},
                "sourceLabels": {"type": "array", "items": {"type": "string"}},
                "separator": {"type": "string"}, "targetLabel": {"type": "string"},
                "regex": {"type": "string"}, "modulus": {"type": "integer"}, "replacement": {"type": "string"},
            },
        }},
    },
}


def _monitor_schema(kind: str, endpoints: str) -> dict:
    return {
        "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": OPERATOR_GROUP}, "kind": {"const": kind},
            "metadata": {"type": "object", "required": ["name"]},
            "spec": {
                "type": "object", "additionalProperties": False, "required": ["selector", endpoints],
                "properties": {
                    "selector": {"type": "object", "additionalProperties": False, "required": ["matchLabels"],
                                 "properties": {"matchLabels": {"type": "object",
                                                                "additionalProperties": {"type": "string"}}}},
                    endpoints: {"type": "array", "minItems": 1, "items": _ENDPOINT},
                    "jobLabel": {"type": "string"},
                    "namespaceSelector": {"type": "object"},
                },
            },
        },
    }


_RULE = {
    "type": "object", "additionalProperties": False, "required": ["expr"],
    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
    "properties": {
        "record": {"type": "string"}, "alert": {"type": "string"}, "expr": {"type": ["string", "integer"]},
        "for": {"type": "string", "pattern": _DURATION},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
MONITOR_SCHEMAS = {
    "ServiceMonitor": _monitor_schema("ServiceMonitor", "endpoints"),
    "PodMonitor": _monitor_schema("PodMonitor", "podMetricsEndpoints"),
    "PrometheusRule": {
        "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": OPERATOR_GROUP}, "kind": {"const": "PrometheusRule"},
            "metadata": {"type": "object", "required": ["name"]},
            "spec": {"type": "object", "additionalProperties": False, "required": ["groups"], "properties": {
                "groups": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False, "required": ["name", "rules"],
                    "properties": {"name": {"type": "string"}, "interval": {"type": "string", "pattern": _DURATION},
                                   "rules": {"type": "array", "minItems": 1, "items": _RULE}},
                }},
            }},
        },
    },
}


@pytest.mark.slow
def test_operator_objects_have_the_operators_structure(render):
    monitors = [o for o in render("vllm+hpa+monitoring") if o["apiVersion"] == OPERATOR_GROUP]
    assert {o["kind"] for o in monitors} == set(MONITOR_SCHEMAS)
    for o in monitors:
        jsonschema.validate(o, MONITOR_SCHEMAS[o["kind"]])
    broken = yaml.safe_load(yaml.safe_dump(next(o for o in monitors if o["kind"] != "PrometheusRule")))
    broken["spec"]["endpoints" if broken["kind"] == "ServiceMonitor" else "podMetricsEndpoints"][0]["interval"] = "5"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, MONITOR_SCHEMAS[broken["kind"]])


def _scrape_job(endpoint: dict) -> str:
    (job,) = [r["replacement"] for r in endpoint["relabelings"] if r.get("targetLabel") == "job"]
    return job


@pytest.mark.slow
def test_monitors_scrape_every_exporter_under_the_compose_job_names(render):
    """Each monitor selects the pods (PodMonitor) or Service (ServiceMonitor) it means, on a port they name,
    and sets `job` to deploy/prometheus.yml's job name: the rules and the dashboard work unchanged."""
    objs = render("vllm+hpa+monitoring")
    pods = [o["spec"]["template"] for o in objs if o["kind"] == "Deployment"]
    services = [o for o in objs if o["kind"] == "Service"]
    jobs = {}
    for m in (o for o in objs if o["kind"] in ("PodMonitor", "ServiceMonitor")):
        match = m["spec"]["selector"]["matchLabels"].items()
        if m["kind"] == "PodMonitor":
            selected = [p for p in pods if match <= p["metadata"]["labels"].items()]
            ports = {port["name"] for p in selected for c in p["spec"]["containers"] for port in c.get("ports", [])}
            endpoints = m["spec"]["podMetricsEndpoints"]
        else:
            selected = [s for s in services if match <= s["metadata"].get("labels", {}).items()]
            ports = {port["name"] for s in selected for port in s["spec"]["ports"]}
            endpoints = m["spec"]["endpoints"]
        assert selected, f"{m['kind']}/{m['metadata']['name']} selects nothing"
        for ep in endpoints:
            assert ep["port"] in ports, (m["metadata"]["name"], ep["port"], ports)
            jobs[_scrape_job(ep)] = (m["metadata"]["name"], ep["port"])
    compose_jobs = {j["job_name"] for j in yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
                    ["scrape_configs"]}
    assert set(jobs) == compose_jobs
    assert jobs["llm-server"] == ("llm-server", "http") and jobs["locust"] == ("locust-master", "metrics")


# ---- the HPA and prometheus-adapter -----------------------------------------------------------------------------
def _hpa() -> dict:
    (hpa,) = _objects("HorizontalPodAutoscaler")
    return hpa


def _adapter_rules() -> list[dict]:
    return yaml.safe_load(_configmap("prometheus-adapter-rules")["data"]["config.yaml"])["rules"]


def test_hpa_targets_the_vllm_deployment():
    hpa = _hpa()
    assert hpa["apiVersion"] == "autoscaling/v2"
    ref = hpa["spec"]["scaleTargetRef"]
    vllm = _deployment(ref["name"])
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", "llm-server-vllm")
    assert vllm["apiVersion"] == ref["apiVersion"]
    assert "replicas" not in vllm["spec"], "the HPA owns the replica count; `kubectl apply` would reset it"
    assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    # nothing scales the load generator (docs/deploy.md: workers are fixed for a run)
    assert {h["spec"]["scaleTargetRef"]["name"] for h in _objects("HorizontalPodAutoscaler")} == {"llm-server-vllm"}


def test_hpa_metric_is_one_the_adapter_serves_per_pod():
    (metric,) = _hpa()["spec"]["metrics"]
    assert metric["type"] == "Pods" and metric["pods"]["target"]["type"] == "AverageValue"
    served = {}
    for rule in _adapter_rules():
        series = re.match(r"[\w:]+", rule["seriesQuery"]).group(0)
        name = re.sub(rule["name"]["matches"], rule["name"]["as"], series)
        served[name] = (series, rule)
    assert metric["pods"]["metric"]["name"] in served
    series, rule = served[metric["pods"]["metric"]["name"]]
    assert series in VLLM_METRICS  # a series vLLM (and server.sim) really serves
    overrides = rule["resources"]["overrides"]
    assert overrides["pod"] == {"resource": "pod"} and overrides["namespace"] == {"resource": "namespace"}
    assert {"<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"} <= set(re.findall(r"<<\.\w+>>", rule["metricsQuery"]))


@pytest.mark.slow
def test_adapter_query_is_valid_promql(tmp_path):
    """The adapter's metricsQuery with its placeholders filled the way the adapter fills them parses in promtool."""
    promtool = require_tool("promtool", "prometheus")
    groups = []
    for i, rule in enumerate(_adapter_rules()):
        series = re.match(r"[\w:]+", rule["seriesQuery"]).group(0)
        expr = (rule["metricsQuery"].replace("<<.Series>>", series)
                .replace("<<.LabelMatchers>>", 'namespace="deepseek-locust",pod=~"llm-server-vllm-.*"')
                .replace("<<.GroupBy>>", "pod"))
        groups.append({"record": f"adapter:query_{i}", "expr": expr})
    path = tmp_path / "adapter.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "adapter", "rules": groups}]}))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hpa_behaviour_does_not_flap():
    behavior = _hpa()["spec"]["behavior"]
    up, down = behavior["scaleUp"], behavior["scaleDown"]
    assert up["stabilizationWindowSeconds"] >= 60  # a burst of queued requests does not add a pod
    assert down["stabilizationWindowSeconds"] >= 600 > up["stabilizationWindowSeconds"]
    for direction in (up, down):
        (policy,) = direction["policies"]
        assert policy["type"] == "Pods" and policy["value"] == 1  # one pod at a time
    # no second scale-up before the new pod can serve (startup probe: 15 s x 80)
    probe = _container("llm-server-vllm", "vllm")["startupProbe"]
    assert up["policies"][0]["periodSeconds"] >= 300 and probe["periodSeconds"] * probe["failureThreshold"] >= 300


# ---- GPUs -------------------------------------------------------------------------------------------------------
def test_gpu_exporter_requests_the_gpu_it_reports():
    exporter = _container("gpu-exporter")
    for section in ("requests", "limits"):
        assert exporter["resources"][section]["nvidia.com/gpu"] == 1, section
    env = {e["name"]: e.get("value") for e in exporter.get("env", [])}
    assert "NVIDIA_VISIBLE_DEVICES" not in env, "the device plugin sets it; `all` would bypass the scheduler"
    # vLLM requests as many GPUs as it shards the model over, and no other container rides on its pod
    vllm = _container("llm-server-vllm", "vllm")
    assert str(vllm["resources"]["limits"]["nvidia.com/gpu"]) == option(_argv(vllm), "--tensor-parallel-size")
    assert [c["name"] for c in _deployment("llm-server-vllm")["spec"]["template"]["spec"]["containers"]] == ["vllm"]


# ---- the rules for Operator clusters ----------------------------------------------------------------------------
@pytest.mark.slow
def test_prometheus_rule_is_the_rule_files_current_copy(tmp_path):
    """deploy/k8s/prometheus-rules.yaml is generated from deploy/prometheus/rules/ and promtool accepts its groups."""
    gen = runpy.run_path(str(ROOT / "deploy" / "prometheus" / "operator_rules.py"))
    assert (K8S / "prometheus-rules.yaml").read_text() == gen["render"](), (
        "stale: run python deploy/prometheus/operator_rules.py"
    )
    (rule,) = _objects("PrometheusRule")
    files = sorted((ROOT / "deploy" / "prometheus" / "rules").glob("*.yml"))
    assert rule["spec"]["groups"] == [g for f in files for g in yaml.safe_load(f.read_text())["groups"]]
    extracted = tmp_path / "rules.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    promtool = require_tool("promtool", "prometheus")
    proc = subprocess.run([promtool, "check", "rules", str(extracted)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_mtp_variant_serves_speculation_and_the_in_band_record():
    """vllm-mtp.yaml: a DeepSeek-V3/R1-class model with MTP drafts and the per-request record the users read."""
    d = _deployment("llm-server-vllm-mtp")
    (c,) = d["spec"]["template"]["spec"]["containers"]
    args = c["args"]
    assert option(args, "--speculative-config") == '{"method":"mtp","num_speculative_tokens":1}'
    assert json.loads(option(args, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 1}
    assert "--enable-per-request-metrics" in args and option(args, "--per-request-spec-decode-metrics") == "summary"
    assert option(args, "--model").startswith("deepseek-ai/DeepSeek-") and option(args, "--tensor-parallel-size") == "8"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "llm-server"
