"""SeaweedFS, an S3-compatible store, for the s3a:// checkpoint scenarios: deployed on demand
(tests/e2e/conftest.py's ``object_store`` fixture), not by ``addons.setup``: only a run that
selects one of them pays for its start."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
import urllib.request
from base64 import b64decode
from dataclasses import dataclass, field

from testbed.cluster.addons import E2E_NAMESPACE, _rollout, placed, render
from testbed.cluster.base import Cluster, log, streamq_image_ref
from testbed.wait import wait_for


@dataclass
class ObjectStore:
    """The SeaweedFS pod: its S3 API in the cluster and from this machine, one bucket, and the
    Secret (streamq-*, the policy's default allowedSecrets) with the only key pair it accepts."""

    endpoint: str  # for pods: the Service
    host_endpoint: str  # for this machine: the pod IP (local provider) or a port-forward
    bucket: str
    secret: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    port_forward: subprocess.Popen | None = field(default=None, repr=False)

    def stop(self) -> None:
        if self.port_forward is not None:
            self.port_forward.terminate()
            self.port_forward.wait(10)


S3_SECRET = "streamq-s3"
S3_BUCKET = "checkpoints"


def _port_forward(cluster: Cluster, target: str, port: int) -> tuple[subprocess.Popen, int]:
    """`kubectl port-forward` to a free port of 127.0.0.1 (for providers whose pod IPs this machine
    cannot reach); returns the process and the local port once it forwards."""
    from testbed.kube import kube_bin

    proc = subprocess.Popen([str(kube_bin("kubectl")), f"--kubeconfig={cluster.kubeconfig}", "-n", E2E_NAMESPACE,
                             "port-forward", target, f":{port}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    line = proc.stdout.readline()
    match = re.search(r"127\.0\.0\.1:(\d+)", line)
    if not match:
        proc.terminate()
        raise RuntimeError(f"kubectl port-forward {target}: {line}{proc.stdout.read()[-2000:]}")
    return proc, int(match.group(1))


def deploy_seaweedfs(cluster: Cluster) -> ObjectStore:
    """The store in E2E_NAMESPACE, with its bucket made; an existing Secret's keys are kept (the
    running store was configured with them)."""
    from testbed.cluster.local import LocalCluster
    from testbed.seaweedfs import signed_request

    t0 = time.monotonic()
    found = cluster.kubectl("-n", E2E_NAMESPACE, "get", "secret", S3_SECRET, "-o", "jsonpath={.data}", check=False)
    if found.returncode == 0 and found.stdout.strip():
        data = {k: b64decode(v).decode() for k, v in json.loads(found.stdout).items()}
        access, secret = data["accessKeyId"], data["secretAccessKey"]
    else:
        access, secret = "streamq" + secrets.token_hex(4), secrets.token_hex(20)
    cluster.apply(placed(render(
        "seaweedfs.yaml", NAMESPACE=E2E_NAMESPACE, IMAGE=streamq_image_ref(), WEED_DIR=cluster.node_weed_dir(),
        SECRET=S3_SECRET, BUCKET=S3_BUCKET, ACCESS_KEY=access, SECRET_KEY=secret,
    ), cluster.infra_placement()))  # fmt: skip
    _rollout(cluster, E2E_NAMESPACE, "deployment/seaweedfs", 180)
    forward = None
    if isinstance(cluster, LocalCluster):  # the host routes to the pod bridge
        pod = cluster.kubectl_json("-n", E2E_NAMESPACE, "get", "pods", "-l", "app=seaweedfs")["items"][0]
        host_endpoint = f"http://{pod['status']['podIP']}:8333"
    else:
        forward, port = _port_forward(cluster, "service/seaweedfs", 8333)
        host_endpoint = f"http://127.0.0.1:{port}"
    store = ObjectStore(
        f"http://seaweedfs.{E2E_NAMESPACE}.svc:8333", host_endpoint, S3_BUCKET, S3_SECRET, access, secret, forward
    )

    def lists_the_bucket() -> bool:
        with urllib.request.urlopen(signed_request("GET", f"{host_endpoint}/", access, secret), timeout=5) as reply:
            return S3_BUCKET in reply.read().decode()

    wait_for(lists_the_bucket, 60, f"SeaweedFS listing bucket {S3_BUCKET} at {host_endpoint}", interval=0.5, ignore=(Exception,))
    log(f"SeaweedFS ready in {time.monotonic() - t0:.0f}s at {store.endpoint} ({host_endpoint} from this machine)")
    return store
