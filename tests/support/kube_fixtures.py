"""pytest fixtures for a real kube-apiserver (registered in tests/conftest.py).

``kube_apiserver`` (session scope) yields a started :class:`KubeApiServer`:
``kube_apiserver.kubeconfig`` is the admin kubeconfig path,
``kube_apiserver.api_client()`` a ``kubernetes`` client, ``kube_apiserver.kubectl(...)``
runs kubectl against it.

Missing binaries fail the test with instructions (run ``hack/install-kube.sh``);
they skip it instead only when ``STREAMQ_ALLOW_SKIP=1``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from testbed.kube import KubeApiServer, kube_bin_dir, missing_binaries

REQUIRED = ("etcd", "kube-apiserver", "kubectl")


def require_kube_binaries(names=REQUIRED) -> None:
    """Fail (or skip, with STREAMQ_ALLOW_SKIP=1) when a cached binary is missing."""
    missing = missing_binaries(names)
    if not missing:
        return
    msg = (
        f"Kubernetes binaries not installed: {', '.join(missing)} (looked in {kube_bin_dir()}). "
        "Build them with `hack/install-kube.sh` (cold build: tens of minutes)."
    )
    if os.environ.get("STREAMQ_ALLOW_SKIP") == "1":
        pytest.skip(msg + " Skipping because STREAMQ_ALLOW_SKIP=1.")
    pytest.fail(msg + " Set STREAMQ_ALLOW_SKIP=1 to skip instead.", pytrace=False)


@pytest.fixture(scope="session")
def kube_apiserver() -> Iterator[KubeApiServer]:
    """etcd + kube-apiserver on loopback for the whole test session."""
    require_kube_binaries()
    server = KubeApiServer().start()
    try:
        yield server
    finally:
        died = server.exited()
        if died:  # the whole session's server gone: keep its directory, say where
            server.keep_dir = True
            print(f"\nkube_apiserver: {died}\n(kept: {server.dir})", file=sys.__stderr__)  # past the capture
        server.stop()
