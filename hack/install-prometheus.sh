#!/usr/bin/env bash
# Puts Debian's Prometheus (the server and promtool) into a cache outside the
# repository, without installing the package system-wide: `apt-get download`
# fetches the .deb into a temporary folder and `dpkg-deb -x` unpacks it.
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/prometheus/
#     usr/bin/promtool     `promtool check rules` / `promtool test rules` of the
#                          chart's alerts (tests/integration/test_alert_rules.py)
#     usr/bin/prometheus   the server, for the e2e tier's real scrape
#     .complete            marker: the package version unpacked
#
# Usage: hack/install-prometheus.sh [--print-bin-dir]
# Idempotent: with the marker and both binaries present it does nothing (well
# under a second); the first run downloads about 30 MiB.
# Knobs:
#   STREAMQ_CACHE               cache root (default $HOME/.cache/streamq)
#   STREAMQ_PROMETHEUS_VERSION  a version apt knows (default: apt's candidate)
#   FORCE=1                     unpack again even if the marker is there
set -euo pipefail

CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}/prometheus"
BIN_DIR="$CACHE/usr/bin"
FORCE="${FORCE:-0}"

log() { printf '[install-prometheus] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ "${1:-}" == --print-bin-dir ]]; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

if [[ "$FORCE" != 1 && -f "$CACHE/.complete" && -x "$BIN_DIR/promtool" && -x "$BIN_DIR/prometheus" ]]; then
  log "prometheus $(cat "$CACHE/.complete"): cached, nothing to do ($BIN_DIR)"
  exit 0
fi

command -v apt-get >/dev/null || die "apt-get not found: promtool comes from Debian's prometheus package"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found"

version="${STREAMQ_PROMETHEUS_VERSION:-$(apt-cache policy prometheus 2>/dev/null | sed -n 's/^ *Candidate: *//p')}"
if [[ -z "$version" || "$version" == "(none)" ]]; then
  die "apt knows no prometheus package (run \`apt-get update\` as root, or set STREAMQ_PROMETHEUS_VERSION)"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "downloading prometheus=$version (not installed system-wide)"
# apt-get download writes into the current folder; as root it drops to the _apt
# user, which must be able to write there.
chmod 0777 "$tmp"
(cd "$tmp" && apt-get download -q "prometheus=$version" >"$tmp/apt.log" 2>&1) || {
  cat "$tmp/apt.log" >&2
  die "apt-get download prometheus=$version failed (an old index? run \`apt-get update\`)"
}
deb="$(ls "$tmp"/prometheus_*.deb)"

# Unpacked next to the cache and moved in whole: an interrupted run leaves no
# half-filled cache behind.
mkdir -p "${CACHE%/*}"
stage="$(mktemp -d "${CACHE%/*}/.prometheus.XXXXXX")"
dpkg-deb -x "$deb" "$stage"
[[ -x "$stage/usr/bin/promtool" && -x "$stage/usr/bin/prometheus" ]] || { rm -rf "$stage"; die "$deb holds no usr/bin/promtool or usr/bin/prometheus"; }
printf '%s\n' "$version" >"$stage/.complete"
rm -rf "$CACHE"
mv "$stage" "$CACHE"
log "promtool: $("$BIN_DIR/promtool" --version 2>&1 | head -n1)"
log "binaries in $BIN_DIR"
