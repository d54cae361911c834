"""deploy/k8s: the manifests parse, their labels/selectors/ports connect, they run the same commands as the
compose file, and the ConfigMap's LOCUST_* settings are options Locust (with this project's options) accepts.
(No cluster or kubectl here: these are structural checks plus a real parse of the settings.)"""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.compose import command, option, rendered
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
    for optional in ("sim.yaml", "vllm.yaml"):  # offered, commented out
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


def test_locust_commands_match_the_compose_file():
    cfg = rendered("gpu")
    # compose passes the server with --host; Kubernetes takes it from the ConfigMap (LOCUST_HOST)
    assert _argv(_container("locust-master")) == _without(command(cfg, "locust-master"), "--host")
    assert _argv(_container("locust-worker")) == command(cfg, "locust-worker")
    assert option(command(cfg, "locust-worker"), "--master-host") == "locust-master"  # the Service's name
    assert _argv(_container("llm-server-sim")) == command(cfg, "sim")
    assert _argv(_container("llm-server-vllm", "vllm")) == command(cfg, "vllm")
    assert _argv(_container("llm-server-vllm", "gpu-exporter")) == command(cfg, "gpu-exporter")
    assert _container("llm-server-vllm", "vllm")["image"] == cfg["services"]["vllm"]["image"]


def test_configmap_points_at_the_llm_server_service():
    (cm,) = _objects("ConfigMap")
    assert cm["data"]["LOCUST_HOST"] == "http://llm-server:8000"
    for f in ("sim.yaml", "vllm.yaml"):
        (svc,) = [d for d in _docs()[f] if d["kind"] == "Service"]
        assert svc["metadata"]["name"] == "llm-server" and 8000 in {p["port"] for p in svc["spec"]["ports"]}


def test_configmap_settings_are_accepted_locust_options(monkeypatch):
    """Parse the ConfigMap's LOCUST_* values with Locust's parser plus this project's options: an unknown name
    or a malformed value (say a bad length SPEC) fails here rather than in the pod."""
    from locust import argument_parser, events

    import locustfile  # noqa: F401  (registers the project's options on locust.events)

    (cm,) = _objects("ConfigMap")
    settings = {k: str(v) for k, v in cm["data"].items() if k.startswith("LOCUST_")}
    parser = argument_parser.get_empty_argument_parser(add_help=False)
    argument_parser.setup_parser_arguments(parser)
    events.init_command_line_parser.fire(parser=parser)
    known = {getattr(a, "env_var", None) for a in parser._actions} | {"LOCUST_USER_CLASSES"}
    assert set(settings) <= known, f"not Locust options: {set(settings) - known}"
    opts, unknown = parser.parse_known_args(args=[], env_vars=settings)
    assert not unknown
    assert opts.host == "http://llm-server:8000"
    assert (opts.input_len, opts.output_len, opts.slo_preset) == ("fixed:512", "fixed:256", "seed")
    bad = {**settings, "LOCUST_INPUT_LEN": "often"}
    with pytest.raises(SystemExit):
        parser.parse_known_args(args=[], env_vars=bad)
