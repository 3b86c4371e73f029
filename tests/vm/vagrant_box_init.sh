#!/bin/busybox sh
# /init of the Vagrant box built by tests/vm/vagrant_box.py. Why it exists: the box is the VM
# tier's guest (Debian's kernel, this machine's / read-only over 9p, tests/vm/init.sh) made
# into a machine Vagrant can drive: its writable layer is the box's disk (/dev/vda, ext4), so
# what provisioning installs survives `vagrant halt` / `vagrant up` as on any VM, and systemd
# runs as PID 1 with what Vagrant needs of a box: DHCP on the management network
# (systemd-networkd), sshd, the `vagrant` user with passwordless sudo.
#
# Kernel command line (the box's Vagrantfile sets it):
#   vmbox.modules=PATH   host path of the tier image's modules/ tree, bind-mounted over
#                        /lib/modules/$KVER (bcc's header links included)
# 9p tag: rootfs (host /, read-only). Disk: /dev/vda, ext4, holding upper/ and work/.
# Any failure prints VMBOX-FAIL on the console (the box's serial log) and powers off.
/bin/busybox mkdir -p /proc /sys /dev /sbin /usr/bin /usr/sbin /lower /disk /newroot
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# to the console and the kernel log (a second serial port, if the host gave one, has the latter)
say() { echo "VMBOX: $*"; echo "VMBOX: $*" > /dev/kmsg; }
die() { echo "VMBOX-FAIL: $*"; echo "VMBOX-FAIL: $*" > /dev/kmsg; sync; poweroff -f; }

MODULES=
for arg in $(cat /proc/cmdline); do
    case "$arg" in vmbox.modules=*) MODULES="${arg#vmbox.modules=}" ;; esac
done
KVER="$(cat /kver)"
for m in $(cat /modules/order); do insmod "/modules/$m" || die "insmod $m"; done
say "initramfs up, kernel $KVER"

mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro,cache=loose rootfs /lower || die "mount 9p rootfs"
i=0
while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 /dev/vda /disk || die "mount the box disk /dev/vda"
mkdir -p /disk/upper /disk/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/disk/upper,workdir=/disk/work /newroot || die "mount overlay"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
# the host's /tmp and /run are not the machine's: fresh ones, as at any boot
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
mount -t tmpfs -o mode=755 tmpfs $R/run
if [ -n "$MODULES" ]; then
    mkdir -p "$R/lib/modules/$KVER"
    mount --bind "$R$MODULES" "$R/lib/modules/$KVER" || die "bind modules $MODULES"
fi

# First boot: the machine's own identity (never the host's): machine-id, sshd host keys, and
# the vagrant user in the passwd files. Each is written once into the disk's upper layer.
if [ ! -f /disk/upper/etc/machine-id ]; then
    tr -d '-' < /proc/sys/kernel/random/uuid > $R/etc/machine-id
fi
if [ ! -f /disk/upper/etc/ssh/.vagrant-box-keys ]; then
    rm -f $R/etc/ssh/ssh_host_*
    chroot $R /usr/bin/ssh-keygen -A >/dev/null || die "ssh-keygen -A"
    : > $R/etc/ssh/.vagrant-box-keys
fi
if ! grep -q '^vagrant:' $R/etc/passwd; then
    UID_GID="$(cat /vagrant-ids)"
    echo "vagrant:x:$UID_GID:vagrant:/home/vagrant:/bin/bash" >> $R/etc/passwd
    echo "vagrant:*:19000:0:99999:7:::" >> $R/etc/shadow
    echo "vagrant:x:${UID_GID#*:}:" >> $R/etc/group
    say "added the vagrant user ($UID_GID)"
fi
say "root ready"
exec switch_root $R /lib/systemd/systemd --unit=vagrant-box.target
