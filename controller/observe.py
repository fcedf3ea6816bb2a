"""What exists for a query, read into plain dataclasses.

The parsing functions are pure (dict in, dataclass out); ``observe()`` does the
reads: the driver pods and, when the backend may use them, SparkApplications; and
a standby query's Lease when one of its drivers was evicted from a lost node (the
Lease says whether that driver can still write: ``decide.drivers.terminating``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from contract import EXECUTORS_ANNOTATION
from contract.lease import LEASE_ENV, lease_name
from controller import names
from controller.run import DriverKind
from controller.status import parse_time

_MESSAGE_CHARS = 4096  # what Kubernetes keeps of a termination message
_WAITING_CHARS = 1024  # a scheduler's message grows with the cluster (one clause per kind of node)
# Waiting reasons of a container that starts normally: not worth a word in status.
_ON_ITS_WAY = (None, "", "ContainerCreating", "PodInitializing")
# The pod condition Kubernetes (1.26+) writes on a pod it deletes because its node carries a
# NoExecute taint the pod no longer tolerates: node.kubernetes.io/not-ready or /unreachable
# past the driver's tolerationSeconds (restartPolicy.nodeLostAfter), i.e. its node is lost.
DISRUPTION_TARGET = "DisruptionTarget"
NODE_LOST_REASON = "DeletionByTaintManager"


class DriverPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def ended(self) -> bool:
        return self in (DriverPhase.SUCCEEDED, DriverPhase.FAILED)


@dataclass(frozen=True)
class Driver:
    """One driver (pod, or SparkApplication with its pod) as the decisions need it."""

    kind: DriverKind
    name: str
    phase: DriverPhase
    attempt: int | None = None
    spec_hash: str | None = None
    restart_nonce: str | None = None  # None: not recorded (a driver of an older operator); "": none
    owner_uid: str | None = None  # the controlling owner (the StreamingQuery)
    owner_kind: str | None = None  # its kind: a StreamingQuery's (ours, or an earlier one's of the same name) or not
    deleting: bool = False
    deletion_due: datetime | None = None  # deletionTimestamp: when its grace period ends
    standby: bool = False  # created as a standby (spec.runtime.standby); it keeps the label once it takes over
    fenced: bool = False  # a pod that runs the query only while it holds the query's Lease (standby queries)
    node_lost: bool = False  # evicted by Kubernetes because its node is lost (DisruptionTarget: DeletionByTaintManager)
    ready: bool = False  # the pod's Ready condition: its readiness probe found the job warm or running (app.driver.ready)
    cpu_request: str | None = None  # the driver container's CPU request as the pod spec has it (a waiting driver's is small)
    cpu_allocated: str | None = None  # ... as the kubelet has actuated it (containerStatuses[].resources; Kubernetes 1.33+)
    resize: str | None = None  # "Reason: message" of the pod's PodResizePending condition (Deferred, Infeasible)
    exit_code: int | None = None
    reason: str | None = None  # why it ended: Error, OOMKilled, Evicted, SUBMISSION_FAILED...
    message: str | None = None  # the termination message the job wrote
    waiting: str | None = None  # why it does not run yet, as Kubernetes says it: "ErrImagePull: ..."
    waiting_reason: str | None = None  # the reason alone: Unschedulable, ErrImagePull, CreateContainerConfigError...
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    pod_ip: str | None = None  # status.podIP
    progress_port: int | None = None  # the driver container's port named `progress` (app.monitoring.endpoint)
    # The executors a micro-batch driver pod is to have (EXECUTORS_ANNOTATION, app.driver.executors);
    # None: not a driver that resizes in place
    executors_wanted: int | None = None

    @property
    def active(self) -> bool:
        return not self.phase.ended


@dataclass(frozen=True)
class LeaseState:
    """A standby query's Lease as the API server has it (app.driver.lease_holder writes it)."""

    name: str
    holder: str | None = None
    renew_time: datetime | None = None  # the holder's clock
    duration_s: float | None = None

    @property
    def expires_at(self) -> datetime | None:
        """When the record stops being valid, on the holder's clock; None when it never was renewed."""
        if self.renew_time is None or self.duration_s is None:
            return None
        return self.renew_time + timedelta(seconds=self.duration_s)


