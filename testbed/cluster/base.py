"""What every cluster provider offers the e2e tests (see ``testbed/cluster/__init__.py``)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from testbed.kube import KubectlError, kube_bin

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("STREAMQ_CACHE") or Path.home() / ".cache" / "streamq")


def log(message: str) -> None:
    print(f"[e2e-cluster {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(
    argv: list[str], *, check: bool = True, timeout: float = 300, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """A command with text output; a failure raises with its stderr in the message."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input, env=env)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    return proc


def streamq_image_archive() -> Path:
    out = run([str(REPO_ROOT / "hack" / "build-image.sh"), "--print-archive"]).stdout.strip()
    return Path(out)


def streamq_image_ref() -> str:
    """`streamq:<version>`: what the chart and the operator put in pods."""
    version = ""
    text = (REPO_ROOT / "pyproject.toml").read_text()
    for line in text.splitlines():
        if line.startswith("version"):
            version = line.split("=", 1)[1].strip().strip('"')
            break
    tag = os.environ.get("STREAMQ_IMAGE_TAG") or version
    return f"{os.environ.get('STREAMQ_IMAGE_NAME', 'streamq')}:{tag}"


def kafka_home() -> Path:
    from testbed.kafka_broker import kafka_home as home

    return home()


class Cluster(ABC):
    """A running cluster: ``kubeconfig``, ``kubectl()``, and the few node-level
    operations the scenarios need (paths on the node, killing a container).

    A provider implements its lifecycle (``up``, ``load_image``, ``down``) and these node operations:

    - ``node_dir(name)``: a fresh directory on the node (for hostPath volumes), writable by uid 1000,
      in ``node_dir_root`` (the policy's hostPathPrefixes);
    - ``node_kafka_home()``, ``node_weed_dir()``: where the broker's jars and SeaweedFS's static ``weed``
      are on the node (their pods mount them);
    - ``kill_container(id)``: SIGKILL a container's processes through the runtime (``containerd://<id>``);
    - ``kafka_external()``: the (host, port) the broker advertises to clients outside the cluster.
    """

    provider = "?"
    kubeconfig: Path
    node_dir_root: str

    @abstractmethod
    def up(self) -> Cluster: ...
    @abstractmethod
    def load_image(self, archive: Path) -> None: ...
    @abstractmethod
    def down(self) -> None: ...
    @abstractmethod
    def node_dir(self, name: str) -> str: ...
    @abstractmethod
    def kill_container(self, container_id: str) -> None: ...
    @abstractmethod
    def node_kafka_home(self) -> str: ...
    @abstractmethod
    def node_weed_dir(self) -> str: ...
    @abstractmethod
    def kafka_external(self) -> tuple[str, int]: ...

    # -- faults (tests/e2e/test_faults_control_plane.py); the local provider has them --
    def stop_apiserver(self) -> None:
        """Stop the kube-apiserver process (etcd and everything else keep running)."""
        raise NotImplementedError(f"provider {self.provider} cannot stop its apiserver")

    def start_apiserver(self, timeout: float = 120) -> None:
        """Start it again with the same flags; returns when /readyz says ok."""
        raise NotImplementedError(f"provider {self.provider} cannot start its apiserver")

    def restart_node_component(self, name: str, down_s: float = 0) -> None:
        """Restart the node's ``kubelet`` or ``containerd`` process (down ``down_s`` seconds)."""
        raise NotImplementedError(f"provider {self.provider} cannot restart {name}")

    def infra_placement(self) -> dict[str, Any]:
        """Pod spec fields that keep the add-ons (Kafka, the operator, DNS) on a node no test stops:
        none on one node; the control-plane node on a cluster with workers (KindCluster)."""
        return {}

    def diagnostics(self) -> str:
        return ""

    # -- clients --------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        argv = [str(kube_bin("kubectl")), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc

    def api_client(self):
        """A ``kubernetes.client.ApiClient`` on the kubeconfig: for readers that poll often (a kubectl
        process each time costs the node's CPU)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", input=manifest)

    def helm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return run([str(kube_bin("helm")), f"--kubeconfig={self.kubeconfig}", *args], timeout=timeout)

    def __enter__(self) -> Cluster:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()
