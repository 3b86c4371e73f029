"""The users' Vagrantfile boots for real: what vagrant/README.md tells a user, run here.

`vagrant up --provider libvirt` of vagrant/Vagrantfile, unmodified, with only what a user on a
host without usable KVM also sets (HWAGENT_VAGRANT_DRIVER=qemu: libvirt's domain type qemu);
its provisioning (vagrant/provision.sh, the qemu tier's script); `vagrant ssh -c 'curl -s
127.0.0.1:9464/healthz; sudo hwagent topology'` showing the two NUMA nodes the Vagrantfile
declares; the VM tier's guest tests through `vagrant ssh`; `vagrant halt`; `vagrant destroy`.

What the test brings that a user's host has already: the box `debian/bookworm64`, built from
the VM tier's guest image (tests/vm/vagrant_box.py: no box can be downloaded here), and a
libvirtd with a management network of the test's own (tests/vm/libvirt_host.py), torn down
after, leaving no domain, volume, network, bridge, box or iptables chain behind.

Budgets: `vagrant up` gets UP_TIMEOUT_S stretched by the host's load as the tier's guests are
(runner.MAX_TIMEOUT_STRETCH at most); every later step's budget is a host figure scaled by
this machine's measured guest/host slowdown (tests/vm/calibrate.py, measured in the VM right
after `up`); the guest tests get the tier's per-guest timeout, stretched alike; all of it
inside what is left of the VM tier's budget (runner.TierBudget). Timings are printed in the
VM tier's summary beside the qemu guests'.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.vm import calibrate, runner, vagrant_box
from tests.vm.conftest import record_vm_timing
from tests.vm.libvirt_host import Libvirt, libvirt_chains, private_libvirtd
from tests.vm.topologies import TOPOLOGIES

#: each step is cut by its own budget (Session.vagrant) or the tier's end first; this is the backstop
pytestmark = [pytest.mark.vm, pytest.mark.slow, pytest.mark.root,
              pytest.mark.timeout(int(runner.TIER_BUDGET_S) + 600),
              # opt-in until it has passed beside the whole tier several times: one run is ~27 min
              # under TCG on 2 cores, passed once in three while it was built, and shares the tier's
              # budget with the qemu guests (issue 36 keeps it open)
              pytest.mark.skipif(os.environ.get("HWAGENT_VAGRANT_BOOT") != "1",
                                 reason="the Vagrant boot runs with HWAGENT_VAGRANT_BOOT=1 (about 27 min under TCG)")]

REPO = Path(__file__).resolve().parents[2]
VAGRANT_DIR = REPO / "vagrant"
#: `vagrant up` (boot, key swap, rsync of the checkout, provisioning with the .venv's build)
#: took 1213 s and 1310 s under TCG on a 2-core host at load 6-20 (pip's install of the venv
#: is ~10 min of it); stretched by the load per CPU, up to runner.MAX_TIMEOUT_STRETCH
UP_TIMEOUT_S = 1200.0
#: host-side seconds of the short steps, scaled by the guest's measured slowdown
SSH_HOST_S = 20.0
HALT_HOST_S = 20.0
#: guest test files that need what only the qemu tier's numa2 guest has: PCI devices behind
#: expander bridges on both nodes (devices, workloads, DRA), or a machine where hwagent is not
#: yet provisioned (hwagent_run runs provision.sh itself; here vagrant up already did)
NOT_IN_VAGRANT = ("test_devices.py", "test_workloads.py", "test_dra.py", "test_slurm_conf.py", "test_hwagent_run.py")
#: the README's guest-test command (HWAGENT_VM_HOST_LOOP_S: the host's reference loop, so the
#: guest scales its budgets by its own speed, as in the qemu tier). The provisioned unit is
#: stopped first: the guest tests start daemons of their own on the same cgroup subtree, and
#: the systemd guest's test starts the unit itself with the emulator's drop-in
GUEST_TESTS = ("cd /hwagent && sudo systemctl stop hwagent && sudo HWAGENT_VM_GUEST=1 HWAGENT_VM_TOPOLOGY=numa2 HWAGENT_VM_CGROUP=v2 "
               "HWAGENT_VM_HOST_LOOP_S={loop} .venv/bin/python -m pytest -q -p no:cacheprovider tests/vm/guest -m vm "
               + " ".join(f"--ignore=tests/vm/guest/{f}" for f in NOT_IN_VAGRANT))
PREFIX = f"hwvt{os.getpid() % 100000}"


@dataclass
class Session:
    """One Vagrant environment of the test: its own VAGRANT_HOME, dotfile dir and libvirtd."""

    libvirt: Libvirt
    root: Path
    env: dict[str, str]
    tier: runner.TierBudget
    #: qemu tier guests this session runs after the Vagrant machine (each keeps its reserve)
    guests_after: int = 0
    ratio: float = 1.0
    timings: dict[str, float] = field(default_factory=dict)

    def vagrant(self, *args: str, budget_s: float, step: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run `vagrant ARGS` in the checkout's vagrant/, cut at budget_s or the tier's end."""
        limit = max(1.0, min(budget_s, self.tier.not_after(self.guests_after) - time.monotonic()))
        t0 = time.monotonic()
        try:
            p = subprocess.run(["vagrant", *args], cwd=VAGRANT_DIR, env=self.env, text=True, capture_output=True,
                               timeout=limit)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            raise AssertionError(f"vagrant {' '.join(args)}: no answer within {limit:.0f}s "
                                 f"(budget {budget_s:.0f}s)\n{out[-3000:]}\n{self.console_tail()}") from None
        self.timings[step or args[0]] = time.monotonic() - t0
        return p

    def budget(self, host_s: float) -> float:
        return calibrate.budget(host_s, self.ratio)

    def console_tail(self, lines: int = 40) -> str:
        """The box's kernel log (its ttyS1, kept by libvirt in the domain's log)."""
        logs = sorted((self.libvirt.root / "var_log_libvirt" / "qemu").glob("*.log"))
        if not logs:
            return "(no domain log)"
        text = logs[-1].read_text(errors="replace").splitlines()
        return f"--- {logs[-1]} ---\n" + "\n".join(text[-lines:])


