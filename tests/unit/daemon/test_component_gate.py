"""A component that is off is not imported (issue 24, READY).

The daemon imported every entry of COMPONENTS to ask its factory, so a standalone
start loaded the kubelet-mode components (the eviction plugin's gRPC service, the
pod directory, the memory and DRA kubelet plugins) and the advisor, off by default:
about 8 ms of CPU and 26 modules before READY for nothing. ``off_before_import``
reads the mode and the component's own section first; each entry it rules out must
be one its factory would refuse too (checked here against the real factories)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import loads
from agent.contracts import DaemonContext
from agent.daemon.daemon import COMPONENTS, load_factory, off_before_import
from agent.topology.model import synthetic

KUBELET_ONLY = ("agent.kubelet.component:factory", "agent.kubelet.evictionplugin:factory",
                "agent.memory.plugin:factory", "agent.dra.kubeletplugin.component:factory")


def test_standalone_rules_out_the_kubelet_components_and_the_advisor_that_is_off() -> None:
    cfg = loads("")
    off = {s for s in COMPONENTS if off_before_import(s, "standalone", cfg)}
    assert off == {*KUBELET_ONLY, "agent.advisor.component:factory", "agent.slurm.component:factory",
                   "agent.slurm.preempt:factory", "agent.nri.component:factory", "agent.slurm.drainer:factory"}
    assert "mode" in str(off_before_import("agent.memory.plugin:factory", "standalone", cfg))
    assert "[advisor]" in str(off_before_import("agent.advisor.component:factory", "standalone", cfg))


def test_an_enabled_advisor_and_kubelet_mode_are_imported() -> None:
    on = loads("[advisor]\nenabled = true\n")
    assert off_before_import("agent.advisor.component:factory", "standalone", on) is None
    for spec in KUBELET_ONLY:
        assert off_before_import(spec, "kubelet", loads("[dra]\nenabled = true\n")) is None
    for spec in ("agent.runtime.component:factory", "agent.workloads.component:factory",
                 "agent.devicemanager.component:factory"):
        assert off_before_import(spec, "kubelet", on) is not None


@pytest.mark.parametrize("mode", ["standalone", "kubelet"])
def test_what_the_gate_rules_out_its_factory_refuses(mode: str, tmp_path: Path) -> None:
    cfg = loads("")
    ctx = DaemonContext(cfg, tmp_path / "root", synthetic(), mode=mode)
    ruled_out = [s for s in COMPONENTS if off_before_import(s, mode, cfg)]
    assert ruled_out
    for spec in ruled_out:
        assert load_factory(spec)(ctx) is None, f"{spec} is on in {mode} mode but the gate skips it"


def test_a_standalone_start_does_not_import_what_is_off() -> None:
    gated = tuple(s.partition(":")[0] for s in (*KUBELET_ONLY, "agent.advisor.component:factory"))
    child = (
        f"import importlib, sys\nGATED = {gated!r}\n"
        "from agent.config import loads\n"
        "from agent.daemon.daemon import COMPONENTS, off_before_import\n"
        "cfg = loads('')\n"
        "for s in COMPONENTS:\n"
        "    if not off_before_import(s, 'standalone', cfg):\n"
        "        importlib.import_module(s.partition(':')[0])\n"
        "print(sorted(m for m in sys.modules if m.startswith(GATED)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
