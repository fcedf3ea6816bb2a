#!/usr/bin/env bash
# kubeadm for the kind node image, built from source the way hack/install-kube.sh
# builds the other Kubernetes binaries: from its wrapper module (every staging
# module replaced by its published version), with the same module and build
# caches, so only kubeadm's own packages compile. Prints the binary's path.
#
#   hack/kind/build-kubeadm.sh            -> $STREAMQ_CACHE/kind/<k8s-version>/kubeadm
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}"
KUBE_VERSION=${STREAMQ_KUBE_VERSION:-v1.33.13}
OUT="$CACHE/kind/$KUBE_VERSION/kubeadm"
log() { printf '[kind-kubeadm] %s\n' "$*" >&2; }

if [[ -x "$OUT" ]]; then echo "$OUT"; exit 0; fi
# The wrapper module (go.mod with its replace directives) is install-kube.sh's.
"$ROOT/hack/install-kube.sh" e2e >/dev/null
SRC="$CACHE/kube/$KUBE_VERSION/src/kubernetes"
[[ -f "$SRC/go.mod" ]] || { log "ERROR: no wrapper module in $SRC"; exit 1; }
command -v go >/dev/null 2>&1 || PATH=/usr/local/go/bin:$PATH
export GOMODCACHE=$CACHE/kube/go/mod GOCACHE=$CACHE/kube/go/build GOPATH=$CACHE/kube/go/path \
  GOTOOLCHAIN=${STREAMQ_GOTOOLCHAIN:-local} GOWORK=off GOFLAGS=-buildvcs=false
unset GOBIN GO111MODULE
cd "$SRC"
commit=$(go list -m -f '{{with .Origin}}{{.Hash}}{{end}}' "k8s.io/kubernetes@$KUBE_VERSION")
date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes@$KUBE_VERSION")
x=${KUBE_VERSION#v}; major=${x%%.*}; x=${x#*.}; minor=${x%%.*}
ld="all=-s -w"
for kv in "gitVersion=$KUBE_VERSION" "gitMajor=$major" "gitMinor=$minor" "gitCommit=$commit" \
  "gitTreeState=clean" "buildDate=$date"; do
  ld+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
mkdir -p "$(dirname "$OUT")"
t0=$SECONDS
log "building kubeadm $KUBE_VERSION from source"
CGO_ENABLED=0 go build -mod=mod -trimpath -tags selinux,notest -ldflags "$ld" -o "$OUT.new" k8s.io/kubernetes/cmd/kubeadm
"$OUT.new" version -o short | grep -qx "$KUBE_VERSION" || { log "ERROR: $OUT.new does not report $KUBE_VERSION"; exit 1; }
mv "$OUT.new" "$OUT"
log "kubeadm built in $((SECONDS - t0)) s"
echo "$OUT"
