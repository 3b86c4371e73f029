"""Dynamic Resource Allocation: hwagent as a DRA node driver.

Standalone mode reads DeviceClasses and ResourceClaims as files in
``<root>/dra/`` (``claims``, ``files``), allocates them itself (``allocator``
with CEL selectors from ``cel``), and prepares them (``driver``: CDI spec files,
journaled); kubelet mode serves the same preparer over the kubelet's DRAPlugin
gRPC service. See docs/dra.md.
"""
