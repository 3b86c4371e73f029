"""Resource rules: which inventory device belongs to which extended resource,
and what a container gets for a set of devices. Pure functions over
``Inventory`` and ``ResourceRule``; no I/O.

Membership is decided in two steps. A device's *identity* (class, vendor,
device id, SR-IOV role, name) says which resource it is for; its *driver*
says whether it is usable now. A device that was a member and whose driver
unbinds (or changes to one the rule does not accept) stays in its resource
as Unhealthy with a reason, instead of silently vanishing - the kubelet then
keeps counting it in capacity, and a pod holding it learns it broke.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent.devices.config import DevicesConfig, MountRule, ResourceRule
from agent.devices.model import Device, Inventory

__all__ = [
    "offered_nodes",
    "DEFAULT_RULES",
    "effective_rules",
    "offered_through",
    "identity_matches",
    "driver_matches",
    "Assignment",
    "RuleConflictError",
    "assign",
    "ContainerGrant",
    "grant",
]

DEFAULT_RULES: tuple[ResourceRule, ...] = (
    ResourceRule(
        name="hwagent.io/gpu-nvidia", pci_class=("03",), vendor=("10de",), sriov="not-vf",
        dev_nodes=("drm-render", "drm-card"), cdi_kind="nvidia.com/gpu",
    ),
    ResourceRule(
        name="hwagent.io/gpu-amd", pci_class=("03",), vendor=("1002",), sriov="not-vf",
        dev_nodes=("drm-render",), extra_dev_nodes=("/dev/kfd",),
    ),
    ResourceRule(
        name="hwagent.io/gpu-intel", pci_class=("03",), vendor=("8086",), driver=("i915", "xe"),
        sriov="not-vf", dev_nodes=("drm-render",),
    ),
    ResourceRule(
        name="hwagent.io/nvme", pci_class=("0108",), driver=("nvme",), sriov="not-vf",
        dev_nodes=("nvme", "block"),
    ),
    ResourceRule(
        name="hwagent.io/sriov-vf", sriov="vf", driver=("vfio-pci",),
        dev_nodes=("vfio", "vfio-cdev"), extra_dev_nodes=("/dev/vfio/vfio",),
    ),
)


def effective_rules(cfg: DevicesConfig) -> tuple[ResourceRule, ...]:
    """Configured rules, plus the built-in ones unless replaced by name or disabled."""
    own = {r.name for r in cfg.resources}
    base = tuple(r for r in DEFAULT_RULES if r.name not in own) if cfg.default_rules else ()
    return base + tuple(cfg.resources)


def offered_through(rules: Iterable[ResourceRule], api: str) -> frozenset[str]:
    """The resources whose devices are offered through ``api`` ("device-plugin" or "dra"): the
    device plugins serve the one set and the DRA driver the other, so a device has one owner."""
    return frozenset(r.name for r in rules if r.api == api)


def _norm_hex(p: str) -> str:
    return p.strip().lower().removeprefix("0x")


def _any_glob(value: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _class_matches(code: str, patterns: Iterable[str]) -> bool:
    for raw in patterns:
        p = _norm_hex(raw)
        if not any(c in p for c in "*?[") and len(p) < 6:
            p += "*"
        if fnmatch.fnmatchcase(code, p):
            return True
    return False


def identity_matches(rule: ResourceRule, dev: Device) -> bool:
    """Does ``dev`` belong to ``rule`` by what it is (ignoring its driver)?"""
    if rule.kind != dev.kind:
        return False
    if dev.kind == "block":
        return _any_glob(dev.name, rule.block_name)
    if dev.kind == "net":
        return _any_glob(dev.name, rule.net_name)
    pci = dev.pci
    if pci is None:
        return False
    if rule.pci_class and not _class_matches(pci.class_code, rule.pci_class):
        return False
    if rule.vendor and not _any_glob(pci.vendor, map(_norm_hex, rule.vendor)):
        return False
    if rule.device and not _any_glob(pci.device, map(_norm_hex, rule.device)):
        return False
    if rule.sriov == "vf" and not pci.is_vf:
        return False
    if rule.sriov == "not-vf" and pci.is_vf:
        return False
    if rule.sriov == "pf" and not pci.is_pf:
        return False
    return True


def driver_matches(rule: ResourceRule, dev: Device) -> bool:
    if not rule.driver:
        return True
    return dev.driver is not None and _any_glob(dev.driver, rule.driver)


class RuleConflictError(ValueError):
    """Two resources claim one device (or a device and its PCI parent)."""


@dataclass(frozen=True)
class Assignment:
    #: resource name -> member device ids (sorted)
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: device id -> why it is Unhealthy by rule (driver unbound/mismatched)
    unhealthy: Mapping[str, str] = field(default_factory=dict)
    #: device id -> the resources that claim it; such devices are in no resource
    conflicts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def owner_map(self) -> dict[str, str]:
        return {d: name for name, ids in self.members.items() for d in ids}

    def restricted_to(self, resources: Iterable[str]) -> Assignment:
        """Only these resources' members (and their rule health): what one API offers."""
        keep = frozenset(resources)
        members = {r: ids for r, ids in self.members.items() if r in keep}
        ids = {d for m in members.values() for d in m}
        return Assignment(members, {d: why for d, why in self.unhealthy.items() if d in ids}, self.conflicts)

    def raise_conflicts(self) -> None:
        if self.conflicts:
            lines = [f"{dev} is matched by {' and '.join(rs)}" for dev, rs in sorted(self.conflicts.items())]
            raise RuleConflictError("a device may belong to one resource only: " + "; ".join(lines))


