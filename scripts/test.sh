#!/usr/bin/env bash
# The test suite, every layer of tests/ (docs/development.md) unless the arguments, which go to pytest, name
# some: `make test` runs it bare, `make test-fast` with tests/unit tests/component.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOCACHE=$PWD/.cache/go/build GOPATH=$PWD/.cache/go/path GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
# Python's bytecode is kept, outside the tree (.cache/pycache): without it every pytest-xdist worker
# rewrites and compiles the whole test tree again (about 4 s of CPU each) and every daemon a test starts
# compiles kcl_daemon again. Also where the environment says PYTHONDONTWRITEBYTECODE, which is about
# keeping __pycache__ out of the sources: the prefix does that.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=$PWD/.cache/pycache
# pytest writes the JUnit report only when its session ends: without it, something ended the run early
# (an os._exit or a signal in the test process), whatever the exit status says.
report=$(mktemp -d)/junit.xml
status=0
.venv/bin/python -m pytest -p no:cacheprovider --junitxml="$report" "$@" || status=$?
if [[ ! -s $report ]]; then
  echo "scripts/test.sh: the test run ended before pytest finished its session (status $status)" >&2
  exit 1
fi
exit "$status"
