"""What the e2e tests need on top of a bare cluster: cluster DNS (local provider),
a single-broker Kafka, and the streamq operator installed with its Helm chart."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path
from string import Template
from typing import Any

import yaml

from testbed.cluster.base import REPO_ROOT, Cluster, log, streamq_image_ref
from testbed.wait import wait_for

MANIFESTS = Path(__file__).parent / "manifests"
E2E_NAMESPACE = "streamq-e2e"
# Pod Security "restricted", enforced: the executor scenario runs here (no hostPath, no privilege).
RESTRICTED_NAMESPACE = "streamq-restricted"
OPERATOR_NAMESPACE = "streamq-system"
RELEASE = "streamq"
KAFKA_SERVICE = f"kafka.{E2E_NAMESPACE}.svc:9092"


def render(name: str, **values: object) -> str:
    return Template((MANIFESTS / name).read_text()).substitute({k: str(v) for k, v in values.items()})


def placed(manifest: str, placement: dict) -> str:
    """The manifest with ``placement`` (Cluster.infra_placement) in each workload's pod spec."""
    if not placement:
        return manifest
    docs = [doc for doc in yaml.safe_load_all(manifest) if doc]
    for doc in docs:
        if doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
            doc["spec"]["template"]["spec"].update(placement)
        elif doc.get("kind") == "Pod":
            doc["spec"].update(placement)
    return yaml.safe_dump_all(docs, sort_keys=False)


def _rollout(cluster: Cluster, namespace: str, what: str, timeout: int) -> None:
    def done() -> bool:
        return cluster.kubectl("-n", namespace, "rollout", "status", what, "--timeout=5s", check=False).returncode == 0

    def diagnose() -> str:
        pods = cluster.kubectl("-n", namespace, "get", "pods", "-o", "wide", check=False).stdout
        events = cluster.kubectl("-n", namespace, "get", "events", "--sort-by=.lastTimestamp", check=False).stdout
        return f"{pods}\n{events[-3000:]}"

    wait_for(done, timeout, lambda: f"{namespace}/{what}" + "\n" + diagnose(), interval=1, ignore=(Exception,))


def deploy_coredns(cluster: Cluster, cluster_dns: str) -> None:
    from testbed.cluster.local import node_images

    image = next(ref for ref in node_images() if "/coredns:" in ref)
    cluster.apply(render("coredns.yaml", IMAGE=image, CLUSTER_DNS=cluster_dns))
    _rollout(cluster, "kube-system", "deployment/coredns", 180)


def check_dns(cluster: Cluster) -> None:
    """A pod resolves kubernetes.default and reaches the API through its Service IP."""
    image = streamq_image_ref()
    cluster.kubectl("-n", E2E_NAMESPACE, "delete", "pod", "dns-check", "--ignore-not-found", "--wait=true")
    manifest = render("dns-check.yaml", IMAGE=image, NAMESPACE=E2E_NAMESPACE)
    cluster.apply(manifest)

    def finished() -> str | None:
        pod = cluster.kubectl_json("-n", E2E_NAMESPACE, "get", "pod", "dns-check")
        return pod["status"].get("phase") if pod["status"].get("phase") in ("Succeeded", "Failed") else None

    phase = wait_for(finished, 180, "the DNS check pod", interval=1, ignore=(Exception,))
    logs = cluster.kubectl("-n", E2E_NAMESPACE, "logs", "dns-check", check=False).stdout
    cluster.kubectl("-n", E2E_NAMESPACE, "delete", "pod", "dns-check", "--wait=false")
    if phase != "Succeeded":
        raise RuntimeError(f"in-cluster DNS / Service check failed:\n{logs}")
    log("DNS: " + " | ".join(line for line in logs.splitlines() if line.strip() and "not yet" not in line))


def deploy_kafka(cluster: Cluster) -> str:
    """The broker in E2E_NAMESPACE; returns the bootstrap address for clients on this machine."""
    host, port = cluster.kafka_external()
    cluster.apply(placed(render(
        "kafka.yaml", NAMESPACE=E2E_NAMESPACE, IMAGE=streamq_image_ref(), KAFKA_HOME=cluster.node_kafka_home(),
        KAFKA_DATA=cluster.node_dir("kafka-data"),  # survives the pod: a new broker pod has every record
        EXTERNAL_HOST=host, EXTERNAL_PORT=port,
    ), cluster.infra_placement()))  # fmt: skip
    _rollout(cluster, E2E_NAMESPACE, "deployment/kafka", 240)
    if hasattr(cluster, "start_kafka_port_forward"):
        cluster.start_kafka_port_forward(E2E_NAMESPACE)
    if not host:
        pod = cluster.kubectl_json("-n", E2E_NAMESPACE, "get", "pods", "-l", "app=kafka")["items"][0]
        host = pod["status"]["podIP"]
    bootstrap = f"{host}:{port}"

    def answers() -> bool:
        with socket.create_connection((host, port), timeout=3):
            return True

    wait_for(answers, 60, f"Kafka's external listener {bootstrap}", interval=1, ignore=(Exception,))
    return bootstrap


