"""cgroupfs driver: hierarchy detection (v1, v2, hybrid), container cgroup
paths for kubepods layouts, and safe-order cpuset / cpu.idle writes."""
