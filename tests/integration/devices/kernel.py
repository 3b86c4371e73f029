"""Real kernel devices for hotplug tests: network links and loop block devices,
always removed again (use as context managers)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator

LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81


def _link_kinds() -> list[str]:
    # this project's CI kernel (Firecracker) has no dummy module; ifb is built in
    return ["dummy", "ifb"]


def add_link(name: str) -> str:
    errors = []
    for kind in _link_kinds():
        r = subprocess.run(["ip", "link", "add", name, "type", kind], capture_output=True, text=True)
        if r.returncode == 0:
            return kind
        errors.append(f"{kind}: {r.stderr.strip()}")
    raise RuntimeError(f"cannot create link {name}: {'; '.join(errors)}")


def del_link(name: str) -> None:
    subprocess.run(["ip", "link", "del", name], capture_output=True)


@contextlib.contextmanager
def net_link(name: str) -> Iterator[str]:
    """A virtual link (dummy, or ifb where dummy is missing); yields its kind."""
    kind = add_link(name)
    try:
        yield kind
    finally:
        del_link(name)


def add_loop(n: int) -> None:
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        fcntl.ioctl(fd, LOOP_CTL_ADD, n)
    finally:
        os.close(fd)


def remove_loop(n: int) -> None:
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        fcntl.ioctl(fd, LOOP_CTL_REMOVE, n)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def loop_device(n: int) -> Iterator[str]:
    """Create /dev/loop<n> (a kernel "add" uevent) and remove it afterwards ("remove")."""
    remove_loop(n)
    add_loop(n)
    try:
        yield f"loop{n}"
    finally:
        remove_loop(n)
