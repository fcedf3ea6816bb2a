#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from source through the
# Go module proxy, with their CRDs, and caches them outside the repository (never
# commit them): the real controllers of the GitOps tier (issue #42).
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/flux/<version>/
#     bin/source-controller bin/kustomize-controller
#     crds/               their CRDs (GitRepository, Kustomization, ...), from the same sources
#     .complete           marker: the version built
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/flux/go/{mod,build}   GOMODCACHE, GOCACHE
#
# Each controller's go.mod replaces its own api module with ./api, a nested module the
# module's zip leaves out: the script copies the controller's module, puts the api module
# it requires at ./api, and builds the controller as the main module (its other
# replaces, go.sum and versions as released).
# v1.9.1: v1.10.x needs Go 1.27 (this machine has 1.26); kustomize-controller v1.8.5
# is not served.
#
# Usage: hack/install-flux.sh [--print-dir]
# Idempotent. Cold: source-controller 385 s, kustomize-controller 168 s on 2 cores
# (2026-11-28, module downloads included). Knobs: STREAMQ_CACHE, STREAMQ_FLUX_VERSION,
# STREAMQ_GOTOOLCHAIN (default local), STREAMQ_GO_GOGC, FORCE=1.
set -euo pipefail
{ # bash reads the whole block first: editing the script during a build is safe

VERSION="${STREAMQ_FLUX_VERSION:-v1.9.1}"
ROOT_CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}/flux"
DEST="$ROOT_CACHE/$VERSION"
CONTROLLERS=(source-controller kustomize-controller)

log() { printf '[install-flux] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# shellcheck source=hack/lib/go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-build.sh"
go_install_begin "Flux controllers" "$ROOT_CACHE" "$DEST" "$VERSION" "$@"
mkdir -p "$DEST/crds"

for controller in "${CONTROLLERS[@]}"; do
  start=$SECONDS
  module="github.com/fluxcd/$controller"
  src="$DEST/src/$controller"
  api_version=$(go_module_source "$module" "$VERSION" "$module/api" api "$src")
  (cd "$src" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags='-s -w' -o "$DEST/bin/$controller.new" . \
    >"$DEST/$controller.build.log" 2>&1) || { tail -n 40 "$DEST/$controller.build.log" >&2; die "go build of $controller failed"; }
  mv "$DEST/bin/$controller.new" "$DEST/bin/$controller"
  cp "$src"/config/crd/bases/*.yaml "$DEST/crds/"
  "$DEST/bin/$controller" --help >/dev/null 2>&1 || die "the built $controller does not run"
  log "$controller $VERSION (api $api_version) built in $((SECONDS - start)) s"
done
rm -rf "$DEST/src"
printf '%s\n' "$VERSION" >"$DEST/.complete"
log "Flux controllers $VERSION in $DEST/bin, CRDs in $DEST/crds"
exit 0
}
