"""The operator as its integration tests and bench/operator.py drive it.

The operator runs as a real process (``python -m controller``) against the real
kube-apiserver of the ``kube_apiserver`` fixture, authenticated as its own
ServiceAccount, so every call it makes also proves the RBAC in manifests/base.
There is no kubelet: a test plays the kubelet's part by writing the driver pod's
status (Running, or Failed with an exit code and a termination message) through
the status subresource, exactly where a kubelet would write it.
The fixtures around these (``cluster``, ``operator``, ...) are in tests/integration/conftest.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import GROUP, LABEL_QUERY, PLURAL, VERSION
from controller import names
from testbed.kube import KubeApiServer, free_port, wait_established
from testbed.specs import resource
from testbed.wait import wait_for

ROOT = Path(__file__).resolve().parents[1]
OPERATOR_NAMESPACE = "streamq-system"
OPERATOR_ACCOUNT = "streamq-operator"
JOB_IMAGE = "streamq:it"

# A minimal SparkApplication CRD written from kubeflow's published v1beta2 API
# (sparkoperator.k8s.io/v1beta2: SparkApplicationSpec's required fields and the
# status the spark-operator writes); nested pod specs are left unvalidated.
SPARK_APP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "sparkapplications.sparkoperator.k8s.io",
        # *.k8s.io groups need it; the value is the one kubeflow's CRD carries
        "annotations": {"api-approved.kubernetes.io": "https://github.com/kubeflow/spark-operator/pull/1298"},
    },
    "spec": {
        "group": "sparkoperator.k8s.io",
        "scope": "Namespaced",
        "names": {"kind": "SparkApplication", "plural": "sparkapplications", "singular": "sparkapplication",
                  "shortNames": ["sparkapp"]},
        "versions": [{
            "name": "v1beta2", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["type", "sparkVersion", "mainApplicationFile", "driver", "executor"],
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {
                            "type": {"type": "string", "enum": ["Java", "Python", "Scala", "R"]},
                            "sparkVersion": {"type": "string"},
                            "mode": {"type": "string", "enum": ["cluster", "client", "in-cluster-client"]},
                            "image": {"type": "string"},
                            "mainApplicationFile": {"type": "string"},
                            "arguments": {"type": "array", "items": {"type": "string"}},
                            "restartPolicy": {"type": "object", "properties": {
                                "type": {"type": "string", "enum": ["Never", "Always", "OnFailure"]}}},
                            "driver": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "executor": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                         "properties": {"instances": {"type": "integer", "minimum": 1}}},
                        },
                    },
                    "status": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {
                            "applicationState": {"type": "object", "properties": {
                                "state": {"type": "string"}, "errorMessage": {"type": "string"}}},
                        },
                    },
                },
            }},
        }],
    },
}  # fmt: skip


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def install_streamq(kube: KubeApiServer) -> Path:
    """The CRDs, the operator's namespace, ServiceAccount and RBAC from manifests/base, and
    SPARK_APP_CRD; returns a kubeconfig that authenticates as the operator's ServiceAccount."""
    base = ROOT / "manifests" / "base"
    for manifest in ("crd.yaml", "namespace.yaml", "operator-rbac.yaml", "driver-rbac.yaml"):
        kube.kubectl("apply", "-f", str(base / manifest))
    kube.kubectl("apply", "-f", "-", input=json.dumps(SPARK_APP_CRD))
    wait_established(kube.kubectl, "streamingqueries.streamq.io", "sparkapplications.sparkoperator.k8s.io")
    return kube.service_account_kubeconfig(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT, duration="4h")


# --- the operator process ---------------------------------------------------------------


