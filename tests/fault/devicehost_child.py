"""The device host under test in its own process, for the kill -9 campaign.

Runs a real DeviceManager + Registration server (the integration tier's
harness) and a fake plugin, then allocates and releases pods at random until it
is killed. Every operation is written to the ack file before it starts
(``begin``) and after it returned (``done``); a release counts as done once the
checkpoint has been flushed, which is the host's contract for it.

    python -m tests.fault.devicehost_child BASE SEED ACKFILE
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

from agent.contracts.devices import ContainerRequest
from agent.devicemanager.selection import AllocationError
from tests.integration.devicemanager.fakeplugin import FakePlugin, dev
from tests.integration.devicemanager.harness import RES, host, until

DEVICES = 6


async def main(base: Path, seed: int, ack_path: Path) -> None:
    rng = random.Random(seed)
    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def ack(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    async with host(base) as h:
        for a in h.manager.allocations():
            ack(f"have {a.pod_uid} {','.join(a.device_ids)}")
        p = FakePlugin(h.sock("p.sock"), [dev(f"d{i}", numa=[i % 2]) for i in range(DEVICES)])
        await p.start()
        await p.register(h.socket, RES)
        await until(lambda: h.cap() == (DEVICES, DEVICES), timeout=60)
        ack("ready")
        n = 0
        while True:
            held = sorted({a.pod_uid for a in h.manager.allocations()})
            if held and (rng.random() < 0.4 or len(held) >= DEVICES):
                uid = rng.choice(held)
                ack(f"begin release {uid}")
                h.manager.release_pod(uid)
                await h.manager.flush_checkpoint()
                ack(f"done release {uid}")
            else:
                uid = f"s{seed}-{n}"
                n += 1
                ack(f"begin alloc {uid}")
                try:
                    got = await h.manager.allocate(ContainerRequest(uid, "c", {RES: rng.choice((1, 1, 2))}))
                except AllocationError as e:
                    ack(f"failed alloc {uid} {e.code}")
                    continue
                ack(f"done alloc {uid} {','.join(got.devices(RES))}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
