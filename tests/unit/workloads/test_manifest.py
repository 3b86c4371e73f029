"""Pod manifests: what the API server accepts is accepted, everything else is
refused naming the field; hostile documents are bounded before they cost anything."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from agent.workloads.manifest import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    is_dns1123_subdomain,
    is_extended_resource_name,
    manifest_of,
    parse_manifest,
    pod_from_document,
)
from agent.quantity import QuantityError, parse_quantity, to_milli

GOOD = """
apiVersion: v1
kind: Pod
metadata:
  name: web.example
  namespace: team-a
  annotations:
    katalyst.kubewharf.io/qos_level: dedicated_cores
  labels: {app: web}
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: setup
    command: [/bin/true]
  containers:
  - name: main
    command: [/usr/bin/sleep]
    args: ["1000"]
    workingDir: /tmp
    env: [{name: A, value: "1"}, {name: B}]
    resources:
      requests: {cpu: 1500m, memory: 1Gi}
      limits: {cpu: "2", memory: 2Gi, hwagent.io/loop: 1}
"""


def test_a_full_manifest_parses_to_the_spec():
    p = parse_manifest(GOOD).pod
    assert (p.name, p.namespace, p.restart_policy, p.termination_grace_period_s) == ("web.example", "team-a", "OnFailure", 5)
    assert [c.name for c in p.all_containers()] == ["setup", "main"]
    main = p.containers[0]
    assert main.argv == ("/usr/bin/sleep", "1000") and main.working_dir == "/tmp"
    assert [(e.name, e.value) for e in main.env] == [("A", "1"), ("B", "")]
    r = main.resources
    assert (r.cpu_request_milli, r.cpu_limit_milli) == (1500, 2000)
    assert (r.memory_request_bytes, r.memory_limit_bytes) == (1 << 30, 2 << 30)
    assert r.extended == {"hwagent.io/loop": 1}
    assert p.init_containers[0].kind == "init" and main.kind == "app"
    assert p.annotations["katalyst.kubewharf.io/qos_level"] == "dedicated_cores"
    assert p.uid  # generated


def test_json_reads_the_same_and_the_document_round_trips():
    yaml_pod = parse_manifest(GOOD, new_uid=lambda: "u-1").pod
    doc = manifest_of(yaml_pod)
    assert parse_manifest(json.dumps(doc)).pod == yaml_pod
    assert pod_from_document(doc).pod == yaml_pod


def test_uid_is_generated_once_per_admission_and_kept_when_given():
    a = parse_manifest("metadata: {name: a}\nspec: {containers: [{name: c, command: [x]}]}").pod
    b = parse_manifest("metadata: {name: a}\nspec: {containers: [{name: c, command: [x]}]}").pod
    assert a.uid != b.uid
    c = parse_manifest("metadata: {name: a, uid: my-uid.1}\nspec: {containers: [{name: c, command: [x]}]}").pod
    assert c.uid == "my-uid.1"


def _err(text: str, **kw) -> ManifestError:
    with pytest.raises(ManifestError) as ei:
        parse_manifest(text, **kw)
    return ei.value


BASE = "metadata: {name: a}\nspec:\n  containers:\n  - name: c\n    command: [x]\n"


@pytest.mark.parametrize(
    "text, field, words",
    [
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], volumeMounts: []}]}",
         "spec.containers[0].volumeMounts", "unknown field"),
        ("metadata: {name: a}\nspec: {dnsPolicy: None, containers: [{name: c, command: [x]}]}",
         "spec.dnsPolicy", "None"),
        ("metadata: {name: a, generateName: b}\nspec: {containers: [{name: c, command: [x]}]}",
         "metadata.generateName", "unknown field"),
        ("metadata: {name: a}\nspec: {hostNetwork: true, containers: [{name: c, command: [x]}]}",
         "spec.hostNetwork", "unknown field"),
        ("metadata: {name: Web}\nspec: {containers: [{name: c, command: [x]}]}", "metadata.name", "DNS-1123"),
        ("metadata: {name: " + "a" * 254 + "}\nspec: {containers: [{name: c, command: [x]}]}", "metadata.name", "253"),
        ("metadata: {name: a, namespace: A_B}\nspec: {containers: [{name: c, command: [x]}]}",
         "metadata.namespace", "DNS-1123"),
        ("metadata: {name: a, uid: ../../etc}\nspec: {containers: [{name: c, command: [x]}]}", "metadata.uid", "only"),
        ("metadata: {name: a, uid: " + "u" * 37 + "}\nspec: {containers: [{name: c, command: [x]}]}",
         "metadata.uid", "longer than 36"),
        ("spec: {containers: [{name: c, command: [x]}]}", "metadata.name", "required"),
        ("metadata: {name: a}", "spec", "required"),
        ("metadata: {name: a}\nspec: {containers: []}", "spec.containers", "at least one"),
        ("metadata: {name: a}\nspec: {containers: [{name: c}]}", "spec.containers[0].command", "required"),
        ("metadata: {name: a}\nspec: {containers: [{name: C_1, command: [x]}]}", "spec.containers[0].name", "DNS-1123"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x]}, {name: c, command: [y]}]}",
         "spec.containers[1].name", "duplicate"),
        ("metadata: {name: a}\nspec: {restartPolicy: Sometimes, containers: [{name: c, command: [x]}]}",
         "spec.restartPolicy", "Always"),
        ("metadata: {name: a}\nspec: {terminationGracePeriodSeconds: -1, containers: [{name: c, command: [x]}]}",
         "spec.terminationGracePeriodSeconds", "0.."),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], resources: {limits: {cpu: 2x}}}]}",
         "spec.containers[0].resources.limits.cpu", "not a quantity"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], resources: {limits: {cpu: -1}}}]}",
         "spec.containers[0].resources.limits.cpu", "negative"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], resources: {limits: {gpu: 1}}}]}",
         "spec.containers[0].resources.limits.gpu", "unknown resource"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], resources: {limits: {kubernetes.io/x: 1}}}]}",
         "spec.containers[0].resources.limits.kubernetes.io/x", "unknown resource"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], resources: {requests: {a.io/d: 1}}}]}",
         "spec.containers[0].resources.limits.a.io/d", "must be set"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], "
         "resources: {requests: {a.io/d: 1}, limits: {a.io/d: 2}}}]}",
         "spec.containers[0].resources.requests.a.io/d", "equal"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], resources: {limits: {a.io/d: 500m}}}]}",
         "spec.containers[0].resources.limits.a.io/d", "whole"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], "
         "resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]}",
         "spec.containers[0].resources.requests.cpu", "less than or equal"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], env: [{name: A, valueFrom: {}}]}]}",
         "spec.containers[0].env[0].valueFrom", "not supported"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], env: [{name: 'A=B', value: x}]}]}",
         "spec.containers[0].env[0].name", "not a valid"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: [x], workingDir: rel}]}",
         "spec.containers[0].workingDir", "absolute"),
        ("metadata: {name: a, annotations: {'bad key!': x}}\nspec: {containers: [{name: c, command: [x]}]}",
         "metadata.annotations.bad key!", "not a valid"),
        ("metadata: {name: a, labels: {app: 'has space'}}\nspec: {containers: [{name: c, command: [x]}]}",
         "metadata.labels.app", "label value"),
        ("kind: Deployment\nmetadata: {name: a}\nspec: {containers: [{name: c, command: [x]}]}", "kind", "Pod"),
        ("apiVersion: v2\nmetadata: {name: a}\nspec: {containers: [{name: c, command: [x]}]}", "apiVersion", "v1"),
        ("metadata: {name: a}\nspec: {containers: [{name: c, command: x}]}", "spec.containers[0].command", "list"),
        ("metadata: {name: 5}\nspec: {containers: [{name: c, command: [x]}]}", "metadata.name", "string"),
    ],
)
def test_invalid_manifests_name_the_field(text, field, words):
    e = _err(text)
    assert e.field == field, str(e)
    assert words in str(e)
    assert str(e).startswith(field)


def test_unknown_fields_become_warnings_under_the_flag():
    text = "metadata: {name: a, generateName: b}\nspec: {nodeName: n, containers: [{name: c, command: [x], image: i}]}"
    p = parse_manifest(text, ignore_unknown=True)
    assert p.pod.name == "a"
    assert p.warnings == (
        "metadata.generateName: unknown field ignored",
        "spec.nodeName: unknown field ignored",
        "ignored, meaningless on a node without images or a cluster: spec.containers[0].image",
    )


#: what `kubectl run web --image=busybox --restart=Never --dry-run=client -o yaml --command -- /bin/sleep 60`
#: writes (kubectl 1.3x), with the fields `kubectl get -o yaml` adds to a container and the spec
KUBECTL_RUN = """apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  labels:
    run: web
  name: web
