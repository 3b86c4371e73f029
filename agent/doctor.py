"""Checks of what the probes need from the machine, each with the exact fix.

Pure over roots (procfs, sysfs, /lib/modules, /boot, the kubelet's root dir) so fixture trees test it;
only the bcc import check touches the running interpreter.
"""

from __future__ import annotations

import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.detect import DEFAULT_CGROUP_ROOT, CgroupError, cgroup_mount_root, detect

__all__ = ["Check", "run_checks", "read_kernel_config", "kubelet_cpu_manager_check"]

#: option -> (why the agent needs it, severity if missing)
KERNEL_OPTIONS = {
    "CONFIG_BPF_SYSCALL": ("BPF programs at all", "error"),
    "CONFIG_BPF_EVENTS": ("BPF programs on tracepoints", "error"),
    "CONFIG_DEBUG_INFO_BTF": ("struct offsets for the run-queue probe (task -> cgroup)", "error"),
    "CONFIG_SCHED_INFO": ("/proc/<tid>/schedstat run_delay (fallback and ground truth)", "warn"),
    "CONFIG_PSI": ("PSI cpu pressure (second signal)", "warn"),
    "CONFIG_BLK_DEV_IO_TRACE": ("block tracepoints are always there; this adds blktrace", "info"),
}


#: what ``hwagent doctor`` says of each hierarchy layout agent.cgroups.detect finds
_CGROUP_MODES = {
    "v2": "cgroup v2 (unified)",
    "hybrid": "hybrid (v1 controllers + v2 at fs/cgroup/unified); pods keyed on v1 cpu",
    "v1": "cgroup v1",
}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    severity: str = "error"  # error | warn | info (only matters when not ok)


def read_kernel_config(release: str, procfs_root: str = "/proc", boot_root: str = "/boot") -> tuple[dict[str, str], str]:
    """(options, where from); empty when neither /proc/config.gz nor /boot/config-<release> exists."""
    gz = Path(procfs_root) / "config.gz"
    text, where = None, ""
    try:
        text = gzip.decompress(gz.read_bytes()).decode()
        where = str(gz)
    except OSError:
        p = Path(boot_root) / f"config-{release}"
        try:
            text = p.read_text()
            where = str(p)
        except OSError:
            return {}, ""
    opts = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, _, v = line.partition("=")
            opts[k] = v
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            opts[line[2:].split()[0]] = "n"
    return opts, where


def kubelet_cpu_manager_check(kubelet_root: str) -> Check:
    """The kubelet's CPU manager must be none where hwagent places pods through NRI
    (agent.kubelet.cpumanager: hwagent refuses to place while it is static)."""
    from agent.kubelet.cpumanager import check

    v = check(kubelet_root)
    return Check("kubelet cpu manager", not v.conflict and v.certain, v.detail, v.fix, "warn")


def run_checks(
    release: str,
    procfs_root: str = "/proc",
    sysfs_root: str = "/sys",
    modules_root: str = "/lib/modules",
    boot_root: str = "/boot",
    check_bcc: bool = True,
    kubelet_root: str = "/var/lib/kubelet",
) -> list[Check]:
    out: list[Check] = []
    opts, where = read_kernel_config(release, procfs_root, boot_root)
    if not where:
        out.append(Check("kernel config", False, f"neither {procfs_root}/config.gz nor {boot_root}/config-{release}",
                         "modprobe configs (for /proc/config.gz) or install the kernel's config file", "warn"))
    else:
        for opt, (why, sev) in KERNEL_OPTIONS.items():
            v = opts.get(opt, "n")
            ok = v in ("y", "m")
            out.append(Check(opt, ok, f"{opt}={v} ({where}): {why}",
                             "" if ok else f"rebuild the kernel with {opt}=y", sev))
        kp = opts.get("CONFIG_KPROBES", "n")
        out.append(Check("CONFIG_KPROBES", True, f"CONFIG_KPROBES={kp}: not needed, the probes use tracepoints only",
                         severity="info"))

    btf = Path(sysfs_root) / "kernel" / "btf" / "vmlinux"
    out.append(Check("BTF", btf.is_file(), f"{btf} {'present' if btf.is_file() else 'missing'}",
                     "" if btf.is_file() else "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y"))

    tracefs = None
    for cand in (Path(sysfs_root) / "kernel" / "tracing", Path(sysfs_root) / "kernel" / "debug" / "tracing"):
        if (cand / "events").is_dir():
            tracefs = cand
            break
    out.append(Check("tracefs", tracefs is not None,
                     f"mounted at {tracefs}" if tracefs else f"{sysfs_root}/kernel/tracing/events not found",
                     "" if tracefs else "mount -t tracefs nodev /sys/kernel/tracing (scripts/setup.sh does it)"))
    if tracefs is not None:
        from agent.pressure.probes import PROBES  # noqa: PLC0415 - light module

        for spec in PROBES.values():
            missing = [tp for tp, _ in spec.attach
                       if not (tracefs / "events" / tp.replace(":", "/") / "format").is_file()]
            out.append(Check(f"tracepoints:{spec.name}", not missing,
                             "all present" if not missing else f"missing {', '.join(missing)}",
                             "" if not missing else "kernel lacks them: the probe falls back (see hwagent probes)",
                             "warn"))

    kdir = Path(modules_root) / release
    for link in ("build", "source"):
        p = kdir / link
        ok = p.exists()
        out.append(Check(f"headers:{link}", ok, f"{p} -> {p.resolve() if ok else 'missing'}",
                         "" if ok else (f"apt-get install linux-headers-amd64 && ln -sfn /usr/src/linux-headers-<ver>-"
                                        f"{'amd64' if link == 'build' else 'common'} {p} (scripts/setup.sh does it)")))
    out.append(Check("headers:match", True,
                     "bcc only needs headers to build; struct offsets come from BTF, so a version mismatch is fine",
                     severity="info"))

    if check_bcc:
        found = importlib.util.find_spec("bcc") is not None
        out.append(Check("bcc", found, "python module bcc importable" if found else "python module bcc not found",
                         "" if found else "apt-get install python3-bpfcc and use a venv with --system-site-packages"))

    try:
        layout = detect(cgroup_mount_root(sysfs_root))
        mode, fix = _CGROUP_MODES[layout.mode], ""
    except CgroupError:
        mode, fix = "no cgroup hierarchy found", f"mount cgroup v2 at {DEFAULT_CGROUP_ROOT}"
    out.append(Check("cgroup mode", not fix, mode, fix))

    psi = Path(procfs_root) / "pressure" / "cpu"
    ok = psi.is_file()
    try:
        psi.read_text()
    except OSError:
        ok = False
    out.append(Check("PSI", ok, f"{psi} {'readable' if ok else 'missing'}",
                     "" if ok else "boot with psi=1 (kernel needs CONFIG_PSI=y)", "warn"))
    sched = Path(procfs_root) / "self" / "schedstat"
    out.append(Check("schedstat", sched.is_file(), f"{sched} {'present' if sched.is_file() else 'missing'}",
                     "" if sched.is_file() else "kernel needs CONFIG_SCHED_INFO=y", "warn"))
    out.append(kubelet_cpu_manager_check(kubelet_root))
    return out
