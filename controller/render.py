"""What the operator creates for one driver attempt, as plain dicts (pure; no I/O).

    query document  the StreamingQuery the job reads (ConfigMap key query.json)
    driver pod      backend `pod`: the image's `job` entrypoint, i.e. `python -m app /etc/streamq/query.json`
    driver service  headless, only when executors run (they connect back to the driver)
    UI service      spec.runtime.sparkUI: port 4040 of the current driver (decide.spark_ui says which)
    auth secret     only when executors run: the key of Spark's RPC authentication and
                    encryption between driver and executors, random, made once per query
    lease access    standby queries: their Lease, and the account, Role and RoleBinding that
                    reach it and nothing else (``controller.lease_access``)
    disruption      standby queries: a PodDisruptionBudget (minAvailable 1 over their driver
                    pods), so a drain never evicts the driver and its standby at once
    SparkApplication backend `sparkApplication`: kubeflow's sparkoperator.k8s.io/v1beta2

Owner references are added by the caller (``kopf.adopt``); everything else is here.
What one attempt is (``Run``) and which spec fields make a new driver
(``spec_hash``) are in ``controller.run``, which the decisions share.
"""

from __future__ import annotations

import base64
import json
import math
import secrets
from typing import Any

from kubernetes.utils import parse_quantity

from app.contract.checkpoint import local_path as checkpoint_local_path
from app.contract import API_VERSION, HANDOVER_ANNOTATION, KIND, POD_IP_ENV, QUERY_ENV, READY_FILE, READY_FILE_ENV, RESUME_ANNOTATION, PROGRESS_FILE_ENV, SECRETS_DIR_ENV, SECRETS_MOUNT_DIR, SPEC_FILE_NAME, SPEC_MOUNT_DIR, TERMINATION_LOG
from app.contract import locations
from app.contract.lease import LEASE_ENV, lease_name
from app.contract import placement as contract_placement
from app.contract.policy import volume_mount
from app.contract.spec import Backend, QuerySpec
from controller import lease_access, names, placement
from controller.config import Settings
from controller.decide import spark_ui
from controller.run import SPARK_APP_KIND, Run, spec_hash

SPARK_APP_API_VERSION = "sparkoperator.k8s.io/v1beta2"
K8S_MASTER = "k8s://https://kubernetes.default.svc:443"
PROGRESS_FILE = "/tmp/streamq/progress.json"
SPEC_PATH = f"{SPEC_MOUNT_DIR}/{SPEC_FILE_NAME}"
# Spark reads this pod template when it makes executor pods: they get the driver's
# security context (Pod Security "restricted") and a read-only root filesystem.
EXECUTOR_TEMPLATE_FILE = "executor-pod.yaml"
EXECUTOR_CONTAINER = "executor"

_VOLUME_SPEC = "query"
_VOLUME_CHECKPOINT = "checkpoint"
_VOLUME_TMP = "tmp"
_VOLUME_AUTH = "spark-auth"

# Spark's shared secret of driver and executors (spark.authenticate). The driver reads it
# from a file, mounted under /var/run/secrets (which the policy keeps checkpoints away
# from; not SECRETS_MOUNT_DIR, where the tenant's own Secrets are mounted by name), and
# uses the file's bytes in base64 as the key. Executors cannot read a key file (Spark
# reads one only where spark.master names Kubernetes, and their startup conf has no
# master): they get that same base64 text in _SPARK_AUTH_SECRET, Spark's variable for
# it, by reference to the Secret's second key, not by value.
AUTH_SECRET_KEY = "secret"
AUTH_SECRET_BASE64_KEY = "secret-base64"
AUTH_MOUNT_DIR = "/var/run/secrets/streamq-spark-auth"
AUTH_SECRET_FILE = f"{AUTH_MOUNT_DIR}/{AUTH_SECRET_KEY}"
AUTH_SECRET_ENV = "_SPARK_AUTH_SECRET"  # org.apache.spark.SecurityManager.ENV_AUTH_SECRET
AUTH_SECRET_BYTES = 32
COMPONENT_SPARK_AUTH = "spark-auth"  # the label of the query's Spark auth Secret


