"""kill -9 of a process serving the CPU policy over gRPC on its journal, at
random moments of a concurrent Allocate/RemovePod sequence, then restart
(issue 10 fault tier, issue 15 "the kill -9 campaign still passes"): every
acknowledged change survives, nothing never sent appears, an in-flight
change is either wholly there or wholly absent, and the recovered state
passes the load-time validation (no CPU in two dedicated containers)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import pytest

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.checkpoint import CheckpointStore

try:
    from ._durable_helpers import ONLINE, cpu_request
except ImportError:
    from _durable_helpers import ONLINE, cpu_request

pytestmark = pytest.mark.fault

TRIALS = 5
CLIENTS = 8

SERVER = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, {helpers!r})
    from _durable_helpers import CPUServer
    from pathlib import Path

    async def main(d):
        async with CPUServer(Path(d)) as s:
            print(s.sock, flush=True)
            await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1]))
""")


async def _clients(sock: str, trial: int, log: dict, stop_at: float) -> None:
    async def one(c: int) -> None:
        rng = random.Random(trial * 100 + c)
        async with grpc.aio.insecure_channel(f"unix://{sock}") as ch:
            stub = pb_grpc.ResourcePluginStub(ch)
            i = 0
            while time.monotonic() < stop_at:
                uid = f"t{trial}-c{c}-{i}"
                i += 1
                ded = rng.random() < 0.3
                req = cpu_request(uid, "dedicated_cores" if ded else None, 1, hint=[c % 4] if ded else None)
                log[uid] = ["A?"]
                try:
                    await stub.Allocate(req, timeout=10)
                except grpc.aio.AioRpcError as e:
                    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                        log[uid] = ["refused"]
                        continue
                    return  # the server died mid-call: in flight
                log[uid] = ["A"]
                if rng.random() < 0.5:
                    log[uid].append("R?")
                    try:
                        await stub.RemovePod(pb.RemovePodRequest(pod_uid=uid), timeout=10)
                    except grpc.aio.AioRpcError:
                        return
                    log[uid][-1] = "R"

    await asyncio.gather(*(one(c) for c in range(CLIENTS)), return_exceptions=True)


def test_kill_minus_nine_during_grpc_allocations_loses_and_resurrects_nothing(tmp_path):
    helpers = str(Path(__file__).parent)
    script = tmp_path / "server.py"
    script.write_text(SERVER.format(helpers=helpers))
    state_dir = tmp_path / "cpu"
    state_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), helpers])}
    rng = random.Random(7)
    expect_present: set[str] = set()  # acknowledged and not removed, from earlier trials
    acked_total = 0
    for trial in range(TRIALS):
        proc = subprocess.Popen([sys.executable, str(script), str(state_dir)], stdout=subprocess.PIPE, env=env,
                                text=True)
        try:
            sock = proc.stdout.readline().strip()
            assert sock, "the server did not start"
            log: dict[str, list[str]] = {}
            run_for = rng.uniform(0.2, 1.0)

            async def drive(sock: str, trial: int, log: dict[str, list[str]], run_for: float, proc) -> None:
                task = asyncio.ensure_future(_clients(sock, trial, log, time.monotonic() + 5))
                await asyncio.sleep(run_for)
                os.kill(proc.pid, signal.SIGKILL)  # while calls are in flight
                await task

            asyncio.run(drive(sock, trial, log, run_for, proc))
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        st = CheckpointStore(state_dir, online=ONLINE).load()  # validates meaning too
        present = set(st.entries) if st is not None else set()
        assert expect_present <= present, f"trial {trial}: lost {sorted(expect_present - present)[:5]}"
        for uid, ops in log.items():
            if ops == ["A"]:
                assert uid in present, f"trial {trial}: acknowledged allocation {uid} lost"
                acked_total += 1
            elif ops[-1] == "R":
                assert uid not in present, f"trial {trial}: acknowledged removal of {uid} undone"
                acked_total += 2
            elif ops == ["refused"]:
                assert uid not in present, f"trial {trial}: refused allocation {uid} is there"
            # "A?" or ["A", "R?"]: in flight at the kill, either outcome is allowed
        known = set(log) | expect_present
        assert present <= known, f"trial {trial}: invented {sorted(present - known)[:5]}"
        expect_present = {u for u in present}
    assert acked_total > TRIALS
