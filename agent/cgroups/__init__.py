"""The cgroup layer: the only code in hwagent that reads or writes cgroupfs.

- ``detect``: which hierarchy layout a cgroup root holds (v1, v2, hybrid)
- ``mounts``: the one parser of the kernel's mount table; ``own``: where a
  process's own cpuset is (topology's fallback for allowed CPUs)
- ``hierarchy``: the hierarchy pods' CPU cgroups are keyed on, cgroup id -> path
- ``paths``: kubepods layouts and ``validate_rel_path``, the gate for every
  cgroup path that comes from outside; ``kubepods``: the kubelet's pod tree
- ``fs``: safe-order cpuset and cpu.idle writes; ``workload``, ``limits``,
  ``devbpf``: the workload runtime's cgroups; ``tree`` and ``kill``: walking a
  subtree and ending what runs in it
- ``config``: the [cgroups] config section

tests/unit/cgroups/test_layer_boundary.py keeps cgroupfs paths out of every
other package.
"""
