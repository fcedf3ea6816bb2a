"""The multinode tier (``hack/test.sh -m multinode``): a kind cluster with two workers, where a
worker is stopped for real (its node container paused) under a running query.

``cluster``       a KindCluster with 2 workers: Kafka, DNS and the operator on the control-plane
                  node (which keeps its NoSchedule taint), queries on the workers
``object_store``  SeaweedFS on this machine at kind's network gateway, with one access key pair in
                  the Secret ``streamq-s3`` of the e2e namespace: the checkpoints, which every
                  node reaches (a node's own disk dies with it)

STREAMQ_MULTINODE_KEEP=1 leaves the cluster up after the run and uses it again next time.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.cluster.addons import E2E_NAMESPACE
from testbed.cluster.workload import FIGURES, LOG_DIR, Kafka
from testbed.seaweedfs import SeaweedS3

RESULTS_DIR = Path(__file__).resolve().parents[3] / "bench" / "results"

WORKERS = 2
S3_SECRET = "streamq-s3"
BUCKET = "streamq-checkpoints"


def _keep() -> bool:
    return os.environ.get("STREAMQ_MULTINODE_KEEP") == "1"


@pytest.fixture(scope="package")
def cluster():
    from testbed.cluster.addons import setup
    from testbed.cluster.kind import KindCluster

    c = KindCluster(os.environ.get("STREAMQ_MULTINODE_CLUSTER", "streamq-multinode"), workers=WORKERS)
    if _keep() and c.kubeconfig.exists() and c.kafka_port:
        c.kafka_bootstrap = f"127.0.0.1:{c.kafka_port}"  # up from an earlier run, add-ons included
        yield c
        return
    t0 = time.monotonic()
    c.up()
    try:
        c.kafka_bootstrap = setup(c)
        FIGURES.append(
            ("session", f"kind with {WORKERS} workers: cluster, Kafka and operator ready in {time.monotonic() - t0:.0f}s")
        )
        yield c
    finally:
        if not _keep():
            c.down()


@pytest.fixture(scope="package", autouse=True)
def figures_file() -> Iterator[None]:
    """The run's figures as JSON in bench/results/multinode-kind-<UTC time>.json, the file docs/benchmarks.md
    cites (and a copy in the run's log folder)."""
    yield
    finished = time.gmtime()
    body = json.dumps({"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", finished),
                       "figures": [{"test": t, "line": line} for t, line in FIGURES]}, indent=2) + "\n"  # fmt: skip
    out = RESULTS_DIR / f"multinode-kind-{time.strftime('%Y%m%dT%H%M%SZ', finished)}.json"
    for path in (out, LOG_DIR / "multinode-figures.json"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    print(f"\nmultinode figures: {out}")


@pytest.fixture(scope="package")
def kafka(cluster) -> Iterator[Kafka]:
    yield Kafka(cluster.kafka_bootstrap)


@pytest.fixture(scope="package")
def object_store(cluster, tmp_path_factory) -> Iterator[SeaweedS3]:
    store = cluster.host_object_store(tmp_path_factory.mktemp("seaweedfs"), E2E_NAMESPACE, S3_SECRET, BUCKET)
    try:
        yield store
    finally:
        store.stop()
