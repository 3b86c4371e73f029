"""`hwagent doctor`'s machine checks (agent/doctor.py) on fake /proc, /sys and /boot trees."""

from __future__ import annotations

import gzip

from agent.doctor import run_checks


def test_doctor_names_each_missing_piece_with_its_fix(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/config.gz").write_bytes(gzip.compress(b"CONFIG_BPF_SYSCALL=y\n# CONFIG_DEBUG_INFO_BTF is not set\nCONFIG_PSI=y\n"))
    (tmp_path / "sys/fs/cgroup/cpu").mkdir(parents=True)
    checks = {c.name: c for c in run_checks("9.9-test", str(tmp_path / "proc"), str(tmp_path / "sys"),
                                             str(tmp_path / "mod"), str(tmp_path / "boot"), check_bcc=False)}
    assert not checks["CONFIG_DEBUG_INFO_BTF"].ok and "CONFIG_DEBUG_INFO_BTF=y" in checks["CONFIG_DEBUG_INFO_BTF"].fix
    assert not checks["CONFIG_BPF_EVENTS"].ok  # absent from the file = not set
    assert checks["CONFIG_PSI"].ok
    assert not checks["BTF"].ok and not checks["tracefs"].ok and "mount -t tracefs" in checks["tracefs"].fix
    assert not checks["headers:build"].ok and "linux-headers" in checks["headers:build"].fix
    assert "9.9-test" in checks["headers:source"].detail
    assert checks["cgroup mode"].detail == "cgroup v1"
    assert not checks["PSI"].ok and "psi=1" in checks["PSI"].fix


def test_doctor_reads_boot_config_when_no_proc_config(tmp_path):
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot/config-1.0").write_text("CONFIG_BPF_SYSCALL=y\nCONFIG_BPF_EVENTS=y\n")
    checks = {c.name: c for c in run_checks("1.0", str(tmp_path / "p"), str(tmp_path / "s"), str(tmp_path / "m"),
                                             str(tmp_path / "boot"), check_bcc=False)}
    assert checks["CONFIG_BPF_EVENTS"].ok and "boot/config-1.0" in checks["CONFIG_BPF_EVENTS"].detail