def image_of(spec: QuerySpec, settings: Settings) -> str:
    return spec.runtime.image or settings.job_image


# --- units ----------------------------------------------------------------------

def mebibytes(quantity: str) -> int:
    """A Kubernetes memory quantity in MiB (rounded up, at least 1)."""
    return max(1, math.ceil(parse_quantity(quantity) / 2**20))


def spark_memory(quantity: str) -> str:
    """Spark reads "1024m", not "1Gi"."""
    return f"{mebibytes(quantity)}m"


def driver_heap(quantity: str) -> str:
    """The JVM heap of a driver pod limited to `quantity`: room is left for Python and off-heap."""
    return f"{max(256, int(mebibytes(quantity) * 0.6))}m"


# --- the query document ---------------------------------------------------------


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


def uses_spark_auth(run: Run) -> bool:
    """Driver and executors talk over the network: pod backend with executors (the
    SparkApplication backend leaves Spark's security to kubeflow's operator)."""
    return run.uses_executors and run.spec.runtime.backend is Backend.POD


def auth_secret_name(query: str) -> str:
    return names.child_name(query, "spark-auth")


def auth_conf(run: Run) -> dict[str, str]:
    """Spark's RPC authentication and AES encryption between driver and executors, and
    encrypted shuffle and spill files, keyed by the query's Secret. Without a key file for
    executors Spark would put a key it generates, by value, into every executor pod's
    environment (readable by anyone who can read pods): the executor file setting turns
    that off, and the executors' variable references the Secret instead (see above)."""
    if not uses_spark_auth(run):
        return {}
    secret = auth_secret_name(run.query)
    return {
        "spark.authenticate": "true",
        "spark.authenticate.secret.driver.file": AUTH_SECRET_FILE,
        "spark.authenticate.secret.executor.file": AUTH_SECRET_FILE,
        f"spark.kubernetes.executor.secretKeyRef.{AUTH_SECRET_ENV}": f"{secret}:{AUTH_SECRET_BASE64_KEY}",
        "spark.network.crypto.enabled": "true",
        "spark.io.encryption.enabled": "true",
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
        "spark.kubernetes.namespace": run.namespace,
        "spark.kubernetes.container.image": image_of(run.spec, settings),
        "spark.kubernetes.container.image.pullPolicy": settings.image_pull_policy,
        "spark.kubernetes.executor.podTemplateFile": f"{SPEC_MOUNT_DIR}/{EXECUTOR_TEMPLATE_FILE}",
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
    }
    for key, value in names.labels(run.query, names.COMPONENT_EXECUTOR, run.attempt).items():
        conf[f"spark.kubernetes.executor.label.{key}"] = value
    if run.spec.runtime.backend is Backend.POD:
        service = names.driver_service_name(run.query)
        conf.update({
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
        })  # fmt: skip
    conf.update(_executor_checkpoint_conf(run))
    conf.update(executor_secrets_conf(run.spec))
    conf.update(auth_conf(run))
    return conf


def _executor_checkpoint_conf(run: Run) -> dict[str, str]:
    """Stateful operators write state from executors: they need the checkpoint volume too."""
    volume, mount = run.spec.checkpoint.volume, checkpoint_mount_path(run.checkpoint_location)
    if volume is None or mount is None:
        return {}
    prefix = f"spark.kubernetes.executor.volumes"
    if volume.persistent_volume_claim is not None:
        base = f"{prefix}.persistentVolumeClaim.{_VOLUME_CHECKPOINT}"
        return {f"{base}.mount.path": mount, f"{base}.options.claimName": volume.persistent_volume_claim.claim_name}
    if volume.host_path is not None:
        base = f"{prefix}.hostPath.{_VOLUME_CHECKPOINT}"
        return {f"{base}.mount.path": mount, f"{base}.options.path": volume.host_path}
    return {}


