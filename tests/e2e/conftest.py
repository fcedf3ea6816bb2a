"""The e2e tier: one cluster for all its tests, torn down after the last one even
when tests fail (or the run is interrupted by ^C or SIGTERM).

``cluster``  a :class:`testbed.cluster.Cluster` with CoreDNS (local provider), a
             single-broker Kafka in namespace streamq-e2e and the operator installed
             with its Helm chart
``kafka``    a client for that broker from this machine (:class:`testbed.cluster.workload.Kafka`)
``sq``       helpers for StreamingQueries in streamq-e2e (:class:`testbed.cluster.workload.Queries`)
``object_store``  SeaweedFS in streamq-e2e with a bucket and the Secret streamq-s3
             (:class:`testbed.cluster.addons.ObjectStore`), deployed by the first test that asks

STREAMQ_E2E_KUBECONFIG and STREAMQ_E2E_KAFKA_BOOTSTRAP (what ``hack/e2e-cluster.sh up``
prints) run the tests on a cluster that is already up, and leave it up.

Prerequisites come from ``hack/install-node.sh`` (``hack/test.sh`` runs it); when
they are missing the tests fail saying so (skip instead with STREAMQ_ALLOW_SKIP=1).
Figures the scenarios report (records in/out, duplicates, restart times) are
printed again in a summary at the end of the run.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.cluster.addons import E2E_NAMESPACE, RESTRICTED_NAMESPACE
from testbed.cluster.workload import FIGURES, LOG_DIR, Kafka, Queries

REPO_ROOT = Path(__file__).resolve().parents[2]


def _unavailable(message: str) -> None:
    if os.environ.get("STREAMQ_ALLOW_SKIP") == "1":
        pytest.skip(message + " Skipping because STREAMQ_ALLOW_SKIP=1.")
    pytest.fail(message + " Set STREAMQ_ALLOW_SKIP=1 to skip instead.", pytrace=False)


def _sigterm_as_interrupt() -> None:
    """SIGTERM (a CI timeout, kill) becomes KeyboardInterrupt: pytest then runs the
    fixture's teardown and the cluster goes down instead of leaving containers behind."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def fresh_cluster(operator: bool = True, what: str = "cluster, DNS, Kafka and operator") -> Iterator:
    """A cluster of the chosen provider brought up with DNS, Kafka and (``operator``) the chart's
    operator, torn down after the caller's last use: for package-scoped fixtures (the gitops tier's
    too, whose tools install the operator themselves)."""
    from testbed.cluster import choose_provider, create_cluster
    from testbed.cluster.addons import setup

    provider = choose_provider()
    check = subprocess.run(
        [str(REPO_ROOT / "hack" / "install-node.sh"), "--check", "--provider", provider],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check.returncode != 0:
        _unavailable(f"the e2e cluster's prerequisites are missing ({check.stderr.strip()}); run hack/install-node.sh.")
    if provider == "local" and os.geteuid() != 0:
        _unavailable("the local e2e cluster needs root (containerd, kubelet, iptables).")
    t0 = time.monotonic()
    _sigterm_as_interrupt()
    c = create_cluster(provider)
    if provider == "local":  # last resort when even the teardown below cannot run
        atexit.register(c.cleanup_if_still_up)
    c.up()
    try:
        c.kafka_bootstrap = setup(c, operator=operator)
        FIGURES.append(("session", f"provider {provider}: {what} ready in {time.monotonic() - t0:.0f}s"))
        yield c
    finally:
        t1 = time.monotonic()
        c.down()
        FIGURES.append(("session", f"cluster torn down in {time.monotonic() - t1:.0f}s"))


# Package scope: the cluster goes down after the last e2e test, not at the end of a
# run that goes on with other tiers (it holds CPUs and memory they need).
@pytest.fixture(scope="package")
def cluster():
    from testbed.cluster import create_cluster

    existing = os.environ.get("STREAMQ_E2E_KUBECONFIG")
    if existing:  # a cluster from `hack/e2e-cluster.sh up` (it prints both values): not torn down here
        c = create_cluster()
        c.kubeconfig = Path(existing)
        c.kafka_bootstrap = os.environ["STREAMQ_E2E_KAFKA_BOOTSTRAP"]
        yield c
        return
    yield from fresh_cluster()


@pytest.fixture(scope="package")
def kafka(cluster) -> Iterator[Kafka]:
    client = Kafka(cluster.kafka_bootstrap)
    yield client


@pytest.fixture(scope="package")
def object_store(cluster):
    """On demand, not in the cluster's setup: only the s3a:// scenarios pay for its start."""
    from testbed.cluster.seaweedfs import deploy_seaweedfs
    from testbed.seaweedfs import WeedMissing

    t0 = time.monotonic()
    try:
        store = deploy_seaweedfs(cluster)
    except WeedMissing as exc:
        _unavailable(str(exc))
    FIGURES.append(("session", f"SeaweedFS pod Ready with its bucket in {time.monotonic() - t0:.0f}s"))
    yield store
    store.stop()


def _queries(cluster, test: str, namespace: str) -> Iterator[Queries]:
    queries = Queries(cluster, test, namespace)
    try:
        yield queries
    finally:
        queries.report()
        queries.cleanup()


@pytest.fixture
def sq(cluster, request) -> Iterator[Queries]:
    yield from _queries(cluster, request.node.name, E2E_NAMESPACE)


@pytest.fixture
def sq_restricted(cluster, request) -> Iterator[Queries]:
    """Queries in a namespace that enforces Pod Security "restricted"."""
    yield from _queries(cluster, request.node.name, RESTRICTED_NAMESPACE)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not FIGURES:
        return
    terminalreporter.section("e2e figures")
    for test, line in FIGURES:
        terminalreporter.write_line(f"{test}: {line}")
    if LOG_DIR.is_dir():
        terminalreporter.write_line(f"per-test logs (kubectl get sq -o wide, events, operator log): {LOG_DIR}")
