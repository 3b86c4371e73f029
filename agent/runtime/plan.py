"""From an admitted container to what the launcher does: cgroup limits, argv,
environment, binds (mostly pure; device nodes are stat'ed through a callable).

Everything that can be refused is refused here, before any cgroup exists: a
granted device node that vanished, a CDI name no spec defines, a memory limit
larger than the node, no CPUs. The error says which and why, and becomes the
pod's StartError.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from agent.cgroups.limits import CgroupLimits, device_rules, hugetlb_name, milli_cpu_to_quota, milli_cpu_to_shares
from agent.cpuset import CPUSet
from agent.quantity import parse_quantity
from agent.runtime.cdi import CDIError, resolve
from agent.runtime.config import RuntimeConfig
from agent.contracts.pods import DEFAULT_PATH, QOS_RECLAIMED, QOS_SHARED, AdmittedPod, ContainerAssignment, ContainerSpec, DeviceNode, RLimit, RunAs
from agent.runtime.rlimits import RLimitsUnreadable, system_limits

__all__ = ["PlanError", "LaunchPlan", "UserNode", "DevNum", "plan_container", "device_number", "BASE_ENV", "home_of"]

#: (kind "c"/"b", major, minor)
DevNum = tuple[str, int, int]

BASE_ENV = {"PATH": DEFAULT_PATH, "HOME": "/root"}


class PlanError(Exception):
    """A container that cannot be started as admitted; the message is for the user."""


@dataclass(frozen=True)
class LaunchPlan:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    #: (source, target, read_only) bind mounts made in the container's private mount namespace
    binds: tuple[tuple[str, str, bool], ...]
    limits: CgroupLimits
    #: who the workload runs as (uid, gid and supplementary groups set); None: root
    user: RunAs | None = None
    #: granted device nodes a non-root workload gets as nodes of its own (agent.runtime.usernodes)
    user_nodes: tuple[UserNode, ...] = ()
    #: the resource limits the workload starts with (the shim sets them before the drop to the user)
    rlimits: tuple[RLimit, ...] = ()


@dataclass(frozen=True)
class UserNode:
    """A granted device node a non-root workload must be able to open: the runtime makes a node
    with the same numbers, owned by the workload's user, and binds it over ``container_path``
    in the workload's mount namespace (the host's node keeps its owner and mode)."""

    container_path: str
    kind: str  # "c" or "b"
    major: int
    minor: int


def home_of(uid: int) -> tuple[str, str] | None:
    """(login name, home directory) of ``uid`` from the passwd database; None without an entry."""
    import pwd

    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return None
    return pw.pw_name, pw.pw_dir


def device_number(path: str, stat: Callable[[str], os.stat_result] = os.stat) -> DevNum | None:
    """(kind, major, minor) of a device node; None when the path is not one."""
    st = stat(path)
    if stat_mod.S_ISCHR(st.st_mode):
        return ("c", os.major(st.st_rdev), os.minor(st.st_rdev))
    if stat_mod.S_ISBLK(st.st_mode):
        return ("b", os.major(st.st_rdev), os.minor(st.st_rdev))
    return None


def _user_env(pod: AdmittedPod, passwd: Callable[[int], tuple[str, str] | None]) -> dict[str, str]:
    """HOME, USER and LOGNAME of the pod's user, as login sets them (a uid without a
    passwd entry gets / as its home: it owns none); nothing for root."""
    user = pod.spec.run_as
    if user is None:
        return {}
    if user.uid is None or user.gid is None:
        raise PlanError(f"pod {pod.spec.key} names no complete user to run as (uid {user.uid}, gid {user.gid})")
    if user.uid == 0:
        return {}
    entry = passwd(user.uid)
    name = entry[0] if entry else str(user.uid)
    return {"HOME": entry[1] if entry else "/", "USER": name, "LOGNAME": name}


def plan_container(
    pod: AdmittedPod,
    spec: ContainerSpec,
    assignment: ContainerAssignment,
    cfg: RuntimeConfig,
    *,
    all_mems: CPUSet,
    managed: Iterable[DevNum],
    node_memory: int | None,
    hugepage_sizes: Iterable[int] = (),
    stat: Callable[[str], os.stat_result] = os.stat,
    exists: Callable[[str], bool] = os.path.exists,
    passwd: Callable[[int], tuple[str, str] | None] = home_of,
    defaults: Callable[[], tuple[RLimit, ...]] = system_limits,
) -> LaunchPlan:
    if not spec.argv:
        raise PlanError(f"container {spec.name} has no command")
    if not assignment.cpus:
        raise PlanError(f"container {spec.name} was assigned no CPUs")
    res = spec.resources
    if node_memory is not None and res.memory_limit_bytes is not None and res.memory_limit_bytes > node_memory:
        raise PlanError(f"container {spec.name} memory limit {res.memory_limit_bytes} bytes exceeds "
                        f"the node's memory ({node_memory} bytes)")
    grant = assignment.grant
    try:
        cdi = resolve(grant.cdi_devices, cfg.cdi_spec_dirs)
    except CDIError as e:
        raise PlanError(str(e)) from None
    # a workload that is not root cannot open a host node that is root:disk 0660 (most are) even
    # though its devices rules allow it: it gets nodes of its own (the host's are not touched)
    own_nodes = pod.spec.run_as is not None and pod.spec.run_as.uid not in (None, 0)
    granted, binds, user_nodes = _device_nodes(grant.devices + cdi.devices, own_nodes, stat)
    for m in grant.mounts + cdi.mounts:
        if not exists(m.host_path):
            raise PlanError(f"mount source {m.host_path} (for {m.container_path}) does not exist")
        binds.append((m.host_path, m.container_path, m.read_only))
    allow, deny = device_rules(cfg.device_policy, granted, managed)
    request = res.cpu_request_milli if res.cpu_request_milli is not None else res.cpu_limit_milli
    quota = milli_cpu_to_quota(res.cpu_limit_milli) if pod.qos == QOS_SHARED else None
    needs = {"cpuset", "cpu"}
    # 0 is no limit (admission maps it so; a record kept from before it did may still say 0)
    memory_limit = res.memory_limit_bytes or None
    if memory_limit is not None:
        needs.add("memory")
    if cfg.pids_max:
        needs.add("pids")
    if allow or deny:
        needs.add("devices")
    # every page size the machine can hand out is limited, to 0 where the container asked for
    # none (as the kubelet does): else any pod could take the pages reserved for another
    asked = {_page_size(r): n for r, n in res.hugepages.items()}
    hugetlb = tuple((hugetlb_name(size), asked.get(size, 0)) for size in sorted(set(asked) | set(hugepage_sizes)))
    if hugetlb:
        needs.add("hugetlb")
    limits = CgroupLimits(
        cpus=assignment.cpus,
        mems=assignment.mems if assignment.mems else all_mems,
        cpu_shares=milli_cpu_to_shares(request),
        cpu_quota_us=quota,
        cpu_idle=pod.qos == QOS_RECLAIMED,
        memory_limit=memory_limit,
        pids_max=cfg.pids_max or None,
        device_policy=cfg.device_policy,
        device_allow=allow,
        device_deny=deny,
        hugetlb=hugetlb,
        needs=frozenset(needs),
    )
    rlimits = _rlimits(pod, defaults)
    env = {**BASE_ENV, **_user_env(pod, passwd)}
    env.update(HWAGENT_POD_NAME=pod.spec.name, HWAGENT_POD_NAMESPACE=pod.spec.namespace,
               HWAGENT_POD_UID=pod.uid, HWAGENT_CONTAINER_NAME=spec.name)
    env.update((e.name, e.value) for e in spec.env)
    env.update(grant.envs)
    env.update(cdi.env)
    return LaunchPlan(argv=spec.argv, env=env, cwd=spec.working_dir or "/", binds=tuple(binds), limits=limits,
                      user=pod.spec.run_as, user_nodes=tuple(user_nodes), rlimits=rlimits)


def _rlimits(pod: AdmittedPod, defaults: Callable[[], tuple[RLimit, ...]]) -> tuple[RLimit, ...]:
    """The limits its submitter had (the pod's record); with none recorded (a static manifest, a
    record from before), the system's defaults, PID 1's: never the daemon's own, which it raised
    at start (agent.daemon.fdlimit). Unreadable defaults refuse the start rather than leak those."""
    if pod.spec.rlimits:
        return pod.spec.rlimits
    try:
        return defaults()
    except RLimitsUnreadable as e:
        raise PlanError(f"pod {pod.spec.key}: no resource limits to start it with: {e}") from None


def _device_nodes(nodes: Iterable[DeviceNode], own_nodes: bool, stat: Callable[[str], os.stat_result]
                  ) -> tuple[list[tuple[str, int, int, str]], list[tuple[str, str, bool]], list[UserNode]]:
    """The granted nodes' (kind, major, minor, permissions) for the devices rules, the binds that put
    a node under another name, and with ``own_nodes`` (a non-root workload) the nodes to make for it
    (which then need no bind of the host's node)."""
    granted: list[tuple[str, int, int, str]] = []
    binds: list[tuple[str, str, bool]] = []
    user_nodes: list[UserNode] = []
    for n in nodes:
        try:
            num = device_number(n.host_path, stat)
        except OSError as e:
            raise PlanError(f"granted device node {n.host_path} is gone: {e.strerror}") from None
        if num is None:
            raise PlanError(f"granted device {n.host_path} is not a device node")
        granted.append((*num, n.permissions))
        if own_nodes:
            user_nodes.append(UserNode(n.container_path, *num))
        elif n.container_path != n.host_path:
            binds.append((n.host_path, n.container_path, False))
    return granted, binds, user_nodes


def _page_size(resource: str) -> int:
    """The page size of ``hugepages-<size>`` (the manifest checked the name)."""
    q = parse_quantity(resource[len("hugepages-"):])
    return int(q)
