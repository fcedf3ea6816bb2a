"""The driver's volumes and mounts, and where the checkpoint and the tenant's Secrets are mounted (pure)."""

from __future__ import annotations

from typing import Any

from contract import (
    EXECUTORS_ANNOTATION,
    EXECUTORS_FILE_NAME,
    EXECUTORS_MOUNT_DIR,
    SECRETS_MOUNT_DIR,
    SPEC_MOUNT_DIR,
    locations,
)
from contract.checkpoint import local_path as checkpoint_local_path
from contract.policy import volume_mount
from contract.spec import QuerySpec
from controller import names
from controller.render.auth import auth_mount, auth_volume, uses_spark_auth
from controller.run import Run

VOLUME_SPEC = "query"
VOLUME_CHECKPOINT = "checkpoint"
VOLUME_TMP = "tmp"
VOLUME_EXECUTORS = "executors"
_VOLUME_S3_AUTH = "s3-auth"


def local_path(location: str) -> str | None:
    """The absolute filesystem path of a checkpoint location, None for remote URIs (s3a://, hdfs://)."""
    path = checkpoint_local_path(location)
    return path if path is not None and path.startswith("/") else None


def checkpoint_mount_path(location: str) -> str | None:
    """Where the checkpoint volume is mounted: the parent of the location, so a fresh
    checkpoint next to the old one (after an incompatible change) lands on the same volume."""
    path = local_path(location)
    if path is None:
        return None
    path = locations.normalise_path(path)  # as the policy read it: //opt is /opt
    return None if path is None else volume_mount(path)


def tls_secret_names(spec: QuerySpec) -> list[str]:
    """The Kafka TLS Secrets (CA, client certificate): Kafka's clients read them as files, on the
    executors too (Spark's consumers and producers, the exactly-once writers' tasks)."""
    found: list[str] = []
    for endpoint in (spec.source.kafka, spec.sink.kafka):
        tls = getattr(endpoint, "tls", None)
        for _, name in tls.secret_refs() if tls is not None else ():
            if name not in found:
                found.append(name)
    return found


def _kafka_secret_names(spec: QuerySpec) -> list[str]:
    found: list[str] = []
    for endpoint in (spec.source.kafka, spec.sink.kafka):
        auth = getattr(endpoint, "auth", None)
        if auth is not None and auth.secret_ref.name not in found:
            found.append(auth.secret_ref.name)
    for name in tls_secret_names(spec):
        if name not in found:
            found.append(name)
    return found


def _s3_secret_name(spec: QuerySpec) -> str | None:
    """The Secret with an s3a:// checkpoint's key pair: mounted like the Kafka ones, read by the job
    at start (app.pipeline.credentials.s3a_hadoop_secrets); only its name is in the spec."""
    s3 = spec.checkpoint.s3
    return s3.credentials.secret_ref.name if s3 is not None and s3.credentials is not None else None


def _checkpoint_source(run: Run) -> dict[str, Any] | None:
    volume = run.spec.checkpoint.volume
    if volume is None:
        return None
    if volume.persistent_volume_claim is not None:
        return {"persistentVolumeClaim": {"claimName": volume.persistent_volume_claim.claim_name}}
    if volume.host_path is not None:
        return {"hostPath": {"path": volume.host_path, "type": "DirectoryOrCreate"}}
    if volume.empty_dir is not None:
        return {"emptyDir": dict(volume.empty_dir)}
    return None


def volumes(run: Run) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, driver container mounts)."""
    vols: list[dict[str, Any]] = [
        {"name": VOLUME_SPEC, "configMap": {"name": names.config_map_name(run.query)}},
        {"name": VOLUME_TMP, "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": VOLUME_SPEC, "mountPath": SPEC_MOUNT_DIR, "readOnly": True},
        {"name": VOLUME_TMP, "mountPath": "/tmp"},
    ]
    source, mount = _checkpoint_source(run), checkpoint_mount_path(run.checkpoint_location)
    if source is not None and mount is not None:
        vols.append({"name": VOLUME_CHECKPOINT, **source})
        mounts.append({"name": VOLUME_CHECKPOINT, "mountPath": mount})
    if run.resizes_in_place:  # the operator's annotation as a file: the kubelet refreshes it when the pod changes
        item = {"path": EXECUTORS_FILE_NAME, "fieldRef": {"fieldPath": f"metadata.annotations['{EXECUTORS_ANNOTATION}']"}}
        vols.append({"name": VOLUME_EXECUTORS, "downwardAPI": {"items": [item]}})
        mounts.append({"name": VOLUME_EXECUTORS, "mountPath": EXECUTORS_MOUNT_DIR, "readOnly": True})
    if uses_spark_auth(run):
        vols.append(auth_volume(run.query))
        mounts.append(auth_mount())
    kafka_secrets = _kafka_secret_names(run.spec)
    for i, secret in enumerate(kafka_secrets):
        vols.append({"name": f"kafka-auth-{i}", "secret": {"secretName": secret, "defaultMode": 0o440}})
        mounts.append({"name": f"kafka-auth-{i}", "mountPath": f"{SECRETS_MOUNT_DIR}/{secret}", "readOnly": True})
    s3_secret = _s3_secret_name(run.spec)
    if s3_secret is not None and s3_secret not in kafka_secrets:  # one Secret may hold both: mounted once
        vols.append({"name": _VOLUME_S3_AUTH, "secret": {"secretName": s3_secret, "defaultMode": 0o440}})
        mounts.append({"name": _VOLUME_S3_AUTH, "mountPath": f"{SECRETS_MOUNT_DIR}/{s3_secret}", "readOnly": True})
    return vols, mounts
