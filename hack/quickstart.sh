#!/usr/bin/env bash
# README "On your cluster: the fraud filter in four commands": from a cluster to flagged payments, against the
# current kubeconfig (kind, the e2e tier's local node, any cluster whose nodes have the image).
#
#   hack/quickstart.sh [up]   in namespace streamq: the operator (Helm chart, serving that
#                             namespace), a one-node Kafka (manifests/quickstart/kafka.yaml),
#                             the topics payments (2 partitions) and payments-flagged, the
#                             checkpoint claim streamq-checkpoints, manifests/samples/fraud-filter.yaml
#                             as it is, and a payments feed; ends when the query is Ready
#   hack/quickstart.sh watch  the flagged payments as they arrive (^C stops)
#   hack/quickstart.sh down   the namespace and the release (the CRD stays)
#
# The image: `make image` builds streamq:<version>, the tag the chart expects. On a kind
# cluster (context kind-*) this script loads it into the nodes; elsewhere put it on the
# nodes yourself (ctr -n k8s.io images import ARCHIVE) or push it to a registry and say
# where: STREAMQ_IMAGE=registry.example.com/platform/streamq:0.1.0 hack/quickstart.sh.
#
# Checkpoint storage: the claim binds through the default StorageClass when it has a
# dynamic provisioner; without one (kubernetes.io/host-path, no-provisioner, none) a
# hostPath PersistentVolume on the Kafka pod's node is made, owned by the drivers' uid 1000.
#
# Environment: STREAMQ_QUICKSTART_NAMESPACE (streamq), STREAMQ_IMAGE, STREAMQ_IMAGE_TAG,
#   STREAMQ_QUICKSTART_STORAGE (auto | class | hostpath), STREAMQ_QUICKSTART_HOSTPATH
#   (the node directory of the hostpath mode, default /var/lib/streamq-quickstart/checkpoints),
#   STREAMQ_QUICKSTART_TIMEOUT (seconds per wait, default 300).
set -euo pipefail
shopt -s inherit_errexit

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NS="${STREAMQ_QUICKSTART_NAMESPACE:-streamq}"
RELEASE=streamq
QUERY=payments-flagged  # manifests/samples/fraud-filter.yaml
CLAIM=streamq-checkpoints
PV="streamq-quickstart-checkpoints-$NS"
HOSTPATH="${STREAMQ_QUICKSTART_HOSTPATH:-/var/lib/streamq-quickstart/checkpoints}"
TIMEOUT="${STREAMQ_QUICKSTART_TIMEOUT:-300}"
VERSION="$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n1)"
MANIFEST_IMAGE="streamq:$VERSION"  # what manifests/quickstart/*.yaml name (a unit test keeps them on the version)
IMAGE="${STREAMQ_IMAGE:-streamq:${STREAMQ_IMAGE_TAG:-$VERSION}}"

