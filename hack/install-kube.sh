#!/usr/bin/env bash
# Build the Kubernetes binaries streamq's tests need, from source, through the
# Go module proxy, and cache them outside the repository:
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/kube/<k8s-version>/bin/
#
# Usage:
#   hack/install-kube.sh [--print-bin-dir] [--check] [COMPONENT|GROUP ...]
#
# Components: etcd kube-apiserver kubectl kube-controller-manager
#             kube-scheduler kubelet kube-proxy helm
# Groups:     integration = etcd kube-apiserver kubectl        (the default)
#             e2e | all   = every component above
# Components can also be given as KUBE_COMPONENTS="e2e" (space separated);
# arguments win over the variable.
#
#   --print-bin-dir  print the binary directory and exit (builds nothing)
#   --check          exit 0 if every requested binary is cached, 1 otherwise
#
# Environment:
#   STREAMQ_CACHE          cache root (default $HOME/.cache/streamq)
#   STREAMQ_KUBE_VERSION   Kubernetes version (default below)
#   STREAMQ_ETCD_VERSION   etcd version (default: what that Kubernetes pins in hack/lib/etcd.sh)
#   STREAMQ_HELM_VERSION   helm v3 version
#   STREAMQ_GOTOOLCHAIN    GOTOOLCHAIN for the builds (default: local, the installed go)
#   STREAMQ_GO_GOGC        GOGC of the Go toolchain's processes (default 400: faster
#                          compiles for a little more memory; also SeaweedFS, CoreDNS, kind)
#   STREAMQ_KUBELET_CGO    0 (default) builds kubelet static, in the same `go build` as
#                          the other node components; 1 links it with cgo, which
#                          compiles nearly every package again (cgo changes `net`,
#                          and with it the build ID of everything that imports it)
#
# `go install k8s.io/kubernetes/cmd/...@vX` is refused because that module has
# replace directives (its staging modules are v0.0.0 + replace). So this script
# writes a small wrapper module that requires k8s.io/kubernetes vX and replaces
# every staging module with its published v0.Y.Z, then `go build`s the cmd
# packages from it. etcd is built the same way from go.etcd.io/etcd/server/v3;
# helm has no replace directives and is built with `go install pkg@version`.
# A binary that is already cached is skipped; GOMODCACHE and GOCACHE live under
# the cache too, so a rebuild after a version bump is incremental.
set -euo pipefail
{ # Braces: bash reads the whole script before running it, so editing or
  # updating this file while a (long) build runs does not break that build.

KUBE_VERSION=${STREAMQ_KUBE_VERSION:-v1.33.13}
ETCD_VERSION=${STREAMQ_ETCD_VERSION:-}
HELM_VERSION=${STREAMQ_HELM_VERSION:-v3.21.4}

CACHE_ROOT=${STREAMQ_CACHE:-$HOME/.cache/streamq}
KUBE_CACHE=$CACHE_ROOT/kube
VERSION_DIR=$KUBE_CACHE/$KUBE_VERSION
BIN_DIR=$VERSION_DIR/bin

INTEGRATION_COMPONENTS=(etcd kube-apiserver kubectl)
ALL_COMPONENTS=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy helm)

log() { printf '[install-kube] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage() { sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }

# ---------------------------------------------------------------- arguments
print_bin_dir=0
check_only=0
requested=()
for arg in "$@"; do
  case "$arg" in
    --print-bin-dir) print_bin_dir=1 ;;
    --check) check_only=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option: $arg" ;;
    *) requested+=("$arg") ;;
  esac
done
if [[ ${#requested[@]} -eq 0 ]]; then
  read -r -a requested <<<"${KUBE_COMPONENTS:-integration}"
fi

if [[ $print_bin_dir -eq 1 ]]; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

components=()
add_component() {
  local c=$1 have
  for have in "${components[@]+"${components[@]}"}"; do [[ $have == "$c" ]] && return 0; done
  components+=("$c")
}
for word in "${requested[@]}"; do
  case "$word" in
    integration) for c in "${INTEGRATION_COMPONENTS[@]}"; do add_component "$c"; done ;;
    e2e|all) for c in "${ALL_COMPONENTS[@]}"; do add_component "$c"; done ;;
    etcd|kube-apiserver|kubectl|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|helm)
      add_component "$word" ;;
    *) die "unknown component or group: $word (see --help)" ;;
  esac
