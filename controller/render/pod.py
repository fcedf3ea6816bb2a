"""The driver as a pod (backend ``pod``): the image's `job` entrypoint, i.e.
`python -m app /etc/streamq/query.json` (pure)."""

from __future__ import annotations

from typing import Any

from contract import EXECUTORS_ANNOTATION, READY_FILE, SPARK_UI_PORT, TERMINATION_LOG
from controller import names, placement
from controller.config import Settings
from controller.render.driver import SPEC_PATH, container_security_context, driver_env, image_of, pod_security_context, scheduling
from controller.render.meta import meta, run_annotations
from controller.render.volumes import volumes
from controller.run import Run

# The job creates READY_FILE once it is warm or runs its query (app.driver.ready): Ready means "worth
# handing the query to", which a warm upgrade waits for. test(1) is in every Debian-based image.
READINESS_PROBE = {"exec": {"command": ["test", "-e", READY_FILE]}, "periodSeconds": 1, "failureThreshold": 1}


def _ports(run: Run, settings: Settings) -> list[dict[str, Any]]:
    ports = [{"name": names.PORT_PROGRESS, "containerPort": settings.progress_port}] if settings.progress_port else []
    if run.uses_executors:
        ports += [
            {"name": names.PORT_DRIVER_RPC, "containerPort": names.DRIVER_PORT},
            {"name": names.PORT_BLOCK_MANAGER, "containerPort": names.BLOCK_MANAGER_PORT},
        ]
    if run.spec.runtime.spark_ui:
        ports.append({"name": names.PORT_SPARK_UI, "containerPort": SPARK_UI_PORT})
    return ports


def driver_pod(run: Run, settings: Settings) -> dict[str, Any]:
    drv = run.spec.runtime.driver
    vols, mounts = volumes(run)
    container: dict[str, Any] = {
        "name": names.DRIVER_CONTAINER,
        "image": image_of(run.spec, settings),
        "imagePullPolicy": settings.image_pull_policy,
        "args": ["job", SPEC_PATH],  # the image's entrypoint (under tini): python -m app SPEC_PATH
        "env": driver_env(run, settings),
        # A driver that waits on the Lease requests little (waitingCoreRequest); once it runs the query the
        # operator grows it in place (decide.drivers.grow), which no CPU limit and this policy allow.
        "resources": {
            "requests": {"cpu": drv.waiting_cpu_request if run.standby else drv.cpu_request, "memory": drv.memory},
            "limits": {"memory": drv.memory},
        },
        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
        "volumeMounts": mounts,
        "securityContext": container_security_context(),
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",  # never the log: console rows and secrets stay out of status
        "readinessProbe": READINESS_PROBE,
    }
    ports = _ports(run, settings)
    if ports:
        container["ports"] = ports
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": vols,
        "securityContext": pod_security_context(settings),
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
        "enableServiceLinks": False,
    }
    spec.update(scheduling(run, settings, account_key="serviceAccountName"))
    if "serviceAccountName" not in spec:
        spec["automountServiceAccountToken"] = False
    annotations = run_annotations(run)
    if run.resizes_in_place:  # the executors it starts with; autoscaling changes them (app.driver.executors)
        annotations[EXECUTORS_ANNOTATION] = str(run.spec.runtime.executors.instances)
    metadata = meta(run.driver_name, run, names.COMPONENT_DRIVER, run.attempt,
                    annotations=placement.annotations(drv, annotations))  # fmt: skip
    metadata["labels"] = placement.labels(drv, metadata["labels"])
    if run.standby:
        metadata["labels"][names.LABEL_ROLE] = names.ROLE_STANDBY
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