def home_vagrantfile(lv: Libvirt) -> str:
    """VAGRANT_HOME's Vagrantfile (loaded before the project's): the test's own libvirtd
    network, domain prefix; the network stays the test's to remove."""
    return f"""\
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.management_network_name = "{lv.network}"
    lv.management_network_address = "{lv.subnet}"
    lv.management_network_keep = true
    lv.default_prefix = "{PREFIX}-"
  end
end
"""


def vagrant_env(root: Path, lv: Libvirt) -> dict[str, str]:
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(root),
        "LANG": "C.UTF-8",
        "VAGRANT_HOME": str(root / "vagrant.d"),
        # the machine's state outside the checkout (vagrant/.vagrant stays the user's)
        "VAGRANT_DOTFILE_PATH": str(root / "dotvagrant"),
        "VAGRANT_CHECKPOINT_DISABLE": "1",
        "VAGRANT_DEFAULT_PROVIDER": "libvirt",
        "LIBVIRT_DEFAULT_URI": lv.uri,
        # what a user without usable KVM sets (vagrant/README.md)
        "HWAGENT_VAGRANT_DRIVER": "qemu" if "kvm" not in runner.accel_args()[1] else "kvm",
    }


def tier_guests_after(request: pytest.FixtureRequest) -> int:
    """How many of the qemu tier's guest suites this pytest session runs after this module."""
    items = request.session.items
    mine = [i for i, item in enumerate(items) if getattr(item, "module", None) is request.module]
    start = mine[-1] + 1 if mine else len(items)
    return len([item for item in items[start:] if getattr(item, "originalname", None) == "test_guest_suite"])


@pytest.fixture(scope="module")
def session(request: pytest.FixtureRequest, tier_budget: runner.TierBudget) -> Iterator[Session]:
    if os.environ.get("HWAGENT_SKIP_VM") == "1":
        pytest.skip("VM tier skipped on request (HWAGENT_SKIP_VM=1)")
    if os.geteuid() != 0:
        pytest.skip("the Vagrant machine needs root (apt packages, libvirtd, 9p export of /)")
    try:
        image = runner.build_image()
        box = vagrant_box.build_box(image)
    except runner.Unavailable as e:
        pytest.skip(f"Vagrant machine unavailable on this machine: {e}")
    after = tier_guests_after(request)
    refused = tier_budget.refusal(after)
    if refused:
        pytest.fail(f"Vagrant machine: {refused}")
    root = Path(tempfile.mkdtemp(prefix="hwvt-", dir="/tmp"))  # short: libvirtd's socket path <= 108 bytes
    chains_before = libvirt_chains()
    with private_libvirtd(root / "libvirt", PREFIX) as lv:
        (root / "vagrant.d").mkdir()
        (root / "vagrant.d" / "Vagrantfile").write_text(home_vagrantfile(lv))
        s = Session(lv, root, vagrant_env(root, lv), tier_budget, after)
        added = s.vagrant("box", "add", "--name", vagrant_box.BOX_NAME, str(box.path), budget_s=300, step="box add")
        assert added.returncode == 0, added.stdout + added.stderr
        try:
            yield s
        finally:
            s.vagrant("destroy", "-f", budget_s=300, step="destroy (teardown)")
            s.vagrant("box", "remove", "-f", vagrant_box.BOX_NAME, budget_s=120, step="box remove")
            record_vm_timing("vagrant", _TimingRun(s), None)
    # nothing of the test is left on the host
    assert libvirt_chains() == chains_before
    assert not Path("/sys/class/net", lv.bridge).exists()
    shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class _TimingRun:
    """What the VM tier's summary prints for a guest, for the Vagrant machine."""

    s: Session
    cgroup: str = "v2"

    @property
    def wall_s(self) -> float:
        return sum(self.s.timings.values())

    @property
    def out_dir(self) -> Path:
        return self.s.root

    def describe(self) -> str:
        return " ".join(f"{k} {v:.0f}s" for k, v in self.s.timings.items())

    def progress(self) -> None:
        return None


