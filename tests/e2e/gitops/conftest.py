"""The gitops tier on a whole cluster (``hack/test.sh -m gitops``): the tools install the operator
from Git, so this package's cluster comes up without it (DNS and Kafka only).

``cluster``  a fresh cluster of the e2e provider without the operator, torn down after this package
``kafka``    a client for its broker from this machine
``flux``     Flux's source and kustomize controllers (testbed/flux.py) against that cluster, with a
             Git server on loopback (testbed/gitserver.py), for one test
``argocd``   Argo CD's application controller and repo server with a Redis (testbed/argocd.py), and
             a Git server, for one test

Figures (sync to Ready, change to new driver) go to bench/results/gitops-<UTC time>.json."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed.argocd import ArgoCD, argocd_dir
from testbed.cluster.workload import FIGURES, Kafka
from testbed.flux import FluxControllers, flux_dir
from testbed.gitserver import GitServer
from testbed.host_controllers import HostControllers, ToolMissing
from tests.e2e.conftest import fresh_cluster

RESULTS_DIR = Path(__file__).resolve().parents[3] / "bench" / "results"


@pytest.fixture(scope="package")
def cluster():
    yield from fresh_cluster(operator=False, what="cluster, DNS and Kafka (no operator: the tools install it)")


@pytest.fixture(scope="package")
def kafka(cluster) -> Iterator[Kafka]:
    yield Kafka(cluster.kafka_bootstrap)


@pytest.fixture(scope="package", autouse=True)
def figures_file() -> Iterator[None]:
    """This package's figures as JSON in bench/results/gitops-<UTC time>.json (docs/gitops.md cites it)."""
    yield
    finished = time.gmtime()
    lines = [{"test": t, "line": line} for t, line in FIGURES]
    out = RESULTS_DIR / f"gitops-{time.strftime('%Y%m%dT%H%M%SZ', finished)}.json"
    out.write_text(json.dumps({"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", finished), "figures": lines}, indent=2) + "\n")
    print(f"\ngitops figures: {out}")


def _tool(cluster, tmp_path_factory, controllers: type[HostControllers], built: Callable[[], object]) -> Iterator:
    try:
        built()
    except ToolMissing as exc:
        pytest.fail(str(exc))
    work = tmp_path_factory.mktemp(controllers.__name__.lower())
    with controllers(cluster.kubeconfig, work) as running, GitServer(work / "git") as git:
        yield running, git


@pytest.fixture
def flux(cluster, tmp_path_factory) -> Iterator[tuple[FluxControllers, GitServer]]:
    yield from _tool(cluster, tmp_path_factory, FluxControllers, flux_dir)


@pytest.fixture
def argocd(cluster, tmp_path_factory) -> Iterator[tuple[ArgoCD, GitServer]]:
    yield from _tool(cluster, tmp_path_factory, ArgoCD, argocd_dir)
