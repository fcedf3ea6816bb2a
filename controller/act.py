"""Carrying out one decision (I/O): its actions in its order, and what came of them.

Acting decides nothing. It carries out ``decision.actions`` and returns an
:class:`ActOutcome`: which driver's creation the API refused and why (a typed
``Refusal``, read here from the API server's answer), the Spark UI names another
object holds, the resizes taken and refused. Reconcile hands that outcome to the
next decision (``Inputs.acted``); nothing here calls into ``controller.decide``.

A refused creation ends the actions: what follows it (the Spark UI Service of the
driver that is not there) is not carried out. A name another object holds is
never written over (``kube.NameConflict``). Resizes come last, once the driver
they replace is being deleted and its room is coming free.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from contract import EXECUTORS_ANNOTATION, failpoints
from contract.failpoints import Failpoint
from controller import names, render
from controller.config import Settings
from controller.decide import (
    ApplySparkUIService,
    CreateDriver,
    Decision,
    DeleteDriver,
    DeleteSparkUIService,
    Inputs,
    ReleaseLease,
    ResizeDriver,
    ScaleExecutors,
)
from controller.decide.acted import ActOutcome, CreateRefused, Refusal, Refused
from controller.kube import Kube, NameConflict, api_message

Log = logging.Logger | logging.LoggerAdapter[Any]  # kopf's handler logger is either

QUOTA_EXCEEDED = "exceeded quota"  # the API server's words when a ResourceQuota refuses a pod (403 Forbidden)
RESIZE_REFUSED_FOR_GOOD = (403, 404, 405, 422)  # no resize subresource, not allowed, or invalid: asking again won't help


def refusal(exc: ApiException) -> Refusal:
    """What the API server's refusal of a driver's child means (its status code, and its words: a
    quota's refusal carries no code or field of its own)."""
    if exc.status == 403 and QUOTA_EXCEEDED in api_message(exc):
        return Refusal.QUOTA
    return Refusal.OTHER


def act(kube: Kube, settings: Settings, body: dict[str, Any], inputs: Inputs, decision: Decision, log: Log) -> ActOutcome:
    """Carry out ``decision`` for the query ``body`` (as read: children are adopted by it). An API
    failure other than a refused creation or resize raises: the pass is retried, the status unwritten."""
    ui_taken: list[str] = []
    scale_refused: list[Refused[ScaleExecutors]] = []
    refused = _carry_out(kube, settings, body, inputs, decision, log, ui_taken, scale_refused)
    resized, resize_refused = _resize(kube, inputs, decision, log)
    return ActOutcome(refused=refused, ui_taken=tuple(ui_taken), resized=resized, resize_refused=resize_refused,
                      scale_refused=tuple(scale_refused))  # fmt: skip


def _carry_out(
    kube: Kube,
    settings: Settings,
    body: dict[str, Any],
    inputs: Inputs,
    decision: Decision,
    log: Log,
    ui_taken: list[str],
    scale_refused: list[Refused[ScaleExecutors]],
) -> CreateRefused | None:
    """The actions but the resizes, in order, up to a refused creation (returned). A UI Service's or
    Ingress's name another object holds is added to ``ui_taken``: the query runs on without its UI; a refused
    executors resize to ``scale_refused``."""
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
        elif isinstance(action, ScaleExecutors):  # refused: said in status and an event, the query runs on
            try:
                if kube.annotate_pod(inputs.namespace, action.name, {EXECUTORS_ANNOTATION: str(action.executors)}, inputs.uid):
                    log.info("driver %s: %d -> %d executors", action.name, action.before, action.executors)
            except ApiException as exc:
                log.warning("cannot resize the executors of driver %s: %s", action.name, api_message(exc))
                scale_refused.append(Refused(action, api_message(exc)))
        elif isinstance(action, ApplySparkUIService):  # a failure raises: the pass is retried, the status unwritten
            try:
                _apply_spark_ui(kube, settings, body, action, log)
            except NameConflict as conflict:
                log.warning("%s", conflict)
                ui_taken.append(str(conflict))
        elif isinstance(action, DeleteSparkUIService):  # only the query's own: kube.delete checks the controller
            ui = names.spark_ui_service_name(action.query)
            if kube.delete("Service", action.namespace, ui, inputs.uid):
                log.info("deleted the Spark UI Service of %s (spec.runtime.sparkUI is off)", action.query)
            if settings.spark_ui_ingress_host and kube.delete("Ingress", action.namespace, ui, inputs.uid):
                log.info("deleted the Spark UI Ingress of %s", action.query)
        elif isinstance(action, CreateDriver):
            refused = _create(kube, settings, body, inputs, action, log)
            if refused is not None:
                return refused
    return None


def _adopt(children: dict[str, Any] | list[dict[str, Any]], body: dict[str, Any]) -> None:
    # kopf reads the owner as a mapping (metadata, uid); its annotation names only its own Body view of one.
    kopf.adopt(children, owner=body)  # type: ignore[arg-type]


def _create(
    kube: Kube, settings: Settings, body: dict[str, Any], inputs: Inputs, action: CreateDriver, log: Log
) -> CreateRefused | None:
    children = render.children(action.run, settings)
    _adopt(children, body)
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
    except NameConflict as conflict:  # nothing was written over; the driver was not created
        log.warning("%s", conflict)
        return CreateRefused(action.run.driver_name, Refusal.NAME_CONFLICT, str(conflict))
    except ApiException as exc:  # refused (RBAC, admission, quota, no SparkApplication API) or down
        message = api_message(exc)
        log.warning("cannot create the driver of %s: %s", inputs.name, message)
        return CreateRefused(action.run.driver_name, refusal(exc), message)
    return None


def _resize(
    kube: Kube, inputs: Inputs, decision: Decision, log: Log
) -> tuple[tuple[ResizeDriver, ...], tuple[Refused[ResizeDriver], ...]]:
    """After the other actions (the driver it replaced is being deleted, its room freed): grow a
    driver that waited on the Lease to its CPU request. Returns the resizes taken and those refused
    for good (the next decision says so once, and asks no more)."""
    taken: list[ResizeDriver] = []
    refused: list[Refused[ResizeDriver]] = []
    for action in decision.actions:
        if not isinstance(action, ResizeDriver):
            continue
        try:
            if kube.resize_pod_cpu(inputs.namespace, action.name, names.DRIVER_CONTAINER, action.cpu, inputs.uid):
                log.info("resized driver %s in place: CPU request %s -> %s", action.name, action.waited_on, action.cpu)
                taken.append(action)
        except ApiException as exc:
            if exc.status not in RESIZE_REFUSED_FOR_GOOD:
                raise
            log.warning("cannot resize driver %s: %s", action.name, api_message(exc))
            refused.append(Refused(action, api_message(exc)))
    return tuple(taken), tuple(refused)


def _apply_spark_ui(kube: Kube, settings: Settings, body: dict[str, Any], action: ApplySparkUIService, log: Log) -> None:
    service = render.spark_ui_service(action.query, action.namespace, action.attempt)
    _adopt(service, body)
    created = kube.apply_service(service)
    log.info(
        "%s Service %s: the UI of attempt %d", "created" if created else "pointed", service["metadata"]["name"], action.attempt
    )
    ingress = render.spark_ui_ingress(action.query, action.namespace, settings)
    if ingress is not None:  # routes to the Service, whatever the attempt: made once
        _adopt(ingress, body)
        if kube.create(ingress):
            log.info("created Ingress %s for %s", ingress["metadata"]["name"], ingress["spec"]["rules"][0]["host"])