spec:
  containers:
  - command:
    - /bin/sleep
    - "60"
    image: busybox
    imagePullPolicy: IfNotPresent
    name: web
    resources: {}
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  restartPolicy: Never
  schedulerName: default-scheduler
status: {}
"""


def test_a_kubectl_written_manifest_is_taken_with_one_line_naming_what_was_ignored():
    """Issue 37 item 7: every kubectl-written Pod has image:, and was refused for it."""
    p = parse_manifest(KUBECTL_RUN)
    assert p.pod.name == "web" and p.pod.containers[0].command == ("/bin/sleep", "60")
    assert p.pod.restart_policy == "Never" and p.pod.labels == {"run": "web"}
    assert p.warnings == ("ignored, meaningless on a node without images or a cluster: metadata.creationTimestamp, "
                          "spec.containers[0].image, spec.containers[0].imagePullPolicy, "
                          "spec.containers[0].terminationMessagePath, spec.containers[0].terminationMessagePolicy, "
                          "spec.dnsPolicy, spec.enableServiceLinks, spec.schedulerName, status",)
    # without image there is still no entrypoint to take: a manifest without command is refused as before
    e = _err(KUBECTL_RUN.replace("  - command:\n    - /bin/sleep\n    - \"60\"\n    image", "  - image"))
    assert e.field == "spec.containers[0].command" and "no image entrypoint" in str(e)


@pytest.mark.parametrize("field", ["volumeMounts: [{name: v, mountPath: /data}]", "ports: [{containerPort: 80, hostPort: 80}]",
                                   "securityContext: {privileged: true}", "stdin: true"])
def test_fields_that_would_change_what_runs_are_still_refused(field):
    text = KUBECTL_RUN.replace("    resources: {}\n", f"    resources: {{}}\n    {field}\n")
    e = _err(text)
    assert e.field == f"spec.containers[0].{field.split(':')[0]}" and "unknown field" in str(e)


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"metadata: {name: a}\n---\nmetadata: {name: b}\n", "2 documents"),
        (b"", "0 documents"),
        (b"\xff\xfe", "UTF-8"),
        (b"a: [1, 2", "not valid YAML"),
        (b'{"metadata": {"name": "a"}, "metadata": {"name": "b"}}', "duplicate key 'metadata'"),
        (b"metadata: {name: a}\nmetadata: {name: b}\n", "duplicate key 'metadata'"),
        (b"{not json", "not valid JSON"),
        (b"- just\n- a list\n", "must be a mapping"),
        (b"metadata: {name: a}\nspec: !!python/object:os.system {}\n", "not valid YAML"),
        (b"metadata: {name: \"a\x00\"}", "NUL"),
    ],
)
def test_malformed_documents(raw, words):
    e = _err(raw)
    assert words in str(e)


def test_yaml_aliases_are_refused_before_they_expand():
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(20)
    )
    e = _err(laughs)
    assert "aliases are not accepted" in str(e)


def test_oversized_and_deep_documents_are_bounded():
    big = BASE + "    args: [" + ",".join(["x" * 1000] * (MAX_MANIFEST_BYTES // 1000 + 1)) + "]\n"
    assert "bytes, more than" in str(_err(big))
    deep_yaml = "a: " + "[" * 200 + "]" * 200
    assert "nests" in str(_err(deep_yaml))
    deep_json = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    assert "nests" in str(_err(deep_json))
    many = "metadata: {name: a}\nspec:\n  containers:\n" + "".join(
        f"  - {{name: c{i}, command: [x]}}\n" for i in range(65)
    )
    assert "more than 64" in str(_err(many))
    huge_arg = BASE + "    args: ['" + "y" * (70 << 10) + "']\n"
    assert "longer than" in str(_err(huge_arg))


@pytest.mark.parametrize(
    "text, value",
    [("1", Fraction(1)), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)), ("2Ki", Fraction(2048)),
     ("1e3", Fraction(1000)), ("1E-3", Fraction(1, 1000)), ("+3", Fraction(3)), (".5", Fraction(1, 2)),
     ("1G", Fraction(10**9)), ("1Gi", Fraction(2**30)), ("100n", Fraction(1, 10**7)), (2, Fraction(2)),
     (0.25, Fraction(1, 4))],
)
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "m", "1.2.3", "1Kb", "1 Gi", "1e3Gi", "--1", "0x10", "1ki", True, None, "1" * 65,
                                  float("inf")])
def test_bad_quantities(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_cpu_rounds_up_to_a_milli_like_the_api_server():
    assert to_milli(parse_quantity("0.0001")) == 1
    assert to_milli(parse_quantity("2")) == 2000


def test_names():
    assert is_dns1123_subdomain("a.b-c.d")
    assert not is_dns1123_subdomain("a..b") and not is_dns1123_subdomain("-a") and not is_dns1123_subdomain("")
    assert is_extended_resource_name("hwagent.io/loop") and is_extended_resource_name("nvidia.com/gpu")
    assert not is_extended_resource_name("loop") and not is_extended_resource_name("kubernetes.io/x")
    assert not is_extended_resource_name("a.kubernetes.io/x") and not is_extended_resource_name("requests.a.io/x")
    assert not is_extended_resource_name("Bad_Domain/x")


def _with_memory(limit: str, request: str | None = None) -> str:
    req = f", requests: {{memory: '{request}'}}" if request is not None else ""
    return (f"metadata: {{name: a}}\nspec: {{containers: [{{name: c, command: [x], "
            f"resources: {{limits: {{memory: '{limit}'}}{req}}}}}]}}")


@pytest.mark.parametrize("limit", ["1", "4Ki", "1Mi", "6291455", "0.5"])
def test_a_memory_limit_below_the_floor_is_refused_with_the_floor_and_the_way_out(limit):
    # 1 B became a 0-byte limit in the kernel (v1 rounds down to a page) and 4 KiB
    # OOM-killed the container before its command ran
    e = _err(_with_memory(limit))
    assert e.field == "spec.containers[0].resources.limits.memory", str(e)
    assert "6Mi" in str(e) and "at least" in str(e) and "no limit" in str(e), str(e)


@pytest.mark.parametrize("limit", ["0", "0Mi"])
def test_a_zero_memory_limit_means_no_limit(limit):
    r = parse_manifest(_with_memory(limit)).pod.containers[0].resources
    assert r.memory_limit_bytes is None
    assert r.memory_request_bytes in (None, 0)
    # as for the API server: a request above a zero limit is still an error, not a silent "no limit"
    assert _err(_with_memory(limit, "1Gi")).field == "spec.containers[0].resources.requests.memory"


def test_the_memory_floor_itself_is_accepted():
    r = parse_manifest(_with_memory("6Mi")).pod.containers[0].resources
    assert r.memory_limit_bytes == 6 << 20
