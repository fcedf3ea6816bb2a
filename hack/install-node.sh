#!/usr/bin/env bash
# Everything the e2e tier's cluster needs on this machine, installed or built
# once and cached under ${STREAMQ_CACHE:-$HOME/.cache/streamq} (idempotent):
#
#   the Kubernetes binaries         hack/install-kube.sh e2e (etcd ... kubelet, kube-proxy, helm)
#   the streamq image               hack/build-image.sh      (images/streamq-<version>.tar)
#   Kafka's jars                    hack/install-jars.sh     (the broker pod mounts them)
#   provider "local" only:
#     containerd, runc, CNI plugins  Debian packages (apt-get), plus iptables and conntrack
#     the pause image                testbed/cluster/images/pause.c, gcc -static, packed as
#                                    node/images/pause-<hash>.tar (streamq-e2e/pause:1.0)
#     CoreDNS                        built from source through the Go module proxy, with the
#                                    plugins the cluster uses (testbed/cluster/images/coredns/):
#                                    coredns/<version>/coredns, packed as
#                                    node/images/coredns-<version>.tar (streamq-e2e/coredns:<version>)
#
# Usage: hack/install-node.sh [--check] [--provider local|kind]
#   --check      exit 0 when everything is in place, 1 otherwise (installs nothing)
#   --provider   what to prepare for (default: STREAMQ_E2E_PROVIDER, else kind
#                when `docker info` works, else local); kind needs only the
#                streamq image, the Kubernetes client binaries and the jars.
#
# Environment: STREAMQ_CACHE, STREAMQ_COREDNS_VERSION (default below),
#   STREAMQ_E2E_SKIP_INSTALL=1 (do nothing: for runs that exclude the e2e tier),
#   STREAMQ_E2E_STALE_IMAGE_OK=1 (--check accepts an image older than the sources).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}"
COREDNS_VERSION="${STREAMQ_COREDNS_VERSION:-v1.12.4}"
PY="${STREAMQ_VENV:-$ROOT/.venv}/bin/python"
NODE="$CACHE/node"
COREDNS_DIR="$CACHE/coredns/$COREDNS_VERSION"
PAUSE_SRC="$ROOT/testbed/cluster/images/pause.c"

log() { printf '[install-node] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check=0
provider="${STREAMQ_E2E_PROVIDER:-}"
while (($#)); do
  case "$1" in
    --check) check=1 ;;
    --provider) provider="${2:?--provider needs a value}"; shift ;;
    --provider=*) provider="${1#*=}" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
  shift
done
if [[ "${STREAMQ_E2E_SKIP_INSTALL:-0}" == 1 && $check == 0 ]]; then
  log "STREAMQ_E2E_SKIP_INSTALL=1: nothing installed"
  exit 0
fi
if [[ -z "$provider" || "$provider" == auto ]]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then provider=kind; else provider=local; fi
fi
case "$provider" in local | kind) ;; *) die "provider must be local or kind, not $provider" ;; esac

PACKAGES=(containerd runc containernetworking-plugins iptables conntrack)
pause_hash() { sha256sum "$PAUSE_SRC" | cut -c1-12; }
PAUSE_TAR="$NODE/images/pause-$(pause_hash).tar"
COREDNS_BIN="$COREDNS_DIR/coredns"
COREDNS_TAR="$NODE/images/coredns-$COREDNS_VERSION.tar"

missing_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
  done
}

if ((check)); then
  status=0
  "$ROOT/hack/install-kube.sh" --check e2e 2>/dev/null || { log "missing: Kubernetes binaries (hack/install-kube.sh e2e)"; status=1; }
  if [[ "${STREAMQ_E2E_STALE_IMAGE_OK:-0}" == 1 ]]; then
    [[ -s "$("$ROOT/hack/build-image.sh" --print-archive)" ]] || { log "missing: the streamq image (hack/build-image.sh)"; status=1; }
  else
    "$ROOT/hack/build-image.sh" --check 2>/dev/null || { log "missing or stale: the streamq image (hack/build-image.sh)"; status=1; }
  fi
  compgen -G "$CACHE/kafka/*/libs/kafka_2.13-*.jar" >/dev/null || { log "missing: Kafka jars (hack/install-jars.sh)"; status=1; }
  if [[ $provider == local ]]; then
    m="$(missing_packages | tr '\n' ' ')"
    [[ -z "$m" ]] || { log "missing Debian packages: $m"; status=1; }
    [[ -s "$PAUSE_TAR" ]] || { log "missing: $PAUSE_TAR"; status=1; }
    [[ -s "$COREDNS_TAR" ]] || { log "missing: $COREDNS_TAR"; status=1; }
  fi
  exit $status
fi

t0=$SECONDS
mkdir -p "$NODE/images"
exec 8>"$NODE/.install.lock"
flock 8

