"""What a driver's executors need (pure): Spark's client-mode settings, the pod template Spark
starts them from, and the headless Service through which they reach the driver (pod backend)."""

from __future__ import annotations

from typing import Any

from contract import SECRETS_MOUNT_DIR, SPEC_MOUNT_DIR
from contract.spec import Backend, QuerySpec
from controller import names, placement
from controller.config import Settings
from controller.render.auth import auth_conf
from controller.render.driver import container_security_context, image_of, pod_security_context
from controller.render.meta import child
from controller.render.units import spark_memory
from controller.render.volumes import VOLUME_CHECKPOINT, VOLUME_TMP, checkpoint_mount_path, tls_secret_names
from controller.run import Run

K8S_MASTER = "k8s://https://kubernetes.default.svc:443"
# Spark reads this pod template when it makes executor pods: they get the driver's
# security context (Pod Security "restricted") and a read-only root filesystem.
EXECUTOR_TEMPLATE_FILE = "executor-pod.yaml"


def _driver_address_conf(run: Run) -> dict[str, str]:
    """Pod backend: executors dial the driver through its headless Service."""
    service = names.driver_service_name(run.query)
    return {
        "spark.kubernetes.driver.pod.name": run.driver_name,
        "spark.kubernetes.executor.podNamePrefix": names.executor_prefix(run.query, run.attempt),
        # the job puts its pod's IP here (POD_IP_ENV): a standby query's Service resolves to both drivers
        "spark.driver.host": f"{service}.{run.namespace}.svc",
        "spark.driver.port": str(names.DRIVER_PORT),
        "spark.driver.blockManager.port": str(names.BLOCK_MANAGER_PORT),
        "spark.driver.bindAddress": "0.0.0.0",
        # Spark 4.1+ defaults this to true: executors then dial spark.driver.bindAddress
        # (0.0.0.0 here, i.e. themselves) instead of spark.driver.host (the Service).
        "spark.kubernetes.executor.useDriverPodIP": "false",
    }


def executor_conf(run: Run, settings: Settings) -> dict[str, str]:
    """Spark's client mode on Kubernetes: the driver pod starts executor pods itself."""
    if not run.uses_executors:
        return {}
    ex = run.spec.runtime.executors
    conf = {
        "spark.master": K8S_MASTER,
        "spark.submit.deployMode": "client",
        "spark.executor.instances": str(ex.instances),
        "spark.executor.cores": str(ex.cores),
        "spark.executor.memory": spark_memory(ex.memory),
        **({"spark.kubernetes.executor.request.cores": ex.core_request} if ex.core_request else {}),
        **({"spark.kubernetes.executor.limit.cores": ex.core_limit} if ex.core_limit else {}),
        "spark.kubernetes.namespace": run.namespace,
        "spark.kubernetes.container.image": image_of(run.spec, settings),
        "spark.kubernetes.container.image.pullPolicy": settings.image_pull_policy,
        "spark.kubernetes.executor.podTemplateFile": f"{SPEC_MOUNT_DIR}/{EXECUTOR_TEMPLATE_FILE}",
        "spark.kubernetes.executor.podTemplateContainerName": names.EXECUTOR_CONTAINER,
    }
    for key, value in names.labels(run.query, names.COMPONENT_EXECUTOR, run.attempt).items():
        conf[f"spark.kubernetes.executor.label.{key}"] = value
    if run.spec.runtime.backend is Backend.POD:
        conf.update(_driver_address_conf(run))
    conf.update(_executor_checkpoint_conf(run))
    conf.update(executor_secrets_conf(run.spec))
    conf.update(auth_conf(run))
    return conf


def _executor_checkpoint_conf(run: Run) -> dict[str, str]:
    """Stateful operators write state from executors: they need the checkpoint volume too."""
    volume, mount = run.spec.checkpoint.volume, checkpoint_mount_path(run.checkpoint_location)
    if volume is None or mount is None:
        return {}
    prefix = "spark.kubernetes.executor.volumes"
    if volume.persistent_volume_claim is not None:
        base = f"{prefix}.persistentVolumeClaim.{VOLUME_CHECKPOINT}"
        return {f"{base}.mount.path": mount, f"{base}.options.claimName": volume.persistent_volume_claim.claim_name}
    if volume.host_path is not None:
        base = f"{prefix}.hostPath.{VOLUME_CHECKPOINT}"
        return {f"{base}.mount.path": mount, f"{base}.options.path": volume.host_path}
    return {}


def executor_secrets_conf(spec: QuerySpec) -> dict[str, str]:
    """Spark mounts these Secrets into every executor pod at the driver's paths (by name: no
    value in the conf), so a setting naming a file means the same file on both."""
    return {f"spark.kubernetes.executor.secrets.{name}": f"{SECRETS_MOUNT_DIR}/{name}" for name in tls_secret_names(spec)}


def executor_pod_template(settings: Settings, run: Run | None = None) -> dict[str, Any]:
    """What Spark starts every executor pod from; Spark adds image, resources, env and ports, and its
    own labels to the spec's (runtime.executors: placement, labels and annotations, which Spark keeps)."""
    executors = run.spec.runtime.executors if run is not None else None
    template: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "securityContext": pod_security_context(settings),
            "enableServiceLinks": False,
            # Spark's executors never call the API server: no token (the namespace's default
            # account would otherwise be mounted: Spark names no executor account in client mode)
            "automountServiceAccountToken": False,
            "containers": [{
                "name": names.EXECUTOR_CONTAINER,
                # Executors fetch the job's jars into their working directory
                # (SparkFiles' root is "." on an executor): it must be writable.
                "workingDir": "/tmp",
                "securityContext": container_security_context(),
                "volumeMounts": [{"name": VOLUME_TMP, "mountPath": "/tmp"}],
            }],
            "volumes": [{"name": VOLUME_TMP, "emptyDir": {}}],
        },
    }  # fmt: skip
    if executors is not None:
        template["spec"].update(placement.scheduling(executors))
        metadata = {"labels": placement.labels(executors, {}), "annotations": placement.annotations(executors)}
        metadata = {key: value for key, value in metadata.items() if value}
        if metadata:
            template["metadata"] = metadata
    return template


def driver_service(run: Run) -> dict[str, Any] | None:
    """Executors reach the driver through this headless Service (pod backend only)."""
    if not run.uses_executors or run.spec.runtime.backend is not Backend.POD:
        return None
    name = names.driver_service_name(run.query)
    return child(
        "v1",
        "Service",
        name,
        run,
        names.COMPONENT_DRIVER_SERVICE,
        spec={
            "clusterIP": "None",
            "selector": names.labels(run.query, names.COMPONENT_DRIVER),
            "ports": [
                {"name": names.PORT_DRIVER_RPC, "port": names.DRIVER_PORT, "targetPort": names.DRIVER_PORT},
                {"name": names.PORT_BLOCK_MANAGER, "port": names.BLOCK_MANAGER_PORT, "targetPort": names.BLOCK_MANAGER_PORT},
            ],
            "publishNotReadyAddresses": True,
        },
    )
