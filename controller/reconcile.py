"""One reconcile pass for one query: read, decide, act, write the status (I/O).

Everything that can be decided without Kubernetes is in ``decide``; this module
only fetches the inputs and carries out the decision, in a safe order:
children first (a retry finds them by name), the status last, guarded by the
resourceVersion it was decided on. Acting decides nothing: when the API refuses
to create the driver, acting stops and says why, and the status written is
``creation_failed``'s (which says so and retries) instead of the decision's.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from app.contract import credentials, failpoints
from app.contract.failpoints import Failpoint
from app.contract.progress import ProgressRecord
from app.contract.spec import Backend
from controller import render
from controller.config import Settings
from controller.decide import drivers, spark_ui, upgrade
from controller.decide import (ApplySparkUIService, CreateDriver, Decision, DeleteDriver, DeleteSparkUIService, Inputs,
                               Event, ReleaseLease, ResizeDriver, creation_failed, decide)
from controller.kube import Kube, NameConflict, api_message
from controller.names import DRIVER_CONTAINER
from controller.observe import observe
from controller.phases import Phase, Reason
from controller.progress import last_progress
from controller.run import SPARK_APP_KIND
from controller.status import QueryStatus, status_patch

CREATE_RETRY_S = 15.0
PROGRESS_LOG_LINES = 200


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    body: dict[str, Any]  # the resource as read (for events)
    conflict: bool = False  # the status write lost a race: look again at once


def _uses_spark_apps(spec: Any, status: QueryStatus) -> bool:
    backend = ((spec or {}).get("runtime") or {}).get("backend") if isinstance(spec, dict) else None
    return backend == Backend.SPARK_APPLICATION or status.driver_kind == SPARK_APP_KIND


def reconcile_once(
    kube: Kube,
    settings: Settings,
    namespace: str,
    name: str,
    *,
    read_progress: bool = False,
    logger: logging.Logger | logging.LoggerAdapter | None = None,
    now: datetime | None = None,
) -> Outcome | None:
    """Returns None when the query is gone or being deleted (its children go with it)."""
    log = logger or logging.getLogger("streamq.controller")
    body = kube.get_query(namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return None
    meta = body["metadata"]
    raw_status = body.get("status") or {}
    status = QueryStatus.parse(raw_status)
    observed = observe(kube, namespace, name, _uses_spark_apps(body.get("spec"), status),
                       secrets=credentials.secret_names(body.get("spec")))  # fmt: skip
    progress = None
    handing_over = status.upgrade is not None and status.upgrade.state == upgrade.HANDING_OVER
    if (read_progress or handing_over) and status.phase in (Phase.RUNNING, Phase.UPGRADING):  # handing over: is the new one serving?
        progress = _read_progress(kube, namespace, status, log)
    inputs = Inputs(
        name=name,
        namespace=namespace,
        uid=meta["uid"],
        generation=int(meta.get("generation") or 0),
        raw_spec=body.get("spec"),
        status=status,
        drivers=observed.drivers,
        now=now or datetime.now(UTC),
        progress=progress,
        silent_after_s=settings.silent_after_s,
        policy=settings.policy,
        facts=settings.facts,
        lease=observed.lease,
        secrets=observed.secrets,
    )
    decision = decide(inputs)
    ui_taken: list[NameConflict] = []
    try:
        refused = _act(kube, settings, body, inputs, decision, log, ui_taken)
        decision = _resize(kube, inputs, decision, log)
    except NameConflict as conflict:  # nothing was written over; the driver was not created
        log.warning("%s", conflict)
        decision = creation_failed(decision, inputs, str(conflict), CREATE_RETRY_S, reason=Reason.NAME_CONFLICT)
        refused = None
    for conflict in ui_taken:  # the query runs on, without its UI
        log.warning("%s", conflict)
        decision = spark_ui.name_taken(decision, str(conflict))
    if refused is not None:  # a warm upgrade's driver refused: no room (quota), or the upgrade fails
        decision = upgrade.create_refused(inputs, decision, refused) or creation_failed(decision, inputs, refused, CREATE_RETRY_S)
    new_status = decision.status.dump()
    patch = status_patch(raw_status, new_status)
    if not patch:
        return Outcome(decision, body)
    try:
        kube.patch_query_status(namespace, name, patch, meta.get("resourceVersion"))
    except ApiException as exc:
        if exc.status in (404, 409):  # deleted, or changed since we read it: decide again
            log.debug("status write skipped (%s): %s", exc.status, api_message(exc))
            return Outcome(decision, body, conflict=exc.status == 409)
        raise
    return Outcome(decision, body)


def _act(kube: Kube, settings: Settings, body: dict, inputs: Inputs, decision: Decision, log,
         ui_taken: list[NameConflict]) -> str | None:
    """Carry out the decision's actions in order; None when all were, else why the API refused
    to create the driver (the actions after it are not carried out). A child name another object
    holds raises NameConflict, except the UI Service's and Ingress's (added to ``ui_taken``)."""
    for action in decision.actions:
        if isinstance(action, DeleteDriver):
            log.info("%sdeleting %s %s: %s", "force-" if action.force else "", action.kind, action.name, action.reason)
            kube.delete(action.kind, inputs.namespace, action.name, inputs.uid, force=action.force)
        elif isinstance(action, ReleaseLease):
            try:  # best effort: the Lease expires by itself within its duration anyway
                if kube.release_lease(inputs.namespace, action.name, action.holder, inputs.uid):
                    log.info("released lease %s of ended driver %s for the standby", action.name, action.holder)
            except ApiException as exc:
                log.warning("cannot release lease %s: %s", action.name, api_message(exc))
        elif isinstance(action, ApplySparkUIService):  # a failure raises: the pass is retried, the status unwritten
            try:
                _apply_spark_ui(kube, settings, body, action, log)
            except NameConflict as conflict:
                ui_taken.append(conflict)
        elif isinstance(action, DeleteSparkUIService):  # only the query's own: kube.delete checks the controller
            ui = render.spark_ui.service_name(action.query)
            if kube.delete("Service", action.namespace, ui, inputs.uid):
                log.info("deleted the Spark UI Service of %s (spec.runtime.sparkUI is off)", action.query)
            if settings.spark_ui_ingress_host and kube.delete("Ingress", action.namespace, ui, inputs.uid):
                log.info("deleted the Spark UI Ingress of %s", action.query)
        elif isinstance(action, CreateDriver):
            children = render.children(action.run, settings)
            kopf.adopt(children, owner=body)
            try:
                for child in children:
                    if child["kind"] == "ConfigMap":
                        kube.apply_config_map(child)
                    elif child["kind"] == "RoleBinding":  # its subject follows the driver's account
                        if kube.apply_role_binding(child):
                            log.info("created RoleBinding %s", child["metadata"]["name"])
                    elif kube.create(child):
                        log.info("created %s %s", child["kind"], child["metadata"]["name"])
                for kind, name in render.absent_children(action.run):  # gone already, or not ours: nothing to do
                    kube.delete(kind, inputs.namespace, name, inputs.uid)
                if failpoints.active(Failpoint.EXIT_AFTER_CREATE):
                    os._exit(137)
            except ApiException as exc:  # refused (RBAC, admission, quota, no SparkApplication API) or down
                message = api_message(exc)
                log.warning("cannot create the driver of %s: %s", inputs.name, message)
                return message
    return None


def _resize(kube: Kube, inputs: Inputs, decision: Decision, log) -> Decision:
    """After the other actions (the driver it replaced is being deleted, its room freed): grow a
    driver that waited on the Lease to its CPU request. A refusal is said once (decide.drivers.resize_refused)."""
    for action in decision.actions:
        if not isinstance(action, ResizeDriver):
            continue
        try:
            if kube.resize_pod_cpu(inputs.namespace, action.name, DRIVER_CONTAINER, action.cpu, inputs.uid):
                log.info("resized driver %s in place: CPU request %s -> %s", action.name, action.waited_on, action.cpu)
                decision = replace(decision, events=(*decision.events, Event(
                    "Normal", Reason.RESIZED, f"driver {action.name} waited on the Lease with {action.waited_on} of CPU; "
                    f"it grows in place to {action.cpu} as it takes over")))  # fmt: skip
        except ApiException as exc:
            if exc.status in (403, 404, 405, 422):  # no resize subresource, not allowed, or invalid: for good
                log.warning("cannot resize driver %s: %s", action.name, api_message(exc))
                decision = drivers.resize_refused(decision, action, api_message(exc))
            else:
                raise
    return decision


def _apply_spark_ui(kube: Kube, settings: Settings, body: dict, action: ApplySparkUIService, log) -> None:
    service = render.spark_ui_service(action.query, action.namespace, action.attempt)
    kopf.adopt(service, owner=body)
    created = kube.apply_service(service)
    log.info("%s Service %s: the UI of attempt %d", "created" if created else "pointed", service["metadata"]["name"], action.attempt)
    ingress = render.spark_ui_ingress(action.query, action.namespace, settings)
    if ingress is not None:  # routes to the Service, whatever the attempt: made once
        kopf.adopt(ingress, owner=body)
        if kube.create(ingress):
            log.info("created Ingress %s for %s", ingress["metadata"]["name"], ingress["spec"]["rules"][0]["host"])


def _read_progress(kube: Kube, namespace: str, status: QueryStatus, log) -> ProgressRecord | None:
    if not status.driver:
        return None
    pod = status.driver if status.driver_kind == "Pod" else f"{status.driver}-driver"
    container = DRIVER_CONTAINER if status.driver_kind == "Pod" else "spark-kubernetes-driver"
    try:
        text = kube.read_pod_log(namespace, pod, container, PROGRESS_LOG_LINES)
    except ApiException as exc:  # no kubelet yet, or the pod just went: progress is best effort
        log.debug("no progress from %s: %s", pod, api_message(exc))
        return None
    return last_progress(text)