def assign(inventory: Inventory, rules: Iterable[ResourceRule],
           previous: Mapping[str, str] | None = None) -> Assignment:
    """Place every device into at most one resource.

    ``previous`` (device id -> resource) keeps devices whose driver went away
    in their resource, Unhealthy. A device claimed by two rules, or a block/net
    device claimed by one rule while its PCI parent is claimed by another,
    is a conflict and goes into no resource.
    """
    rules = tuple(rules)
    by_name = {r.name: r for r in rules}
    previous = previous or {}
    owner: dict[str, str] = {}
    unhealthy: dict[str, str] = {}
    conflicts: dict[str, tuple[str, ...]] = {}
    for dev in inventory:
        claims = [r.name for r in rules if identity_matches(r, dev) and driver_matches(r, dev)]
        if len(claims) > 1:
            conflicts[dev.id] = tuple(claims)
            continue
        if claims:
            owner[dev.id] = claims[0]
            continue
        prev = by_name.get(previous.get(dev.id, ""))
        if prev is not None and identity_matches(prev, dev):
            owner[dev.id] = prev.name
            unhealthy[dev.id] = ("driver unbound" if dev.driver is None
                                 else f"driver {dev.driver} is not one of {', '.join(prev.driver)}")
    # the same hardware seen twice: nvme0n1 under a PCI function claimed elsewhere
    for dev_id, res in list(owner.items()):
        found = inventory.get(dev_id)
        parent = found.parent_pci if found else None
        if parent and parent in owner and owner[parent] != res:
            conflicts[dev_id] = (owner[parent], res)
            del owner[dev_id]
            unhealthy.pop(dev_id, None)
    members: dict[str, list[str]] = {}
    for dev_id, res in owner.items():
        members.setdefault(res, []).append(dev_id)
    return Assignment({k: tuple(sorted(v)) for k, v in sorted(members.items())}, unhealthy, conflicts)


@dataclass(frozen=True)
class NodeGrant:
    host_path: str
    container_path: str
    permissions: str


@dataclass(frozen=True)
class ContainerGrant:
    """What one container gets for its devices of one resource (the content of
    a ContainerAllocateResponse, as plain data)."""

    devices: tuple[NodeGrant, ...] = ()
    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[MountRule, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


def env_name(resource: str) -> str:
    """"example.com/fast-nvme" -> "EXAMPLE_COM_FAST_NVME" (an env-var-safe name)."""
    return "".join(c if c.isalnum() else "_" for c in resource).upper()


def default_env(rule: ResourceRule) -> dict[str, str]:
    base = env_name(rule.name)
    env = {f"HWAGENT_{base}_IDS": "{ids}"}
    if rule.kind == "pci":
        # the SR-IOV device plugin's convention, read by DPDK/vfio users
        env[f"PCIDEVICE_{base}"] = "{pci_addresses}"
    if rule.kind == "net":
        env[f"HWAGENT_{base}_IFACES"] = "{net_ifaces}"
    return env


def _template_values(rule: ResourceRule, devs: list[Device], nodes: list[str]) -> dict[str, str]:
    pci = [d.pci.address for d in devs if d.pci is not None] + [d.parent_pci for d in devs if d.parent_pci]
    ifaces = [i for d in devs for i in (d.net_children if d.kind == "pci" else (d.name,) if d.kind == "net" else ())]
    disks = [b for d in devs for b in (d.block_children if d.kind == "pci" else (d.name,) if d.kind == "block" else ())]
    numa = sorted({d.numa_node for d in devs if d.numa_node is not None})
    return {
        "ids": ",".join(d.id for d in devs),
        "pci_addresses": ",".join(dict.fromkeys(pci)),
        "dev_nodes": ",".join(nodes),
        "net_ifaces": ",".join(ifaces),
        "block_devs": ",".join(disks),
        "numa_nodes": ",".join(map(str, numa)),
        "resource": rule.name,
    }


def grant(rule: ResourceRule, devs: Iterable[Device]) -> ContainerGrant:
    """The response for one container given these devices (already validated)."""
    devs = list(devs)
    paths: dict[str, None] = {}
    for d in devs:
        for n in d.nodes_of(rule.dev_nodes):
            paths[n.path] = None
    for p in rule.extra_dev_nodes:
        paths[p] = None
    nodes = list(paths)
    values = _template_values(rule, devs, nodes)
    envs = {k: v.format_map(values) for k, v in {**default_env(rule), **rule.env}.items()}
    annotations = {k: v.format_map(values) for k, v in rule.annotations.items()}
    mounts = tuple(MountRule(m.host_path, m.container_path or m.host_path, m.read_only) for m in rule.mounts)
    cdi = tuple(f"{rule.cdi_kind}={d.id}" for d in devs) if rule.cdi_kind else ()
    return ContainerGrant(
        devices=tuple(NodeGrant(p, p, rule.permissions) for p in nodes),
        envs=envs, mounts=mounts, annotations=annotations, cdi_devices=cdi,
    )


def offered_nodes(inventory: Inventory, rules: Iterable[ResourceRule], assignment: Assignment) -> tuple[str, ...]:
    """Host paths of the device nodes of every device the rules place in a resource, through any
    API (device plugin or DRA), healthy or not, with the rules' ``extra_dev_nodes``: what hwagent
    hands out, so what the runtime denies to every container that was not given it (the
    ``managed`` device policy, docs/runtime.md). A device no pod holds yet is in it too: a pod
    started before another is given the device must not be able to open it, and keep it open."""
    by_name = {r.name: r for r in rules}
    out: dict[str, None] = {}
    for resource, ids in assignment.members.items():
        rule = by_name.get(resource)
        devs = [d for i in ids if (d := inventory.get(i)) is not None]
        if rule is not None and devs:
            out.update((n.host_path, None) for n in grant(rule, devs).devices)
    return tuple(out)