"$ROOT/hack/install-kube.sh" e2e
"$ROOT/hack/install-jars.sh"
"$ROOT/hack/build-image.sh" >/dev/null

if [[ $provider == kind ]]; then
  log "provider kind: nothing else to install ($((SECONDS - t0)) s)"
  exit 0
fi

# ------------------------------------------------------------ Debian packages
mapfile -t missing < <(missing_packages)
if ((${#missing[@]})); then
  [[ $EUID -eq 0 ]] || die "installing ${missing[*]} needs root"
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's containerd package starts a system containerd where an init system
# runs; the cluster runs its own (own socket, root and state), so that one is left alone.
for tool in containerd runc ctr iptables ip nsenter mount umount; do
  command -v "$tool" >/dev/null || die "$tool not found after installing ${PACKAGES[*]}"
done
[[ -x /usr/lib/cni/bridge || -x /opt/cni/bin/bridge ]] || die "no CNI bridge plugin in /usr/lib/cni or /opt/cni/bin"

# ------------------------------------------------------------ the pause image
if [[ ! -s "$PAUSE_TAR" ]]; then
  command -v gcc >/dev/null || die "gcc not found (apt-get install gcc libc6-dev)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  gcc -static -Os -s -Wall -Wextra -Werror -o "$work/pause" "$PAUSE_SRC"
  "$work/pause" -v >/dev/null
  rm -f "$NODE"/images/pause-*.tar
  (cd "$ROOT" && "$PY" -m testbed.cluster.images.pack "$PAUSE_TAR" streamq-e2e/pause:1.0 \
    --entrypoint /pause --user 65535:65535 --file "/pause=$work/pause:0755") >/dev/null
  log "pause image: $PAUSE_TAR"
fi

# ------------------------------------------------------------ CoreDNS
# Only the plugins the cluster's Corefile uses (testbed/cluster/images/coredns/main.go),
# in a wrapper module that requires CoreDNS at the pinned version: `go install
# github.com/coredns/coredns@v` works too, but links every plugin (cloud SDKs,
# tracing...) and takes several times longer cold.
COREDNS_MAIN="$ROOT/testbed/cluster/images/coredns/main.go"
coredns_inputs() { printf '%s %s\n' "$COREDNS_VERSION" "$(sha256sum < "$COREDNS_MAIN" | cut -d' ' -f1)"; }
if [[ ! -x "$COREDNS_BIN" || "$(cat "$COREDNS_BIN.inputs" 2>/dev/null)" != "$(coredns_inputs)" ]]; then
  command -v go >/dev/null 2>&1 || PATH=/usr/local/go/bin:$PATH
  command -v go >/dev/null 2>&1 || die "go not found (needed to build CoreDNS)"
  log "building CoreDNS $COREDNS_VERSION from source (cold: minutes)"
  t1=$SECONDS
  src="$COREDNS_DIR/src"
  rm -rf "$src"; mkdir -p "$src"
  cp "$COREDNS_MAIN" "$src/main.go"
  printf 'module streamq.local/e2e-coredns\n\ngo 1.24.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > "$src/go.mod"
  # Its module cache is shared with the Kubernetes builds (many common modules).
  (
    export GOMODCACHE="$CACHE/kube/go/mod" GOCACHE="$CACHE/coredns/go-build" GOPATH="$CACHE/coredns/gopath" \
      GOTOOLCHAIN="${STREAMQ_GOTOOLCHAIN:-local}" GOFLAGS=-buildvcs=false GOWORK=off CGO_ENABLED=0 \
      GOGC="${STREAMQ_GO_GOGC:-400}" # faster compiles, as hack/install-kube.sh explains
    cd "$src"
    go mod tidy 8>&-
    go build -trimpath -ldflags "-s -w" -o "$COREDNS_BIN.new" . 8>&-
  )
  "$COREDNS_BIN.new" -plugins | grep -qx 'kubernetes' || die "the CoreDNS build has no kubernetes plugin"
  mv "$COREDNS_BIN.new" "$COREDNS_BIN"
  coredns_inputs > "$COREDNS_BIN.inputs"
  log "CoreDNS built in $((SECONDS - t1)) s"
fi
if [[ ! -s "$COREDNS_TAR" || "$COREDNS_TAR" -ot "$COREDNS_BIN" ]]; then
  (cd "$ROOT" && "$PY" -m testbed.cluster.images.pack "$COREDNS_TAR" "streamq-e2e/coredns:$COREDNS_VERSION" \
    --entrypoint /coredns --expose 53/udp --expose 53/tcp --file "/coredns=$COREDNS_BIN:0755") >/dev/null
  log "CoreDNS image: $COREDNS_TAR"
fi
log "node ready for provider local ($((SECONDS - t0)) s)"
