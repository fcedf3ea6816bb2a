"""kwok's fake nodes beside a KubeApiServer: pods that reach Running without a kubelet, a JVM or an image.

kwok (``sigs.k8s.io/kwok``, the tool Kubernetes' own scale tests use) is built from the Go module
proxy into ``~/.cache/streamq/kwok/<version>/bin`` the first time, like the Kubernetes binaries.
kube-scheduler (built with those) binds the pods to the fake nodes; kwok then plays each node's
kubelet: the pod is Running and Ready, with an address from ``POD_CIDR``.

``POD_CIDR`` is inside 127.0.0.0/8, which Linux routes to loopback as a whole: every pod's address is
an address of this machine, so one process listening on 0.0.0.0 answers for all of them and tells
them apart by the address a connection came in on (bench.fake_drivers).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from testbed.kube import KubeApiServer, _die_with_parent, free_port, kube_bin
from testbed.wait import wait_for

KWOK_VERSION = "v0.8.0"
POD_CIDR = "127.16.0.0/12"  # 1M loopback addresses
FAKE_NODE_LABEL = "streamq.io/fake-node"


def kwok_bin() -> Path:
    """The kwok binary, built on first use (about 2 minutes on 2 cores)."""
    target = Path.home() / ".cache" / "streamq" / "kwok" / KWOK_VERSION / "bin"
    binary = target / "kwok"
    if not binary.is_file():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "install", f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}"], check=True,
                       env={**os.environ, "GOBIN": str(target), "CGO_ENABLED": "0"}, timeout=1800)  # fmt: skip
    return binary


def stages_config(target: Path) -> Path:
    """kwok's own "fast" stages (a node Ready at once; a pod Running at once, with an address; deleted
    at once), read from the module kwok was built from, as one config file."""
    mod = subprocess.run(["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True).stdout.strip()
    stage = Path(mod) / f"sigs.k8s.io/kwok@{KWOK_VERSION}" / "kustomize" / "stage"
    files = sorted((stage / "node" / "fast").glob("*.yaml")) + sorted((stage / "pod" / "fast").glob("*.yaml"))
    docs = [f.read_text() for f in files if f.name != "kustomization.yaml"]
    if not docs:
        raise FileNotFoundError(f"kwok's stages are not in {stage}: kwok_bin() downloads the module")
    target.write_text("\n---\n".join(docs))
    return target


def fake_node(name: str, cores: int = 1000, pods: int = 1000) -> dict[str, Any]:
    """A node kwok manages (by FAKE_NODE_LABEL), with room for ``pods`` drivers of a core each."""
    capacity = {"cpu": str(cores), "memory": "4Ti", "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {FAKE_NODE_LABEL: "true", "kubernetes.io/hostname": name},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },  # fmt: skip
        "status": {"capacity": capacity, "allocatable": capacity},
    }


class FakeNodes:
    """kube-scheduler and kwok against ``kube``; :meth:`add` makes nodes. Stop with :meth:`stop`."""

    def __init__(self, kube: KubeApiServer, workdir: Path):
        self.kube, self.workdir = kube, workdir
        self.procs: list[subprocess.Popen] = []

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "w")  # the process keeps it open
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.procs.append(proc)
        return proc

    def start(self) -> FakeNodes:
        kubeconfig = str(self.kube.kubeconfig)
        self._spawn("kube-scheduler", [str(kube_bin("kube-scheduler")), f"--kubeconfig={kubeconfig}",
                                       "--leader-elect=false", "--bind-address=127.0.0.1",
                                       f"--secure-port={free_port()}"])  # fmt: skip
        kwok = str(kwok_bin())
        self._spawn("kwok", [kwok, f"--config={stages_config(self.workdir / 'kwok-stages.yaml')}", f"--kubeconfig={kubeconfig}",
                             f"--manage-nodes-with-label-selector={FAKE_NODE_LABEL}=true",
                             f"--cidr={POD_CIDR}", "--node-ip=127.0.0.1",
                             f"--server-address=127.0.0.1:{free_port()}"])  # fmt: skip
        return self

    def add(self, count: int, cores: int = 1000, pods: int = 1000) -> list[str]:
        from kubernetes import client

        core = client.CoreV1Api(self.kube.api_client())
        names = [f"fake-{i}" for i in range(count)]
        for name in names:
            core.create_node(fake_node(name, cores, pods))
        # The API server gives a new node the not-ready taint (TaintNodesByCondition) and only the node
        # lifecycle controller takes it off: there is none here, so it goes once kwok reports Ready.
        for name in names:
            wait_for(lambda name=name: any(c.type == "Ready" and c.status == "True"
                                           for c in core.read_node(name).status.conditions or []), 60, f"node {name} Ready")  # fmt: skip
            core.patch_node(name, {"spec": {"taints": None}})
        return names

    def exited(self) -> str | None:
        for proc in self.procs:
            if proc.poll() is not None:
                return f"{proc.args[0]} exited with {proc.returncode}"
        return None

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