def query_document(run: Run, settings: Settings) -> dict[str, Any]:
    """The StreamingQuery the job runs: the spec with the effective checkpoint location
    and the Spark settings the operator adds (the user's sparkConf wins)."""
    spec = run.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec.pop("suspend", None)
    spec["checkpoint"]["location"] = run.checkpoint_location
    runtime = spec.setdefault("runtime", {})
    conf = executor_conf(run, settings)
    if run.spec.runtime.backend is Backend.POD:
        conf.setdefault("spark.driver.memory", driver_heap(run.spec.runtime.driver.memory))
    conf.update(runtime.get("sparkConf", {}))
    if conf:
        runtime["sparkConf"] = conf
    metadata: dict[str, Any] = {"name": run.query, "namespace": run.namespace}
    annotations = {}
    if run.resume is not None:
        annotations[RESUME_ANNOTATION] = run.resume.to_annotation()
    if run.handover_from is not None:
        annotations[HANDOVER_ANNOTATION] = run.handover_from
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


# --- objects --------------------------------------------------------------------


def _meta(name: str, run: Run, component: str, attempt: int | None = None, **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": run.namespace, "labels": names.labels(run.query, component, attempt)}
    meta.update(extra)
    return meta


def _run_annotations(run: Run) -> dict[str, str]:
    return {
        names.ANNOTATION_SPEC_HASH: spec_hash(run.spec, run.checkpoint_location),
        names.ANNOTATION_CHECKPOINT: run.checkpoint_location,
        names.ANNOTATION_RESTART_NONCE: run.spec.restart_nonce or "",
    }


def executor_pod_template(settings: Settings, run: Run | None = None) -> dict[str, Any]:
    """What Spark starts every executor pod from; Spark adds image, resources, env and ports, and its
    own labels to the spec's (runtime.executors: placement, labels and annotations, which Spark keeps)."""
    executors = run.spec.runtime.executors if run is not None else None
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "securityContext": pod_security_context(settings),
            "enableServiceLinks": False,
            # Spark's executors never call the API server: no token (the namespace's default
            # account would otherwise be mounted: Spark names no executor account in client mode)
            "automountServiceAccountToken": False,
            "containers": [{
                "name": EXECUTOR_CONTAINER,
                # Executors fetch the job's jars into their working directory
                # (SparkFiles' root is "." on an executor): it must be writable.
                "workingDir": "/tmp",
                "securityContext": container_security_context(),
                "volumeMounts": [{"name": _VOLUME_TMP, "mountPath": "/tmp"}],
            }],
            "volumes": [{"name": _VOLUME_TMP, "emptyDir": {}}],
        },
    }  # fmt: skip
    if executors is not None:
        template["spec"].update(placement.scheduling(executors))
        metadata = {"labels": placement.labels(executors, {}), "annotations": placement.annotations(executors)}
        metadata = {key: value for key, value in metadata.items() if value}
        if metadata:
            template["metadata"] = metadata
    return template


def _auth_volume(secret: str) -> dict[str, Any]:
    return {"name": _VOLUME_AUTH, "secret": {"secretName": secret, "defaultMode": 0o440,
                                             "items": [{"key": AUTH_SECRET_KEY, "path": AUTH_SECRET_KEY}]}}


def _auth_mount() -> dict[str, Any]:
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
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(auth_secret_name(run.query), run, COMPONENT_SPARK_AUTH),
        "type": "Opaque",
        "immutable": True,
        "data": {
            AUTH_SECRET_KEY: base64.b64encode(value).decode(),
            AUTH_SECRET_BASE64_KEY: base64.b64encode(as_spark_sees_it).decode(),
        },
    }


def config_map(run: Run, settings: Settings) -> dict[str, Any]:
    data = {SPEC_FILE_NAME: json.dumps(query_document(run, settings), indent=2, sort_keys=True) + "\n"}
    if run.uses_executors:
        data[EXECUTOR_TEMPLATE_FILE] = json.dumps(executor_pod_template(settings, run), indent=2, sort_keys=True) + "\n"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(names.config_map_name(run.query), run, names.COMPONENT_QUERY_CONFIG, annotations=_run_annotations(run)),
        "data": data,
    }


