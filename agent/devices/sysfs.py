"""Read the device inventory from a sysfs tree (the live /sys or a fixture).

Every function takes the sysfs root, so the hwloc snapshots, hand-built trees
in tests and the live machine go through the same code. Missing files are
normal (old kernels, fixtures that captured only part of a tree) and read as
"unknown"; nothing here raises for a device it cannot fully read - it records
a warning instead, so one odd device never hides the others.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from agent.cpuset import CPUSet, CPUSetError
from agent.devices.model import Device, DevNode, Inventory, PCIInfo
from agent.eventlog import get_logger
from agent.fsread import read_int, read_stripped

__all__ = [
    "read_inventory",
    "read_pci_device",
    "read_block_device",
    "read_net_device",
    "read_device",
    "pci_dirs",
    "block_dirs",
    "net_dirs",
    "PCI_ADDRESS",
]

log = get_logger("hwagent.devices")

#: domain may be 4 or more hex digits (32-bit domains exist, see 2pa-pcidomain32bits)
PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
#: how deep below a PCI function its class devices may sit: pci/virtio2/net/eth0,
#: pci/nvme/nvme0/nvme0n1, pci/ata1/host0/target0:0:0/0:0:0:0/block/sda
_CHILD_DEPTH = 7
#: attribute dirs that never contain class devices (and can be large)
_SKIP_DIRS = frozenset({"power", "msi_irqs", "queues", "queue", "mq", "holders", "slaves", "statistics",
                        "trace", "integrity", "bdi", "subsystem", "driver", "firmware_node", "iommu"})


def _link_name(path: Path) -> str | None:
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def _hex(path: Path, width: int) -> str:
    raw = read_stripped(path)
    if not raw:
        return ""
    raw = raw.lower().removeprefix("0x")
    return raw.zfill(width)[-width:]


def _uevent(path: Path) -> dict[str, str]:
    raw = read_stripped(path / "uevent") or ""
    out = {}
    for line in raw.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def _devt(path: Path) -> tuple[int | None, int | None]:
    raw = read_stripped(path / "dev")
    if raw and ":" in raw:
        a, _, b = raw.partition(":")
        if a.isdigit() and b.isdigit():
            return int(a), int(b)
    return None, None


def _dev_path(path: Path, default_name: str, dev_root: str) -> str:
    name = _uevent(path).get("DEVNAME") or default_name
    return name if name.startswith("/") else f"{dev_root}/{name}"


def _local_cpus(path: Path) -> CPUSet | None:
    """The mask file first: it is what hwloc reads, and the two disagree in
    a hand-edited snapshot (2pa-pcidomain32bits); the kernel writes both
    from the same cpumask."""
    for name, parse in (("local_cpus", CPUSet.from_mask), ("local_cpulist", CPUSet.parse)):
        text = read_stripped(path / name)
        if text:
            try:
                return parse(text)
            except CPUSetError:
                continue
    return None


def _numa(path: Path) -> int | None:
    n = read_int(path / "numa_node")
    return n if n is not None and n >= 0 else None


def _revision(path: Path) -> str:
    rev = _hex(path / "revision", 2)
    if rev:
        return rev
    try:
        with open(path / "config", "rb") as f:
            head = f.read(9)
        # fixtures sometimes carry an empty config file; the live kernel gives 64+ bytes
        return f"{head[8]:02x}" if len(head) > 8 else ""
    except OSError:
        return ""


def _real(root: Path, link: Path) -> Path:
    """Resolve a sysfs symlink. Relative links resolve inside a fixture root
    by themselves; an absolute one ("/sys/devices/...") is re-rooted."""
    target = os.readlink(link) if link.is_symlink() else None
    if target and target.startswith("/sys/") and str(root) != "/sys":
        return Path(os.path.realpath(root / target.removeprefix("/sys/")))
    return Path(os.path.realpath(link))


def _parent_pci(real: Path) -> str | None:
    for part in reversed(real.parts[:-1]):
        if PCI_ADDRESS.match(part):
            return part
    return None


def _pci_children(path: Path, dev_root: str) -> tuple[list[DevNode], list[str], list[str]]:
    """Class devices below one PCI function: /dev nodes, disks, interfaces.

    Walks real directories only (not symlinks) and stops at nested PCI
    functions, which are devices of their own (behind a bridge)."""
    nodes: list[DevNode] = []
    disks: list[str] = []
    ifaces: list[str] = []
    stack = [(path, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if not e.is_dir(follow_symlinks=False) or PCI_ADDRESS.match(e.name) or e.name in _SKIP_DIRS:
                continue
            child = Path(e.path)
            kind = d.name
            if kind == "block" and not (child / "partition").exists():
                disks.append(e.name)
                mj, mn = _devt(child)
                nodes.append(DevNode(_dev_path(child, e.name, dev_root), "block", mj, mn))
                continue
            if kind == "net":
                ifaces.append(e.name)
                continue
            if kind == "drm" and (e.name.startswith("renderD") or re.fullmatch(r"card\d+", e.name)):
                mj, mn = _devt(child)
                nk = "drm-render" if e.name.startswith("renderD") else "drm-card"
                nodes.append(DevNode(_dev_path(child, f"dri/{e.name}", dev_root), nk, mj, mn))
                continue
            if kind in ("nvme", "misc") and re.fullmatch(r"nvme\d+", e.name):
                mj, mn = _devt(child)
                nodes.append(DevNode(_dev_path(child, e.name, dev_root), "nvme", mj, mn))
                # namespaces (nvme0n1) live below the controller on newer kernels
            if kind == "vfio-dev" and re.fullmatch(r"vfio\d+", e.name):
                mj, mn = _devt(child)
                nodes.append(DevNode(_dev_path(child, f"vfio/devices/{e.name}", dev_root), "vfio-cdev", mj, mn))
                continue
            if depth + 1 < _CHILD_DEPTH:
                stack.append((child, depth + 1))
    nodes.sort(key=lambda n: n.path)
    return nodes, sorted(set(disks)), sorted(set(ifaces))


def read_pci_device(path: Path, dev_root: str = "/dev") -> Device:
    """One PCI function from its (real) sysfs directory."""
    address = path.name
    driver = _link_name(path / "driver")
    iommu = _link_name(path / "iommu_group")
    virtfns = []
    for e in path.glob("virtfn*"):
        idx = e.name.removeprefix("virtfn")
        target = _link_name(e)
        if idx.isdigit() and target:
            virtfns.append((int(idx), target))
    info = PCIInfo(
        address=address,
        vendor=_hex(path / "vendor", 4),
        device=_hex(path / "device", 4),
        class_code=_hex(path / "class", 6),
        subsystem_vendor=_hex(path / "subsystem_vendor", 4),
        subsystem_device=_hex(path / "subsystem_device", 4),
        revision=_revision(path),
        iommu_group=int(iommu) if iommu and iommu.isdigit() else None,
        physfn=_link_name(path / "physfn"),
        virtfns=tuple(a for _, a in sorted(virtfns)),
        sriov_totalvfs=read_int(path / "sriov_totalvfs"),
        sriov_numvfs=read_int(path / "sriov_numvfs"),
    )
    nodes, disks, ifaces = _pci_children(path, dev_root)
    if driver == "vfio-pci" and info.iommu_group is not None:
        nodes.append(DevNode(f"{dev_root}/vfio/{info.iommu_group}", "vfio"))
    return Device(
        id=address,
        kind="pci",
        name=address,
        sysfs_path=str(path),
        driver=driver,
        numa_node=_numa(path),
        local_cpus=_local_cpus(path),
        pci=info,
        dev_nodes=tuple(nodes),
        block_children=tuple(disks),
        net_children=tuple(ifaces),
    )


def _parent_locality(root: Path, parent: str | None) -> tuple[int | None, CPUSet | None]:
    if parent is None:
        return None, None
    p = root / "bus" / "pci" / "devices" / parent
    return _numa(p), _local_cpus(p)


def read_block_device(root: Path, path: Path, dev_root: str = "/dev") -> Device:
    mj, mn = _devt(path)
    devt = f"{mj}:{mn}" if mj is not None else None
    return _class_device(root, path, "block", devt=devt,
                         dev_nodes=(DevNode(_dev_path(path, path.name, dev_root), "block", mj, mn),))


def read_net_device(root: Path, path: Path) -> Device:
    return _class_device(root, path, "net")


def _class_device(root: Path, path: Path, kind: str, devt: str | None = None,
                  dev_nodes: tuple[DevNode, ...] = ()) -> Device:
    """A block or net device: named by its class entry, placed by the PCI function above it."""
    parent = _parent_pci(path)
    numa, cpus = _parent_locality(root, parent)
    return Device(
        id=path.name,
        kind=kind,
        name=path.name,
        sysfs_path=str(path),
        driver=_link_name(path / "device" / "driver"),
        numa_node=numa,
        local_cpus=cpus,
        parent_pci=parent,
        devt=devt,
        dev_nodes=dev_nodes,
    )


def _links(root: Path, *dirs: str) -> list[Path]:
    out: dict[str, Path] = {}
    for rel in dirs:
        base = root / rel
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name not in out:
                out[e.name] = _real(root, Path(e.path))
    return list(out.values())


def pci_dirs(root: Path) -> list[Path]:
    return [p for p in _links(root, "bus/pci/devices") if PCI_ADDRESS.match(p.name)]


def block_dirs(root: Path) -> list[Path]:
    """Whole disks: /sys/class/block also lists partitions, /sys/block (old
    kernels, some fixtures) does not."""
    return [p for p in _links(root, "class/block", "block") if not (p / "partition").exists()]


def net_dirs(root: Path) -> list[Path]:
    return _links(root, "class/net")


def build_inventory(root: Path, pci: Iterable[Path], block: Iterable[Path], net: Iterable[Path],
                    dev_root: str = "/dev") -> Inventory:
    """The shared back half of the sysfs and udev readers."""
    devices: dict[str, Device] = {}
    warnings: list[str] = []

    def add(dev: Device) -> None:
        if dev.id in devices:
            warnings.append(f"duplicate device id {dev.id!r} ({dev.kind} and {devices[dev.id].kind}); kept the first")
            return
        devices[dev.id] = dev

    for p in pci:
        add(read_pci_device(p, dev_root))
    for p in block:
        if not p.exists():  # raced with removal
            continue
        add(read_block_device(root, p, dev_root))
    for p in net:
        if not p.exists():
            continue
        add(read_net_device(root, p))
    for w in warnings:
        log.warning("inventory warning", warning=w)
    return Inventory(devices, tuple(warnings))


def read_device(sysfs_root: str | Path, subsystem: str, name: str, dev_root: str = "/dev") -> Device | None:
    """One device by subsystem ("pci", "block", "net") and kernel name, as a
    uevent names it; None when it is gone or is not a device here (a partition)."""
    root = Path(sysfs_root)
    link = {"pci": root / "bus/pci/devices", "block": root / "class/block", "net": root / "class/net"}[subsystem] / name
    if not link.exists():
        return None
    real = _real(root, link)
    if subsystem == "pci":
        return read_pci_device(real, dev_root)
    if subsystem == "block":
        return None if (real / "partition").exists() else read_block_device(root, real, dev_root)
    return read_net_device(root, real)


def read_inventory(sysfs_root: str | Path = "/sys", dev_root: str = "/dev") -> Inventory:
    """Every PCI function, whole disk and network interface under a sysfs root."""
    root = Path(sysfs_root)
    return build_inventory(root, pci_dirs(root), block_dirs(root), net_dirs(root), dev_root)
