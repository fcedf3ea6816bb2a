#!/usr/bin/env bash
# Installs the Flink SQL peer of the latency benchmark (bench/flink_peer.py) into a
# cache outside the repository. Benchmark-only: never part of the product.
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/flink/
#     venv/                PyFlink (bench/flink/requirements.txt) in its own venv: its
#                          pins clash with the project's venv (see that file)
#     venv/.complete       marker: python version + requirements fingerprint
#     jars/*.jar           Flink's Kafka SQL connector (bench/flink/pom.xml), a
#                          shaded jar: it carries its own kafka-clients
#     jars/.complete       marker: version + POM fingerprint
#
# Idempotent: a folder whose marker matches is left alone (about 2 min and
# ~850 MiB the first time, under a second after).
# Knobs:
#   STREAMQ_CACHE        cache root (default $HOME/.cache/streamq)
#   STREAMQ_M2_REPO      Maven local repository (default: Maven's own, ~/.m2)
#   FLINK_KAFKA_CONNECTOR_VERSION  override the POM's connector version
#   PYTHON               interpreter the venv is made from (default: the one behind
#                        .venv, else python3); PyFlink 2.2 supports 3.9 to 3.12
#   FORCE=1              reinstall even if the markers say complete
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}/flink"
REQS="$ROOT/bench/flink/requirements.txt"
POM="$ROOT/bench/flink/pom.xml"
FORCE="${FORCE:-0}"

log() { printf '[install-flink] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v java >/dev/null || die "java not found (Java 11, 17 or 21 needed by Flink 2.2)"

pom_prop() { sed -n "s:.*<$2>\(.*\)</$2>.*:\1:p" "$1" | head -n1; }
is_complete() { [[ "$FORCE" != 1 && -f "$1/.complete" ]] && [[ "$(cat "$1/.complete")" == "$2" ]]; }

base_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  if [[ -x "$ROOT/.venv/bin/python" ]]; then
    "$ROOT/.venv/bin/python" -c 'import sys; print(sys._base_executable)'
  else
    command -v python3
  fi
}

# ---------------------------------------------------------------------- venv
install_venv() {
  local py; py="$(base_python)"
  local pyver; pyver="$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
  case "$pyver" in
    3.9.*|3.10.*|3.11.*|3.12.*) ;;
    *) die "PyFlink 2.2 needs Python 3.9-3.12, $py is $pyver (set PYTHON)";;
  esac
  local dest="$CACHE/venv"
  local fp; fp="$(printf '%s\n' "python=$pyver" "requirements-sha256=$(sha256sum "$REQS" | cut -d' ' -f1)")"
  if is_complete "$dest" "$fp"; then
    log "venv: complete, nothing to do ($dest)"
    return
  fi
  # A venv is not relocatable (its scripts name their interpreter): built in place,
  # the marker written last.
  rm -rf "$dest"
  log "venv: $(grep -E '^apache-flink==' "$REQS") with Python $pyver into $dest (pip, ~2 min)"
  "$py" -m venv "$dest"
  if ! "$dest/bin/python" -m pip install -q --no-input -r "$REQS" >"$CACHE/.pip.log" 2>&1; then
    cat "$CACHE/.pip.log" >&2
    die "pip could not install $REQS; log: $CACHE/.pip.log"
  fi
  "$dest/bin/python" -c 'import pyflink.version, pyflink.table' \
    || die "venv: pyflink does not import"
  rm -f "$CACHE/.pip.log"
  printf '%s\n' "$fp" > "$dest/.complete"
  log "venv: PyFlink $("$dest/bin/python" -c 'import pyflink.version as v; print(v.__version__)'), $(du -sh "$dest" | cut -f1)"
}

# ---------------------------------------------------------------------- jars
install_jars() {
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  local v="${FLINK_KAFKA_CONNECTOR_VERSION:-$(pom_prop "$POM" flink.kafka.connector.version)}"
  local dest="$CACHE/jars"
  local fp; fp="$(printf '%s\n' "flink-sql-connector-kafka=$v" "pom-sha256=$(sha256sum "$POM" | cut -d' ' -f1)")"
  if is_complete "$dest" "$fp"; then
    log "jars: complete, nothing to do ($dest)"
    return
  fi
  local stage="$CACHE/.jars.new"
  rm -rf "$stage"; mkdir -p "$stage"
  local args=(-B -q --no-transfer-progress -Dstyle.color=never)
  [[ -n "${STREAMQ_M2_REPO:-}" ]] && args+=("-Dmaven.repo.local=$STREAMQ_M2_REPO")
  log "jars: resolving org.apache.flink:flink-sql-connector-kafka:$v"
  # The SQL connector is self-contained (shaded): the artifact alone, no closure.
  if ! mvn "${args[@]}" -f "$POM" -Dflink.kafka.connector.version="$v" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DincludeScope=runtime -DexcludeTransitive=true -DoutputDirectory="$stage" >"$CACHE/.mvn.log" 2>&1; then
    sed 's/\x1b\[[0-9;]*m//g' "$CACHE/.mvn.log" | grep -v '^\s*$' >&2 || true
    die "Maven could not resolve $POM; log: $CACHE/.mvn.log"
  fi
  rm -f "$CACHE/.mvn.log"
  [[ -f "$stage/flink-sql-connector-kafka-$v.jar" ]] || die "jars: flink-sql-connector-kafka-$v.jar missing after resolution"
  printf '%s\n' "$fp" > "$stage/.complete"
  rm -rf "$dest"; mv "$stage" "$dest"
  log "jars: $(cd "$dest" && ls *.jar) ($(du -sh "$dest" | cut -f1))"
}

start=$SECONDS
mkdir -p "$CACHE"
install_jars
install_venv
log "done in $((SECONDS - start)) s; $CACHE: $(du -sh "$CACHE" | cut -f1)"