done

wanted() { local c; for c in "${components[@]}"; do [[ $c == "$1" ]] && return 0; done; return 1; }
missing() { wanted "$1" && [[ ! -x $BIN_DIR/$1 ]]; }

if [[ $check_only -eq 1 ]]; then
  status=0
  for c in "${components[@]}"; do
    if [[ -x $BIN_DIR/$c ]]; then log "ok      $BIN_DIR/$c"; else log "missing $BIN_DIR/$c"; status=1; fi
  done
  exit $status
fi

# ---------------------------------------------------------------- go setup
command -v go >/dev/null 2>&1 || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null 2>&1 || die "go not found (install Go >= 1.24 or put it on PATH)"

mkdir -p "$BIN_DIR" "$KUBE_CACHE/go"
export GOMODCACHE=$KUBE_CACHE/go/mod
export GOCACHE=$KUBE_CACHE/go/build
export GOPATH=$KUBE_CACHE/go/path
export GOTOOLCHAIN=${STREAMQ_GOTOOLCHAIN:-local}
export GOWORK=off
export GOFLAGS=-buildvcs=false
# The compiler and linker collect garbage 4x less often: a cold etcd build took 63-68 s against 80-81 s
# (GOGC=100), ~0.45 GiB per compile (bench/results/go-gogc-20261128.txt).
export GOGC=${STREAMQ_GO_GOGC:-400}
unset GOBIN GO111MODULE
# `go` may leave a background child behind (telemetry upload, up to a minute);
# it must not inherit the lock descriptor below, or the next run waits for it.
go() { command go "$@" 9>&-; }

# One build at a time per cache (parallel CI jobs sharing a cache, or a user
# running the script twice).
exec 9>"$KUBE_CACHE/.install.lock"
if ! flock -n 9; then
  log "another install-kube.sh holds $KUBE_CACHE/.install.lock; waiting"
  flock 9
fi

all_present=1
for c in "${components[@]}"; do [[ -x $BIN_DIR/$c ]] || all_present=0; done
if [[ $all_present -eq 1 ]]; then
  log "all requested binaries already cached (${components[*]})"
fi

# Facts about a module version, from the module proxy (`go list -m -f`).
mod_field() { # module@version template
  (cd "$VERSION_DIR" && go list -m -f "$2" "$1")
}
mod_dir() { # module@version -> its extracted source in GOMODCACHE
  (cd "$VERSION_DIR" && go mod download "$1" && go list -m -f '{{.Dir}}' "$1")
}
ORIGIN_HASH='{{with .Origin}}{{.Hash}}{{end}}'

