"""Fixtures of the integration tier: the operator against a real kube-apiserver.

The helpers behind them (Operator, Cluster, SPARK_APP_CRD) are in testbed/operator.py;
``helm`` is the binary the chart tests run;
the kube-apiserver, Kafka and Spark fixtures are registered in tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.kube import KubeApiServer, kube_bin
from testbed.operator import Cluster, Operator, install_streamq, unique
from tests.support.kube_fixtures import require_kube_binaries
from tests.support.kubelet_logs import KubeletLogs


@pytest.fixture(scope="session")
def streamq_installed(kube_apiserver: KubeApiServer) -> Path:
    """streamq installed from manifests/base; a kubeconfig of the operator's ServiceAccount."""
    return install_streamq(kube_apiserver)


@pytest.fixture(scope="module")
def api_client(kube_apiserver: KubeApiServer):
    with kube_apiserver.api_client() as api:
        yield api


@pytest.fixture
def namespace(kube_apiserver: KubeApiServer, streamq_installed) -> str:
    """A namespace of its own per test (never deleted: no namespace controller runs here)."""
    name = unique("sq")
    kube_apiserver.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def cluster(kube_apiserver: KubeApiServer, api_client, namespace: str) -> Cluster:
    return Cluster(kube_apiserver, api_client, namespace)


@pytest.fixture
def start_operator(streamq_installed: Path, namespace: str, tmp_path: Path):
    """Start (and restart) operators on the test's namespace; all stopped at the end."""
    started: list[Operator] = []

    def start(metrics_port: int = 0, **env: str) -> Operator:
        op = Operator(streamq_installed, namespace, tmp_path / f"operator-{len(started)}.log", env=env,
                      metrics_port=metrics_port)  # fmt: skip
        started.append(op)
        return op.start()

    yield start
    for op in started:
        op.stop()
        print(f"--- {op.log_path.name} ---\n{op.log_tail(120)}")  # shown by pytest when the test fails


@pytest.fixture
def operator(start_operator) -> Operator:
    return start_operator()


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary `hack/install-kube.sh helm` builds (fails without it; STREAMQ_ALLOW_SKIP=1 skips)."""
    require_kube_binaries(("helm",))
    return kube_bin("helm")


@pytest.fixture
def kubelet(cluster, tmp_path):
    """Serves a local job's log where the API server asks the driver's kubelet for it."""
    logs = KubeletLogs(tmp_path)
    logs.node = unique("node")
    logs.register_node(cluster.core, logs.node)
    yield logs
    logs.stop()
    cluster.core.delete_node(logs.node)
