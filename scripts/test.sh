#!/usr/bin/env bash
# The whole test suite: unit, component, protocol (every client), e2e. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOCACHE=$PWD/.cache/go/build GOPATH=$PWD/.cache/go/path GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
