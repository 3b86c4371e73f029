#!/usr/bin/env python3
"""Build the Vagrant box the users' Vagrantfile (vagrant/Vagrantfile) boots in the test suite.

Why a box of our own: `debian/bookworm64` cannot be downloaded here, and the VM tier already
has a Debian guest: Debian's kernel, a busybox initramfs, and this machine's / read-only over
9p (tests/vm/build-image.sh). The box is that guest made into a machine Vagrant can drive:

  box.img           qcow2 (ext4): the writable layer over the host's / (upper/, work/) and
                    what Vagrant expects of a box in it: the `vagrant` user's home with
                    Vagrant's well-known insecure public key (taken from the installed vagrant
                    package; `vagrant up` replaces it at first boot), its sudoers line, and the
                    systemd units of the box's target (networkd DHCP, sshd)
  vmlinuz           the tier image's kernel
  initramfs.cpio.gz busybox + virtio/9p/overlay/ext4/virtio_net modules + vagrant_box_init.sh
  metadata.json     {"provider": "libvirt", "format": "qcow2", "virtual_size": GiB}
  Vagrantfile       the provider defaults: direct kernel boot of the files above, the 9p
                    export of / (qemu arguments), a serial console, no graphics

Cached as $HWAGENT_VM_CACHE/vagrant-<hash of inputs>.box; the same inputs give the same box
contents (fixed filesystem UUID, hash seed and timestamps), and a second call costs nothing.

    tests/vm/vagrant_box.py build     # print the .box path
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.vm import runner  # noqa: E402

#: the name vagrant/Vagrantfile's config.vm.box uses
BOX_NAME = "debian/bookworm64"
#: apt packages the box and its test need on the host (the guest runs the host's userland,
#: so its sshd and sudo are these); installed here, idempotently, like build-image.sh's
APT_PACKAGES = ("vagrant", "vagrant-libvirt", "libvirt-daemon-system", "libvirt-clients", "dnsmasq-base",
                "qemu-system-x86", "qemu-utils", "openssh-server", "sudo", "rsync", "e2fsprogs", "iptables")
#: services those packages enable on a systemd host: the test runs its own libvirtd, and the
#: host's sshd is only the guest's (both stopped and disabled right after the install)
QUIET_SERVICES = ("libvirtd.service", "libvirtd.socket", "libvirtd-ro.socket", "libvirtd-admin.socket",
                  "libvirt-guests.service", "virtlogd.service", "virtlogd.socket", "virtlockd.socket",
                  "ssh.service")
#: loaded by the box's /init, dependencies resolved by modprobe --show-depends
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "ext4", "9pnet_virtio", "9p", "overlay")
#: the vagrant user's ids inside the box (a range Debian leaves to the local admin, unlikely on a host)
VAGRANT_UID = 2900
DISK_GIB = 16
#: fixed so the same inputs build the same filesystem
DISK_UUID = "7a6e0b5c-6d61-4e2b-9f3a-686761676e74"
HASH_SEED = "3b2c1d4e-5f60-4718-8a9b-0c1d2e3f4a5b"
FAKE_TIME = "1700000000"
#: the units of the box's systemd target: what Vagrant needs (networkd's DHCP, sshd, logins
#: open: systemd-user-sessions, which pulls in sysinit/basic as on any Debian machine); the
#: host's multi-user services and getty are not the box's
UNITS = {
    "etc/systemd/system/vagrant-box.target": """\
[Unit]
Description=Vagrant box (hwagent VM tier): network, sshd
DefaultDependencies=no
Wants=systemd-journald.socket systemd-journald.service systemd-udevd.service systemd-udev-trigger.service
Wants=systemd-networkd.service vagrant-box-sshd.service systemd-user-sessions.service
After=systemd-networkd.service vagrant-box-sshd.service systemd-user-sessions.service
AllowIsolate=yes
""",
    "etc/systemd/system/vagrant-box-sshd.service": """\
[Unit]
Description=OpenSSH server of the Vagrant box
DefaultDependencies=no
# logins are open once systemd-user-sessions removed /run/nologin (systemd-tmpfiles writes it
# at boot; pam_nologin turns the vagrant user away until then)
After=systemd-journald.service systemd-user-sessions.service
[Service]
RuntimeDirectory=sshd
RuntimeDirectoryMode=0755
ExecStartPre=/usr/sbin/sshd -t
ExecStart=/usr/sbin/sshd -D -e
Restart=on-failure
""",
    "etc/systemd/network/50-vagrant-box.network": """\
