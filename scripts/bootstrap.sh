#!/usr/bin/env bash
# Installs everything the daemon, its samples and its test suite need, into this checkout:
#   .venv/           Python virtualenv: kcl-daemon (editable, with the dev extra), the stdlib-only
#                    Python client, and the real amazon_kclpy client library.
#   .cache/node/     npm packages: aws-kcl (the real Node client), kinesalite + dynalite (emulators).
#   Debian packages: golang-go (Go client), jq and shellcheck (shell client), a Java 17 runtime (the
#                    Spark source's tests), chromium (the status page's browser test), when missing.
# Idempotent and quiet; safe to run before every command. Set KCL_SKIP_APT=1 to skip apt-get.
# `bootstrap.sh --run` installs only what `make run` needs: the .venv with kcl-daemon[local] and the Python
# client (no Debian or npm packages, no Java, no pyspark).
set -euo pipefail
MODE=all
[[ ${1:-} == --run ]] && MODE=run
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || { echo "[bootstrap] kcl-daemon needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
STAMP_DIR=.cache/stamps
mkdir -p "$STAMP_DIR" .cache/node

log() { printf '[bootstrap] %s\n' "$*" >&2; }
make_venv() {  # the .venv, and deps_hash: what its pip stamps are keyed on
  if [[ ! -x .venv/bin/python ]]; then
    log "creating .venv"
    "$PY" -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -U pip wheel setuptools
  fi
  deps_hash=$(cat pyproject.toml clients/python/pyproject.toml | sha256sum | cut -c1-16)
}

# ---- only what `make run` needs ---------------------------------------------------------------
if [[ $MODE == run ]]; then
  make_venv
  if [[ ! -f $STAMP_DIR/pip-$deps_hash && ! -f $STAMP_DIR/pip-run-$deps_hash ]]; then
    log "pip install (kcl-daemon[local], clients/python)"
    .venv/bin/pip install -q --disable-pip-version-check -e '.[local]' -e clients/python
    touch "$STAMP_DIR/pip-run-$deps_hash"
  fi
  exit 0
fi

# ---- Debian packages -------------------------------------------------------------------------
need_apt=()
command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
command -v shellcheck >/dev/null 2>&1 || need_apt+=(shellcheck)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)  # the Spark source's tests
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)  # the status page's headless browser test
if ((${#need_apt[@]})) && [[ -z ${KCL_SKIP_APT:-} ]]; then
  SUDO=; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  log "apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# ---- npm packages (run in the background while pip works) -------------------------------------
npm_pid=
if [[ ! -f $STAMP_DIR/npm-v1 ]]; then
  (
    cd .cache/node
    [[ -f package.json ]] || echo '{"private":true}' > package.json
    npm install --no-audit --no-fund --loglevel=error \
      aws-kcl@2.3.2 kinesalite@3.3.3 dynalite@4.0.0 log4js@6 >/dev/null
    touch "$ROOT/$STAMP_DIR/npm-v1"
  ) > .cache/npm.log 2>&1 &
  npm_pid=$!
fi

# ---- Python ----------------------------------------------------------------------------------
make_venv
if [[ ! -f $STAMP_DIR/pip-$deps_hash ]]; then
  log "pip install (kcl-daemon[dev,spark,bench], clients/python)"
  .venv/bin/pip install -q --disable-pip-version-check -e '.[dev,spark,bench]' -e clients/python
  touch "$STAMP_DIR/pip-$deps_hash"
fi
if [[ ! -f $STAMP_DIR/kclpy-3.2.0 ]]; then
  # amazon-kclpy's setup.py downloads the Java daemon's Maven jars while it builds and fails without
  # them. We replace that daemon, so the jars are never needed: a data: URL satisfies the downloader
  # with tiny placeholders, which are deleted right after. The Python package itself is stdlib-only.
  log "pip install amazon-kclpy==3.2.0 (without the Java jars)"
  KCL_MVN_REPO_SEARCH_URL='data:,' .venv/bin/pip install -q --disable-pip-version-check 'amazon-kclpy==3.2.0'
  rm -f .venv/lib/python3*/site-packages/amazon_kclpy/jars/*.jar
  touch "$STAMP_DIR/kclpy-3.2.0"
fi

# The real Java MultiLangDaemons for the mixed-fleet tests (KCL_SKIP_JAVA=1 skips them).
bash scripts/install_java_kcl.sh

if [[ -n $npm_pid ]]; then
  wait "$npm_pid" || { cat .cache/npm.log >&2; log "npm install failed"; exit 1; }
fi
