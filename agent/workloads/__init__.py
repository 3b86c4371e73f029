"""Standalone admission: Pod manifests, the workload registry (the ActivePods
source) and the admission API. See ``agent.workloads.model`` for the data and
``agent.contracts`` for what admission and the runtime promise each other."""
