"""Pressure: eBPF probes (probes/) and file fallbacks -> device health and CPU-pressure eviction."""
