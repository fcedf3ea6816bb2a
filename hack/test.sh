#!/usr/bin/env bash
# README command 2: install everything the tests need, then run every tier.
#   hack/test.sh                 unit + integration + e2e
#   hack/test.sh -m unit         any pytest arguments narrow it down
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
echo "test: tools ready after $(( $(date +%s) - start ))s" >&2
args=("$@")
# CI's default: every tier but the few fault scenarios that take minutes each (`-m slow` runs them)
# and the slowest tests by name, so CI's log says where its minutes go
[ ${#args[@]} -gt 0 ] || args=(-m "(unit or integration or e2e) and not slow" --durations=40 --durations-min=10)
exec "${STREAMQ_VENV:-$ROOT/.venv}/bin/pytest" "${args[@]}"
