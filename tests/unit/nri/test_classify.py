"""A container's QoS level and requests, read back from what the kubelet wrote (pure)."""

from __future__ import annotations

import pytest

from agent.nri.classify import (
    BESTEFFORT, BURSTABLE, GUARANTEED, Resources, classify, kube_qos_of, milli_from_quota, milli_from_shares,
)

KATALYST = "katalyst.kubewharf.io/qos_level"


@pytest.mark.parametrize("milli", [1, 10, 100, 250, 500, 999, 1000, 1500, 2000, 3000, 64000])
def test_shares_give_back_the_kubelets_request(milli: int) -> None:
    shares = max(2, milli * 1024 // 1000)  # the kubelet's MilliCPUToShares
    assert abs(milli_from_shares(shares) - milli) <= 1 or shares == 2
    if milli % 1000 == 0:
        assert milli_from_shares(shares) == milli  # whole CPUs come back exactly


def test_no_request_and_quota_limits() -> None:
    assert milli_from_shares(2) == milli_from_shares(None) == 0
    assert milli_from_quota(200_000, 100_000) == 2000
    assert milli_from_quota(50_000, 100_000) == 500
    assert milli_from_quota(-1, 100_000) is milli_from_quota(None, None) is None


@pytest.mark.parametrize("parent,qos", [
    ("/kubepods/besteffort/pod1234", BESTEFFORT),
    ("kubepods-besteffort-pod1234.slice", BESTEFFORT),
    ("/kubepods/burstable/pod1234", BURSTABLE),
    ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12.slice", BURSTABLE),
    ("/kubepods/pod1234", GUARANTEED),
    ("kubepods-pod1234.slice", GUARANTEED),
])
def test_kube_qos_from_the_cgroup_parent(parent: str, qos: str) -> None:
    assert kube_qos_of(parent) == qos


def test_levels_as_the_kubelet_and_katalyst_would() -> None:
    g2 = classify({}, {}, "/kubepods/podx", Resources(cpu_shares=2048, cpu_quota=200_000, cpu_period=100_000,
                                                      memory_limit=64 << 20))
    assert (g2.level, g2.kube_qos, g2.cpu_request_milli, g2.cpu_limit_milli) == ("dedicated_cores", GUARANTEED,
                                                                                  2000, 2000)
    assert g2.annotations["katalyst.kubewharf.io/memory_enhancement"] == '{"numa_binding": "true"}'
    assert g2.memory_limit_bytes == 64 << 20
    frac = classify({}, {}, "/kubepods/podx", Resources(cpu_shares=1536, cpu_quota=150_000, cpu_period=100_000))
    assert (frac.level, frac.cpu_request_milli) == ("shared_cores", 1500)
    burst = classify({}, {}, "/kubepods/burstable/podx", Resources(cpu_shares=2048))
    assert (burst.level, burst.kube_qos) == ("shared_cores", BURSTABLE)
    be = classify({}, {}, "/kubepods/besteffort/podx", Resources(cpu_shares=2))
    assert (be.level, be.cpu_request_milli) == ("reclaimed_cores", 0)
    # a Guaranteed container without CPU (e.g. only memory) is shared, never dedicated with 0 CPUs
    assert classify({}, {}, "/kubepods/podx", Resources(cpu_shares=2)).level == "shared_cores"


def test_katalyst_annotation_wins_and_its_enhancements_go_along() -> None:
    ann = {KATALYST: "reclaimed_cores", "other.io/x": "y"}
    c = classify(ann, {}, "/kubepods/podx", Resources(cpu_shares=2048))
    assert (c.level, c.kube_qos) == ("reclaimed_cores", "")
    assert c.annotations == {KATALYST: "reclaimed_cores"}
    ded = {KATALYST: "dedicated_cores", "katalyst.kubewharf.io/memory_enhancement": '{"numa_binding":"true",'
                                                                                   '"numa_exclusive":"true"}'}
    c = classify(ded, {}, "/kubepods/burstable/podx", Resources(cpu_shares=1024))
    assert c.level == "dedicated_cores"
    assert c.annotations["katalyst.kubewharf.io/memory_enhancement"] == ded["katalyst.kubewharf.io/memory_enhancement"]


@pytest.mark.parametrize("where", ["pod", "container"])
def test_opt_out(where: str) -> None:
    ann = {"hwagent.io/nri": "ignore"}
    c = classify(ann if where == "pod" else {}, ann if where == "container" else {}, "/kubepods/podx",
                 Resources(cpu_shares=2048))
    assert c.ignored and c.level == "" and "hwagent.io/nri" in c.reason
    # any other value is no opt-out
    assert not classify({"hwagent.io/nri": "yes"}, {}, "/kubepods/podx", Resources(cpu_shares=2048)).ignored


def test_hugepage_sizes_named_as_the_memory_manager_names_them() -> None:
    c = classify({}, {}, "/kubepods/podx", Resources(cpu_shares=1024, hugepages={"2MB": 4 << 20, "1GB": 0}))
    assert c.hugepages == {"hugepages-2Mi": 4 << 20}
    with pytest.raises(ValueError):
        classify({}, {}, "/kubepods/podx", Resources(hugepages={"huge": 1}))


def test_opt_out_off_by_config() -> None:
    """[nri] honor_opt_out = false: whoever may annotate a pod cannot take it off hwagent's placement."""
    ann = {"hwagent.io/nri": "ignore"}
    c = classify(ann, ann, "/kubepods/besteffort/podx", Resources(cpu_shares=2), allow_opt_out=False)
    assert not c.ignored and c.level == "reclaimed_cores"
