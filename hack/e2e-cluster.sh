#!/usr/bin/env bash
# The e2e tier's cluster by hand (the tests' session fixture does the same):
#   hack/e2e-cluster.sh up [--no-addons]   cluster + CoreDNS + Kafka + operator (Helm);
#                                          stays in the foreground, ^C tears it all down
#   hack/e2e-cluster.sh down               clean up what a crashed run left behind
#   hack/e2e-cluster.sh provider           the provider that would be used
# Provider: STREAMQ_E2E_PROVIDER=kind|local, else kind when `docker info` works.
# Prerequisites: hack/install-node.sh (binaries, images, Debian packages).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
exec "${STREAMQ_VENV:-$ROOT/.venv}/bin/python" -m testbed.cluster "$@"
