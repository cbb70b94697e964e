#!/usr/bin/env bash
# ruff (format + lint) and mypy over the whole tree; gofmt for the Go client.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/ruff format --check --quiet .
.venv/bin/ruff check --quiet .
.venv/bin/mypy --no-error-summary
unformatted=$(gofmt -l clients/go samples/go)
[[ -z $unformatted ]] || { echo "gofmt needed: $unformatted" >&2; exit 1; }
echo "lint: ruff, mypy and gofmt clean"
