"""The build child, the descriptors and the syscall-level map access, on the real kernel."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.pressure.bpfmaps import possible_cpus
from agent.pressure.probes import ProbeSet, default_probes_dir

pytestmark = [pytest.mark.root, pytest.mark.bpf]

REPO = Path(__file__).resolve().parents[3]


def _probes_copy(tmp_path: Path) -> Path:
    d = tmp_path / "probes"
    shutil.copytree(default_probes_dir(), d)
    return d


def test_the_loading_process_never_maps_llvm():
    """bcc/LLVM live only in the build child: the process holding the probes has none of it."""
    pytest.importorskip("bcc")
    code = (
        "import json, sys\n"
        "from agent.pressure.probes import ProbeSet\n"
        "ps = ProbeSet(['irq', 'runqlat'], hierarchy='v2'); ps.load()\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(json.dumps({'states': {n: ps.states[n].state for n in ('irq', 'runqlat')},\n"
        "                  'llvm': 'libLLVM' in maps or 'libclang' in maps, 'bcc': 'bcc' in sys.modules}))\n"
        "ps.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["states"] == {"irq": "bpf", "runqlat": "bpf"}, out.stderr
    assert not got["llvm"] and not got["bcc"]


def test_a_probe_that_does_not_compile_is_isolated(tmp_path):
    pytest.importorskip("bcc")
    d = _probes_copy(tmp_path)
    (d / "irq.c").write_text((d / "irq.c").read_text() + "\nint irq_broken(void *ctx) { return undefined_thing; }\n")
    ps = ProbeSet(["irq", "netdev"], probes_dir=d)
    ps.load()
    try:
        assert ps.states["irq"].state == "unavailable"
        assert "compile failed" in ps.states["irq"].detail and "undefined_thing" in ps.states["irq"].detail
        assert ps.active("netdev"), ps.states["netdev"]
        assert ps.table("net_stats").max_entries == 256  # the kernel's view of the map netdev.c declares
    finally:
        ps.close()


def test_a_kernel_prototype_other_than_the_descriptor_says_is_refused_before_compiling(tmp_path):
    d = _probes_copy(tmp_path)
    text = (d / "runqlat.toml").read_text()
    (d / "runqlat.toml").write_text(text.replace('"unsigned int"]', '"unsigned long"]'))
    ps = ProbeSet(["runqlat"], probes_dir=d, hierarchy="v2")
    ps.load()
    assert ps.states["runqlat"].state == "unavailable"
    assert "expects (_Bool, struct task_struct *, struct task_struct *, unsigned long)" in ps.states["runqlat"].detail
    assert ps.bpf is None  # nothing was built


def test_a_missing_descriptor_leaves_the_probe_unavailable(tmp_path):
    d = _probes_copy(tmp_path)
    (d / "iommu.toml").unlink()
    ps = ProbeSet(["iommu"], probes_dir=d)
    ps.load()
    assert ps.states["iommu"].state == "unavailable"
    assert "cannot read probe descriptor" in ps.states["iommu"].detail


def test_maps_read_and_write_through_plain_syscalls(probe_set):
    over = probe_set.constant("runqlat", "RQ_OVERFLOW_CGID")
    cg = probe_set.table("rq_cgroups")
    assert over in [k for k, _ in cg.items()], "the loader seeds the overflow row"
    assert len(cg[over].slots) == 32 and cg.max_entries == probe_set.max_cgroups

    errs = probe_set.table("blk_errors")
    key = errs.Key(dev=0xFFFFF, op=4, error=-5)
    errs[key] = 41
    assert errs[key] == 41
    assert (bytes(key), 41) in [(bytes(k), v) for k, v in errs.items()]
    del errs[key]
    with pytest.raises(KeyError):
        errs[key]
    with pytest.raises(KeyError):
        del errs[key]

    drops = probe_set.table("rq_drops")
    rows = dict(drops.items())
    assert set(rows) == {0, 1} and all(len(v) == possible_cpus() for v in rows.values())
    with pytest.raises(KeyError, match="array"):
        del drops[0]


def test_detach_and_attach_again_without_rebuilding(probe_set):
    fds = dict(probe_set.bpf.programs)
    probe_set.detach("irq")
    assert not probe_set.active("irq")
    probe_set.attach("irq")
    assert probe_set.active("irq") and probe_set.bpf.programs == fds
