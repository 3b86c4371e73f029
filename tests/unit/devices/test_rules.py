"""Resource rules: config validation, matching, one-resource-per-device,
sticky membership on driver unbind, and what a container gets."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, loads
from agent.devices.config import DevicesConfig, MountRule, ResourceRule
from agent.devices.names import extended_resource_name_error, is_extended_resource_name
from agent.devices.rules import (DEFAULT_RULES, RuleConflictError, assign, effective_rules, grant, offered_nodes,
                                 identity_matches)
from agent.devices.sysfs import read_inventory
from tests.unit.devices.fakesysfs import FakeSysfs


@pytest.mark.parametrize("name", ["example.com/gpu", "hwagent.io/nvme", "a.b-c.d/x_y.z-1", "x/y",
                                  "nvidia.com/mig-1g.5gb"])
def test_valid_extended_names(name):
    assert is_extended_resource_name(name), extended_resource_name_error(name)


@pytest.mark.parametrize("name,why", [
    ("gpu", "domain prefix"),
    ("kubernetes.io/gpu", "kubernetes.io"),
    ("foo.kubernetes.io/gpu", "kubernetes.io"),
    ("requests.example.com/gpu", "requests."),
    ("Example.com/gpu", "qualified"),
    ("example.com/", "qualified"),
    ("example.com/-gpu", "qualified"),
    ("example.com/a/b", "qualified"),
    ("example.com/" + "x" * 64, "63"),
    ("exa_mple.com/gpu", "qualified"),
])
def test_invalid_extended_names(name, why):
    err = extended_resource_name_error(name)
    assert err is not None and why in err


def test_defaults_are_valid_and_disjoint_by_construction():
    for r in DEFAULT_RULES:
        r.validate()
    assert len({r.name for r in DEFAULT_RULES}) == len(DEFAULT_RULES)


def test_config_section_parses_resources_and_errors_name_the_key():
    cfg = loads('''
[devices]
default_rules = false
[[devices.resources]]
name = "example.com/scratch"
block_name = ["loop*"]
permissions = "rwm"
env = { SCRATCH = "{dev_nodes}" }
mounts = [{ host_path = "/srv/scratch", read_only = false }]
''').sections["devices"]
    (rule,) = cfg.resources
    assert rule.kind == "block" and rule.permissions == "rwm" and rule.mounts[0].host_path == "/srv/scratch"
    assert effective_rules(cfg) == (rule,)
    bad = [
        ('name = "scratch"\nblock_name = ["loop*"]', "domain prefix"),
        ('name = "a.io/x"', "selects nothing"),
        ('name = "a.io/x"\nblock_name = ["l*"]\nnet_name = ["d*"]', "mixes selectors"),
        ('name = "a.io/x"\nblock_name = ["l*"]\npermissions = "rx"', "permissions"),
        ('name = "a.io/x"\nblock_name = ["l*"]\nenv = { A = "{nope}" }', "unknown placeholder {nope}"),
        ('name = "a.io/x"\nblock_name = ["l*"]\ndev_nodes = ["tty"]', "unknown dev_nodes"),
        ('name = "a.io/x"\nblock_name = ["l*"]\ncdi_kind = "novendor"', "cdi_kind"),
        ('name = "a.io/x"\nblock_nam = ["l*"]', "block_nam"),
        ('name = "a.io/x"\nblock_name = "l*"', "expected a list"),
    ]
    for body, why in bad:
        with pytest.raises(ConfigError, match="devices.resources\\[0\\]") as e:
            loads("[[devices.resources]]\n" + body)
        assert why in str(e.value), (body, str(e.value))
        if why == "block_nam":
            assert "unknown key" in str(e.value)
    with pytest.raises(ConfigError, match="configured twice"):
        loads('[[devices.resources]]\nname="a.io/x"\nblock_name=["a"]\n[[devices.resources]]\nname="a.io/x"\nnet_name=["b"]')


def test_user_rule_replaces_default_of_same_name():
    mine = ResourceRule(name="hwagent.io/nvme", pci_class=("0108",), dev_nodes=("block",))
    rules = effective_rules(DevicesConfig(resources=(mine,)))
    assert [r for r in rules if r.name == "hwagent.io/nvme"] == [mine]
    assert len(rules) == len(DEFAULT_RULES)
    assert effective_rules(DevicesConfig(default_rules=False)) == ()


@pytest.fixture
def fs(tmp_path):
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:3b:00.0", vendor="15b3", device="1017", driver="mlx5_core", numa=1, iommu=30, totalvfs=4)
    fs.vf("0000:3b:00.0", 0, "0000:3b:00.2", vendor="15b3", device="1018", driver="vfio-pci", numa=1, iommu=31)
    fs.vf("0000:3b:00.0", 1, "0000:3b:00.3", vendor="15b3", device="1018", driver="vfio-pci", numa=1, iommu=32)
    fs.pci("0000:65:00.0", vendor="10de", device="20b0", cls="030200", driver="nvidia", numa=0)
    fs.child("0000:65:00.0", "drm/renderD128", dev="226:128", devname="dri/renderD128")
    fs.pci("0000:66:00.0", vendor="1002", device="740f", cls="038000", driver="amdgpu", numa=1)
    fs.child("0000:66:00.0", "drm/renderD129", dev="226:129", devname="dri/renderD129")
    fs.pci("0000:00:02.0", vendor="8086", device="a780", cls="030000", driver="i915", numa=0)
    fs.pci("0000:5e:00.0", vendor="144d", device="a808", cls="010802", driver="nvme", numa=0)
    fs.child("0000:5e:00.0", "nvme/nvme0", dev="240:0", devname="nvme0")
    fs.child("0000:5e:00.0", "nvme/nvme0/block/nvme0n1", dev="259:0", devname="nvme0n1")
    fs.virtual_block("loop3", "7:3")
    fs.virtual_net("dummy0")
    return fs


def test_default_rules_on_a_typical_node(fs):
    a = assign(read_inventory(fs.root), DEFAULT_RULES)
    assert dict(a.members) == {
        "hwagent.io/gpu-amd": ("0000:66:00.0",),
        "hwagent.io/gpu-intel": ("0000:00:02.0",),
        "hwagent.io/gpu-nvidia": ("0000:65:00.0",),
        "hwagent.io/nvme": ("0000:5e:00.0",),
        "hwagent.io/sriov-vf": ("0000:3b:00.2", "0000:3b:00.3"),
    }
    assert not a.conflicts and not a.unhealthy


def test_two_resources_for_one_device_is_an_error(fs):
    inv = read_inventory(fs.root)
    rules = DEFAULT_RULES + (ResourceRule(name="example.com/mlx-vf", vendor=("15b3",), device=("1018",)),)
    a = assign(inv, rules)
    assert set(a.conflicts) == {"0000:3b:00.2", "0000:3b:00.3"}
    assert "hwagent.io/sriov-vf" not in a.members  # claimed devices go to neither
    with pytest.raises(RuleConflictError, match="0000:3b:00.2 is matched by hwagent.io/sriov-vf and example.com/mlx-vf"):
        a.raise_conflicts()


def test_block_child_of_a_claimed_pci_function_conflicts(fs):
    inv = read_inventory(fs.root)
    a = assign(inv, DEFAULT_RULES + (ResourceRule(name="example.com/disk", block_name=("nvme*",)),))
    assert a.conflicts == {"nvme0n1": ("hwagent.io/nvme", "example.com/disk")}
    assert a.members["hwagent.io/nvme"] == ("0000:5e:00.0",)


def test_driver_unbind_keeps_device_unhealthy_and_rebind_heals(fs):
    rules = DEFAULT_RULES
    first = assign(read_inventory(fs.root), rules)
    fs.unbind("0000:3b:00.2")
    second = assign(read_inventory(fs.root), rules, first.owner_map())
    assert second.members["hwagent.io/sriov-vf"] == ("0000:3b:00.2", "0000:3b:00.3")
    assert second.unhealthy == {"0000:3b:00.2": "driver unbound"}
    fs.bind("0000:3b:00.2", "mlx5_core")
    third = assign(read_inventory(fs.root), rules, second.owner_map())
    assert third.unhealthy == {"0000:3b:00.2": "driver mlx5_core is not one of vfio-pci"}
    # without history the same device is simply not a member
    assert "0000:3b:00.2" not in assign(read_inventory(fs.root), rules).owner_map()
    fs.bind("0000:3b:00.2", "vfio-pci")
    assert not assign(read_inventory(fs.root), rules, third.owner_map()).unhealthy


def test_patterns(fs):
    inv = read_inventory(fs.root)
    gpu = inv.get("0000:65:00.0")
    for rule, ok in [
        (ResourceRule(name="a.io/x", pci_class=("0302",)), True),
        (ResourceRule(name="a.io/x", pci_class=("0x030200",)), True),
        (ResourceRule(name="a.io/x", pci_class=("03??00",)), True),
        (ResourceRule(name="a.io/x", pci_class=("0300",)), False),
        (ResourceRule(name="a.io/x", vendor=("0x10DE",), device=("20b*",)), True),
        (ResourceRule(name="a.io/x", vendor=("10de",), sriov="vf"), False),
        (ResourceRule(name="a.io/x", block_name=("*",)), False),
    ]:
        assert identity_matches(rule, gpu) is ok, rule
    assert identity_matches(ResourceRule(name="a.io/x", net_name=("dummy*",)), inv.get("dummy0"))
    assert identity_matches(ResourceRule(name="a.io/x", sriov="pf"), inv.get("0000:3b:00.0"))


def test_grant_contents(fs):
    inv = read_inventory(fs.root)
    vf_rule = next(r for r in DEFAULT_RULES if r.name == "hwagent.io/sriov-vf")
    g = grant(vf_rule, [inv.get("0000:3b:00.2"), inv.get("0000:3b:00.3")])
    assert [d.host_path for d in g.devices] == ["/dev/vfio/31", "/dev/vfio/32", "/dev/vfio/vfio"]
    assert {d.permissions for d in g.devices} == {"rw"}
    assert g.envs["PCIDEVICE_HWAGENT_IO_SRIOV_VF"] == "0000:3b:00.2,0000:3b:00.3"
    assert g.envs["HWAGENT_HWAGENT_IO_SRIOV_VF_IDS"] == "0000:3b:00.2,0000:3b:00.3"
    nv = next(r for r in DEFAULT_RULES if r.name == "hwagent.io/gpu-nvidia")
    g = grant(nv, [inv.get("0000:65:00.0")])
    assert [d.host_path for d in g.devices] == ["/dev/dri/renderD128"]
    assert g.cdi_devices == ("nvidia.com/gpu=0000:65:00.0",)
    custom = ResourceRule(name="example.com/scratch", block_name=("loop*",), permissions="r",
                          env={"DISKS": "{block_devs}", "NUMA": "{numa_nodes}", "R": "{resource}"},
                          annotations={"example.com/nodes": "{dev_nodes}"},
                          mounts=(MountRule(host_path="/srv/x"),), extra_dev_nodes=("/dev/fuse",))
    g = grant(custom, [inv.get("loop3")])
    assert [(d.host_path, d.permissions) for d in g.devices] == [("/dev/loop3", "r"), ("/dev/fuse", "r")]
    assert g.envs["DISKS"] == "loop3" and g.envs["NUMA"] == "" and g.envs["R"] == "example.com/scratch"
    assert g.annotations == {"example.com/nodes": "/dev/loop3,/dev/fuse"}
    assert g.mounts == (MountRule("/srv/x", "/srv/x", True),)


def test_offered_nodes_are_every_device_of_every_rule_through_either_api_held_or_not(fs):
    """The runtime's managed devices (issue 32 item 8): a DRA rule's devices count as much as a
    device plugin's, an Unhealthy member still counts (a pod may hold it), extra nodes count, and a
    device no rule offers does not."""
    rules = DEFAULT_RULES + (ResourceRule(name="example.com/scratch", block_name=("loop*",), api="dra",
                                          extra_dev_nodes=("/dev/fuse",)),)
    first = assign(read_inventory(fs.root), rules)
    fs.unbind("0000:3b:00.2")
    inv = read_inventory(fs.root)
    a = assign(inv, rules, first.owner_map())
    assert "0000:3b:00.2" in a.unhealthy
    nodes = offered_nodes(inv, rules, a)
    # the unbound function has no vfio group node left to list; its sibling's and the container node count
    assert {"/dev/loop3", "/dev/fuse", "/dev/vfio/32", "/dev/vfio/vfio",
            "/dev/dri/renderD128", "/dev/dri/renderD129"} <= set(nodes), nodes
    assert len(nodes) == len(set(nodes))
    assert offered_nodes(inv, rules, a.restricted_to(["example.com/scratch"])) == ("/dev/loop3", "/dev/fuse")
    assert offered_nodes(inv, (), a) == ()