log() { printf '[quickstart %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# kubectl and helm from PATH, else the ones hack/install-kube.sh built.
tool() {
  if command -v "$1" >/dev/null; then command -v "$1"; return; fi
  local dir; dir="$("$ROOT/hack/install-kube.sh" --print-bin-dir 2>/dev/null || true)"
  [[ -x "$dir/$1" ]] || die "$1 not found on PATH (hack/install-kube.sh e2e builds kubectl and helm)"
  echo "$dir/$1"
}
KUBECTL="$(tool kubectl)"
k() { "$KUBECTL" "$@"; }
kn() { "$KUBECTL" -n "$NS" "$@"; }

manifest() { # manifest FILE: the file with the image this run uses
  sed "s#image: $MANIFEST_IMAGE\$#image: $IMAGE#" "$ROOT/manifests/quickstart/$1"
}

diagnose() {
  { kn get sq,pods,pvc -o wide; kn get events --sort-by=.lastTimestamp | tail -n 25; } >&2 || true
}

load_into_kind() {
  local context cluster kind archive
  context="$(k config current-context 2>/dev/null || true)"
  [[ "$context" == kind-* ]] || return 0
  cluster="${context#kind-}"
  kind="$(command -v kind || true)"
  [[ -n "$kind" ]] || kind="$(ls "${STREAMQ_CACHE:-$HOME/.cache/streamq}"/kind/bin/kind* 2>/dev/null | head -n1 || true)"
  [[ -n "$kind" ]] || { log "context $context is kind's, but kind is not on PATH: load the image yourself"; return 0; }
  if [[ -z "${DOCKER_HOST:-}" && -S /run/streamq-docker/docker.sock ]] && ! docker info >/dev/null 2>&1; then
    export DOCKER_HOST=unix:///run/streamq-docker/docker.sock  # the engine hack/kind-docker.sh started
  fi
  archive="$("$ROOT/hack/build-image.sh" --print-archive)"
  [[ -s "$archive" ]] || die "no image archive at $archive: run make image first"
  log "loading $archive into kind cluster $cluster"
  "$kind" load image-archive "$archive" --name "$cluster" >&2
}

checkpoint_storage() {
  local mode="${STREAMQ_QUICKSTART_STORAGE:-auto}" provisioner node
  if kn get pvc "$CLAIM" >/dev/null 2>&1; then
    log "checkpoint claim $CLAIM exists"
    return
  fi
  if [[ "$mode" == auto ]]; then
    provisioner="$(k get storageclass -o jsonpath='{range .items[?(@.metadata.annotations.storageclass\.kubernetes\.io/is-default-class=="true")]}{.provisioner}{"\n"}{end}' | head -n1)"
    case "$provisioner" in
      "" | kubernetes.io/host-path | kubernetes.io/no-provisioner) mode=hostpath ;;
      *) mode=class ;;
    esac
    log "checkpoint storage: $mode (default StorageClass provisioner: ${provisioner:-none})"
  fi
  case "$mode" in
    class)
      kn apply -f - <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $CLAIM, labels: {app.kubernetes.io/part-of: streamq-quickstart}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
YAML
      ;;
    hostpath)
      # The directory, owned by the drivers' uid, on the node the broker runs on (a node that
      # runs pods from this image); the volume is pinned to that node.
      node="$(kn get pods -l app.kubernetes.io/name=kafka -o jsonpath='{.items[0].spec.nodeName}')"
      [[ -n "$node" ]] || die "the Kafka pod has no node yet"
      kn delete job quickstart-checkpoint-dir --ignore-not-found >/dev/null
      manifest checkpoint-dir-job.yaml | sed "s#__NODE__#$node#; s#__HOSTPATH__#$HOSTPATH#" | kn apply -f - >/dev/null
      kn wait --for=condition=Complete job/quickstart-checkpoint-dir --timeout="${TIMEOUT}s" >/dev/null ||
        { diagnose; die "the job that prepares $HOSTPATH on node $node did not finish"; }
      kn delete job quickstart-checkpoint-dir --wait=false >/dev/null
      k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $PV, labels: {app.kubernetes.io/part-of: streamq-quickstart}}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: $HOSTPATH, type: Directory}
  claimRef: {namespace: $NS, name: $CLAIM}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$node]}]
YAML
      kn apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $CLAIM, labels: {app.kubernetes.io/part-of: streamq-quickstart}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: $PV
  resources: {requests: {storage: 1Gi}}
YAML
      log "checkpoint claim $CLAIM: hostPath $HOSTPATH on node $node"
      ;;
    *) die "STREAMQ_QUICKSTART_STORAGE must be auto, class or hostpath, not $mode" ;;
  esac
}

