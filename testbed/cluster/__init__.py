"""Whole clusters for the e2e tier, behind one entry point.

    from testbed.cluster import create_cluster
    cluster = create_cluster()        # provider from STREAMQ_E2E_PROVIDER, else auto
    cluster.up(); ...; cluster.down()

Providers:
  kind   a kind cluster; chosen automatically only when `docker info` works
         (kind itself must be on PATH; images go in with `kind load image-archive`).
  local  one node on this machine from the cached source-built binaries, containerd
         and runc from Debian (see local.py); hack/install-node.sh installs it all.

On top of either, ``testbed.cluster.addons`` deploys CoreDNS (local only: kind
has its own), a single-broker Kafka and the operator through its Helm chart.

By hand: ``hack/e2e-cluster.sh up`` (stays in the foreground; ^C tears down),
``hack/e2e-cluster.sh down`` (cleans a crashed run's leftovers).
"""

from __future__ import annotations

import os
import shutil
import subprocess

from testbed.cluster.base import Cluster

PROVIDERS = ("kind", "local")


def docker_works() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def choose_provider() -> str:
    forced = os.environ.get("STREAMQ_E2E_PROVIDER", "").strip()
    if forced and forced != "auto":
        if forced not in PROVIDERS:
            raise ValueError(f"STREAMQ_E2E_PROVIDER must be one of {', '.join(PROVIDERS)} (or auto), not {forced!r}")
        return forced
    return "kind" if docker_works() else "local"


def create_cluster(provider: str | None = None) -> Cluster:
    provider = provider or choose_provider()
    if provider == "kind":
        from testbed.cluster.kind import KindCluster

        return KindCluster()
    from testbed.cluster.local import LocalCluster

    return LocalCluster()


__all__ = ["Cluster", "PROVIDERS", "choose_provider", "create_cluster", "docker_works"]