def driver_service(run: Run) -> dict[str, Any] | None:
    """Executors reach the driver through this headless Service (pod backend only)."""
    if not run.uses_executors or run.spec.runtime.backend is not Backend.POD:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(names.driver_service_name(run.query), run, names.COMPONENT_DRIVER_SERVICE),
        "spec": {
            "clusterIP": "None",
            "selector": names.labels(run.query, names.COMPONENT_DRIVER),
            "ports": [
                {"name": "driver-rpc", "port": names.DRIVER_PORT, "targetPort": names.DRIVER_PORT},
                {"name": "blockmanager", "port": names.BLOCK_MANAGER_PORT, "targetPort": names.BLOCK_MANAGER_PORT},
            ],
            "publishNotReadyAddresses": True,
        },
    }


def spark_ui_service(query: str, namespace: str, attempt: int) -> dict[str, Any]:
    """The query's Spark UI and Spark's own metrics (/metrics/prometheus) on the driver of
    ``attempt`` only: a standby driver (a later attempt) is not behind it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": spark_ui.service_name(query),
            "namespace": namespace,
            "labels": names.labels(query, spark_ui.COMPONENT_SPARK_UI),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": spark_ui.selector(query, attempt),
            "ports": [{"name": "spark-ui", "port": spark_ui.SPARK_UI_PORT, "targetPort": spark_ui.SPARK_UI_PORT}],
        },
    }


def spark_ui_ingress(query: str, namespace: str, settings: Settings) -> dict[str, Any] | None:
    """An Ingress to the query's UI Service when the installation asks for one (chart value
    sparkUI.ingress.host, a template of {query} and {namespace}); None otherwise."""
    if not settings.spark_ui_ingress_host:
        return None
    host = settings.spark_ui_ingress_host.format(query=names.query_label(query), namespace=namespace)
    spec: dict[str, Any] = {"rules": [{"host": host, "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": spark_ui.service_name(query), "port": {"number": spark_ui.SPARK_UI_PORT}}},
    }]}}]}  # fmt: skip
    if settings.spark_ui_ingress_class:
        spec["ingressClassName"] = settings.spark_ui_ingress_class
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": spark_ui.service_name(query), "namespace": namespace,
                     "labels": names.labels(query, spark_ui.COMPONENT_SPARK_UI)},  # fmt: skip
        "spec": spec,
    }


def _secret_names(spec: QuerySpec) -> list[str]:
    found: list[str] = []
    for endpoint in (spec.source.kafka, spec.sink.kafka):
        auth = getattr(endpoint, "auth", None)
        if auth is not None and auth.secret_ref.name not in found:
            found.append(auth.secret_ref.name)
    for name in _tls_secret_names(spec):
        if name not in found:
            found.append(name)
    return found


def _tls_secret_names(spec: QuerySpec) -> list[str]:
    """The Kafka TLS Secrets (CA, client certificate): Kafka's clients read them as files, on the
    executors too (Spark's consumers and producers, the exactly-once writers' tasks)."""
    names_: list[str] = []
    for endpoint in (spec.source.kafka, spec.sink.kafka):
        tls = getattr(endpoint, "tls", None)
        for _, name in tls.secret_refs() if tls is not None else ():
            if name not in names_:
                names_.append(name)
    return names_


def executor_secrets_conf(spec: QuerySpec) -> dict[str, str]:
    """Spark mounts these Secrets into every executor pod at the driver's paths (by name: no
    value in the conf), so a setting naming a file means the same file on both."""
    return {f"spark.kubernetes.executor.secrets.{name}": f"{SECRETS_MOUNT_DIR}/{name}" for name in _tls_secret_names(spec)}


_VOLUME_S3_AUTH = "s3-auth"


def _s3_secret_name(spec: QuerySpec) -> str | None:
    """The Secret with an s3a:// checkpoint's key pair: mounted like the Kafka ones, read by the job
    at start (app.pipeline.credentials.s3a_hadoop_secrets); only its name is in the spec."""
    s3 = spec.checkpoint.s3
    return s3.credentials.secret_ref.name if s3 is not None and s3.credentials is not None else None


def volumes(run: Run) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, driver container mounts)."""
    vols: list[dict[str, Any]] = [
        {"name": _VOLUME_SPEC, "configMap": {"name": names.config_map_name(run.query)}},
        {"name": _VOLUME_TMP, "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": _VOLUME_SPEC, "mountPath": SPEC_MOUNT_DIR, "readOnly": True},
        {"name": _VOLUME_TMP, "mountPath": "/tmp"},
    ]
    volume, mount = run.spec.checkpoint.volume, checkpoint_mount_path(run.checkpoint_location)
    if volume is not None and mount is not None:
        source: dict[str, Any] | None = None
        if volume.persistent_volume_claim is not None:
            source = {"persistentVolumeClaim": {"claimName": volume.persistent_volume_claim.claim_name}}
        elif volume.host_path is not None:
            source = {"hostPath": {"path": volume.host_path, "type": "DirectoryOrCreate"}}
        elif volume.empty_dir is not None:
            source = {"emptyDir": dict(volume.empty_dir)}
        if source is not None:
            vols.append({"name": _VOLUME_CHECKPOINT, **source})
            mounts.append({"name": _VOLUME_CHECKPOINT, "mountPath": mount})
    if uses_spark_auth(run):
        vols.append(_auth_volume(auth_secret_name(run.query)))
        mounts.append(_auth_mount())
    kafka_secrets = _secret_names(run.spec)
    for i, secret in enumerate(kafka_secrets):
        vols.append({"name": f"kafka-auth-{i}", "secret": {"secretName": secret, "defaultMode": 0o440}})
        mounts.append({"name": f"kafka-auth-{i}", "mountPath": f"{SECRETS_MOUNT_DIR}/{secret}", "readOnly": True})
    s3_secret = _s3_secret_name(run.spec)
    if s3_secret is not None and s3_secret not in kafka_secrets:  # one Secret may hold both: mounted once
        vols.append({"name": _VOLUME_S3_AUTH, "secret": {"secretName": s3_secret, "defaultMode": 0o440}})
        mounts.append({"name": _VOLUME_S3_AUTH, "mountPath": f"{SECRETS_MOUNT_DIR}/{s3_secret}", "readOnly": True})
    return vols, mounts


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
        {"name": SECRETS_DIR_ENV, "value": SECRETS_MOUNT_DIR},
        {"name": QUERY_ENV, "value": run.query},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},  # spark.driver.host
        {"name": READY_FILE_ENV, "value": READY_FILE},
        *([{"name": LEASE_ENV, "value": lease_name(run.query)}] if lease_access.needs_lease(run, settings.policy) else []),
    ]


