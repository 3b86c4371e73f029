"""hwagent: a node agent for bare-metal machines.

See ARCHITECTURE in the project docs: topology and devices from sysfs/udev,
cpusets and cpu.idle through cgroupfs, eBPF pressure probes, and the kubelet
plugin gRPC APIs (device plugin, pod resources, Katalyst QRM) on top.
"""

__version__ = "0.1.0"
