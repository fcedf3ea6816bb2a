"""The query's Spark auth Secret, and how driver and executors use it (pure).

Spark's shared secret of driver and executors (spark.authenticate). The driver reads it
from a file, mounted under /var/run/secrets (which the policy keeps checkpoints away
from; not SECRETS_MOUNT_DIR, where the tenant's own Secrets are mounted by name), and
uses the file's bytes in base64 as the key. Executors cannot read a key file (Spark
reads one only where spark.master names Kubernetes, and their startup conf has no
master): they get that same base64 text in _SPARK_AUTH_SECRET, Spark's variable for
it, by reference to the Secret's second key, not by value.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

from contract.spec import Backend
from controller import names
from controller.render.meta import child
from controller.run import Run

AUTH_SECRET_KEY = "secret"
AUTH_SECRET_BASE64_KEY = "secret-base64"
AUTH_MOUNT_DIR = "/var/run/secrets/streamq-spark-auth"
AUTH_SECRET_FILE = f"{AUTH_MOUNT_DIR}/{AUTH_SECRET_KEY}"
AUTH_SECRET_ENV = "_SPARK_AUTH_SECRET"  # org.apache.spark.SecurityManager.ENV_AUTH_SECRET
AUTH_SECRET_BYTES = 32
_VOLUME_AUTH = "spark-auth"


def uses_spark_auth(run: Run) -> bool:
    """Driver and executors talk over the network: pod backend with executors (the
    SparkApplication backend leaves Spark's security to kubeflow's operator)."""
    return run.uses_executors and run.spec.runtime.backend is Backend.POD


def auth_conf(run: Run) -> dict[str, str]:
    """Spark's RPC authentication and AES encryption between driver and executors, and
    encrypted shuffle and spill files, keyed by the query's Secret. Without a key file for
    executors Spark would put a key it generates, by value, into every executor pod's
    environment (readable by anyone who can read pods): the executor file setting turns
    that off, and the executors' variable references the Secret instead (see above)."""
    if not uses_spark_auth(run):
        return {}
    secret = names.auth_secret_name(run.query)
    return {
        "spark.authenticate": "true",
        "spark.authenticate.secret.driver.file": AUTH_SECRET_FILE,
        "spark.authenticate.secret.executor.file": AUTH_SECRET_FILE,
        f"spark.kubernetes.executor.secretKeyRef.{AUTH_SECRET_ENV}": f"{secret}:{AUTH_SECRET_BASE64_KEY}",
        "spark.network.crypto.enabled": "true",
        "spark.io.encryption.enabled": "true",
    }


def auth_volume(query: str) -> dict[str, Any]:
    return {
        "name": _VOLUME_AUTH,
        "secret": {
            "secretName": names.auth_secret_name(query),
            "defaultMode": 0o440,
            "items": [{"key": AUTH_SECRET_KEY, "path": AUTH_SECRET_KEY}],
        },
    }


def auth_mount() -> dict[str, Any]:
    return {"name": _VOLUME_AUTH, "mountPath": AUTH_MOUNT_DIR, "readOnly": True}


def auth_secret(run: Run, key: bytes | None = None) -> dict[str, Any] | None:
    """The query's Spark auth Secret, with a new random key (``key`` for tests). It is only
    ever created, never updated: a retry or the next attempt finds the first one and keeps
    it (kube.create ignores "already exists"), and it goes with the StreamingQuery that owns
    it. The value is in no log, status, event or ConfigMap: only this object holds it."""
    if not uses_spark_auth(run):
        return None
    value = key if key is not None else secrets.token_bytes(AUTH_SECRET_BYTES)
    as_spark_sees_it = base64.b64encode(value)  # what the driver makes of the file's bytes
    data = {
        AUTH_SECRET_KEY: base64.b64encode(value).decode(),
        AUTH_SECRET_BASE64_KEY: base64.b64encode(as_spark_sees_it).decode(),
    }
    name = names.auth_secret_name(run.query)
    return child("v1", "Secret", name, run, names.COMPONENT_SPARK_AUTH, type="Opaque", immutable=True, data=data)
