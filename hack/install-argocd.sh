#!/usr/bin/env bash
# Builds Argo CD from source through the Go module proxy, with its CRDs, and caches it outside
# the repository (never commit it): the application controller and the repo server of the
# GitOps tier (issue #42; they need a Redis: Debian's redis-server, installed here when missing).
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/argocd/<version>/
#     bin/argocd          Argo CD's multi-call binary; argocd-application-controller and
#                         argocd-repo-server are links to it (it runs the one its name says)
#     crds/               application-crd.yaml, appproject-crd.yaml
#     .complete           marker: the version built
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/argocd/go/{mod,build}   GOMODCACHE, GOCACHE
#
# Argo CD's go.mod replaces github.com/argoproj/gitops-engine with ./gitops-engine, a nested
# module its zip leaves out: the script copies the module, puts the gitops-engine version it
# requires at ./gitops-engine, and builds ./cmd as the main module.
#
# Usage: hack/install-argocd.sh [--print-dir]
# Idempotent. Cold: 392 s on 2 cores (2026-11-29, module downloads included).
# Knobs: STREAMQ_CACHE, STREAMQ_ARGOCD_VERSION, STREAMQ_GOTOOLCHAIN (default local), STREAMQ_GO_GOGC, FORCE=1.
# Out of a cluster the repo server needs ARGOCD_GPG_ENABLED=false (else it looks for
# /app/config/gpg/keys), and the destination cluster is a cluster Secret with the API server's
# address and credentials (kubernetes.default.svc exists only in a pod).
set -euo pipefail
{ # bash reads the whole block first: editing the script during a build is safe

VERSION="${STREAMQ_ARGOCD_VERSION:-v3.3.0}"
ROOT_CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}/argocd"
DEST="$ROOT_CACHE/$VERSION"
MODULE=github.com/argoproj/argo-cd/v3
ENGINE=github.com/argoproj/gitops-engine

log() { printf '[install-argocd] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# shellcheck source=hack/lib/go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-build.sh"
# The Redis both Argo CD components cache in: Debian's package, as Argo CD's install has its own
if [[ "${1:-}" != --print-dir ]] && ! command -v redis-server >/dev/null; then
  [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null || die "redis-server not found (Debian: apt-get install redis-server)"
  log "apt-get install redis-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # the package's own service is not ours: the tests start a redis-server of their own on a free port
  if command -v systemctl >/dev/null; then systemctl disable --now redis-server >/dev/null 2>&1 || true; fi
fi
go_install_begin "Argo CD" "$ROOT_CACHE" "$DEST" "$VERSION" "$@"
mkdir -p "$DEST/crds"
start=$SECONDS

src="$DEST/src"
engine_version=$(go_module_source "$MODULE" "$VERSION" "$ENGINE" gitops-engine "$src")
(cd "$src" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags='-s -w' -o "$DEST/bin/argocd.new" ./cmd \
  >"$DEST/build.log" 2>&1) || { tail -n 40 "$DEST/build.log" >&2; die "go build of Argo CD failed (log: $DEST/build.log)"; }
mv "$DEST/bin/argocd.new" "$DEST/bin/argocd"
for name in argocd-application-controller argocd-repo-server; do
  ln -sf argocd "$DEST/bin/$name"
  "$DEST/bin/$name" --help >/dev/null 2>&1 || die "the built $name does not run"
done
cp "$src"/manifests/crds/application-crd.yaml "$src"/manifests/crds/appproject-crd.yaml "$DEST/crds/"
rm -rf "$src"
printf '%s\n' "$VERSION" >"$DEST/.complete"
log "Argo CD $VERSION ($ENGINE $engine_version) built in $((SECONDS - start)) s: $DEST/bin"
exit 0
}