@dataclass(frozen=True)
class Observed:
    drivers: tuple[Driver, ...] = ()
    lease: LeaseState | None = None  # read only when a fenced driver's node is lost (``needs_lease``)
    # The credentials Secrets the spec names: their type and labels, None for a missing one (never their data)
    secrets: dict[str, dict[str, Any] | None] = field(default_factory=dict)


def _identity(meta: dict[str, Any]) -> dict[str, Any]:
    """What a driver's metadata says, pod or SparkApplication: which attempt of which spec,
    whose it is, whether it is going."""
    annotations = meta.get("annotations") or {}
    return {
        "name": meta.get("name", ""),
        "attempt": _attempt(meta),
        "spec_hash": annotations.get(names.ANNOTATION_SPEC_HASH),
        "restart_nonce": annotations.get(names.ANNOTATION_RESTART_NONCE),
        "owner_uid": _controller_uid(meta),
        "owner_kind": _controller_kind(meta),
        "deleting": bool(meta.get("deletionTimestamp")),
        "deletion_due": parse_time(meta.get("deletionTimestamp")),
        "standby": (meta.get("labels") or {}).get(names.LABEL_ROLE) == names.ROLE_STANDBY,
        "created_at": parse_time(meta.get("creationTimestamp")),
    }


def _attempt(meta: dict[str, Any]) -> int | None:
    value = (meta.get("labels") or {}).get(names.LABEL_ATTEMPT)
    return int(value) if value is not None and str(value).isdigit() else None


def _controller_kind(meta: dict[str, Any]) -> str | None:
    kind: str | None = next((ref.get("kind") for ref in meta.get("ownerReferences") or [] if ref.get("controller")), None)
    return kind


def _controller_uid(meta: dict[str, Any]) -> str | None:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            uid: str | None = ref.get("uid")
            return uid
    return None


