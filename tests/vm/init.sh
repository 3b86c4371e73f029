#!/bin/busybox sh
# /init of the VM test tier's initramfs (busybox). Why it exists: the guest boots Debian's
# kernel with no disk; it needs the 9p/virtio/overlay modules loaded before it can reach
# its root, which is the host's / shared read-only over 9p with a tmpfs overlay on top.
#
# Kernel command line (set by tests/vm/runner.py):
#   vmtest.cgroup=v2|v1|hybrid|none   cgroup layout mounted at /sys/fs/cgroup
#   vmtest.modules=PATH               host path of the image's modules/ tree (bind-mounted
#                                     over /lib/modules/$KVER, headers links included)
#   vmtest.cwd=PATH                   directory the command starts in (the checkout)
# 9p tags: rootfs (host /, read-only), out (host results dir, read-write).
# The command is /out/cmd.sh (written by the host); its exit status goes to /out/rc and
# to the console as VMTEST-RC=<n>; then the guest powers off. Any setup failure prints
# VMTEST-FAIL and powers off, so the host never waits for its timeout on a broken boot.
/bin/busybox mkdir -p /proc /sys /dev /sbin /usr/bin /usr/sbin /lower /ovl /newroot
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

say() { echo "VMTEST: $*"; }
up() { cut -d' ' -f1 /proc/uptime; }
die() {
    echo "VMTEST-FAIL: $* (at $(up)s)"
    [ -d /newroot/out/. ] && echo "$*" > /newroot/out/init-failed 2>/dev/null
    sync
    poweroff -f
}

CGROUP=none MODULES= CWD=/ INIT=busybox
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        vmtest.init=*) INIT="${arg#vmtest.init=}" ;;
        vmtest.cgroup=*) CGROUP="${arg#vmtest.cgroup=}" ;;
        vmtest.modules=*) MODULES="${arg#vmtest.modules=}" ;;
        vmtest.cwd=*) CWD="${arg#vmtest.cwd=}" ;;
    esac
done
KVER="$(cat /kver)"

for m in $(cat /modules/order); do
    insmod "/modules/$m" || die "insmod $m"
done
say "initramfs up at $(up)s, kernel $KVER"

P9="trans=virtio,version=9p2000.L,msize=262144"
mount -t 9p -o "$P9,ro,cache=loose" rootfs /lower || die "mount 9p rootfs"
mount -t tmpfs -o mode=755 tmpfs /ovl || die "mount tmpfs"
mkdir -p /ovl/upper /ovl/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/ovl/upper,workdir=/ovl/work /newroot ||
    die "mount overlay"
