"""Provider ``kind``: a kind cluster on a machine with a Docker engine.

The node gets the Kafka jars from the cache through an extraMount (the broker
pod mounts them with hostPath, as on the local provider) and a directory for
hostPath checkpoints; the streamq image goes in with ``kind load image-archive``.
Clients outside the cluster reach the broker through ``kubectl port-forward``
to its external listener, advertised as 127.0.0.1:<port>.

Not exercised on the machine this was written on (no Docker engine there: kind
cannot create a node); the local provider is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.e2e.cluster.base import Cluster, kafka_home, log, run, streamq_image_archive
from tests.support.wait import wait_for
from tests.support.kube import free_port, kube_bin

NODE_KAFKA_HOME = "/streamq/kafka"
NODE_HOSTPATH_DIR = "/streamq/hostpath"


class KindCluster(Cluster):
    provider = "kind"

    def __init__(self) -> None:
        self.name = os.environ.get("STREAMQ_KIND_CLUSTER", "streamq-e2e")
        self.node = f"{self.name}-control-plane"
        self.dir = Path(tempfile.mkdtemp(prefix="streamq-kind-"))
        self.kubeconfig = self.dir / "kubeconfig"
        self.kafka_port = free_port()
        self._port_forward: subprocess.Popen | None = None

    def _kind(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        kind = shutil.which("kind")
        if kind is None:
            raise FileNotFoundError("kind is not on PATH (the kind provider needs it: go install sigs.k8s.io/kind@latest)")
        return run([kind, *args], timeout=timeout)

    def up(self) -> "KindCluster":
        config = f"""kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    extraMounts:
      - hostPath: {kafka_home()}
        containerPath: {NODE_KAFKA_HOME}
        readOnly: true
"""
        (self.dir / "kind.yaml").write_text(config)
        existing = self._kind("get", "clusters").stdout.split()
        if self.name in existing:
            log(f"deleting the leftover kind cluster {self.name}")
            self._kind("delete", "cluster", "--name", self.name)
        t0 = time.monotonic()
        try:
            self._kind("create", "cluster", "--name", self.name, "--config", str(self.dir / "kind.yaml"),
                       "--kubeconfig", str(self.kubeconfig), "--wait", "180s")
            self.load_image(streamq_image_archive())
            wait_for(lambda: self.kubectl("-n", "kube-system", "rollout", "status", "deployment/coredns",
                                                    "--timeout=10s", check=False).returncode == 0, 180, "CoreDNS", interval=2, ignore=(Exception,))
        except BaseException:
            self.down()
            raise
        log(f"kind cluster {self.name} up in {time.monotonic() - t0:.0f}s")
        return self

    def down(self) -> None:
        if self._port_forward is not None and self._port_forward.poll() is None:
            self._port_forward.terminate()
            self._port_forward.wait(10)
        try:
            self._kind("delete", "cluster", "--name", self.name)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def load_image(self, archive: Path) -> None:
        self._kind("load", "image-archive", str(archive), "--name", self.name)

    def node_dir_root(self) -> str:
        return NODE_HOSTPATH_DIR

    def node_dir(self, name: str) -> str:
        path = f"{NODE_HOSTPATH_DIR}/{name}"
        run(["docker", "exec", self.node, "sh", "-c", f"rm -rf {path} && mkdir -p {path} && chown 1000:1000 {path}"])
        return path

    def node_kafka_home(self) -> str:
        return NODE_KAFKA_HOME

    def kill_container(self, container_id: str) -> None:
        cid = container_id.split("://", 1)[-1]
        run(["docker", "exec", self.node, "ctr", "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", "--all", cid])

    def kafka_external(self) -> tuple[str, int]:
        return ("127.0.0.1", self.kafka_port)

    def start_kafka_port_forward(self, namespace: str) -> None:
        """After the broker runs: 127.0.0.1:<port> on this machine -> its external listener."""
        argv = [str(kube_bin("kubectl")), f"--kubeconfig={self.kubeconfig}", "-n", namespace, "port-forward",
                "deployment/kafka", f"{self.kafka_port}:9094"]
        self._port_forward = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
