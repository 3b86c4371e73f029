#!/usr/bin/env bash
# The whole test suite. pytest's own exit code is passed through, except that
# "no tests collected" (5) is a failure here too: a suite that ran nothing is broken.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
.venv/bin/python -m pytest "$@"
rc=$?
[ "$rc" = 5 ] && { echo "run-tests: pytest collected no tests" >&2; exit 1; }
exit "$rc"
