"""A stand-in daemon for the kill -9 tests: runs the runtime in its own process.

``driver.py ROOT SUBTREE MODE``. Statuses go to ROOT/status.jsonl (flushed
before returning, as the registry persists before it answers); admitted pods
to ROOT/admitted/<uid>.pkl (removed once their terminal status is recorded:
what admission's registry would still hold). MODE ``steady`` starts three pods
and waits; ``reclaimed`` starts a reclaimed and a shared pod and waits; ``churn`` launches and stops pods in a loop until killed; ``slowstop``
starts a pod that ignores SIGTERM and stops it with a grace period.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from agent.cgroups.config import derived_reclaimed_subtree  # noqa: E402
from agent.cgroups.detect import detect  # noqa: E402
from agent.cgroups.workload import WorkloadCgroups  # noqa: E402
from agent.contracts.pods import QOS_RECLAIMED  # noqa: E402
from agent.runtime.runtime import WorkloadRuntime  # noqa: E402
from tests.integration.runtime.conftest import FAST, make_pod  # noqa: E402


SLOW_STOP_GRACE_S = 5.0


class FileSink:
    def __init__(self, root: Path) -> None:
        self.f = open(root / "status.jsonl", "a")
        self.admitted = root / "admitted"
        self.admitted.mkdir(exist_ok=True)

    def admit(self, pod) -> None:
        tmp = self.admitted / f".{pod.uid}.tmp"
        tmp.write_bytes(pickle.dumps(pod))
        os.replace(tmp, self.admitted / f"{pod.uid}.pkl")

    async def pod_status_changed(self, uid, status) -> None:
        self.f.write(json.dumps({"uid": uid, "phase": status.phase.value, "reason": status.reason,
                                 "containers": [[c.name, c.state.value, c.exit_code, c.restart_count]
                                                for c in status.containers]}) + "\n")
        self.f.flush()
        if status.phase.terminal:
            (self.admitted / f"{uid}.pkl").unlink(missing_ok=True)


async def main(root: Path, subtree: str, mode: str) -> None:
    sink = FileSink(root)
    cgroups = WorkloadCgroups(detect(), subtree, reclaimed_subtree=derived_reclaimed_subtree(subtree))
    rt = WorkloadRuntime(FAST, cgroups, root, lambda: sink)
    if mode == "steady":
        pods = [
            make_pod("runner", ["sleep", "300"], restart="Always"),
            make_pod("quitter", ["sh", "-c", f"while [ ! -e {root}/quit ]; do sleep 0.05; done; exit 3"]),
            make_pod("polite", ["sh", "-c", f"trap 'exit 0' TERM; touch {root}/polite; while :; do sleep 0.05; done"]),
        ]
        for p in pods:
            sink.admit(p)
            await rt.run(p)
        while not (root / "polite").exists():  # its trap is set
            await asyncio.sleep(0.02)
        print("ready", flush=True)
        await asyncio.Event().wait()
    if mode == "reclaimed":
        # a reclaimed pod (its cgroups in the reclaimed subtree) and a shared one
        for p in (make_pod("hog", ["sleep", "300"], qos=QOS_RECLAIMED), make_pod("ls", ["sleep", "300"])):
            sink.admit(p)
            await rt.run(p)
        print("ready", flush=True)
        await asyncio.Event().wait()
    if mode == "slowstop":
        # ignores SIGTERM: only the end of its grace period ends it
        p = make_pod("stubborn", ["sh", "-c", f"trap '' TERM; touch {root}/armed; while :; do sleep 0.05; done"])
        sink.admit(p)
        await rt.run(p)
        while not (root / "armed").exists():
            await asyncio.sleep(0.02)
        print("ready", flush=True)
        await rt.stop(p.uid, SLOW_STOP_GRACE_S)
        await asyncio.Event().wait()
    i = 0
    live: list = []
    while True:
        i += 1
        p = make_pod(f"churn{i}", ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done"])
        sink.admit(p)
        await rt.run(p)
        live.append(p)
        if i == 3:
            print("ready", flush=True)
        if len(live) > 3:
            await rt.stop(live.pop(0).uid, 0.5)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
