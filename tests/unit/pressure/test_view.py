"""`hwagent probes`' rows name the pod (issue 37 item 12): a row was a cgroup path holding the
pod's UID (``/hwagent/pod3f2a.../main``), which a person cannot tie to `hwagent ps`' names."""

from __future__ import annotations

from agent.pressure.view import pod_of, render

UID = "3f2a9c1e-0b7d-4c55-9e1a-2b6f0c8d9e71"
PODS = {UID: "default/web", "11111111-2222-3333-4444-555555555555": "team/batch"}


def test_a_runtime_pods_cgroup_is_named_by_pod_and_container() -> None:
    assert pod_of(f"/hwagent-runtime/pod{UID}/main", PODS) == "default/web main"
    assert pod_of(f"/hwagent-runtime/pod{UID}", PODS) == "default/web"


def test_a_kubelet_pods_cgroup_both_drivers() -> None:
    cid = "a" * 64
    assert pod_of(f"/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/{cid}", PODS) == \
        "team/batch " + cid[:12]
    systemd = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11111111_2222_3333_4444_555555555555" \
              f".slice/cri-containerd-{cid}.scope"
    assert pod_of(systemd, PODS).startswith("team/batch ")


def test_unknown_and_non_pod_cgroups_have_no_name() -> None:
    assert pod_of("/system.slice/sshd.service", PODS) is None
    assert pod_of(f"/x/pod{'9' * 8}-0000-0000-0000-000000000000/main", PODS) is None  # not a pod the daemon has
    assert pod_of("/", PODS) is None and pod_of("(other)", PODS) is None


def test_render_puts_the_pod_first() -> None:
    s = {"probes": {"runqlat": "bpf"}, "block": {}, "net": {}, "unhealthy": {}, "evictions": 0,
         "cgroups": [{"cgroup": f"/hwagent-runtime/pod{UID}/main", "pod": "default/web main", "wait_s_per_s": 0.5,
                      "switch_ins": 10, "p99_us": 64.0},
                     {"cgroup": "/", "pod": None, "wait_s_per_s": 0.1, "switch_ins": 3, "p99_us": None}]}
    lines = render(s).splitlines()
    assert lines[1].split()[:2] == ["POD", "CGROUP"]
    assert lines[2].startswith("default/web main") and lines[3].startswith("-")
