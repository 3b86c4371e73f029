"""The [devices] config section: which devices become which extended
resources, and what a container gets for each.

    [devices]
    default_rules = true            # GPUs, NVMe, vfio-bound SR-IOV VFs

    [[devices.resources]]
    name = "example.com/scratch"
    block_name = ["loop*"]
    env = { SCRATCH_DEVICES = "{dev_nodes}" }
    api = "dra"                     # offered through DRA only (default: "device-plugin")

Selectors of one rule must all match (each list is "any of"); a rule selects
one kind of device: PCI (pci_class/vendor/device/driver/sriov), block
(block_name) or net (net_name). Patterns are shell globs; hex ids are compared
lower-case without "0x", and a pci_class shorter than 6 digits without a glob
is a prefix ("0108" = NVMe of any prog-if).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Literal

from agent.devices.names import extended_resource_name_error
from agent.config import SectionKey

__all__ = ["DEVICES_SECTION", "MountRule", "ResourceRule", "DevicesConfig", "TEMPLATE_FIELDS", "NODE_KINDS"]

#: placeholders allowed in env and annotation values
TEMPLATE_FIELDS = ("ids", "pci_addresses", "dev_nodes", "net_ifaces", "block_devs", "numa_nodes", "resource")
#: kinds of /dev node a rule can hand out (see agent.devices.model.DevNode)
NODE_KINDS = ("block", "nvme", "drm-render", "drm-card", "vfio", "vfio-cdev")
_PCI_SELECTORS = ("pci_class", "vendor", "device", "driver")


@dataclass(frozen=True)
class MountRule:
    host_path: str = ""
    #: defaults to host_path
    container_path: str = ""
    read_only: bool = True


@dataclass(frozen=True)
class ResourceRule:
    name: str = ""
    pci_class: tuple[str, ...] = ()
    vendor: tuple[str, ...] = ()
    device: tuple[str, ...] = ()
    driver: tuple[str, ...] = ()
    #: "vf": only SR-IOV virtual functions, "not-vf": everything else
    sriov: Literal["any", "vf", "not-vf", "pf"] = "any"
    block_name: tuple[str, ...] = ()
    net_name: tuple[str, ...] = ()
    #: which of the device's own /dev nodes a container gets
    dev_nodes: tuple[str, ...] = NODE_KINDS
    #: fixed extra nodes every container with this resource gets ("/dev/vfio/vfio")
    extra_dev_nodes: tuple[str, ...] = ()
    #: cgroup device permissions: some of r, w, m
    permissions: str = "rw"
    env: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    mounts: tuple[MountRule, ...] = ()
    #: CDI kind ("vendor.com/class"): Allocate then names "<kind>=<device id>"
    cdi_kind: str = ""
    pre_start_required: bool = False
    #: the one API the devices are offered through: "device-plugin" (an extended resource, the
    #: device manager allocates) or "dra" (ResourceSlices, claims prepared by the DRA driver).
    #: Never both, so no device can be given to a container and prepared for a claim at once.
    api: Literal["device-plugin", "dra"] = "device-plugin"

    @property
    def kind(self) -> str:
        if self.block_name:
            return "block"
        if self.net_name:
            return "net"
        return "pci"

    def validate(self) -> None:
        err = extended_resource_name_error(self.name) if self.name else "a resource needs a name"
        if err:
            raise ValueError(f"resource name {err}")
        groups = [bool(self.block_name), bool(self.net_name),
                  any(getattr(self, s) for s in _PCI_SELECTORS) or self.sriov != "any"]
        if sum(groups) == 0:
            raise ValueError(f"resource {self.name!r} selects nothing: give pci_class/vendor/device/driver/sriov, "
                             "block_name or net_name")
        if sum(groups) > 1:
            raise ValueError(f"resource {self.name!r} mixes selectors of different device kinds "
                             "(pci selectors, block_name and net_name are exclusive)")
        if not self.permissions or set(self.permissions) - set("rwm"):
            raise ValueError(f"resource {self.name!r}: permissions must be some of 'rwm', got {self.permissions!r}")
        bad = sorted(set(self.dev_nodes) - set(NODE_KINDS))
        if bad:
            raise ValueError(f"resource {self.name!r}: unknown dev_nodes kind {bad[0]!r} "
                             f"(known: {', '.join(NODE_KINDS)})")
        for p in self.extra_dev_nodes:
            if not p.startswith("/dev/"):
                raise ValueError(f"resource {self.name!r}: extra_dev_nodes entry {p!r} must be under /dev/")
        for m in self.mounts:
            if not m.host_path.startswith("/") or (m.container_path and not m.container_path.startswith("/")):
                raise ValueError(f"resource {self.name!r}: mount paths must be absolute, got {m.host_path!r}")
        self._validate_templates()
        if self.cdi_kind:
            vendor, sep, cls = self.cdi_kind.partition("/")
            if not sep or not vendor or not cls or "=" in self.cdi_kind:
                raise ValueError(f"resource {self.name!r}: cdi_kind must look like 'vendor.com/class', "
                                 f"got {self.cdi_kind!r}")

    def _validate_templates(self) -> None:
        """env and annotation values may name only the known {placeholders}, unformatted."""
        for what, table in (("env", self.env), ("annotations", self.annotations)):
            for key, value in table.items():
                for _, fname, spec, conv in string.Formatter().parse(value):
                    if fname is not None and (fname not in TEMPLATE_FIELDS or spec or conv):
                        raise ValueError(
                            f"resource {self.name!r}: {what}.{key} uses unknown placeholder {{{fname}}} "
                            f"(known: {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)})")


@dataclass(frozen=True)
class DevicesConfig:
    enabled: bool = True
    #: add the built-in rules (GPUs, NVMe, vfio VFs); a resource of the same
    #: name in ``resources`` replaces the built-in one
    default_rules: bool = True
    resources: tuple[ResourceRule, ...] = ()
    #: where plugin sockets go; "" = the kubelet's device-plugins dir in
    #: kubelet mode, <root_dir>/device-plugins in standalone mode
    plugin_dir: str = ""
    #: the Registration socket; "" = kubelet.sock in plugin_dir
    registration_socket: str = ""
    hotplug: bool = True
    dev_root: str = "/dev"
    register_backoff_initial_s: float = 0.1
    register_backoff_max_s: float = 5.0
    #: how often the registration socket is checked for a re-create (kubelet restart)
    socket_check_interval_s: float = 0.5

    def validate(self) -> None:
        seen: set[str] = set()
        for r in self.resources:
            if r.name in seen:
                raise ValueError(f"resource {r.name!r} is configured twice")
            seen.add(r.name)
        for p in (self.plugin_dir, self.registration_socket):
            if p and not p.startswith("/"):
                raise ValueError(f"paths must be absolute, got {p!r}")
        if self.register_backoff_initial_s <= 0 or self.register_backoff_max_s < self.register_backoff_initial_s:
            raise ValueError("need 0 < register_backoff_initial_s <= register_backoff_max_s")
        if self.socket_check_interval_s <= 0:
            raise ValueError("socket_check_interval_s must be positive")


#: ``config[DEVICES_SECTION]``, the [devices] section
DEVICES_SECTION: SectionKey[DevicesConfig] = SectionKey("devices", DevicesConfig)
