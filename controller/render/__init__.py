"""What the operator creates for one driver attempt, as plain dicts (pure; no I/O), one module per kind:

    query_config   ConfigMap   the StreamingQuery the job reads (key query.json), and the executors' pod template
    pod            Pod         backend `pod`: the driver (what both backends' drivers share: ``driver``)
    spark_app      SparkApplication  backend `sparkApplication`: kubeflow's sparkoperator.k8s.io/v1beta2
    executors      Service     headless, only when executors run (they connect back to the driver); their Spark conf
    auth           Secret      only when executors run: the key of Spark's RPC authentication and
                               encryption between driver and executors, random, made once per query
    lease_access   ServiceAccount, Role, RoleBinding, Lease   a query whose drivers take its Lease (standby,
                               warm upgrades): the Lease, and an account that reaches it and nothing else
    disruption     PodDisruptionBudget   standby queries: a drain never evicts the driver and its standby at once
    spark_ui       Service, Ingress      spec.runtime.sparkUI: port 4040 of the current driver (made when
                               ``controller.decide.spark_ui`` says so, not by ``children``)

and what they share: ``meta`` (metadata, the run's annotations), ``volumes``, ``units``.
Names and labels are ``controller.names``'. Owner references are added by the caller
(``kopf.adopt``); everything else is here. What one attempt is (``Run``) and which spec
fields make a new driver (``spec_hash``) are in ``controller.run``, which the decisions share.
"""

from __future__ import annotations

from typing import Any

from contract.spec import Backend
from controller import names
from controller.config import Settings
from controller.render import lease_access, spark_ui
from controller.render.auth import AUTH_MOUNT_DIR, AUTH_SECRET_BASE64_KEY, AUTH_SECRET_FILE, AUTH_SECRET_KEY, auth_secret
from controller.render.disruption import disruption_budget
from controller.render.driver import NODE_LOST_TAINTS, driver_affinity, driver_tolerations, pod_security_context
from controller.render.executors import EXECUTOR_TEMPLATE_FILE, driver_service, executor_conf, executor_pod_template
from controller.render.pod import driver_pod
from controller.render.query_config import config_map, query_document
from controller.render.spark_app import spark_application
from controller.render.spark_ui import spark_ui_ingress, spark_ui_service
from controller.render.units import driver_heap, mebibytes
from controller.render.volumes import checkpoint_mount_path
from controller.run import Run

__all__ = [
    "AUTH_MOUNT_DIR", "AUTH_SECRET_BASE64_KEY", "AUTH_SECRET_FILE", "AUTH_SECRET_KEY", "EXECUTOR_TEMPLATE_FILE",
    "NODE_LOST_TAINTS", "absent_children", "auth_secret", "checkpoint_mount_path", "children", "config_map",
    "disruption_budget", "driver_affinity", "driver_heap", "driver_pod", "driver_service", "driver_tolerations",
    "executor_conf", "executor_pod_template", "lease_access", "mebibytes", "pod_security_context",
    "query_document", "spark_application", "spark_ui", "spark_ui_ingress", "spark_ui_service",
]  # fmt: skip


def children(run: Run, settings: Settings) -> list[dict[str, Any]]:
    """Everything one attempt needs, in creation order (the driver last): a query's Lease, and the
    account, Role and RoleBinding that reach it, come first (the pod names the account)."""
    objs = [*lease_access.objects(run, settings), config_map(run, settings)]
    budget = disruption_budget(run)
    if budget is not None:
        objs.append(budget)
    secret = auth_secret(run)
    if secret is not None:  # before the driver, which mounts it
        objs.append(secret)
    service = driver_service(run)
    if service is not None:
        objs.append(service)
    if run.spec.runtime.backend is Backend.SPARK_APPLICATION:
        objs.append(spark_application(run, settings))
    else:
        objs.append(driver_pod(run, settings))
    return objs


def absent_children(run: Run) -> list[tuple[str, str]]:
    """(kind, name) of what must not exist for this run: the disruption budget of a query that no
    longer has a standby (its one driver would block every drain of its node)."""
    if disruption_budget(run) is None:
        return [("PodDisruptionBudget", names.disruption_budget_name(run.query))]
    return []