# The job creates READY_FILE once it is warm or runs its query (app.driver.ready): Ready means "worth
# handing the query to", which a warm upgrade waits for. test(1) is in every Debian-based image.
READINESS_PROBE = {"exec": {"command": ["test", "-e", READY_FILE]}, "periodSeconds": 1, "failureThreshold": 1}


def service_account(run: Run, settings: Settings) -> str | None:
    """The spec's account, else the driver account when it starts executors, else the query's
    own Lease account when it is a standby query, else none (no token): ``lease_access``."""
    return lease_access.service_account(run, settings)


# The NoExecute taints the node controller puts on a node that stopped reporting (not-ready) or
# cannot be reached (unreachable). Kubernetes' DefaultTolerationSeconds gives every pod 300 s of
# them; a driver gets restartPolicy.nodeLostAfter, so the next one (or the standby) starts sooner.
NODE_LOST_TAINTS = contract_placement.NODE_LOST_TAINTS  # a query's own tolerations of them are refused
HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"
COMPONENT_DISRUPTION = "disruption-budget"  # the label of a standby query's PodDisruptionBudget


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


def disruption_budget_name(query: str) -> str:
    return names.child_name(query, "drivers")


def disruption_budget(run: Run) -> dict[str, Any] | None:
    """A standby query's PodDisruptionBudget: one of its driver pods stays through a voluntary
    eviction (a drain, a node upgrade), so the standby is not evicted with the driver it stands by
    for. A driver pod that is not Ready (starting, Pending) may always be evicted: a standby that
    cannot start blocks no drain. Made once, like the Lease; removed when standby is turned off
    (``absent_children``)."""
    if not run.spec.runtime.standby:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(disruption_budget_name(run.query), run, COMPONENT_DISRUPTION),
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": names.labels(run.query, names.COMPONENT_DRIVER)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def absent_children(run: Run) -> list[tuple[str, str]]:
    """(kind, name) of what must not exist for this run: the disruption budget of a query that no
    longer has a standby (its one driver would block every drain of its node)."""
    if disruption_budget(run) is None:
        return [("PodDisruptionBudget", disruption_budget_name(run.query))]
    return []


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
    ports = []
    if run.uses_executors:
        ports += [
            {"name": "driver-rpc", "containerPort": names.DRIVER_PORT},
            {"name": "blockmanager", "containerPort": names.BLOCK_MANAGER_PORT},
        ]
    if run.spec.runtime.spark_ui:  # named: the chart's PodMonitor scrapes drivers by this port's name
        ports.append({"name": "spark-ui", "containerPort": spark_ui.SPARK_UI_PORT})
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
    spec.update(_placement(run, settings, account_key="serviceAccountName"))
    if "serviceAccountName" not in spec:
        spec["automountServiceAccountToken"] = False
    meta = _meta(run.driver_name, run, names.COMPONENT_DRIVER, run.attempt,
                 annotations=placement.annotations(drv, _run_annotations(run)))  # fmt: skip
    meta["labels"] = placement.labels(drv, meta["labels"])
    if run.standby:
        meta["labels"][names.LABEL_ROLE] = names.ROLE_STANDBY
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _placement(run: Run, settings: Settings, account_key: str) -> dict[str, Any]:
    """The driver's node selector, tolerations, affinity, priority class (the spec's and the
    operator's: controller.placement) and service account, where it has them (a pod names its
    account serviceAccountName, a SparkApplication's driver serviceAccount)."""
    out = placement.scheduling(run.spec.runtime.driver, driver_tolerations(run, settings), driver_affinity(run))
    account = service_account(run, settings)
    if account:
        out[account_key] = account
    return out


