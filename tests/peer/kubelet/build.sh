#!/usr/bin/env bash
# Build cpumstate (tests/peer/kubelet/cpumstate/*.go, our own code) inside kubeedge's vendored
# Kubernetes tree (v1.32.x: the kubelet's cpumanager/state checkpoint and KubeletConfiguration),
# offline, with the DRA tier's recipe (tests/peer/dra/build_in_kubeedge.sh).
#
#   tests/peer/kubelet/build.sh KUBEEDGE_GIT_DIR GO [BUILD_DIR]
#
# BUILD_DIR: default /tmp/hwagent-kubelet-peer; the binary is BUILD_DIR/cpumstate (printed last).
# GOCACHE may point at another tier's cache (the packages are few and small either way).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SRC_DIR="$here/cpumstate" exec "$here/../dra/build_in_kubeedge.sh" cpumstate \
    vendor/k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state/state_checkpoint.go \
    "${1:?kubeedge git dir}" "${2:?go binary or dir}" "${3:-/tmp/hwagent-kubelet-peer}"