[Match]
Name=en* eth*
[Network]
DHCP=ipv4
""",
}
SUDOERS = "vagrant ALL=(ALL) NOPASSWD: ALL\nDefaults:vagrant !requiretty\n"


def insecure_public_key() -> Path:
    """Vagrant's well-known insecure public key, as the installed vagrant package ships it."""
    found = sorted(glob.glob("/usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub")
                   + glob.glob("/usr/lib/ruby/vendor_ruby/vagrant*/keys/vagrant.pub"))
    if not found:
        raise runner.Unavailable("no keys/vagrant.pub in the installed vagrant package")
    return Path(found[-1])


def metadata(disk_gib: int = DISK_GIB) -> str:
    """metadata.json of a libvirt box."""
    return json.dumps({"provider": "libvirt", "format": "qcow2", "virtual_size": disk_gib}) + "\n"


def box_vagrantfile(modules: Path) -> str:
    """The box's own Vagrantfile: the provider defaults a user's Vagrantfile is merged over.

    The kernel and initramfs are files of the box (beside this Vagrantfile once `vagrant box
    add` unpacked it); the image's modules tree stays in the tier's cache, named on the kernel
    command line. qemu exports / read-only over 9p (multidevs=remap: / spans file systems). The console is
    ttyS0 (libvirt's serial, a pty); the kernel's log also goes to ttyS1, qemu's stdout, which
    libvirt keeps in /var/log/libvirt/qemu/<domain>.log (vagrant-libvirt 0.11 can set neither
    `serial` nor `qemuargs` in two Vagrantfiles: its merge fails or keeps the last one only,
    so the box's own qemu arguments carry the log port)."""
    fsdev = "local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap"
    return f"""\
# written by tests/vm/vagrant_box.py: the hwagent VM tier's guest as a Vagrant box
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.kernel = File.join(__dir__, "vmlinuz")
    lv.initrd = File.join(__dir__, "initramfs.cpio.gz")
    lv.cmd_line = "console=ttyS1 console=ttyS0 panic=-1 fstab=0 vmbox.modules={modules}"
    lv.qemuargs :value => "-fsdev"
    lv.qemuargs :value => "{fsdev}"
    lv.qemuargs :value => "-device"
    lv.qemuargs :value => "virtio-9p-pci,fsdev=fsroot,mount_tag=rootfs,bus=pci.0,addr=0x1e"
    lv.qemuargs :value => "-chardev"
    lv.qemuargs :value => "stdio,id=boxlog,signal=off"
    lv.qemuargs :value => "-device"
    lv.qemuargs :value => "isa-serial,chardev=boxlog,index=1"
    lv.graphics_type = "none"
    lv.video_type = "none"
  end
end
"""


def cache_key(image: runner.Image) -> str:
    """A hash of every input of the box: the tier image, this builder, the box's /init."""
    h = hashlib.sha256()
    h.update(str(image.path).encode())
    for f in (Path(__file__), HERE / "vagrant_box_init.sh", insecure_public_key()):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _missing_packages() -> list[str]:
    out = []
    for p in APT_PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
        if "install ok installed" not in r.stdout:
            out.append(p)
    return out