R=/newroot
mkdir -p $R/out
mount -t 9p -o "$P9" out $R/out || die "mount 9p out"
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
# Fresh /tmp and /run, except where the checkout lives under one of them (CI may
# clone into /tmp): that one stays the host's, writable through the overlay.
scratch_tmpfs() {
    case "$CWD/" in
        "$1"/*) say "keeping the host's $1: the checkout $CWD is under it" ;;
        *) mount -t tmpfs -o "mode=$2" tmpfs "$R$1" ;;
    esac
}
scratch_tmpfs /tmp 1777
scratch_tmpfs /run 755
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
mount -t bpf bpf $R/sys/fs/bpf 2>/dev/null
if [ -n "$MODULES" ]; then
    mkdir -p "$R/lib/modules/$KVER"
    mount --bind "$R$MODULES" "$R/lib/modules/$KVER" || die "bind modules $MODULES"
fi

CG=$R/sys/fs/cgroup
[ "$INIT" = systemd ] && CGROUP=systemd  # systemd mounts the unified hierarchy itself
mount_v1() {
    mount -t tmpfs -o mode=755 cgroup $CG || die "tmpfs at /sys/fs/cgroup"
    # systemd's v1 layout: joint cpu,cpuacct and net_cls,net_prio with alias links
    for c in cpuset cpu,cpuacct blkio memory devices freezer net_cls,net_prio perf_event hugetlb pids rdma misc; do
        mkdir -p $CG/$c
        mount -t cgroup -o $c cgroup $CG/$c || die "mount cgroup v1 $c"
    done
    ln -s cpu,cpuacct $CG/cpu; ln -s cpu,cpuacct $CG/cpuacct
    ln -s net_cls,net_prio $CG/net_cls; ln -s net_cls,net_prio $CG/net_prio
    mkdir -p $CG/systemd
    mount -t cgroup -o none,name=systemd cgroup $CG/systemd || die "mount cgroup v1 name=systemd"
}
case "$CGROUP" in
    v2)
        mount -t cgroup2 -o nsdelegate cgroup2 $CG || die "mount cgroup2"
        echo "+cpuset +cpu +io +memory +pids" > $CG/cgroup.subtree_control || die "enable v2 controllers"
        ;;
    v1) mount_v1 ;;
    hybrid)
        mount_v1
        mkdir -p $CG/unified
        mount -t cgroup2 -o nsdelegate cgroup2 $CG/unified || die "mount cgroup2 (hybrid)"
        ;;
    none|systemd) ;;
    *) die "unknown vmtest.cgroup=$CGROUP" ;;
esac
# coldplug, as udev would at boot: load the drivers of the devices present (virtio_blk,
# virtio_net...) from the image's modules tree, so /sys/block, /sys/class/net and /dev fill in
# (+ loop: a node's /dev/loop-control exists from boot, kmod static nodes; tests use losetup)
chroot $R /bin/sh -c '{ cat /sys/bus/*/devices/*/modalias 2>/dev/null; echo loop; } | sort -u | xargs -r modprobe -q -a -b' ||
    say "coldplug: no module for some devices (usual on q35)"
hostname vmtest
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
say "root ready at $(up)s, cgroup=$CGROUP, cwd=$CWD"

[ -f $R/out/cmd.sh ] || die "no /out/cmd.sh"
if [ "$INIT" = systemd ]; then
    # The host's systemd becomes PID 1 over the overlay and runs the command as a unit of
    # its own target: nothing of the host's boot (no getty, no sshd, no enabled services)
    # starts, only journald and what the command starts. Its exit status comes back the
    # same way (/out/rc, VMTEST-RC on the console), then systemd powers off.
    [ -x $R/lib/systemd/systemd ] || die "no /lib/systemd/systemd on the host"
    U=$R/etc/systemd/system
    mkdir -p $U
    cat > $U/vmtest.target <<EOT
[Unit]
Description=VM test tier: run /out/cmd.sh
DefaultDependencies=no
Requires=systemd-journald.socket systemd-journald.service vmtest.service
After=systemd-journald.service vmtest.service
EOT
    cat > $U/vmtest.service <<EOT
[Unit]
Description=VM test tier command
DefaultDependencies=no
After=systemd-journald.service
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
WorkingDirectory=$CWD
Environment=HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
ExecStart=/bin/sh -c '/bin/sh /out/cmd.sh; rc=\$\$?; echo \$\$rc > /out/rc; sync; echo "VMTEST-RC=\$\$rc" > /dev/console'
EOT
    # the initramfs's mounts of /proc, /sys, /dev stay where they are under the new root
    say "switching root to systemd at $(up)s"
    ln -sf vmtest.target $U/default.target
    # tmpfiles' boot clean-up empties /tmp: where the checkout lives under the host's /tmp
    # (CI clones there) it would delete the checkout from the guest's view, walking the
    # whole host /tmp over 9p under TCG for minutes first. The test target needs none of it.
    for u in systemd-tmpfiles-setup.service systemd-tmpfiles-clean.service systemd-tmpfiles-clean.timer; do
        ln -sf /dev/null $U/$u
    done
    # systemd logs to the journal as on a node, so `journalctl -u hwagent` has its lines
    # about the unit (start, watchdog, restart) beside the daemon's own
    exec switch_root $R /lib/systemd/systemd --unit=vmtest.target
fi
HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8 \
    chroot $R /bin/sh -c 'cd "$1" && exec /bin/sh /out/cmd.sh' vmtest "$CWD"
rc=$?
echo "$rc" > $R/out/rc
sync
echo "VMTEST-RC=$rc uptime=$(up)s"
umount $R/out
poweroff -f
