"""The device-plugin host: what the kubelet's device manager does, inside hwagent.

Layout (functional core, imperative shell):
- ``model``      plain data: devices, allocations, run options
- ``selection``  pure decisions: NUMA filtering, device choice, topology hints
- ``checkpoint`` the on-disk format and its atomic writer/reader
- ``endpoint``   gRPC client of one registered device plugin
- ``manager``    the single owner of the state (one asyncio loop)
- ``registration`` / ``watcher``  the two ways a plugin registers
- ``component``  the daemon component that wires it all together
"""
