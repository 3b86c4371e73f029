from agent.cpuset import CPUSet
from agent.topology import synthetic


def test_synthetic_x86_shape_helpers():
    t = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)
    assert len(t.cpus) == 16
    assert t.package_ids == (0, 1)
    assert len(t.cores) == 8
    # spread numbering: cpu 0 and cpu 8 share a core
    assert t.siblings(0) == CPUSet([0, 8])
    assert t.numa_nodes_of_package(1) == (2, 3)
    assert t.cpus_of_numa(0) == CPUSet([0, 1, 8, 9])
    assert t.package_of_numa(3) == 1
    assert t.distance(0, 1) == 11 and t.distance(0, 2) == 21
    assert [c.cpus for c in t.last_level_caches][0] == CPUSet([0, 1, 8, 9])
    assert t.threads_per_core == 2


def test_memory_only_nodes_have_no_cpus():
    t = synthetic(sockets=1, numa_per_socket=1, memory_only_nodes=1)
    assert t.numa_node(1).memory_only
    assert t.package_of_numa(1) is None
    assert t.distance(0, 1) == 30
