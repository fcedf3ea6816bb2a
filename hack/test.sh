#!/usr/bin/env bash
# README command 2: install everything the tests need, then run every tier.
#   hack/test.sh                 unit + integration + e2e
#   hack/test.sh -m unit         any pytest arguments narrow it down
#   hack/test.sh -m multinode    a kind cluster with two workers, a worker stopped under queries
#                                (not in the default run: ~15 min warm, the node image ~25 min cold)
#   hack/test.sh -m gitops       Flux's and Argo CD's own controllers sync the operator and queries from
#                                a Git server onto a fresh cluster (not in the default run: building
#                                both tools takes ~16 min cold)
# Heavy artifacts (Kafka, connector and S3A jars, Kubernetes binaries and SeaweedFS
# built from source) are cached under ${STREAMQ_CACHE:-~/.cache/streamq} and rebuilt when missing.
#
# The default run (CI, `make test`) builds what only the object-store and e2e tests need
# (SeaweedFS, the node's Kubernetes components, the image, CoreDNS: ~14 min cold, nothing
# warm) in the background, at the lowest CPU weight, while the unit and integration tiers
# run: cold builds take the CPU those tests leave idle. The tests that need them run after.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$(date +%s)
PYTEST="${STREAMQ_VENV:-$ROOT/.venv}/bin/pytest"
hack/bootstrap.sh
hack/install-jars.sh

if [ $# -gt 0 ]; then
  hack/install-kube.sh integration helm  # the integration tier's apiserver, and helm for the chart tests
  hack/install-prometheus.sh             # promtool for the alert-rule tests
  # weed, an S3 store for the s3a:// checkpoint tests (~5-28 min cold, cached after): not for the
  # gitops tier alone, which stores no checkpoint in it
  marker="" previous=""
  for arg in "$@"; do [[ "$previous" == "-m" ]] && marker="$arg"; previous="$arg"; done
  if [[ "$marker" != "gitops" ]]; then hack/install-seaweedfs.sh; fi
  # e2e tier (when it may run): node components, images, CoreDNS; STREAMQ_E2E_SKIP_INSTALL=1 skips it
  if [[ "$*" == *e2e* ]] || [[ "$*" == *slow* ]] || [[ "$*" == *gitops* ]]; then hack/install-node.sh; fi
  # multinode tier (only when asked: -m multinode): a kind cluster with two workers; kind, its node
  # image and the engine come from hack/kind-up.sh prepare (the tier runs it), the image from here
  if [[ "$*" == *multinode* ]]; then hack/build-image.sh >/dev/null; fi
  # gitops tier (only when asked: -m gitops): Flux's source and kustomize controllers and Argo CD's
  # application controller and repo server, built from source (and Debian's Redis for Argo CD)
  if [[ "$*" == *gitops* ]]; then hack/install-flux.sh && hack/install-argocd.sh; fi
  echo "test: tools ready after $(( $(date +%s) - start ))s" >&2
  exec "$PYTEST" "$@"
fi

# ---------------------------------------------------------------- the default run
results="$(mktemp -d)"
# A session of its own whose autogroup has nice 19: plain nice weighs a process only against its own
# session's, and the tests' JVMs run in sessions of their own (kernel.sched_autogroup_enabled).
setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || renice -n 19 $$ >/dev/null
                   hack/install-seaweedfs.sh && hack/install-node.sh' >"$results/prepare.log" 2>&1 &
prepare=$!
trap 'kill -- -"$prepare" 2>/dev/null || true; rm -rf "$results"' EXIT  # a failed step below stops the builds
hack/install-kube.sh integration helm  # (install-kube.sh takes a lock: the background's waits for it)
hack/install-prometheus.sh
echo "test: tools for the first tiers ready after $(( $(date +%s) - start ))s; SeaweedFS, node and image in the background" >&2

# What needs the background's builds: the image's own test, the object store (SeaweedFS), the
# admission policy's type check (kube-controller-manager, built with the node), the cluster.
LATER=(tests/integration/test_image.py tests/integration/test_object_store.py tests/integration/test_admission_policy.py)
# CI's default: every tier but the few fault scenarios that take minutes each (`-m slow` runs them);
# the slowest tests by name, so CI's log says where its minutes go.
common=(--durations=40 --durations-min=10)
first=0
"$PYTEST" -m "(unit or integration) and not slow" "${LATER[@]/#/--ignore=}" "${common[@]}" \
  --junit-xml="$results/first.xml" || first=$?

built=0
wait "$prepare" || built=$?
cat "$results/prepare.log" >&2
if [ "$built" -ne 0 ]; then
  echo "test: building SeaweedFS, the node or the image failed (exit $built): see above" >&2
  exit "$built"
fi
echo "test: background builds done; the rest starts after $(( $(date +%s) - start ))s" >&2

second=0
"$PYTEST" -m "(integration or e2e) and not slow" "${LATER[@]}" tests/e2e "${common[@]}" \
  --junit-xml="$results/second.xml" || second=$?

# One closing line for both runs, and one exit code: 5 (no tests) only when neither ran any.
"${STREAMQ_VENV:-$ROOT/.venv}/bin/python" - "$results"/first.xml "$results"/second.xml <<'EOF' || true
import sys
import xml.etree.ElementTree as ET
totals = dict(tests=0, failures=0, errors=0, skipped=0)
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        continue
    for suite in root.iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, 0))
passed = totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"]
print(f"tests: {passed} passed, {totals['failures'] + totals['errors']} failed, {totals['skipped']} skipped")
EOF
echo "test: done after $(( $(date +%s) - start ))s" >&2
for rc in "$first" "$second"; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
done
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then exit 5; fi
exit 0