class Operator:
    """`python -m controller` watching one namespace, as the operator's ServiceAccount."""

    def __init__(self, kubeconfig: Path, namespace: str, log_path: Path, env: dict[str, str] | None = None,
                 metrics_port: int = 0, verbose: bool = True):  # fmt: skip
        """``verbose``: kopf's and the client's debug lines too (tests read them; a benchmark runs as the
        chart does, without)."""
        self.kubeconfig, self.namespace, self.log_path = kubeconfig, namespace, log_path
        self.env = env or {}
        self.metrics_port = metrics_port
        self.proc: subprocess.Popen | None = None
        self.liveness_port = 0
        self.verbose = verbose

    def start(self, timeout: float = 120.0) -> Operator:
        self.liveness_port = free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "STREAMQ_JOB_IMAGE": JOB_IMAGE,
            "STREAMQ_RESYNC_INTERVAL_SECONDS": "10",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        argv = [
            sys.executable, "-m", "controller", "--standalone", "-n", self.namespace, *(["--verbose"] if self.verbose else []),
            "--metrics-port", str(self.metrics_port), "--liveness", f"http://127.0.0.1:{self.liveness_port}/healthz",
        ]  # fmt: skip
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        finally:
            log.close()
        wait_for(self._live, timeout, lambda: f"the operator's liveness endpoint\n{self.log_tail()}")
        return self

    def _live(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"the operator exited ({self.proc and self.proc.returncode}):\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no cleanup, no finalizers, whatever it was doing is cut off."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"


# --- the cluster, as a test sees it -----------------------------------------------------------


class Cluster:
    def __init__(self, kube: KubeApiServer, api_client: client.ApiClient, namespace: str):
        self.kube, self.api_client, self.namespace = kube, api_client, namespace
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    # -- StreamingQueries --------------------------------------------------------------

    def apply(self, name: str, spec: dict, check: bool = True) -> subprocess.CompletedProcess:
        """`kubectl apply` exactly as a user would (the manifest as JSON: no YAML 1.1 surprises)."""
        return self.kube.kubectl("apply", "-f", "-", input=json.dumps(resource(spec, name, self.namespace)), check=check)

    def get(self, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def status(self, name: str) -> dict:
        return (self.get(name) or {}).get("status") or {}

    def patch_spec(self, name: str, patch: dict) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, {"spec": patch})

    def wait_status(self, name: str, predicate: Callable[[dict], Any], timeout: float = 60.0, what: str = "") -> dict:
        wait_for(lambda: predicate(self.status(name)), timeout,
                 lambda: f"{what or 'status'} of {name}; status now: {json.dumps(self.status(name), indent=1)[:3000]}")  # fmt: skip
        return self.status(name)

    def wait_phase(self, name: str, phase: str, timeout: float = 60.0) -> dict:
        return self.wait_status(name, lambda s: s.get("phase") == phase, timeout, f"phase {phase}")

    def condition(self, name: str, kind: str) -> dict | None:
        return next((c for c in self.status(name).get("conditions", []) if c["type"] == kind), None)

    # -- drivers and children -----------------------------------------------------------

    def pods(self, query: str) -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(self.namespace, label_selector=f"{LABEL_QUERY}={query}").items

    def driver_pods(self, query: str) -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(self.namespace, label_selector=names.selector(query)).items

    def wait_driver(self, query: str, attempt: int, timeout: float = 60.0) -> client.V1Pod:
        name = names.driver_name(query, attempt)

        def found():
            pods = self.driver_pods(query)
            return next((p for p in pods if p.metadata.name == name and not p.metadata.deletion_timestamp), None)

        return wait_for(found, timeout, f"driver pod {name}")

    def config_map(self, query: str) -> client.V1ConfigMap:
        return self.core.read_namespaced_config_map(names.config_map_name(query), self.namespace)

    def query_document(self, query: str) -> dict:
        return json.loads(self.config_map(query).data["query.json"])

    def events(self, name: str) -> list[client.CoreV1Event]:
        return [e for e in self.core.list_namespaced_event(self.namespace).items
                if e.involved_object.kind == "StreamingQuery" and e.involved_object.name == name]  # fmt: skip

    def wait_event(self, name: str, reason: str, timeout: float = 30.0) -> client.CoreV1Event:
        return wait_for(lambda: next((e for e in self.events(name) if e.reason == reason), None), timeout,
                        f"event {reason} on {name}")  # fmt: skip

    # -- playing the kubelet ----------------------------------------------------------------

    def _patch_pod_status(self, pod: str, status: dict) -> None:
        self.core.patch_namespaced_pod_status(pod, self.namespace, {"status": status},
                                              _content_type="application/merge-patch+json")  # fmt: skip

    def pod_runs(self, pod: str, container: str = names.DRIVER_CONTAINER, pod_ip: str | None = None) -> None:
        """Running and Ready; at ``pod_ip`` if given (where a job process here serves its progress endpoint)."""
        t = now()
        self._patch_pod_status(pod, {
            "phase": "Running", "startTime": t,
            **({"podIP": pod_ip, "podIPs": [{"ip": pod_ip}]} if pod_ip else {}),
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t}],
            "containerStatuses": [{"name": container, "image": JOB_IMAGE, "imageID": "", "ready": True,
                                   "restartCount": 0, "started": True, "state": {"running": {"startedAt": t}}}],
        })  # fmt: skip

    def pod_cannot_pull(self, pod: str, container: str = names.DRIVER_CONTAINER) -> None:
        """Its image cannot be pulled (a tag that does not exist): Pending, the container waiting."""
        self._patch_pod_status(pod, {
            "phase": "Pending",
            "containerStatuses": [{"name": container, "image": JOB_IMAGE, "imageID": "", "ready": False,
                                   "restartCount": 0, "started": False, "state": {"waiting": {
                                       "reason": "ErrImagePull", "message": "failed to pull image: not found"}}}],
        })  # fmt: skip

    def pod_dies(self, pod: str, exit_code: int, message: str, container: str = names.DRIVER_CONTAINER) -> None:
        t = now()
        self._patch_pod_status(pod, {
            "phase": "Failed" if exit_code else "Succeeded",
            "containerStatuses": [{"name": container, "image": JOB_IMAGE, "imageID": "", "ready": False,
                                   "restartCount": 0, "started": False, "state": {"terminated": {
                                       "exitCode": exit_code, "reason": "Error" if exit_code else "Completed",
                                       "message": message, "startedAt": t, "finishedAt": t}}}],
        })  # fmt: skip