UNPULLABLE_IMAGE = "streamq-e2e-unpullable.invalid/streamq:missing"

# The e2e install's policy beside the chart's defaults: what tests/e2e/test_fraud_filter.py places its pods
# with (that priority class, toleration key, label and annotation prefix, and nothing else of the kind).
E2E_PRIORITY_CLASS = "streamq-e2e-streaming"
E2E_POLICY = {
    "allowedPriorityClasses": [E2E_PRIORITY_CLASS],
    "allowedTolerationKeys": ["example.com/dedicated"],
    "allowedLabelPrefixes": ["example.com/*"],
    "allowedAnnotationPrefixes": ["example.com/*"],
    # tests/e2e/test_waiting.py names it (containerd on the e2e node sends every registry to a closed
    # loopback port: it never pulls); allowed from the start, as a new policy would roll the operator.
    "allowedImages": [UNPULLABLE_IMAGE],
}


def operator_values(cluster: Cluster, current_chart: bool = True) -> dict[str, Any]:
    """The chart values the e2e clusters' operator is installed with (by ``helm install`` here, and by
    the GitOps tier's tools from Git): the image streamq:<version>, IfNotPresent. ``current_chart``
    False: an earlier chart (test_helm_upgrade's), which has no such policy values."""
    repository, tag = streamq_image_ref().rsplit(":", 1)
    policy = {
        # The tests keep checkpoints on a node directory: the policy must allow that one.
        "allowedVolumes": ["persistentVolumeClaim", "emptyDir", "hostPath"],
        "hostPathPrefixes": [cluster.node_dir_root],
        **(E2E_POLICY if current_chart else {}),
    }
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "jobs": {"imagePullPolicy": "IfNotPresent"},
        "operator": {
            # Namespaced, as the chart's default is: the operator's RBAC and the drivers'
            # accounts are bound in the namespaces the tests use, nowhere else.
            "watchNamespaces": [E2E_NAMESPACE, RESTRICTED_NAMESPACE],
            # Progress read every 5 s instead of 15: the tests wait on it.
            "extraEnv": [{"name": "STREAMQ_PROGRESS_INTERVAL_SECONDS", "value": "5"}],
            **cluster.infra_placement(),
        },
        "policy": policy,
    }


def _values_file(cluster: Cluster, current_chart: bool = True) -> str:
    with tempfile.NamedTemporaryFile("w", prefix="streamq-values-", suffix=".yaml", delete=False) as out:
        yaml.safe_dump(operator_values(cluster, current_chart), out)
    return out.name


def install_operator(cluster: Cluster, chart: Path | None = None, values: tuple[str, ...] = ()) -> None:
    """`helm install` of charts/streamq (or ``chart``: an earlier one, tests/e2e/test_helm_upgrade.py)
    with :func:`operator_values`; ``values`` are more helm arguments, last (they win)."""
    t0 = time.monotonic()
    values_file = _values_file(cluster, current_chart=chart is None)
    try:
        cluster.helm(
            "upgrade", "--install", RELEASE, str(chart or REPO_ROOT / "charts" / "streamq"),
            "--namespace", OPERATOR_NAMESPACE, "--create-namespace", "--values", values_file, *values,
            "--wait", "--timeout", "5m",
        )  # fmt: skip
    finally:
        os.unlink(values_file)
    log(f"operator installed with helm in {time.monotonic() - t0:.0f}s")


def render_operator(cluster: Cluster) -> str:
    """The chart as `helm template` renders it with :func:`operator_values`, its CRD included and its
    hooks left out: what a GitOps repository holds where no helm-controller runs (docs/gitops.md)."""
    values_file = _values_file(cluster)
    try:
        rendered: str = cluster.helm(
            "template", RELEASE, str(REPO_ROOT / "charts" / "streamq"), "--namespace", OPERATOR_NAMESPACE,
            "--include-crds", "--no-hooks", "--values", values_file,
        ).stdout  # fmt: skip
        return rendered
    finally:
        os.unlink(values_file)


def setup(cluster: Cluster, operator: bool = True) -> str:
    """Everything on top of a fresh cluster (the operator too unless ``operator`` is False: the GitOps
    tier's tools install it); returns Kafka's bootstrap for this machine."""
    from testbed.cluster.local import CLUSTER_DNS, LocalCluster

    t0 = time.monotonic()
    cluster.kubectl("create", "namespace", E2E_NAMESPACE, check=False)
    cluster.kubectl("create", "namespace", RESTRICTED_NAMESPACE, check=False)
    cluster.kubectl("label", "--overwrite", "namespace", RESTRICTED_NAMESPACE,
                    "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")  # fmt: skip
    if isinstance(cluster, LocalCluster):
        deploy_coredns(cluster, CLUSTER_DNS)
    check_dns(cluster)
    bootstrap = deploy_kafka(cluster)
    if operator:
        install_operator(cluster)
    log(f"addons ready in {time.monotonic() - t0:.0f}s; Kafka for this machine at {bootstrap}")
    return bootstrap
