"""A device that becomes managed while a pod runs is denied to that pod too (issue 32 item 8).

A container's device rules are written when it starts, for the managed set of that moment. A
device that joins the set later (plugged in, a claim's node no rule offers, a glob that matches
more) must be closed to the containers already running, or a pod that started first could open
the device another pod is given now. The runtime writes the running containers' rules again when
the set grows: the v1 devices controller, and on v2 the BPF program attached again."""

from __future__ import annotations

import asyncio

import pytest

from agent.contracts.pods import ContainerState, PodPhase
from agent.runtime.config import RuntimeConfig

from .conftest import FAST, make_pod
from .test_runtime import loops, read_log  # noqa: F401 - loops is a fixture

pytestmark = [pytest.mark.timeout(120), pytest.mark.root]

#: waits for its go file, then opens each path and prints "<path> ok|<errno name>"
PROBE = ("import errno, os, sys, time\n"
         "while not os.path.exists(sys.argv[1]):\n"
         "    time.sleep(0.05)\n"
         "for p in sys.argv[2:]:\n"
         "    try:\n"
         "        os.close(os.open(p, os.O_RDONLY)); print(p, 'ok')\n"
         "    except OSError as e:\n"
         "        print(p, errno.errorcode[e.errno])\n")


@pytest.mark.parametrize("enforcer", ["v1", "bpf"])
def test_a_device_managed_after_a_pod_started_is_denied_to_it(env, loops, tmp_path, enforcer):  # noqa: F811
    from agent.cgroups.devbpf import DevicePrograms
    from agent.cgroups.workload import WorkloadCgroups
    from agent.contracts.pods import DeviceGrant, DeviceNode

    if enforcer == "bpf":
        pytest.importorskip("bcc")
    first, later = loops
    managed = [first]

    async def go():
        rt = env.runtime(RuntimeConfig(**{**vars(FAST), "device_policy": "managed"}),
                         managed_devices=lambda: list(managed))
        if enforcer == "bpf":
            cg = WorkloadCgroups(env.layout, env.subtree, DevicePrograms())
            cg.hierarchies = [h for h in cg.hierarchies if "devices" not in h.controllers]
            rt.cgroups = cg
        go_file = tmp_path / "go"
        early = make_pod("early", ["/usr/bin/python3", "-S", "-c", PROBE, str(go_file), first, later])
        await rt.run(early)
        await env.sink.wait(early.uid, lambda s: s.containers and s.containers[0].state == ContainerState.RUNNING)
        # `later` joins the set (a claim's node, a plugged device): a pod that holds it starts
        managed.append(later)
        holder = make_pod("holder", ["/usr/bin/python3", "-S", "-c", PROBE, "/", later],
                          grant=DeviceGrant(devices=(DeviceNode(later, later, "rw"),)))
        await rt.run(holder)
        st = await env.sink.wait(holder.uid, lambda s: s.phase.terminal)
        assert st.phase == PodPhase.SUCCEEDED, st
        assert read_log(env, holder).split() == [later, "ok"]
        go_file.write_text("")
        st = await env.sink.wait(early.uid, lambda s: s.phase.terminal)
        assert st.phase == PodPhase.SUCCEEDED, st
        out = dict(line.split(" ", 1) for line in read_log(env, early).splitlines())
        assert out == {first: "EPERM", later: "EPERM"}, out

    asyncio.run(go())
