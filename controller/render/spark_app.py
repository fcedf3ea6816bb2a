"""The driver as a SparkApplication (backend ``sparkApplication``): kubeflow's
sparkoperator.k8s.io/v1beta2 submits it (pure)."""

from __future__ import annotations

from typing import Any

from controller import names, placement
from controller.config import Settings
from controller.render.driver import SPEC_PATH, container_security_context, driver_env, image_of, pod_security_context, scheduling
from controller.render.meta import meta, run_annotations
from controller.render.units import spark_memory
from controller.render.volumes import VOLUME_CHECKPOINT, volumes
from controller.run import SPARK_APP_KIND, Run

SPARK_APP_API_VERSION = "sparkoperator.k8s.io/v1beta2"


def _executor(run: Run, settings: Settings, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    executors = run.spec.runtime.executors
    executor: dict[str, Any] = {
        "cores": executors.cores,
        **({"coreRequest": executors.core_request} if executors.core_request else {}),
        **({"coreLimit": executors.core_limit} if executors.core_limit else {}),
        "memory": spark_memory(executors.memory),
        "labels": placement.labels(executors, names.labels(run.query, names.COMPONENT_EXECUTOR, run.attempt)),
        "podSecurityContext": pod_security_context(settings),
        "securityContext": container_security_context(read_only_root=False),
        **placement.scheduling(executors),
    }
    if executors.annotations:
        executor["annotations"] = placement.annotations(executors)
    if run.uses_executors:
        executor["instances"] = executors.instances
        checkpoint_mounts = [m for m in mounts if m["name"] == VOLUME_CHECKPOINT]
        if checkpoint_mounts:
            executor["volumeMounts"] = checkpoint_mounts
    return executor


def spark_application(run: Run, settings: Settings) -> dict[str, Any]:
    """The same driver, submitted through kubeflow's Spark operator. Its own restart
    policy is Never: restarts are this operator's decision (it knows the exit codes)."""
    drv = run.spec.runtime.driver
    vols, mounts = volumes(run)
    driver: dict[str, Any] = {
        "cores": drv.cores,
        **({"coreRequest": drv.core_request} if drv.core_request else {}),
        "memory": spark_memory(drv.memory),
        "labels": placement.labels(drv, names.labels(run.query, names.COMPONENT_DRIVER, run.attempt)),
        "annotations": placement.annotations(drv, run_annotations(run)),
        "env": driver_env(run, settings),
        "volumeMounts": mounts,
        "podSecurityContext": pod_security_context(settings),
        "securityContext": container_security_context(read_only_root=False),
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
    }
    driver.update(scheduling(run, settings, account_key="serviceAccount"))
    return {
        "apiVersion": SPARK_APP_API_VERSION,
        "kind": SPARK_APP_KIND,
        "metadata": meta(run.driver_name, run, names.COMPONENT_DRIVER, run.attempt, annotations=run_annotations(run)),
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "sparkVersion": settings.spark_version,
            "image": image_of(run.spec, settings),
            "imagePullPolicy": settings.image_pull_policy,
            "mainApplicationFile": settings.spark_app_main_file,
            "arguments": [SPEC_PATH],
            "restartPolicy": {"type": "Never"},
            "volumes": vols,
            "driver": driver,
            "executor": _executor(run, settings, mounts),
        },
    }
