# Shared by hack/kind-*.sh (sourced): paths, logging, the Docker engine to talk
# to, and the small Go tools built once into the cache.
# shellcheck shell=bash
shopt -s inherit_errexit  # set -e inside $(...) too: a failed step stops the script
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}"
KIND_CACHE="$CACHE/kind"
KIND_VERSION="${STREAMQ_KIND_VERSION:-v0.30.0}"
KUBE_VERSION="${STREAMQ_KUBE_VERSION:-v1.33.13}"
KIND_BIN="$KIND_CACHE/bin"
# The engine hack/kind-docker.sh starts when no Docker answers: its own socket,
# exec root and pid file under /run, its data root (images, kept) in the cache.
OWN_DOCKER_RUN="${STREAMQ_DOCKER_RUN:-/run/streamq-docker}"
OWN_DOCKER_HOST="unix://$OWN_DOCKER_RUN/docker.sock"
OWN_DOCKER_DATA="$KIND_CACHE/docker"

_kind_log_tag="${_kind_log_tag:-kind}"
log() { printf '[%s %s] %s\n' "$_kind_log_tag" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || PATH=/usr/local/go/bin:$PATH

go_env() { # the module cache is shared with the Kubernetes builds
  export GOMODCACHE="$CACHE/kube/go/mod" GOCACHE="$KIND_CACHE/go-build" GOPATH="$KIND_CACHE/gopath" \
    GOTOOLCHAIN="${STREAMQ_GOTOOLCHAIN:-local}" GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
    GOGC="${STREAMQ_GO_GOGC:-400}" # faster compiles, as hack/install-kube.sh explains
  unset GOBIN GO111MODULE
}

docker_answers() { # docker_answers [host]
  command -v docker >/dev/null 2>&1 || return 1
  if [[ -n "${1:-}" ]]; then DOCKER_HOST="$1" docker info >/dev/null 2>&1; else docker info >/dev/null 2>&1; fi
}

# DOCKER_HOST for everything that follows: the user's engine when one answers
# (and STREAMQ_KIND_OWN_DOCKER is not 1), else ours when it runs. Returns 1
# when neither answers.
use_docker() {
  if [[ "${STREAMQ_KIND_OWN_DOCKER:-0}" != 1 ]] && docker_answers; then return 0; fi
  if docker_answers "$OWN_DOCKER_HOST"; then export DOCKER_HOST="$OWN_DOCKER_HOST"; return 0; fi
  return 1
}

ensure_kind() { # the kind CLI, built from its module (go install), cached
  local bin="$KIND_BIN/kind-$KIND_VERSION"
  if [[ ! -x "$bin" ]]; then
    command -v go >/dev/null 2>&1 || die "go not found (needed to build kind)"
    log "building kind $KIND_VERSION (go install sigs.k8s.io/kind@$KIND_VERSION)"
    mkdir -p "$KIND_BIN"
    (go_env; GOBIN="$KIND_BIN/.new" go install "sigs.k8s.io/kind@$KIND_VERSION")
    mv "$KIND_BIN/.new/kind" "$bin"
    rmdir "$KIND_BIN/.new" 2>/dev/null || true
  fi
  ln -sfn "kind-$KIND_VERSION" "$KIND_BIN/kind"
  echo "$bin"
}

ensure_capshim() { # hack/kind/capshim as a static binary; prints its path
  local src="$ROOT/hack/kind/capshim" bin="$KIND_BIN/capshim" hash
  hash="$(cat "$src/go.mod" "$src/main.go" | sha256sum | cut -c1-16)"
  if [[ ! -x "$bin" || "$(cat "$bin.inputs" 2>/dev/null)" != "$hash" ]]; then
    mkdir -p "$KIND_BIN"
    (go_env; cd "$src" && go build -trimpath -ldflags "-s -w" -o "$bin.new" .)
    mv "$bin.new" "$bin"
    echo "$hash" > "$bin.inputs"
  fi
  echo "$bin"
}
