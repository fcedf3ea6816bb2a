#!/usr/bin/env bash
# streamq on a kind cluster: README "Try it on kind".
#
#   hack/kind-up.sh [up] [--no-sample | --no-operator] [--workers N]   (options in any order)
#       the tools (venv, Kafka jars, kubectl/helm from source, the streamq image),
#       a Docker engine (yours when `docker info` answers, else hack/kind-docker.sh
#       starts one of its own), kind, the node image (hack/kind-image.sh builds it
#       here; STREAMQ_KIND_NODE_IMAGE=kindest/node:v1.33.x uses a published one),
#       then the cluster "streamq" with the streamq image loaded, a Kafka broker,
#       the operator (Helm chart) and the fraud-filter sample: it waits until the
#       query is Ready and its flagged payments are in the output topic.
#       --workers N: N worker nodes beside the control plane (queries run on the
#       workers; Kafka, DNS and the operator stay on the control-plane node).
#       --no-operator: the cluster alone (the image loaded, DNS), for the README's
#       cluster quick start, which installs Kafka and streamq itself (make quickstart).
#       Cold (nothing cached): ~40 min here; warm: a few minutes.
#   hack/kind-up.sh down         delete the cluster (and stop our Docker engine if idle)
#   hack/kind-up.sh kubeconfig   print the cluster's kubeconfig path
#   hack/kind-up.sh prepare      the engine, kind and the node image only; prints
#                                DOCKER_HOST=, KIND=, NODE_IMAGE= (the e2e tier's kind
#                                provider runs this)
#
# Environment: STREAMQ_KIND_CLUSTER (cluster name, default streamq),
#   STREAMQ_KIND_NODE_IMAGE, STREAMQ_KIND_OWN_DOCKER=1, STREAMQ_CACHE.
set -euo pipefail
_kind_log_tag=kind-up
source "$(dirname "${BASH_SOURCE[0]}")/kind/lib.sh"
cd "$ROOT"
PY="${STREAMQ_VENV:-$ROOT/.venv}/bin/python"
NAME="${STREAMQ_KIND_CLUSTER:-streamq}"

prepare() {
  local line image kind
  line="$("$ROOT/hack/kind-docker.sh" up | grep '^DOCKER_HOST=')"
  if [[ -n "${line#DOCKER_HOST=}" ]]; then export DOCKER_HOST="${line#DOCKER_HOST=}"; fi
  kind="$(ensure_kind)"
  if [[ -n "${STREAMQ_KIND_NODE_IMAGE:-}" ]]; then
    image="$STREAMQ_KIND_NODE_IMAGE"
  else
    image="$("$ROOT/hack/kind-image.sh")"
  fi
  echo "DOCKER_HOST=${DOCKER_HOST:-}"
  echo "KIND=$kind"
  echo "NODE_IMAGE=$image"
}

case "${1:-up}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  up | --*)  # `up` may be left out: the options alone bring a cluster up
    [[ "${1:-}" == up ]] && shift
    t0=$SECONDS
    "$ROOT/hack/bootstrap.sh"
    "$ROOT/hack/install-jars.sh"
    "$ROOT/hack/install-kube.sh" e2e >/dev/null
    "$ROOT/hack/build-image.sh" >/dev/null
    log "tools ready after $((SECONDS - t0)) s"
    prepare >/dev/null  # builds what is missing now, so that the cluster's timing is its own
    log "engine, kind and node image ready after $((SECONDS - t0)) s"
    "$PY" -m testbed.cluster.kind up --name "$NAME" "$@"
    log "done in $((SECONDS - t0)) s; the cluster stays up: hack/kind-up.sh down removes it"
    ;;
  down) "$PY" -m testbed.cluster.kind down --name "$NAME" ;;
  kubeconfig) "$PY" -m testbed.cluster.kind kubeconfig --name "$NAME" ;;
  prepare) prepare ;;
  *) die "unknown command: $1 (up|down|kubeconfig|prepare)" ;;
esac
