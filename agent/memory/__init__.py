"""The memory manager: memory and hugepages per NUMA node (docs/memory.md)."""
