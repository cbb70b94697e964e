#!/usr/bin/env bash
# ruff (format + lint), mypy and the import layering over the whole tree; gofmt for the Go client; the docs build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/ruff format --check --quiet .
.venv/bin/ruff check --quiet .
.venv/bin/mypy --no-error-summary
# the package layering of pyproject.toml's [tool.importlinter] (docs/architecture.md)
layers_log=$(.venv/bin/lint-imports --no-cache 2>&1) || { echo "$layers_log" >&2; exit 1; }
unformatted=$(gofmt -l clients/go samples/go)
[[ -z $unformatted ]] || { echo "gofmt needed: $unformatted" >&2; exit 1; }
# The manual (docs/, mkdocs.yml, strict): a broken link, an unknown anchor or a page left out of the nav
# fails the build. Not with --quiet: MkDocs 1.6 then counts no warnings and passes a broken build
# (mkdocs#4126), so its output is kept and shown only when it fails.
docs_log=$(.venv/bin/mkdocs build --strict --site-dir .cache/site 2>&1) \
  || { echo "$docs_log" >&2; echo "mkdocs build failed: fix the warnings above" >&2; exit 1; }
echo "lint: ruff, mypy, import layering, gofmt and the docs build clean"