def spark_application(run: Run, settings: Settings) -> dict[str, Any]:
    """The same driver, submitted through kubeflow's Spark operator. Its own restart
    policy is Never: restarts are this operator's decision (it knows the exit codes)."""
    rt = run.spec.runtime
    vols, mounts = volumes(run)
    driver_labels = names.labels(run.query, names.COMPONENT_DRIVER, run.attempt)
    driver: dict[str, Any] = {
        "cores": rt.driver.cores,
        **({"coreRequest": rt.driver.core_request} if rt.driver.core_request else {}),
        "memory": spark_memory(rt.driver.memory),
        "labels": placement.labels(rt.driver, driver_labels),
        "annotations": placement.annotations(rt.driver, _run_annotations(run)),
        "env": driver_env(run, settings),
        "volumeMounts": mounts,
        "podSecurityContext": pod_security_context(settings),
        "securityContext": container_security_context(read_only_root=False),
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
    }
    driver.update(_placement(run, settings, account_key="serviceAccount"))
    executor: dict[str, Any] = {
        "cores": rt.executors.cores,
        **({"coreRequest": rt.executors.core_request} if rt.executors.core_request else {}),
        "memory": spark_memory(rt.executors.memory),
        "labels": placement.labels(rt.executors, names.labels(run.query, names.COMPONENT_EXECUTOR, run.attempt)),
        "podSecurityContext": pod_security_context(settings),
        "securityContext": container_security_context(read_only_root=False),
        **placement.scheduling(rt.executors),
    }
    if rt.executors.annotations:
        executor["annotations"] = placement.annotations(rt.executors)
    if run.uses_executors:
        executor["instances"] = rt.executors.instances
        checkpoint_mounts = [m for m in mounts if m["name"] == _VOLUME_CHECKPOINT]
        if checkpoint_mounts:
            executor["volumeMounts"] = checkpoint_mounts
    return {
        "apiVersion": SPARK_APP_API_VERSION,
        "kind": SPARK_APP_KIND,
        "metadata": _meta(run.driver_name, run, names.COMPONENT_DRIVER, run.attempt, annotations=_run_annotations(run)),
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
            "executor": executor,
        },
    }


def children(run: Run, settings: Settings) -> list[dict[str, Any]]:
    """Everything one attempt needs, in creation order (the driver last): a standby query's
    Lease, and the account, Role and RoleBinding that reach it, come first (the pod names the account)."""
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
