#!/usr/bin/env bash
# README command 2: install everything the tests need, then run every tier.
#   hack/test.sh                 unit + integration + e2e
#   hack/test.sh -m unit         any pytest arguments narrow it down
#   hack/test.sh -m multinode    a kind cluster with two workers, a worker stopped under queries
#                                (not in the default run: ~15 min warm, the node image ~25 min cold)
# Heavy artifacts (Kafka, connector and S3A jars, Kubernetes binaries and SeaweedFS
# built from source) are cached under ${STREAMQ_CACHE:-~/.cache/streamq} and rebuilt when missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$(date +%s)
hack/bootstrap.sh
hack/install-jars.sh
hack/install-kube.sh
hack/install-prometheus.sh  # promtool for the alert-rule tests
hack/install-seaweedfs.sh   # weed, an S3 store for the s3a:// checkpoint tests (~4 min cold, cached after)
# e2e tier (when it may run): node components, images, CoreDNS; STREAMQ_E2E_SKIP_INSTALL=1 skips it
if [ $# -eq 0 ] || [[ "$*" == *e2e* ]] || [[ "$*" == *slow* ]]; then hack/install-node.sh; fi
# multinode tier (only when asked: -m multinode): a kind cluster with two workers; kind, its node
# image and the engine come from hack/kind-up.sh prepare (the tier runs it), the image from here
if [[ "$*" == *multinode* ]]; then hack/build-image.sh >/dev/null; fi
echo "test: tools ready after $(( $(date +%s) - start ))s" >&2
args=("$@")
# CI's default: every tier but the few fault scenarios that take minutes each (`-m slow` runs them)
# and the slowest tests by name, so CI's log says where its minutes go
[ ${#args[@]} -gt 0 ] || args=(-m "(unit or integration or e2e) and not slow" --durations=40 --durations-min=10)
exec "${STREAMQ_VENV:-$ROOT/.venv}/bin/pytest" "${args[@]}"