up() {
  local t0=$SECONDS helm repository tag elsewhere
  helm="$(tool helm)"
  log "cluster: $(k config current-context 2>/dev/null || echo '?'); namespace $NS; image $IMAGE"
  # The chart's cluster-scoped objects are named for the release: one release "streamq" per cluster.
  elsewhere="$("$helm" list --all-namespaces --filter '^streamq$' -o json | python3 -c 'import json, sys; print(" ".join(r["namespace"] for r in json.load(sys.stdin) if r["namespace"] != sys.argv[1]))' "$NS")"
  [[ -z "$elsewhere" ]] || die "release $RELEASE is installed in namespace $elsewhere: STREAMQ_QUICKSTART_NAMESPACE=$elsewhere, or helm uninstall it first"
  load_into_kind
  # The operator serves its release's namespace (the chart's default), where everything below goes.
  repository="${IMAGE%:*}" tag="${IMAGE##*:}"
  "$helm" upgrade --install "$RELEASE" "$ROOT/charts/streamq" --namespace "$NS" --create-namespace \
    --set image.repository="$repository" --set image.tag="$tag" --wait --timeout "${TIMEOUT}s" >/dev/null ||
    { diagnose; die "helm install did not finish (the image $IMAGE must be on the nodes or in a registry they reach)"; }
  log "operator: release $RELEASE in $NS, serving $NS ($((SECONDS - t0)) s)"

  manifest kafka.yaml | kn apply -f - >/dev/null
  # payments.py and the two modules of devtools it runs (the image carries no devtools):
  # payments-feed.yaml mounts them as /opt/quickstart/{payments.py,devtools/}
  kn create configmap quickstart-payments --from-file=payments.py="$ROOT/manifests/quickstart/payments.py" \
    --from-file=devtools-init.py="$ROOT/devtools/__init__.py" --from-file=devtools-payments.py="$ROOT/devtools/payments.py" \
    --from-file=devtools-payments-io.py="$ROOT/devtools/payments_io.py" \
    --dry-run=client -o yaml | kn apply -f - >/dev/null
  kn rollout status deployment/kafka --timeout="${TIMEOUT}s" >&2 || { diagnose; die "the Kafka broker did not start"; }
  # The feed creates the topics it needs before it sends (payments.py); they are waited for
  # here, from the feed's pod, so that the query finds them when it starts.
  manifest payments-feed.yaml | kn apply -f - >/dev/null
  kn rollout status deployment/payments-feed --timeout="${TIMEOUT}s" >&2 || { diagnose; die "the payments feed did not start"; }
  kn exec deployment/payments-feed -- python /opt/quickstart/payments.py topics >&2 || { diagnose; die "no topics"; }
  log "Kafka: kafka.$NS.svc:9092, topics created, payments flowing ($((SECONDS - t0)) s)"

  checkpoint_storage
  kn apply -f "$ROOT/manifests/samples/fraud-filter.yaml"
  if ! kn wait --for=condition=Ready "sq/$QUERY" --timeout="${TIMEOUT}s" >&2; then
    diagnose
    die "the query $QUERY is not Ready (kubectl -n $NS describe sq $QUERY says why)"
  fi
  kn get sq >&2
  log "ready in $((SECONDS - t0)) s. Next:"
  cat >&2 <<EOF
  kubectl -n $NS get sq -w                   # the query, its epoch and lag
  hack/quickstart.sh watch                   # flagged payments as they arrive (^C stops)
  kubectl -n $NS logs -l streamq.io/query=$QUERY,streamq.io/component=driver -f
  hack/quickstart.sh down                    # remove it all
EOF
}

watch_flagged() {
  exec "$KUBECTL" -n "$NS" exec -i deployment/payments-feed -- python -u /opt/quickstart/payments.py watch
}

down() {
  local helm; helm="$(tool helm)"
  kn delete sq --all --wait=true --timeout=120s >/dev/null 2>&1 || true
  "$helm" uninstall "$RELEASE" --namespace "$NS" --wait >/dev/null 2>&1 || true
  k delete namespace "$NS" --ignore-not-found --wait=true --timeout=180s >/dev/null || true
  k delete pv "$PV" --ignore-not-found >/dev/null || true
  log "removed namespace $NS and release $RELEASE (the CRD stays; the hostPath directory, if any, stays on its node)"
}

case "${1:-up}" in
  up) up ;;
  watch) watch_flagged ;;
  down) down ;;
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown command: $1 (up | watch | down)" ;;
esac
