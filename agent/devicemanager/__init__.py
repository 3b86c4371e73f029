"""The device-plugin host: what the kubelet's device manager does, inside hwagent.

Layout (functional core, imperative shell; the kubelet's split of
``pkg/kubelet/cm/devicemanager``):
- ``model``       plain data: devices, allocations, run options
- ``types``       the contracts: the manager, a plugin endpoint, the registry (``types.go``)
- ``pod_devices`` who holds which devices, and its checkpoint conversion (``pod_devices.go``)
- ``selection``   pure decisions: NUMA filtering, device choice
- ``hints``       topology hints for the topology manager (``topology_hints.go``)
- ``checkpoint``  the on-disk format, its journal records and replay
- ``endpoint``    gRPC client of one registered device plugin (``endpoint.go``)
- ``manager``     the single owner of the state (one asyncio loop) (``manager.go``)
- ``registration`` / ``watcher``  the two ways a plugin registers
- ``component``   the daemon component that wires it all together
"""