def test_vagrant_up_provisions_hwagent(session: Session) -> None:
    stretch = min(runner.MAX_TIMEOUT_STRETCH, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
    p = session.vagrant("up", "--provider", "libvirt", budget_s=UP_TIMEOUT_S * stretch)
    assert p.returncode == 0, f"{p.stdout[-6000:]}\n{p.stderr[-3000:]}\n{session.console_tail()}"
    assert "provision: hwagent healthy at http://127.0.0.1:9464/healthz" in p.stdout + p.stderr, p.stdout[-4000:]
    # this machine's guest/host slowdown, measured in the VM: the later steps' budgets
    host = calibrate.loop_seconds()
    code = "from tests.vm.calibrate import loop_seconds; print(loop_seconds())"
    m = session.vagrant("ssh", "-c", f"cd /hwagent && python3 -c {shlex.quote(code)}", budget_s=600, step="calibrate")
    assert m.returncode == 0, m.stdout + m.stderr
    session.ratio = max(1.0, float(m.stdout.strip().splitlines()[-1]) / host)
    session.env["HWAGENT_VM_HOST_LOOP_S"] = f"{host:.4f}"


def test_healthz_and_topology_show_the_vagrantfiles_two_numa_nodes(session: Session) -> None:
    p = session.vagrant("ssh", "-c", "curl -s 127.0.0.1:9464/healthz; sudo hwagent topology",
                        budget_s=session.budget(SSH_HOST_S), step="ssh topology")
    assert p.returncode == 0, p.stdout + p.stderr
    numa2 = TOPOLOGIES["numa2"]
    assert re.search(r"\b2 packages\b", p.stdout) and re.search(r"\b2 NUMA nodes\b", p.stdout), p.stdout
    assert re.search(r"\b2 threads/core\b", p.stdout), p.stdout
    for i, node in enumerate(numa2.nodes):
        cpus = f"{node.cpus[0]}-{node.cpus[-1]}"
        assert re.search(rf"node {i}: .*cpus {cpus}\b", p.stdout), p.stdout


def test_guest_tests_pass_through_vagrant_ssh(session: Session) -> None:
    loop = session.env.get("HWAGENT_VM_HOST_LOOP_S", "0")
    budget = runner.DEFAULT_TIMEOUT_S * min(runner.MAX_TIMEOUT_STRETCH, max(1.0, session.ratio / 10))
    p = session.vagrant("ssh", "-c", GUEST_TESTS.format(loop=loop), budget_s=budget, step="guest tests")
    tail = "\n".join((p.stdout + p.stderr).splitlines()[-60:])
    assert p.returncode == 0, tail
    assert re.search(r"\d+ passed", tail), tail


def test_halt_then_destroy_leave_no_domain_or_volume(session: Session) -> None:
    p = session.vagrant("halt", budget_s=session.budget(HALT_HOST_S) + 60)
    assert p.returncode == 0, p.stdout + p.stderr
    status = session.vagrant("status", budget_s=120)
    assert re.search(r"default\s+shutoff", status.stdout), status.stdout
    d = session.vagrant("destroy", "-f", budget_s=300)
    assert d.returncode == 0, d.stdout + d.stderr
    assert session.libvirt.virsh("list", "--all", "--name").split() == []
    vols = session.libvirt.virsh("vol-list", "default").split()
    assert not [v for v in vols if v.startswith(PREFIX)], vols
