"""The workload runtime: runs admitted pods as process trees in their own cgroups
(see docs/runtime.md). ``WorkloadRuntime`` implements ``agent.contracts.PodRuntime``."""