def install_packages() -> None:
    """apt-get install what is missing (root only); then quiet the services it enabled."""
    missing = _missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        raise runner.Unavailable(f"not root and missing apt packages: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise runner.Unavailable(f"apt-get install {' '.join(missing)} failed: {p.stderr[-500:]}")
    if Path("/run/systemd/system").is_dir():
        subprocess.run(["systemctl", "disable", "--now", "--quiet", *QUIET_SERVICES], capture_output=True)


def _initramfs(image: runner.Image, work: Path, dst: Path) -> None:
    root = work / "initramfs"
    (root / "bin").mkdir(parents=True)
    (root / "modules").mkdir()
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    depmod = work / "depmod" / "lib" / "modules"
    depmod.mkdir(parents=True)
    (depmod / image.kver).symlink_to(image.modules)
    show = subprocess.run(["modprobe", "-d", str(work / "depmod"), "-S", image.kver, "-a", "--show-depends",
                           *INITRAMFS_MODULES], capture_output=True, text=True, check=True).stdout
    order: list[str] = []
    for line in show.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "insmod" and Path(parts[1]).name not in order:
            shutil.copy2(parts[1], root / "modules" / Path(parts[1]).name)
            order.append(Path(parts[1]).name)
    if not order:
        raise RuntimeError(f"no modules resolved for {INITRAMFS_MODULES}")
    (root / "modules" / "order").write_text("\n".join(order) + "\n")
    shutil.copy2(HERE / "vagrant_box_init.sh", root / "init")
    (root / "init").chmod(0o755)
    (root / "kver").write_text(image.kver + "\n")
    (root / "vagrant-ids").write_text(f"{VAGRANT_UID}:{VAGRANT_UID}\n")
    files = subprocess.run(["find", ".", "-print0"], cwd=root, capture_output=True, check=True).stdout
    files = b"\0".join(sorted(files.rstrip(b"\0").split(b"\0"))) + b"\0"
    cpio = subprocess.run(["cpio", "-o", "-0", "-H", "newc", "--quiet", "--reproducible"], cwd=root, input=files,
                          capture_output=True, check=True).stdout
    dst.write_bytes(subprocess.run(["gzip", "-n", "-1"], input=cpio, capture_output=True, check=True).stdout)


def _disk(work: Path, dst: Path) -> None:
    """qcow2 of an ext4 file system made from a staged tree (mkfs.ext4 -d: no loop device, no mount)."""
    fs = work / "fs"
    upper = fs / "upper"
    (fs / "work").mkdir(parents=True)
    home = upper / "home" / "vagrant"
    (home / ".ssh").mkdir(parents=True)
    shutil.copyfile(insecure_public_key(), home / ".ssh" / "authorized_keys")
    (home / ".ssh").chmod(0o700)
    (home / ".ssh" / "authorized_keys").chmod(0o600)
    for p in (home, home / ".ssh", home / ".ssh" / "authorized_keys"):
        os.lchown(p, VAGRANT_UID, VAGRANT_UID)
    sudoers = upper / "etc" / "sudoers.d" / "vagrant"
    sudoers.parent.mkdir(parents=True)
    sudoers.write_text(SUDOERS)
    sudoers.chmod(0o440)
    for rel, text in UNITS.items():
        (upper / rel).parent.mkdir(parents=True, exist_ok=True)
        (upper / rel).write_text(text)
    for d in (upper / "etc", upper / "etc" / "systemd", upper / "home"):
        d.chmod(0o755)
    raw = work / "disk.raw"
    env = {**os.environ, "E2FSPROGS_FAKE_TIME": FAKE_TIME}
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "vagrant-box", "-U", DISK_UUID, "-E",
                    f"hash_seed={HASH_SEED},root_owner=0:0", "-d", str(fs), str(raw), f"{DISK_GIB}G"],
                   env=env, check=True, capture_output=True)
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(dst)], check=True, capture_output=True)


@dataclass(frozen=True)
class Box:
    path: Path
    name: str = BOX_NAME


def build_box(image: runner.Image | None = None) -> Box:
    """Build (or reuse) the box for the tier's image; Unavailable when the host cannot."""
    install_packages()
    image = image or runner.build_image()
    cache = image.path.parent
    dst = cache / f"vagrant-{cache_key(image)}.box"
    if dst.exists():
        return Box(dst)
    with tempfile.TemporaryDirectory(prefix=".vagrant-box.", dir=cache) as tmp:
        work = Path(tmp)
        box = work / "box"
        box.mkdir()
        shutil.copy2(image.vmlinuz, box / "vmlinuz")
        _initramfs(image, work, box / "initramfs.cpio.gz")
        _disk(work, box / "box.img")
        (box / "metadata.json").write_text(metadata())
        (box / "Vagrantfile").write_text(box_vagrantfile(image.modules))
        part = work / "out.box"
        with tarfile.open(part, "w:gz") as tar:
            for name in ("metadata.json", "Vagrantfile", "vmlinuz", "initramfs.cpio.gz", "box.img"):
                info = tar.gettarinfo(box / name, arcname=name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = int(FAKE_TIME), 0, 0, "root", "root"
                with open(box / name, "rb") as f:
                    tar.addfile(info, f)
        for old in cache.glob("vagrant-*.box"):
            old.unlink()
        os.replace(part, dst)
    return Box(dst)


def main(argv: list[str]) -> int:
    if argv[1:] != ["build"]:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    try:
        print(build_box().path)
    except runner.Unavailable as e:
        print(f"vagrant box unavailable: {e}", file=sys.stderr)
        return runner.UNAVAILABLE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
