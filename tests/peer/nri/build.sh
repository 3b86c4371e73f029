#!/usr/bin/env bash
# Build, offline, from containerd's own source and vendored tree (nothing downloaded):
#   - containerd 2.x: containerd, containerd-shim-runc-v2, ctr (the NRI tests' second peer)
#   - nripeer (tests/peer/nri/nripeer/*.go, our own code): the floor NRI plugin built on the
#     vendored github.com/containerd/nri/pkg/stub, and the runtime side driven through the
#     vendored pkg/adaptation (the code containerd itself calls plugins with), for bench/nri.py
#
#   tests/peer/nri/build.sh CONTAINERD_GIT_DIR GO BUILD_DIR [REF] [TARGETS]
#
# REF: a 2.x tag or commit in the mirror (default v2.3.4). TARGETS: "containerd nripeer" (default
# both). The tree is extracted once per BUILD_DIR and commit; rebuilds reuse BUILD_DIR/gocache.
# Binaries land in BUILD_DIR/bin; the build time of each target is printed (and kept in
# BUILD_DIR/build-times.txt). -mod=vendor, GOPROXY=off, GOTOOLCHAIN=local, GOWORK=off, CGO_ENABLED=0
# (containerd's own static build: no btrfs, no libseccomp).
set -euo pipefail
GD=${1:?containerd git dir (fetch github:containerd/containerd)}; GO=${2:?go binary or dir}
OUT=${3:?build dir}; REF=${4:-v2.3.4}; TARGETS=${5:-containerd nripeer}
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$GO" ] && GO="$GO/bin/go"
[ -x "$GO" ] || { echo "no go binary at $GO" >&2; exit 2; }
mkdir -p "$OUT/bin"; OUT=$(cd "$OUT" && pwd)
tree="$OUT/containerd"
commit=$(git --git-dir="$GD" rev-parse "$REF^{commit}")
if [ "$(cat "$tree/.commit" 2>/dev/null)" != "$commit" ]; then
  rm -rf "$tree"; mkdir -p "$tree"
  git --git-dir="$GD" archive "$commit" | tar -x -C "$tree"
  test -f "$tree/vendor/github.com/containerd/nri/pkg/stub/stub.go"
  echo "$commit" > "$tree/.commit"
fi
export GOWORK=off GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off
export GOCACHE="${GOCACHE:-$OUT/gocache}" GOPATH="$OUT/gopath"
cd "$tree"
version=$(git --git-dir="$GD" describe --tags "$commit" 2>/dev/null || echo "$commit")
echo "containerd $version ($commit), $("$GO" version), go.mod wants $(awk '$1=="go"{print $2}' go.mod)" >&2
timed() {  # NAME CMD...: run, print and record the wall time
  local name=$1 start; shift; start=$(date +%s.%N)
  "$@"
  local s; s=$(echo "$(date +%s.%N) - $start" | bc)
  printf '%s %s built in %.0f s (load %s, %s CPUs)\n' "$name" "$version" "$s" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" | tee -a "$OUT/build-times.txt" >&2
}
ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$version -X github.com/containerd/containerd/v2/version.Revision=$commit"
for t in $TARGETS; do
  case $t in
    containerd)
      timed containerd "$GO" build -trimpath -tags "no_btrfs urfave_cli_no_docs" -ldflags "$ld" -o "$OUT/bin/" \
        ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr ;;
    nripeer)
      rm -rf "$tree/hack/nripeer"; mkdir -p "$tree/hack/nripeer"
      cp "$here/nripeer"/*.go "$tree/hack/nripeer/"
      timed nripeer "$GO" build -trimpath -o "$OUT/bin/nripeer" ./hack/nripeer ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
done
ls "$OUT/bin"