def _container_status(pod: dict[str, Any]) -> dict[str, Any] | None:
    statuses: list[dict[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == names.DRIVER_CONTAINER:
            return status
    # spark-operator names the driver container itself (names.SPARK_APP_DRIVER_CONTAINER)
    return statuses[0] if statuses else None


def executors_wanted(meta: dict[str, Any]) -> int | None:
    """A driver pod's EXECUTORS_ANNOTATION as a number; None when absent or not one (the driver ignores it too)."""
    value = (meta.get("annotations") or {}).get(EXECUTORS_ANNOTATION)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 4:
        return None
    return int(value)


def _progress_port(pod: dict[str, Any]) -> int | None:
    """The port a driver of ours serves its progress on; None for a driver made before the channel (or by Spark's
    operator), whose progress is read from its log."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == names.DRIVER_CONTAINER:
            for port in container.get("ports") or []:
                if port.get("name") == names.PORT_PROGRESS and isinstance(port.get("containerPort"), int):
                    return int(port["containerPort"])
    return None


def _cpu_request(pod: dict[str, Any]) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == names.DRIVER_CONTAINER:
            return ((container.get("resources") or {}).get("requests") or {}).get("cpu")
    return None


def resize_pending(pod: dict[str, Any]) -> str | None:
    """Why the kubelet has not granted a resize (Kubernetes 1.33's PodResizePending condition: Deferred,
    Infeasible), or could not actuate it (PodResizeInProgress with reason Error)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        pending = cond.get("type") == "PodResizePending"
        failing = cond.get("type") == "PodResizeInProgress" and cond.get("reason") == "Error"
        if (pending or failing) and cond.get("status") == "True":
            return _one_line(cond.get("reason") or cond["type"], cond.get("message"))
    return None


def _cpu_allocated(pod: dict[str, Any]) -> str | None:
    status = _container_status(pod) or {}
    return ((status.get("resources") or {}).get("requests") or {}).get("cpu")


def termination_message(raw: str | None) -> str | None:
    """What the job wrote to its termination-message file ("QUERY_FAILED: ..."), on one
    line. Drivers use the File policy, so no log line (a console sink's rows, a
    credential a library printed) ever reaches status or events through here."""
    if not raw or not raw.strip():
        return None
    text = " ".join(raw.split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."


def _one_line(reason: str, message: str | None) -> str:
    text = f"{reason}: {' '.join(message.split())}" if message and message.strip() else reason
    return text if len(text) <= _WAITING_CHARS else text[: _WAITING_CHARS - 3] + "..."


def why_waiting(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, one-line text) of a pod that cannot start, from its own status: the
    scheduler's verdict (PodScheduled False: a missing PVC, too little CPU or memory, a
    taint) or the kubelet's on the driver container (an image it cannot pull, a Secret
    key an env var names). Both are written on the pod, so its watch wakes the
    reconciler and no Event needs to be listed. None while it is on its way."""
    status = pod.get("status") or {}
    if (status.get("phase") or "Pending") != "Pending":
        return None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reason = condition.get("reason") or "Unschedulable"
            return reason, _one_line(reason, condition.get("message"))
    container = _container_status(pod)
    wait = ((container or {}).get("state") or {}).get("waiting") or {}
    if wait.get("reason") not in _ON_ITS_WAY:
        return wait["reason"], _one_line(wait["reason"], wait.get("message"))
    return None


def node_lost(pod: dict[str, Any]) -> bool:
    """Kubernetes deletes the pod because its node is not ready or unreachable (taint manager)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return bool(condition.get("reason") == NODE_LOST_REASON)
    return False


def pod_ready(pod: dict[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def fenced(pod: dict[str, Any]) -> bool:
    """The operator named the query's Lease on the pod (a standby query's driver, standby or not, and
    every driver of a query with warm upgrades): it runs the query only while it holds the Lease."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        if any(env.get("name") == LEASE_ENV for env in container.get("env") or []):
            return True
    return False


def lease_from(obj: dict[str, Any]) -> LeaseState:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    return LeaseState(name=meta.get("name", ""), holder=spec.get("holderIdentity") or None,
                      renew_time=parse_time(spec.get("renewTime")),
                      duration_s=float(duration) if duration is not None else None)  # fmt: skip


def driver_from_pod(pod: dict[str, Any]) -> Driver:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    try:
        phase = DriverPhase(status.get("phase") or "Pending")
    except ValueError:
        phase = DriverPhase.UNKNOWN
    exit_code = reason = message = None
    started_at = finished_at = None
    waiting_reason, waiting = why_waiting(pod) or (None, None)
    container = _container_status(pod)
    if container is not None:
        state = container.get("state") or {}
        if "terminated" in state and state["terminated"] is not None:
            term = state["terminated"]
            exit_code = term.get("exitCode")
            reason = term.get("reason")
            message = termination_message(term.get("message"))
            started_at, finished_at = parse_time(term.get("startedAt")), parse_time(term.get("finishedAt"))
        elif state.get("running"):
            started_at = parse_time(state["running"].get("startedAt"))
    if phase.ended and reason is None:
        reason = status.get("reason")  # e.g. Evicted, with no container state
        message = message or status.get("message")
    if phase is DriverPhase.RUNNING and started_at is None:
        started_at = parse_time(status.get("startTime"))
    return Driver(
        kind="Pod",
        phase=phase,
        **_identity(meta),
        exit_code=exit_code,
        reason=reason,
        message=message,
        waiting=waiting,
        waiting_reason=waiting_reason,
        started_at=started_at,
        finished_at=finished_at,
        fenced=fenced(pod),
        node_lost=node_lost(pod),
        ready=pod_ready(pod),
        cpu_request=_cpu_request(pod),
        cpu_allocated=_cpu_allocated(pod),
        resize=resize_pending(pod),
        pod_ip=status.get("podIP") or None,
        progress_port=_progress_port(pod),
        executors_wanted=executors_wanted(meta),
    )


# kubeflow spark-operator's applicationState.state -> our phase
_APP_STATES = {
    "": DriverPhase.PENDING,
    "SUBMITTED": DriverPhase.PENDING,
    "PENDING_RERUN": DriverPhase.PENDING,
    "INVALIDATING": DriverPhase.PENDING,
    "RUNNING": DriverPhase.RUNNING,
    "SUCCEEDING": DriverPhase.RUNNING,
    "FAILING": DriverPhase.RUNNING,
    "COMPLETED": DriverPhase.SUCCEEDED,
    "FAILED": DriverPhase.FAILED,
    "SUBMISSION_FAILED": DriverPhase.FAILED,
    "UNKNOWN": DriverPhase.UNKNOWN,
}


def driver_from_spark_application(app: dict[str, Any], pod: dict[str, Any] | None = None) -> Driver:
    """A SparkApplication, with what its driver pod (if found) says about how it ended."""
    meta, status = app.get("metadata") or {}, app.get("status") or {}
    app_state = status.get("applicationState") or {}
    state = app_state.get("state") or ""
    phase = _APP_STATES.get(state, DriverPhase.UNKNOWN)
    from_pod = driver_from_pod(pod) if pod is not None else None
    exit_code = from_pod.exit_code if from_pod else None
    message = (from_pod.message if from_pod else None) or app_state.get("errorMessage") or None
    reason = (from_pod.reason if from_pod and from_pod.reason else None) or (state if phase.ended else None)
    return Driver(
        kind="SparkApplication",
        phase=phase,
        **_identity(meta),
        exit_code=exit_code,
        reason=reason,
        message=message,
        waiting=from_pod.waiting if from_pod else None,  # its driver pod cannot start: the same reasons
        waiting_reason=from_pod.waiting_reason if from_pod else None,
        started_at=(from_pod.started_at if from_pod else None) or parse_time(status.get("lastSubmissionAttemptTime")),
        finished_at=(from_pod.finished_at if from_pod else None) or parse_time(status.get("terminationTime")),
    )


def _owned_by_spark_app(pod: dict[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "SparkApplication":
            name: str | None = ref.get("name")
            return name
    return None


def drivers_from(pods: list[dict[str, Any]], apps: list[dict[str, Any]]) -> tuple[Driver, ...]:
    """Pods we created are drivers; pods a SparkApplication created describe that application."""
    app_pods: dict[str, dict[str, Any]] = {}
    out: list[Driver] = []
    for pod in pods:
        owner = _owned_by_spark_app(pod)
        if owner is not None:
            app_pods[owner] = pod
        else:
            out.append(driver_from_pod(pod))
    for app in apps:
        name = (app.get("metadata") or {}).get("name", "")
        out.append(driver_from_spark_application(app, app_pods.get(name)))
    return tuple(sorted(out, key=lambda d: (d.attempt or 0, d.kind, d.name)))


def needs_lease(drivers: tuple[Driver, ...]) -> bool:
    """Whether the Lease tells the decisions anything: a fenced driver pod's node is lost."""
    return any(x.kind == "Pod" and x.fenced and x.node_lost for x in drivers)


class Reads(Protocol):
    """What observing reads from the API (controller.kube.Kube): named here, since decide, which
    imports this module, may not import the client."""

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...
    def list_spark_applications(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...
    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def read_secret_meta(self, namespace: str, name: str) -> dict[str, Any] | None: ...


def observe(kube: Reads, namespace: str, query: str, include_spark_apps: bool, secrets: Iterable[str] = ()) -> Observed:
    """One LIST of the query's driver pods (and SparkApplications): fresh, never cached; one GET
    of the query's Lease when ``needs_lease``; and the type and labels of each of ``secrets``, the
    credentials Secrets its spec names (contract.credentials.secret_names)."""
    selector = names.selector(query, names.COMPONENT_DRIVER)
    pods = kube.list_pods(namespace, selector)
    apps = kube.list_spark_applications(namespace, selector) if include_spark_apps else []
    drivers = drivers_from(pods, apps)
    lease = None
    if needs_lease(drivers):
        raw = kube.read_lease(namespace, lease_name(query))
        lease = lease_from(raw) if raw is not None else None
    return Observed(drivers=drivers, lease=lease, secrets={name: kube.read_secret_meta(namespace, name) for name in secrets})
