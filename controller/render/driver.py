"""What a query's driver is given whichever backend runs it, a pod or a SparkApplication (pure):
image, environment, security contexts, and where it is scheduled."""

from __future__ import annotations

from typing import Any

from contract import (
    EXECUTORS_FILE_ENV,
    EXECUTORS_FILE_NAME,
    EXECUTORS_MOUNT_DIR,
    POD_IP_ENV,
    PROGRESS_FILE_ENV,
    PROGRESS_PORT_ENV,
    QUERY_ENV,
    READY_FILE,
    READY_FILE_ENV,
    SECRETS_DIR_ENV,
    SECRETS_MOUNT_DIR,
    SPEC_FILE_NAME,
    SPEC_MOUNT_DIR,
)
from contract import placement as contract_placement
from contract.lease import LEASE_ENV, lease_name
from contract.spec import QuerySpec
from controller import names, placement
from controller.config import Settings
from controller.render import lease_access
from controller.run import Run

PROGRESS_FILE = "/tmp/streamq/progress.json"
SPEC_PATH = f"{SPEC_MOUNT_DIR}/{SPEC_FILE_NAME}"

# The NoExecute taints the node controller puts on a node that stopped reporting (not-ready) or
# cannot be reached (unreachable). Kubernetes' DefaultTolerationSeconds gives every pod 300 s of
# them; a driver gets restartPolicy.nodeLostAfter, so the next one (or the standby) starts sooner.
NODE_LOST_TAINTS = contract_placement.NODE_LOST_TAINTS  # a query's own tolerations of them are refused
HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"


def image_of(spec: QuerySpec, settings: Settings) -> str:
    return spec.runtime.image or settings.job_image


def pod_security_context(settings: Settings) -> dict[str, Any]:
    uid = settings.run_as_user
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(read_only_root: bool = True) -> dict[str, Any]:
    """Pod Security "restricted", and a read-only root filesystem: the job writes only to /tmp
    (an emptyDir), the checkpoint volume and its termination-message file. SparkApplication
    pods keep a writable one: spark-operator's own mounts and work directory are not ours."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "privileged": False,
            "readOnlyRootFilesystem": read_only_root}  # fmt: skip


def driver_env(run: Run, settings: Settings) -> list[dict[str, Any]]:
    return [
        {"name": PROGRESS_FILE_ENV, "value": PROGRESS_FILE},
        *([{"name": PROGRESS_PORT_ENV, "value": str(settings.progress_port)}] if settings.progress_port else []),
        {"name": SECRETS_DIR_ENV, "value": SECRETS_MOUNT_DIR},
        {"name": QUERY_ENV, "value": run.query},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},  # spark.driver.host
        {"name": READY_FILE_ENV, "value": READY_FILE},
        *([{"name": LEASE_ENV, "value": lease_name(run.query)}] if lease_access.needs_lease(run, settings.policy) else []),
        *(
            [{"name": EXECUTORS_FILE_ENV, "value": f"{EXECUTORS_MOUNT_DIR}/{EXECUTORS_FILE_NAME}"}]
            if run.resizes_in_place
            else []
        ),
    ]


def driver_tolerations(run: Run, settings: Settings) -> list[dict[str, Any]]:
    seconds = run.spec.restart_policy.node_lost_after_s(fenced=lease_access.needs_lease(run, settings.policy))
    return [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
            for key in NODE_LOST_TAINTS]  # fmt: skip


def driver_affinity(run: Run) -> dict[str, Any] | None:
    """A standby query's two drivers prefer different nodes, so one node lost takes one of them.
    Preferred, not required: on one node (or a full cluster) both still run there. Only the
    query's drivers are counted: its executors, and other queries' drivers, land anywhere.
    Not for a hostPath checkpoint: it is one node's directory, a standby elsewhere would not see it
    (a persistentVolumeClaim must then be ReadWriteMany: docs/operations.md)."""
    volume = run.spec.checkpoint.volume
    if not run.spec.runtime.standby or (volume is not None and volume.host_path is not None):
        return None
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {"labelSelector": {"matchLabels": names.labels(run.query, names.COMPONENT_DRIVER)},
                            "topologyKey": HOSTNAME_TOPOLOGY},
    }]}}  # fmt: skip


def scheduling(run: Run, settings: Settings, account_key: str) -> dict[str, Any]:
    """The driver's node selector, tolerations, affinity, priority class (the spec's and the
    operator's: controller.placement) and service account, where it has them (a pod names its
    account serviceAccountName, a SparkApplication's driver serviceAccount)."""
    out = placement.scheduling(run.spec.runtime.driver, driver_tolerations(run, settings), driver_affinity(run))
    account = lease_access.service_account(run, settings)
    if account:
        out[account_key] = account
    return out