STAGE=$(mktemp -d "$VERSION_DIR/.stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

timings=()
timed() { # label cmd... ; runs cmd, records the elapsed time
  local label=$1 start=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-48s %5ds' "$label" $((SECONDS - start)))")
}

install_from_stage() { # name...
  local n
  for n in "$@"; do
    [[ -x $STAGE/$n ]] || die "build did not produce $n"
    mv -f "$STAGE/$n" "$BIN_DIR/$n"
  done
}

# ---------------------------------------------------------------- kubernetes
KUBE_SRC=$VERSION_DIR/src/kubernetes
kube_prepared=0
KUBE_LDFLAGS=""
prepare_kube() {
  [[ $kube_prepared -eq 1 ]] && return 0
  log "resolving k8s.io/kubernetes@$KUBE_VERSION"
  local gomod commit date major minor x staging
  gomod=$(mod_field "k8s.io/kubernetes@$KUBE_VERSION" '{{.GoMod}}')
  commit=$(mod_field "k8s.io/kubernetes@$KUBE_VERSION" "$ORIGIN_HASH")
  date=$(mod_field "k8s.io/kubernetes@$KUBE_VERSION" '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}')
  [[ -f $gomod ]] || die "could not download the go.mod of k8s.io/kubernetes@$KUBE_VERSION"

  # The staging modules: `k8s.io/<name> v0.0.0` requirements of that go.mod.
  mapfile -t staging < <(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u)
  [[ ${#staging[@]} -gt 0 ]] || die "no staging modules found in $gomod"
  local staging_version=v0.${KUBE_VERSION#v1.}

  mkdir -p "$KUBE_SRC"
  {
    echo "// Generated by streamq hack/install-kube.sh: builds k8s.io/kubernetes $KUBE_VERSION binaries."
    echo "module streamq.invalid/kube-build"
    echo
    grep -m1 -E '^go [0-9]' "$gomod"
    grep -E '^godebug ' "$gomod" || true
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    for x in "${staging[@]}"; do printf '\t%s => %s %s\n' "$x" "$x" "$staging_version"; done
    echo ")"
  } >"$KUBE_SRC/go.mod.new"
  if ! cmp -s "$KUBE_SRC/go.mod.new" "$KUBE_SRC/go.mod.template" 2>/dev/null; then
    mv "$KUBE_SRC/go.mod.new" "$KUBE_SRC/go.mod.template"
    cp "$KUBE_SRC/go.mod.template" "$KUBE_SRC/go.mod"
    rm -f "$KUBE_SRC/go.sum"
  else
    rm -f "$KUBE_SRC/go.mod.new"
  fi
  log "wrapper module $KUBE_SRC/go.mod (${#staging[@]} staging modules -> $staging_version)"

  x=${KUBE_VERSION#v}
  major=${x%%.*}
  x=${x#*.}
  minor=${x%%.*}
  local -a kv=(
    "gitVersion=$KUBE_VERSION" "gitMajor=$major" "gitMinor=$minor"
    "gitCommit=$commit" "gitTreeState=clean" "buildDate=$date"
  )
  KUBE_LDFLAGS="all=-s -w"
  for x in "${kv[@]}"; do
    KUBE_LDFLAGS+=" -X k8s.io/component-base/version.$x -X k8s.io/client-go/pkg/version.$x"
  done
  kube_prepared=1
}

build_kube() { # cgo(0|1) name...
  local cgo=$1 n
  shift
  local -a pkgs=()
  for n in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$n"); done
  log "building $* (CGO_ENABLED=$cgo) from k8s.io/kubernetes@$KUBE_VERSION"
  (cd "$KUBE_SRC" && CGO_ENABLED=$cgo go build -mod=mod -trimpath \
      -tags selinux,notest -ldflags "$KUBE_LDFLAGS" -o "$STAGE/" "${pkgs[@]}")
  install_from_stage "$@"
}

# ---------------------------------------------------------------- etcd
build_etcd() {
  if [[ -z $ETCD_VERSION ]]; then
    prepare_kube
    local dir
    dir=$(mod_dir "k8s.io/kubernetes@$KUBE_VERSION")
    ETCD_VERSION=v$(sed -n -E 's/^ETCD_VERSION=\$\{ETCD_VERSION:-([0-9.]+)\}.*/\1/p' "$dir/hack/lib/etcd.sh")
    [[ $ETCD_VERSION != v ]] || die "could not read ETCD_VERSION from $dir/hack/lib/etcd.sh"
  fi
  log "building etcd $ETCD_VERSION (the version Kubernetes $KUBE_VERSION tests with)"
  local src=$VERSION_DIR/src/etcd sha
  sha=$(mod_field "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "$ORIGIN_HASH")
  mkdir -p "$src"
  if [[ ! -f $src/go.mod ]] || ! grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION\$" "$src/go.mod"; then
    printf '%s\nmodule streamq.invalid/etcd-build\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
      "// Generated by streamq hack/install-kube.sh: builds etcd $ETCD_VERSION." "$ETCD_VERSION" >"$src/go.mod"
    rm -f "$src/go.sum"
  fi
  (cd "$src" && CGO_ENABLED=0 go build -mod=mod -trimpath \
      -ldflags "-X go.etcd.io/etcd/api/v3/version.GitSHA=${sha:0:9}" \
      -o "$STAGE/etcd" go.etcd.io/etcd/server/v3)
  install_from_stage etcd
}

# ---------------------------------------------------------------- helm
build_helm() {
  log "building helm $HELM_VERSION"
  local gomod sha cgv cmaj cmin
  gomod=$(mod_field "helm.sh/helm/v3@$HELM_VERSION" '{{.GoMod}}')
  sha=$(mod_field "helm.sh/helm/v3@$HELM_VERSION" "$ORIGIN_HASH")
  # helm's Makefile derives the Kubernetes version it reports from client-go.
  cgv=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")
  cgv=${cgv#v}
  cmaj=$((${cgv%%.*} + 1))
  cmin=$(cut -d. -f2 <<<"$cgv")
  local ld="-s -w"
  ld+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ld+=" -X helm.sh/helm/v3/internal/version.metadata="
  ld+=" -X helm.sh/helm/v3/internal/version.gitCommit=$sha"
  ld+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  ld+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$cmaj"
  ld+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$cmin"
  ld+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$cmaj"
  ld+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$cmin"
  (cd "$VERSION_DIR" && GOBIN=$STAGE CGO_ENABLED=0 go install -trimpath -ldflags "$ld" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
  install_from_stage helm
}

# ---------------------------------------------------------------- main
log "go: $(go version) (GOTOOLCHAIN=$GOTOOLCHAIN)"
log "cache: $KUBE_CACHE; components: ${components[*]}"
total_start=$SECONDS

if missing etcd; then timed "etcd" build_etcd; fi

group=()
for c in kube-apiserver kubectl; do missing "$c" && group+=("$c"); done
if [[ ${#group[@]} -gt 0 ]]; then
  prepare_kube
  timed "${group[*]}" build_kube 0 "${group[@]}"
fi

# The node's components in one `go build`: static, they share every compiled package with
# kube-apiserver's build. A cgo kubelet (as upstream links it) shares almost none, and took
# 155-306 s of a cold run on its own (bench/results/ci-cold-20261126.txt).
kubelet_cgo=${STREAMQ_KUBELET_CGO:-0}
if [[ $kubelet_cgo == 1 ]] && ! command -v "${CC:-cc}" >/dev/null 2>&1; then
  log "no C compiler: building kubelet with CGO_ENABLED=0"
  kubelet_cgo=0
fi
group=()
node=(kube-controller-manager kube-scheduler kube-proxy)
[[ $kubelet_cgo == 0 ]] && node+=(kubelet)
for c in "${node[@]}"; do missing "$c" && group+=("$c"); done
if [[ ${#group[@]} -gt 0 ]]; then
  prepare_kube
  timed "${group[*]}" build_kube 0 "${group[@]}"
fi

if missing kubelet; then
  prepare_kube
  timed kubelet build_kube 1 kubelet
fi

if missing helm; then timed helm build_helm; fi

if [[ ${#timings[@]} -gt 0 ]]; then
  log "build times:"
  for t in "${timings[@]}"; do log "  $t"; done
  log "  $(printf '%-48s %5ds' total $((SECONDS - total_start)))"
fi

log "binaries in $BIN_DIR:"
for c in "${components[@]}"; do
  [[ -x $BIN_DIR/$c ]] || die "$BIN_DIR/$c is missing after the build"
  case "$c" in
    etcd) v=$("$BIN_DIR/$c" --version | sed -n 1p) ;;
    kubectl) v=$("$BIN_DIR/$c" version --client 2>/dev/null | sed -n 1p) ;;
    helm) v=$("$BIN_DIR/$c" version --short) ;;
    *) v=$("$BIN_DIR/$c" --version 2>/dev/null | sed -n 1p) ;;
  esac
  log "  $c: $v"
done
printf '%s\n' "$BIN_DIR"
exit 0
}
