#!/usr/bin/env bash
# Build one of our Go programs (tests/peer/dra/NAME/*.go, our own code) inside kubeedge's
# vendored Kubernetes tree, offline: -mod=vendor, GOPROXY=off, GOWORK=off, CGO_ENABLED=0,
# nothing downloaded. build.sh (draharness) and build_allocpeer.sh (allocpeer) call it.
#
#   tests/peer/dra/build_in_kubeedge.sh NAME SENTINEL KUBEEDGE_GIT_DIR GO BUILD_DIR
#
# SRC_DIR (environment): where NAME's *.go are when not tests/peer/dra/NAME (another tier's program).
# SENTINEL: a vendored file NAME needs, checked after the extraction (a mirror without it
#   is not the tree we want). The tree is extracted once per BUILD_DIR and kubeedge commit;
#   rebuilds reuse BUILD_DIR/gocache (or $GOCACHE). The binary is BUILD_DIR/NAME (printed last).
set -euo pipefail
NAME=${1:?program name}; SENTINEL=${2:?a vendored file the program needs}
GD=${3:?kubeedge git dir}; GO=${4:?go binary or dir}; OUT=${5:?build dir}
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$GO" ] && GO="$GO/bin/go"
[ -x "$GO" ] || { echo "no go binary at $GO" >&2; exit 2; }
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
tree="$OUT/kubeedge"
head=$(git --git-dir="$GD" rev-parse HEAD)
if [ "$(cat "$tree/.$NAME-commit" 2>/dev/null)" != "$head" ]; then
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
  test -f "$tree/$SENTINEL"
  echo "$head" > "$tree/.$NAME-commit"
fi
rm -rf "${tree:?}/hack/$NAME"; mkdir -p "$tree/hack/$NAME"
cp "${SRC_DIR:-$here/$NAME}"/*.go "$tree/hack/$NAME/"
export GOWORK=off GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off
export GOCACHE="${GOCACHE:-$OUT/gocache}" GOPATH="$OUT/gopath"
cd "$tree"
echo "kubeedge $head, $("$GO" version)" >&2
start=$(date +%s)
"$GO" build -o "$OUT/$NAME" "./hack/$NAME"
echo "built in $(( $(date +%s) - start )) s (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
echo "$OUT/$NAME"
