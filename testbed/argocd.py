"""Argo CD's own application controller and repo server (built from source by hack/install-argocd.sh),
with Debian's Redis, run on this machine against a cluster's API server.

    with ArgoCD(kubeconfig, work_dir) as argocd:
        argocd.server                         # the destination server Applications name
        argocd.application("streamq")         # its object: status.sync, status.health, conditions

What a pod would have and a process here has not, and how it is given:
- the destination cluster: a cluster Secret with the API server's address and the kubeconfig's
  credentials (``kubernetes.default.svc`` exists only in a pod);
- the repo server's GnuPG keys: none (ARGOCD_GPG_ENABLED=false, as Argo CD's own local runs);
- helm, which the repo server runs to render a chart: the tests' own, on its PATH.
The argocd-cm ConfigMap is the project's (manifests/gitops/argocd/argocd-cm.yaml: the health of a
StreamingQuery and of an Application); the controller resyncs every ``reconciliation_s``, without jitter.

Used by the gitops tier (tests/e2e/gitops/test_argocd.py)."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from testbed.host_controllers import HostControllers, ToolMissing, built_dir
from testbed.kube import free_port, kube_bin, wait_established
from testbed.wait import wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "argocd"
ARGOCD_CM = REPO_ROOT / "manifests" / "gitops" / "argocd" / "argocd-cm.yaml"


class ArgoCDMissing(ToolMissing):
    pass


def argocd_dir() -> Path:
    found = built_dir(REPO_ROOT / "hack" / "install-argocd.sh", "Argo CD is", ArgoCDMissing)
    if shutil.which("redis-server") is None:
        raise ArgoCDMissing("redis-server is not installed: run hack/install-argocd.sh (hack/test.sh -m gitops does)")
    return found


def _credentials(kubeconfig: Path) -> tuple[str, dict[str, str]]:
    """The API server's address and the cluster Secret's tlsClientConfig, from ``kubeconfig``."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]

    def data(entry: dict[str, Any], key: str) -> str:
        if f"{key}-data" in entry:
            return str(entry[f"{key}-data"])
        return base64.b64encode(Path(entry[key]).read_bytes()).decode()

    tls = {"caData": data(cluster, "certificate-authority"), "certData": data(user, "client-certificate"),
           "keyData": data(user, "client-key")}  # fmt: skip
    return str(cluster["server"]), tls


class ArgoCD(HostControllers):
    def __init__(self, kubeconfig: Path, work: Path, reconciliation_s: int = 5) -> None:
        super().__init__(kubeconfig, work)
        self.reconciliation_s = reconciliation_s
        self.server, self._tls = _credentials(kubeconfig)

    def __enter__(self) -> ArgoCD:
        built = argocd_dir()
        self.work.mkdir(parents=True, exist_ok=True)
        self.kubectl("apply", "--server-side", "-f", str(built / "crds"))
        self.kubectl("create", "namespace", NAMESPACE, check=False)
        wait_established(self.kubectl, "applications.argoproj.io", "appprojects.argoproj.io")
        cm = yaml.safe_load(ARGOCD_CM.read_text())
        cm["metadata"]["labels"] = {"app.kubernetes.io/part-of": "argocd"}
        secret = {"apiVersion": "v1", "kind": "Secret",
                  "metadata": {"name": "argocd-secret", "namespace": NAMESPACE, "labels": {"app.kubernetes.io/part-of": "argocd"}},
                  "stringData": {"server.secretkey": base64.b64encode(os.urandom(24)).decode()}}  # fmt: skip
        project = {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                   "metadata": {"name": "default", "namespace": NAMESPACE},
                   "spec": {"sourceRepos": ["*"], "destinations": [{"namespace": "*", "server": "*"}],
                            "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}}  # fmt: skip
        destination = {"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "in-cluster", "namespace": NAMESPACE,
                                    "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
                       "stringData": {"name": "in-cluster", "server": self.server,
                                      "config": json.dumps({"tlsClientConfig": self._tls})}}  # fmt: skip
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                            "items": [cm, secret, project, destination]}))  # fmt: skip
        redis, repo_server = free_port(), free_port()
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "ARGOCD_NAMESPACE": NAMESPACE,
               "ARGOCD_GPG_ENABLED": "false", "ARGOCD_GNUPGHOME": str(self.work / "gnupg"),
               "PATH": f"{kube_bin('helm').parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
        self.start("redis", ["redis-server", "--bind", "127.0.0.1", "--port", str(redis), "--save", "",
                              "--appendonly", "no"], env)  # fmt: skip
        self.start("repo-server", [str(built / "bin" / "argocd-repo-server"), "--port", str(repo_server),
                                    "--redis", f"127.0.0.1:{redis}", "--disable-tls",
                                    # what a branch points at is cached for 3 min by default (a webhook would
                                    # refresh it): as short as the resync here, so a push is seen at the next one
                                    "--revision-cache-expiration", f"{self.reconciliation_s}s",
                                    "--metrics-port", str(free_port())], env)  # fmt: skip
        self.start("application-controller", [str(built / "bin" / "argocd-application-controller"),
                                               "--kubeconfig", str(self.kubeconfig), "--namespace", NAMESPACE,
                                               "--repo-server", f"127.0.0.1:{repo_server}", "--repo-server-plaintext",
                                               "--redis", f"127.0.0.1:{redis}", "--metrics-port", str(free_port()),
                                               # out of a pod argocd-cm's timeout.reconciliation is not read
                                               "--app-resync", str(self.reconciliation_s), "--app-resync-jitter", "0",
                                               # each resource's health (and its message) in the Application's
                                               # status, as before 3.0: what the UI shows, readable by kubectl
                                               "--persist-resource-health"],
                    env)  # fmt: skip
        return self

    def application(self, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", "application", "-n", NAMESPACE, name, "-o", "json").stdout)

    def state(self, name: str) -> str:
        """For a failure's message: the Application's sync, health and conditions, exited processes, logs' tails."""
        got = self.kubectl("get", "application", "-n", NAMESPACE, name, "-o", "json", check=False)
        status = json.loads(got.stdout).get("status", {}) if got.returncode == 0 else got.stderr
        short = (
            {k: status.get(k) for k in ("sync", "health", "conditions", "operationState")} if isinstance(status, dict) else status
        )
        return f"{json.dumps(short)[:3000]}\n{self.processes('repo-server', 'application-controller')}"

    def wait_synced(self, name: str, revision: str, timeout: float, health: str = "Healthy") -> dict[str, Any]:
        """Until the Application is Synced to ``revision`` (a commit) and its health is ``health``, as
        Argo CD reports them."""

        def synced() -> dict[str, Any] | None:
            app = self.application(name)
            status = app.get("status", {})
            sync, healthy = status.get("sync", {}), status.get("health", {})
            done = sync.get("status") == "Synced" and sync.get("revision") == revision and healthy.get("status") == health
            return app if done else None

        return wait_for(synced, timeout, lambda: f"{name} Synced to {revision} and {health}: {self.state(name)}",
                        ignore=(RuntimeError,))  # fmt: skip
