"""What a StreamingQuery may ask of the cluster: the platform team's policy (pure).

The chart's ``policy:`` values are exactly the ``Policy`` model below. The operator
reads them from the file named by STREAMQ_POLICY_FILE (a ConfigMap the chart
renders); ``streamq validate --policy values.yaml`` reads them from a values file.
Both call ``validate_spec(..., policy=..., facts=...)``, which runs ``check_policy``
after the spec's own rules, so a tenant sees before applying what the operator
would refuse (phase Invalid, an event, no pod).

Every problem names the rule it broke: ``policy.<knob>`` for the knobs of the
model, ``policy.<name>`` for the fixed rules no value turns off (the operator's
own account, the operator's Spark wiring, secrets in sparkConf, the operator's
paths). docs/security.md is the reader's version of this module.

Static limits (lengths, counts, ranges) are on the spec model's fields and in
the CRD; this module holds what depends on the cluster.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

from kubernetes.utils import parse_quantity
from pydantic import Field, StringConstraints, field_validator

from contract import capacity, exactly_once, hosts, kafka_settings, locations, patterns, placement, sql
from contract.expressions import transform_texts
from contract.names import (
    APP_DIR,
    DEFAULT_DRIVER_SERVICE_ACCOUNT,
    DEFAULT_JOB_IMAGE,
    DEFAULT_OPERATOR_SERVICE_ACCOUNT,
    SECRETS_MOUNT_DIR,
    SPEC_MOUNT_DIR,
    TERMINATION_LOG,
)
from contract.problems import Problem
from contract.spec import MAX_CORES, MAX_EXECUTORS, Duration, Model, Quantity, QuerySpec, duration_ms

Found = Iterator[tuple[str, str]]  # (path below spec, message without the rule's name)

LEASE_ACCOUNT_SUFFIX = "-lease"  # controller.names: a standby query's own Lease account
OPERATOR_SECRET_SUFFIX = "-spark-auth"  # controller.names.auth_secret_name: a query's Spark RPC key
TENANT_SECRETS = "streamq-*"
TENANT_CLAIMS = "streamq-*"  # likewise for claims: a query never mounts another application's volume  # a Secret a namespace's owners made for queries: only they can name one so
NAMESPACE_VARIABLE = "${namespace}"
# Addresses no query has business with: the cloud metadata endpoints (instance credentials) and
# the link-local ranges they live in (AWS's ECS and Pod Identity agents sit at 169.254.170.x and
# fd00:ec2::23), and the names that resolve to them, also as a resolver's search domains complete
# a single label (instance-data -> instance-data.<region>.compute.internal). contract.hosts.
METADATA_HOSTS = (
    "169.254.0.0/16", "fe80::/10", "fd00:ec2::/32", "100.100.100.200/32",
    "metadata", "metadata.google.internal", "metadata.goog", "metadata.azure.internal",
    "instance-data", "instance-data.ec2.internal",
)  # fmt: skip


class VolumeKind(StrEnum):
    PERSISTENT_VOLUME_CLAIM = "persistentVolumeClaim"
    EMPTY_DIR = "emptyDir"
    HOST_PATH = "hostPath"


# Spark settings a query may tune by default: SQL and streaming behaviour, serialisation,
# memory fractions, timeouts, shuffle and compression. Nothing that loads code, opens a
# port, changes the pods or moves data outside the query.
DEFAULT_SPARK_CONF = (
    "spark.sql.*",
    "spark.default.parallelism",
    "spark.serializer",
    "spark.kryo.*",
    "spark.kryoserializer.*",
    "spark.memory.fraction",
    "spark.memory.storageFraction",
    "spark.network.timeout",
    "spark.executor.heartbeatInterval",
    "spark.locality.wait*",
    "spark.speculation*",
    "spark.shuffle.*",
    "spark.rdd.compress",
    "spark.io.compression.*",
    "spark.checkpoint.compress",
    "spark.cleaner.*",
    "spark.task.maxFailures",
)


def _none_by_default(description: str, **field: Any) -> Any:
    """A knob that lists what a query may ask for beyond the defaults: names, or prefixes ending in
    ``*``; empty (nothing more) unless the platform team lists some."""
    return Field(default=(), description=description, **field)


class Policy(Model):
    """The chart's ``policy:`` values. Lists of names take exact names or prefixes ending in ``*``."""

    allowed_images: tuple[str, ...] = _none_by_default(
        "Images a query may name in runtime.image, besides the operator's job image "
        "(always allowed): exact (registry.example/team/job:1.2) or prefix (registry.example/team/*).",
    )
    allowed_service_accounts: tuple[str, ...] = _none_by_default(
        "Accounts a query may name in runtime.serviceAccountName, besides the chart's driver "
        "account (for queries that run executors only); '*': any account of the query's namespace. Never the "
        "operator's own.",
    )
    allowed_volumes: tuple[VolumeKind, ...] = Field(
        default=(VolumeKind.PERSISTENT_VOLUME_CLAIM, VolumeKind.EMPTY_DIR),
        description="Kinds of checkpoint.volume a query may use. hostPath is off unless listed.",
    )
    allowed_claims: tuple[str, ...] = Field(
        default=(TENANT_CLAIMS,),
        description="PersistentVolumeClaims a query may mount as checkpoint.volume (in its own namespace). Default: "
        f"those made for queries ({TENANT_CLAIMS}), not another application's data; '*': any claim.",
    )
    host_path_prefixes: tuple[Annotated[str, StringConstraints(pattern=r"^/")], ...] = Field(
        default=("/var/lib/streamq",),
        description="When hostPath is allowed: the node directories (and what is below them) it may use.",
    )
    max_executors: int = Field(
        default=10,
        ge=0,
        le=2 * MAX_EXECUTORS,
        description="Executor pods of one query at once: runtime.executors.instances, twice for a query that can run "
        "two drivers at once (runtime.standby, warm upgrades: contract.capacity).",
    )
    max_cores: int = Field(
        default=32,
        ge=1,
        le=2 * MAX_CORES * (MAX_EXECUTORS + 1),
        description="Cores of one query at once: drivers x (driver.cores + executors.instances x executors.cores), "
        "where drivers is 2 for a standby or warm-upgrade query (contract.capacity).",
    )
    max_memory: Quantity = Field(
        default="64Gi",
        description="Memory of one query at once: drivers x (driver.memory + executors.instances x "
        "executors.memory with Spark's overhead), where drivers is 2 for a standby or warm-upgrade query.",
    )
    allowed_spark_conf: tuple[str, ...] = Field(
        default=DEFAULT_SPARK_CONF,
        description="runtime.sparkConf keys a query may set. A key on the refused-by-default list passes only "
        "when listed here as the full key or as that list spells it (spark.ui.*), never through a wider prefix.",
    )
    allowed_secrets: tuple[str, ...] = Field(
        default=(TENANT_SECRETS,),
        description="Secrets a query may mount through auth.secretRef (in its own namespace). Default: those "
        f"the namespace's owners named for queries ({TENANT_SECRETS}); '*': any Secret of the namespace.",
    )
    allowed_sql_functions: tuple[str, ...] = _none_by_default(
        alias="allowedSQLFunctions",
        description="Spark functions refused by default (reflect, java_method, xpath, ...: docs/security.md) "
        "that queries may call; '*': every function of Spark's registry.",
    )
    allowed_kafka_options: tuple[str, ...] = _none_by_default(
        "Kafka client settings (options kafka.<setting>) beyond the default allow-list that queries may "
        "set: exact names or prefixes ending in '*' (e.g. ssl.truststore.location).",
    )
    checkpoint_roots: tuple[Annotated[str, StringConstraints(pattern=r"^/")], ...] = Field(
        default=("/checkpoints",),
        description="Directories of the driver under which a checkpoint volume may be mounted. A checkpoint "
        "without a volume stays in the driver's scratch directory (/tmp).",
    )
    checkpoint_schemes: tuple[str, ...] = Field(
        default=("s3a", "gs", "abfs", "abfss", "hdfs"),
        description="URI schemes a remote checkpoint may use.",
    )
    remote_checkpoint_prefixes: tuple[str, ...] = Field(
        default=(f"*://*/{NAMESPACE_VARIABLE}/",),
        description="Where remote checkpoints may live, as scheme://bucket/prefix with '*' for any scheme or bucket "
        f"and {NAMESPACE_VARIABLE} for the query's namespace. Default: any bucket, below a folder named after "
        "the namespace.",
    )
    min_backoff: Duration = Field(
        default="1s", description="restartPolicy.backoff.initial at least: a crashing query never restarts in a tight loop."
    )
    max_restarts: int = Field(
        default=100, ge=-1, description="restartPolicy.maxRestarts at most; -1 lets queries ask for unlimited restarts."
    )
    min_stable_after: Duration = Field(
        default="1m",
        description="restartPolicy.stableAfter at least: a shorter one resets the restart count so often that "
        "maxRestarts never ends a crash loop.",
    )
    denied_hosts: tuple[str, ...] = Field(
        default=METADATA_HOSTS,
        description="Hosts no broker (bootstrapServers), checkpoint.s3.endpoint or remote checkpoint host may be: "
        "networks (169.254.0.0/16, an address) that IP literals are compared with in every form the JVM and libc "
        "read, and names (with their subdomains). Default: the cloud metadata endpoints. An older prefix "
        "like 169.254.* means its network.",
    )
    allowed_hosts: tuple[str, ...] = _none_by_default(
        "When not empty, the only hosts a broker, checkpoint.s3.endpoint or remote checkpoint host may be: "
        f"networks (10.0.0.0/8), names (kafka.example.com, and its subdomains), domains (*.kafka.svc, .example.com), "
        f"with {NAMESPACE_VARIABLE} for the query's namespace; '*' or empty: any host deniedHosts does not refuse.",
    )

    @field_validator("denied_hosts", "allowed_hosts")
    @classmethod
    def _host_patterns(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        hosts.compile_patterns(entries)  # a typo refuses the policy, not every query
        return entries

    allow_spark_ui: bool = Field(
        default=True,
        alias="allowSparkUI",
        description="Whether a query may turn on runtime.sparkUI (its driver serves the UI on 4040).",
    )
    allow_exactly_once: bool = Field(
        default=True,
        description="Whether a query may ask for sink.kafka.delivery exactlyOnce (its writers need Write on the "
        "TransactionalId prefix streamq.<namespace>. and on the control topic: docs/security.md).",
    )
    allow_standby: bool = Field(
        default=True,
        description="Whether a query may ask for runtime.standby (without executors its drivers run as an account "
        "the operator makes for the query, which can only get and update that query's Lease).",
    )
    allow_node_identity: bool = Field(
        default=False,
        description="Whether a remote checkpoint may be written without credentials of its own (an s3a:// one "
        "without checkpoint.s3.credentials; gs://, abfs://, hdfs://... have none): with the node's or the pod's "
        "identity (instance profile, IRSA, workload identity), i.e. with the platform's rights, not the namespace's.",
    )
    # Pod placement and metadata of drivers and executors (contract.placement).
    allowed_priority_classes: tuple[str, ...] = _none_by_default(
        "PriorityClasses a query may name in runtime.driver.priorityClassName and "
        "runtime.executors.priorityClassName; system-* classes only by their full name. Empty: none (the "
        "cluster's default class).",
    )
    allowed_toleration_keys: tuple[str, ...] = _none_by_default(
        "Taint keys a query's pods may tolerate (runtime.driver/executors.tolerations); '*' also allows a "
        "toleration without a key, which tolerates every taint. Empty: none.",
    )
    allowed_node_labels: tuple[str, ...] = Field(
        default=placement.WELL_KNOWN_NODE_LABELS,
        description="Node label keys a query may select nodes by (runtime.driver/executors.nodeSelector and "
        "nodeAffinity). Default: what a node is and where (OS, architecture, instance type, zone, region).",
    )
    allowed_label_prefixes: tuple[str, ...] = _none_by_default(
        "Label keys a query may put on its pods (runtime.driver/executors.labels), e.g. team.example.com/*, "
        "cost-center. Keys of kubernetes.io and k8s.io only through a prefix naming the domain; never the "
        "operator's streamq.io/..., the selector labels app.kubernetes.io/name, instance, component, managed-by "
        "or Spark's spark-*. Empty: none.",
    )
    allowed_annotation_prefixes: tuple[str, ...] = _none_by_default(
        "Annotation keys a query may put on its pods (runtime.driver/executors.annotations), e.g. "
        "prometheus.io/*, team.example.com/*. Keys of kubernetes.io and k8s.io only through a prefix naming the "
        "domain; never the operator's streamq.io/.... Empty: none.",
    )


@dataclass(frozen=True)
class OperatorFacts:
    """What the operator knows about its own installation (Settings; the chart's values)."""

    job_image: str = DEFAULT_JOB_IMAGE
    driver_service_account: str = DEFAULT_DRIVER_SERVICE_ACCOUNT
    operator_service_account: str = DEFAULT_OPERATOR_SERVICE_ACCOUNT
    operator_namespace: str | None = None  # None: unknown, the operator's account is refused everywhere


matches = patterns.matches
_listed = patterns.listed


# --- images, accounts, secrets ----------------------------------------------------------


def _image(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    image = spec.runtime.image
    allowed = [facts.job_image, *policy.allowed_images]
    if image is not None and not matches(image, allowed):
        yield ".runtime.image", f"image {image} is not allowed (allowed: {_listed(allowed)})"


def _is_operator_account(account: str | None, facts: OperatorFacts, namespace: str | None) -> bool:
    same_namespace = None in (namespace, facts.operator_namespace) or namespace == facts.operator_namespace
    return account == facts.operator_service_account and same_namespace


def _operator_account(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    account = spec.runtime.service_account_name
    if _is_operator_account(account, facts, namespace):
        yield ".runtime.serviceAccountName", f"{account} is the operator's own account; a query never runs as it"


def runs_executors(spec: QuerySpec, policy: Policy | None) -> bool:
    """Whether the query starts executor pods on this platform: the only reason for its driver to
    hold the driver account (``None``: no policy applies)."""
    return spec.runtime.executors.instances > 0 and (policy is None or policy.max_executors > 0)


def warm_upgrades(spec: QuerySpec, policy: Policy | None) -> bool:
    """Whether the query's spec changes are warm upgrades on this platform (``QuerySpec.warm_upgrades``):
    a second driver and a Lease token, which ``allowStandby: false`` turns off; a change is then a
    plain restart. ``None``: no policy applies."""
    return spec.warm_upgrades and (policy is None or policy.allow_standby)


def _service_account(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    account = spec.runtime.service_account_name
    allowed = [facts.driver_service_account, *policy.allowed_service_accounts]
    if account is None or _is_operator_account(account, facts, namespace):
        return
    if account.endswith(LEASE_ACCOUNT_SUFFIX):  # even under "*": it would take another query's Lease
        yield ".runtime.serviceAccountName", f"{account} is an account the operator makes for a query's Lease"
        return
    if account == facts.driver_service_account and not runs_executors(spec, policy):
        # even under "*": it creates, patches and deletes pods, which only a driver that starts executors needs
        yield (
            ".runtime.serviceAccountName",
            (
                f"{account} is the driver account, which creates and deletes pods: only a query that runs executors "
                f"(runtime.executors.instances > 0, where policy.maxExecutors > 0) may run as it"
            ),
        )
        return
    if not matches(account, allowed):
        yield ".runtime.serviceAccountName", f"service account {account} is not allowed (allowed: {_listed(allowed)})"


def secret_refs(spec: QuerySpec) -> Iterator[tuple[str, str]]:
    """(path, name) of every Secret the query mounts."""
    for at, endpoint in ((".source.kafka", spec.source.kafka), (".sink.kafka", spec.sink.kafka)):
        auth = getattr(endpoint, "auth", None)
        if auth is not None:
            yield f"{at}.auth.secretRef.name", auth.secret_ref.name
        tls = getattr(endpoint, "tls", None)
        if tls is not None:
            for path, name in tls.secret_refs():
                yield f"{at}.tls{path}", name
    s3 = getattr(spec.checkpoint, "s3", None)
    if s3 is not None and s3.credentials is not None:
        yield ".checkpoint.s3.credentials.secretRef.name", s3.credentials.secret_ref.name


# The names Kubernetes gives a service account's token Secret (the legacy token controller's
# <account>-token-<5 chars>) and the names people give one (<account>-token).
TOKEN_SECRET_NAME = re.compile(r"-token(-[a-z0-9]{5})?$")


def _account_token(name: str, facts: OperatorFacts) -> bool:
    """Named like a token of an account a query must never borrow. What a Secret is, the operator
    reads from the cluster (contract.credentials); ``streamq validate`` can only read the name."""
    accounts = (facts.driver_service_account, facts.operator_service_account)
    return (
        bool(TOKEN_SECRET_NAME.search(name))
        or any(name.startswith(f"{a}-") for a in accounts)
        or (LEASE_ACCOUNT_SUFFIX + "-" in name or name.endswith(LEASE_ACCOUNT_SUFFIX))
    )


def _secrets(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for at, name in secret_refs(spec):
        if name.endswith(OPERATOR_SECRET_SUFFIX):
            yield at, f"Secret {name} is one the operator makes for a query's Spark authentication"
        elif _account_token(name, facts):
            yield at, (f"Secret {name} is named like a service account's token (or after the driver, operator or a "
                       "Lease account): credentials Secrets are Opaque Secrets the namespace's owners label "
                       'streamq.io/credentials: "true", never an account\'s token')  # fmt: skip
        elif not matches(name, policy.allowed_secrets):
            yield at, f"Secret {name} is not allowed (allowed: {_listed(policy.allowed_secrets)})"


def _spark_ui(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    if spec.runtime.spark_ui and not policy.allow_spark_ui:
        yield ".runtime.sparkUI", "the Spark UI is turned off on this platform (policy.allowSparkUI)"


def _standby(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    if spec.runtime.standby and not policy.allow_standby:
        yield ".runtime.standby", "standby drivers are turned off on this platform (policy.allowStandby)"


# --- volumes and paths -----------------------------------------------------------------------

# Where the operator mounts what it owns (the query document, Secrets and the account's
# token, the job's code) and the kernel's views: a checkpoint must not land on them, and
# its volume (mounted at the location's parent) must not cover them.
PROTECTED_PATHS = (
    SPEC_MOUNT_DIR,
    posixpath.dirname(SECRETS_MOUNT_DIR),  # /var/run/secrets: also the account token
    APP_DIR,
    posixpath.dirname(TERMINATION_LOG),  # /dev
    "/proc",
    "/sys",
)
DRIVER_MOUNTS = ("/tmp",)  # the driver's scratch emptyDir: a second volume there makes the pod invalid


def _volumes(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    volume = spec.checkpoint.volume
    if volume is None:
        return
    chosen = {
        VolumeKind.PERSISTENT_VOLUME_CLAIM: volume.persistent_volume_claim,
        VolumeKind.EMPTY_DIR: volume.empty_dir,
        VolumeKind.HOST_PATH: volume.host_path,
    }
    allowed = _listed(policy.allowed_volumes)
    for kind, source in chosen.items():
        if source is not None and kind not in policy.allowed_volumes:
            yield f".checkpoint.volume.{kind}", f"{kind} volumes are not allowed (allowed: {allowed})"


def _claims(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    volume = spec.checkpoint.volume
    if volume is None or volume.persistent_volume_claim is None:
        return
    claim = volume.persistent_volume_claim.claim_name
    if not matches(claim, policy.allowed_claims):
        yield (
            ".checkpoint.volume.persistentVolumeClaim.claimName",
            (f"claim {claim} is not allowed (allowed: {_listed(policy.allowed_claims)})"),
        )


def _host_path(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    volume = spec.checkpoint.volume
    if volume is None or volume.host_path is None or VolumeKind.HOST_PATH not in policy.allowed_volumes:
        return  # refused by allowedVolumes already
    path = locations.normalise_path(volume.host_path)
    if path is None or not any(locations.under(path, p) for p in policy.host_path_prefixes):
        yield (
            ".checkpoint.volume.hostPath",
            (f"node directory {volume.host_path} is not allowed (allowed: {_listed(policy.host_path_prefixes)})"),
        )


def volume_mount(path: str) -> str:
    """Where the operator mounts a checkpoint volume for ``path``: its parent, or the path itself
    when its parent is / (controller.render.volumes)."""
    return path if posixpath.dirname(path) == "/" else posixpath.dirname(path)


def _checkpoint_paths(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    where = locations.parse(spec.checkpoint.location)
    if not where.local:
        return  # a remote URI: policy.checkpointSchemes and policy.remoteCheckpointPrefixes
    if where.bucket not in ("", "localhost") or not where.path:
        yield (
            ".checkpoint.location",
            (f"{spec.checkpoint.location} is not an absolute path of the driver (e.g. /checkpoints/my-query)"),
        )
        return
    path = where.path
    mount = volume_mount(path)
    for root in PROTECTED_PATHS:
        if locations.under(path, root) or (spec.checkpoint.volume is not None and locations.under(root, mount)):
            yield (
                ".checkpoint.location",
                (f"{spec.checkpoint.location} would write to or cover {root}, which the operator or the kernel owns"),
            )
            return
    if spec.checkpoint.volume is not None and mount in DRIVER_MOUNTS:
        yield (
            ".checkpoint.location",
            (f"the checkpoint volume would be mounted at {mount}, the driver's scratch directory: use a subdirectory"),
        )


def _checkpoint_roots(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    where = locations.parse(spec.checkpoint.location)
    if not where.local or not where.path or where.bucket not in ("", "localhost"):
        return
    roots = policy.checkpoint_roots
    if spec.checkpoint.volume is None:  # in the container's own filesystem: scratch, or below a root
        if not any(locations.under(where.path, root) for root in (*DRIVER_MOUNTS, *roots)):
            yield (
                ".checkpoint.location",
                (f"{spec.checkpoint.location} is outside the checkpoint roots ({_listed((*roots, *DRIVER_MOUNTS))})"),
            )
        return
    mount = volume_mount(where.path)
    if not any(locations.under(mount, root) for root in roots):
        example = f"{roots[0] if roots else '/checkpoints'}/my-query"
        yield (
            ".checkpoint.location",
            (f"the checkpoint volume would be mounted at {mount}: volumes go below {_listed(roots)} (e.g. {example})"),
        )


def _prefix_matches(where: locations.Location, pattern: str, namespace: str) -> bool:
    """scheme://bucket/prefix, '*' for any scheme or bucket, ${namespace} for the query's."""
    scheme, sep, rest = pattern.replace(NAMESPACE_VARIABLE, namespace).partition("://")
    if not sep:
        return False
    bucket, _, prefix = rest.partition("/")
    prefix = "/" + prefix.strip("/")
    return (
        scheme in ("*", where.scheme) and bucket in ("*", where.bucket) and (prefix == "/" or locations.under(where.path, prefix))
    )


def _remote_checkpoint(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    location = spec.checkpoint.location
    where = locations.parse(location)
    if where.local:
        return
    shown = locations.redacted(location)
    if where.userinfo:
        yield (
            ".checkpoint.location",
            (
                f"{shown} holds credentials in the URI: they would show in status and logs; "
                "use checkpoint.s3.credentials.secretRef"
            ),
        )
    if where.extras or where.dot_segments or not where.bucket:
        yield ".checkpoint.location", f"{shown} is not a plain scheme://bucket/path URI (no ., .., ? or #)"
    if where.scheme not in policy.checkpoint_schemes:
        yield (
            ".checkpoint.location",
            (f"{where.scheme}:// checkpoints are not allowed (allowed: {_listed(policy.checkpoint_schemes)})"),
        )
    elif not any(_prefix_matches(where, p, namespace or "default") for p in policy.remote_checkpoint_prefixes):
        allowed = _listed(p.replace(NAMESPACE_VARIABLE, namespace or "default") for p in policy.remote_checkpoint_prefixes)
        yield ".checkpoint.location", f"{shown} is outside this namespace's checkpoint prefixes (allowed: {allowed})"


def _node_identity(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    """Without a key of its own, a store client falls back on whatever identity the pod has: S3A's
    default chain ends at the instance profile (or IRSA's web identity), gs:// and abfs:// use the
    node's service account, hdfs:// the process's user. Every namespace would write with the same,
    platform-wide rights, across every tenant's prefix."""
    where = locations.parse(spec.checkpoint.location)
    if where.local or policy.allow_node_identity:
        return
    s3 = spec.checkpoint.s3
    if where.scheme == "s3a":
        if s3 is None or s3.credentials is None:
            yield (
                ".checkpoint.s3.credentials",
                (
                    "an s3a:// checkpoint without credentials writes with the node's identity (S3A's default chain: "
                    "instance profile, IRSA), the platform's rights; set spec.checkpoint.s3.credentials.secretRef"
                ),
            )
        return
    yield (
        ".checkpoint.location",
        (
            f"a {where.scheme}:// checkpoint has no credentials of its own (only s3a:// takes "
            "spec.checkpoint.s3.credentials): it would write with the node's identity, the platform's rights"
        ),
    )


def _derived_locations(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    """The fresh checkpoint the operator (or the job) would make next to the spec's, held to the
    location rules now, before any incompatible change asks for it (contract.derived)."""
    from contract import derived  # it runs this module's location rules

    yield from derived.reset_location_problems(spec, policy, facts, namespace)


# --- resources -------------------------------------------------------------------------------


# The caps count every driver that can run at once, each with its executors: a standby, a warm
# upgrade's or blue/green's second driver (contract.capacity says why, takeovers included).


def _executors(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    count = capacity.executors_at_once(spec)
    if count.total > policy.max_executors:
        yield (
            ".runtime.executors.instances",
            (
                f"{count.explain(f'{count.executors} executors', f'{count.total} executors')}, "
                f"at most {policy.max_executors} allowed"
            ),
        )


def _cores(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    count = capacity.cores_at_once(spec)
    if count.total > policy.max_cores:
        one = f"{_number(count.driver)} driver" + _each_executor(count, _number)
        yield (
            ".runtime",
            (
                f"{count.explain(one, f'{_number(count.total)} cores')} (per pod cores or coreRequest, the larger), "
                f"at most {policy.max_cores} allowed"
            ),
        )


def _at_most_executors(check: Callable[[QuerySpec, Policy, OperatorFacts, str | None], Found]) -> Callable[..., Found]:
    """``check`` of the spec as it would be at autoscaling.maxExecutors: a recommendation stays within the caps."""

    def at_max(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
        auto, executors = spec.autoscaling, spec.runtime.executors
        if auto is None or auto.max_executors <= executors.instances:  # the spec's own size is checked as it is
            return
        grown = executors.model_copy(update={"instances": auto.max_executors})
        at_max = spec.model_copy(update={"runtime": spec.runtime.model_copy(update={"executors": grown})})
        for _, message in check(at_max, policy, facts, namespace):
            yield ".autoscaling.maxExecutors", f"at autoscaling.maxExecutors {auto.max_executors}: {message}"

    return at_max


def _each_executor(count: capacity.AtOnce, show: Callable[[Decimal], str]) -> str:
    return f" + {count.executors} x {show(count.executor)} executor" if count.executors else ""


def _number(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _gi(value: Decimal) -> str:
    return f"{value / 2**30:.1f}Gi"


def _memory(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    count = capacity.memory_at_once(spec)
    if count.total > parse_quantity(policy.max_memory):
        one = f"{_gi(count.driver)} driver" + _each_executor(count, _gi)
        yield (
            ".runtime",
            (
                f"{count.explain(one, f'{_gi(count.total)} of memory')} (executors with Spark's overhead), "
                f"at most {policy.max_memory} allowed"
            ),
        )


def _restarts(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    restart = spec.restart_policy
    if duration_ms(restart.backoff.initial) < duration_ms(policy.min_backoff):
        yield (
            ".restartPolicy.backoff.initial",
            (f"backoff {restart.backoff.initial} is below the platform's floor of {policy.min_backoff}"),
        )
    if duration_ms(restart.stable_after) < duration_ms(policy.min_stable_after):
        yield (
            ".restartPolicy.stableAfter",
            (f"stableAfter {restart.stable_after} is below the platform's floor of {policy.min_stable_after}"),
        )
    if policy.max_restarts >= 0 and not 0 <= restart.max_restarts <= policy.max_restarts:
        asked = "unlimited" if restart.max_restarts < 0 else restart.max_restarts
        yield ".restartPolicy.maxRestarts", f"{asked} restarts, at most {policy.max_restarts} allowed"


# --- where a query connects -------------------------------------------------------------------

# Schemes whose authority is a bucket, not a host: the store's endpoint is the host (gs:// and AWS: fixed).
BUCKET_SCHEMES = ("s3a", "s3", "s3n", "gs")
# Kafka options and sparkConf keys whose values name hosts: refused by default, checked too when a policy opens one.
HOST_KEY = re.compile(r"(servers|\.urls?|\.uri|endpoint|\.host|\.address|defaultfs)$", re.IGNORECASE)


@dataclass(frozen=True)
class Connection:
    path: str  # below spec
    address: str  # host, host:port, [v6]:port or a URL, as written
    shown: str  # for messages (no credentials)
    host: bool = True  # False: a bucket, compared with deniedHosts only


def connections(spec: QuerySpec) -> Iterator[Connection]:
    """Every address a query makes its pods connect to."""
    for at, endpoint in ((".source.kafka", spec.source.kafka), (".sink.kafka", spec.sink.kafka)):
        for server in endpoint.bootstrap_servers.split(",") if endpoint is not None else ():
            if server.strip():  # Kafka skips empty entries
                yield Connection(f"{at}.bootstrapServers", server, server.strip())
    keyed = [(path, key, value) for path, key, value in kafka_options(spec)]
    keyed += [(f".runtime.sparkConf.{key}", key, value) for key, value in spec.runtime.spark_conf.items()]
    for path, key, value in keyed:
        if HOST_KEY.search(key):
            yield from (Connection(path, v, v.strip()) for v in value.split(",") if v.strip())
    s3 = getattr(spec.checkpoint, "s3", None)
    if s3 is not None and s3.endpoint:
        yield Connection(".checkpoint.s3.endpoint", s3.endpoint, s3.endpoint)
    location = spec.checkpoint.location
    where = locations.parse(location)
    authority = location.partition("://")[2].split("/", 1)[0]  # also where urlsplit gave up (unbalanced [ ])
    if where.local or not (where.bucket or authority):
        return  # hdfs:///path: the cluster's default namenode
    bucket = where.scheme in BUCKET_SCHEMES
    yield Connection(".checkpoint.location", location, locations.redacted(location), host=not bucket)
    if bucket and s3 is not None and s3.endpoint and not s3.path_style_access:
        try:  # virtual-host style: S3A connects to <bucket>.<endpoint's host>
            (store,) = hosts.split(s3.endpoint)
        except (hosts.HostError, ValueError):
            return  # reported at checkpoint.s3.endpoint
        if hosts.ipv4_readings(store.host.rstrip(".")) is None and ":" not in store.host:
            composed = f"{where.bucket.rpartition('@')[2]}.{store.host}"
            yield Connection(".checkpoint.s3.endpoint", composed, f"{composed} (the bucket before the endpoint)")


def _readings(connection: Connection) -> list[hosts.Host] | str:
    """The host's readings, or why it cannot be read."""
    try:
        return hosts.parse(connection.address)
    except hosts.HostError as exc:
        return str(exc)


def _endpoints(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    denied = hosts.compile_patterns(policy.denied_hosts, namespace or "default")
    for connection in connections(spec):
        readings = _readings(connection)
        if isinstance(readings, str):
            if connection.host:  # a bucket's own rules are remoteCheckpointPrefixes'
                yield connection.path, f"{connection.shown}: {readings}; a host is a DNS name or an IP address"
            continue
        hit = next((h for reading in readings for h in hosts.denied_by(reading, denied)), None)
        if hit is not None:
            entry, matched = hit
            yield (
                connection.path,
                (
                    f"{connection.shown} is {matched}, which {entry} denies: the cloud metadata endpoints are never "
                    "a broker, a store or a namenode"
                ),
            )


def _allowed_endpoints(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    if not policy.allowed_hosts:
        return
    ns = namespace or "default"
    allowed, denied = hosts.compile_patterns(policy.allowed_hosts, ns), hosts.compile_patterns(policy.denied_hosts, ns)
    for connection in connections(spec):
        readings = _readings(connection)
        if not connection.host or isinstance(readings, str):
            continue  # unreadable hosts: policy.deniedHosts
        if any(next(hosts.denied_by(r, denied), None) for r in readings):
            continue
        refused = [r.text for r in readings if not hosts.allowed(r, allowed)]
        if refused:
            listed = _listed(p.replace(NAMESPACE_VARIABLE, ns) for p in policy.allowed_hosts)
            yield connection.path, f"{connection.shown}: host {refused[0]} is not allowed (allowed: {listed})"


# --- SQL and Kafka client settings --------------------------------------------------------------


def _sql_functions(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for path, text in transform_texts(spec):
        for why in sql.function_problems(text, policy.allowed_sql_functions):
            yield path, why


def kafka_options(spec: QuerySpec) -> Iterator[tuple[str, str, str]]:
    """(path, key, value) of every option of the Kafka source and sink."""
    for at, endpoint in ((".source.kafka", spec.source.kafka), (".sink.kafka", spec.sink.kafka)):
        for key, value in (getattr(endpoint, "options", None) or {}).items():
            yield f"{at}.options.{key}", key, value


def _kafka_options(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for path, key, value in kafka_options(spec):
        if "${" in value:
            yield path, "${...} in a value is a config-provider reference (it reads files or the environment)"
        setting = key[len("kafka.") :] if key.lower().startswith("kafka.") else None
        if setting is None or matches(setting, policy.allowed_kafka_options):
            continue
        why = kafka_settings.refusal(setting)
        if why is not None:
            yield path, f"Kafka setting {setting} is refused unless the policy lists it: {why}"


# --- exactly-once: transactional ids and control topics ---------------------------------------


def _exactly_once(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    kafka = spec.sink.kafka
    if kafka is not None and kafka.exactly_once and not policy.allow_exactly_once:
        yield ".sink.kafka.delivery", "exactlyOnce is not allowed on this platform"


def _transactional_names(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    """Transactional ids and control topics are the operator's, named per query
    (contract.exactly_once): a query that named another's would fence its writers,
    and one that wrote into another's control topic would forge markers, making it skip
    a batch it never wrote."""
    for path, key, value in kafka_options(spec):
        if key.lower() == "kafka.transactional.id":
            yield path, "transactional ids are set by the exactlyOnce sink (streamq.<namespace>.<query>.<writer>)"
        elif key.lower() == "groupidprefix" and namespace and not value.startswith(exactly_once.namespace_prefix(namespace)):
            # the job names its group streamq.<namespace>.<query>.source: another prefix leaves the namespace's
            yield path, (f"consumer groups of namespace {namespace} start with {exactly_once.namespace_prefix(namespace)} "
                         "(the default, streamq.<namespace>.<query>.source, needs no option)")  # fmt: skip
    kafka = spec.sink.kafka
    if kafka is not None and exactly_once.is_control_topic(kafka.topic):
        yield ".sink.kafka.topic", (f"{kafka.topic} is, or collides in Kafka with ('.' and '_' read as one), an "
                                    "exactlyOnce control topic (streamq.<namespace>.<query>.eos-markers); only its "
                                    "query's writers write it")  # fmt: skip


# --- sparkConf -------------------------------------------------------------------------------

# Set by the operator or through the spec's own fields: no policy lets a query set them.
_DRIVER_NETWORK = ("spark.driver.host", "spark.driver.port", "spark.driver.bindAddress",
                   "spark.driver.blockManager.port", "spark.blockManager.port")  # fmt: skip
OPERATOR_SPARK_CONF = {
    "spark.master": "the operator chooses local[N] or Kubernetes",
    "spark.submit.*": "the operator starts the driver",
    "spark.kubernetes.*": "the operator wires namespace, image, pods, volumes and credentials",
    **dict.fromkeys(_DRIVER_NETWORK, "the operator wires the driver's network"),
    "spark.executor.instances": "set runtime.executors.instances",
    "spark.executor.cores": "set runtime.executors.cores",
    "spark.executor.memory": "set runtime.executors.memory",
    "spark.executor.memoryOverhead*": "memory comes from runtime.executors.memory",
    "spark.executor.pyspark.memory": "memory comes from runtime.executors.memory",
    "spark.driver.cores": "set runtime.driver.cores",
    "spark.driver.memory": "set runtime.driver.memory",
    "spark.driver.memoryOverhead*": "memory comes from runtime.driver.memory",
    "spark.memory.offHeap.*": "memory comes from runtime.*.memory",
    "spark.cores.max": "cores come from runtime",
    "spark.dynamicAllocation.*": "executors come from runtime.executors.instances",
    "spark.sql.streaming.checkpointLocation": "set checkpoint.location",
}
# Code on the classpath, JVM flags, the cluster's security settings, ports and files:
# refused unless the policy names the key (or this list's pattern) in allowedSparkConf.
REFUSED_SPARK_CONF = {
    **dict.fromkeys(
        ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions",
         "spark.driver.defaultJavaOptions", "spark.executor.defaultJavaOptions"],
        "JVM options run code and read files in the pod",
    ),
    **dict.fromkeys(
        ["spark.driver.extraClassPath", "spark.executor.extraClassPath", "spark.driver.extraLibraryPath",
         "spark.executor.extraLibraryPath", "spark.driver.userClassPathFirst", "spark.executor.userClassPathFirst",
         "spark.jars", "spark.jars.*", "spark.files", "spark.files.*", "spark.archives", "spark.pyFiles",
         "spark.plugins", "spark.extraListeners", "spark.sql.extensions", "spark.sql.queryExecutionListeners",
         "spark.sql.streaming.streamingQueryListeners", "spark.sql.hive.metastore.jars*", "spark.pyspark.*",
         "spark.python.*", "spark.executorEnv.*"],
        "it loads code or changes what runs in the pod",
    ),
    **dict.fromkeys(
        ["spark.authenticate*", "spark.network.crypto.*", "spark.io.encryption.*", "spark.ssl.*",
         "spark.redaction.*", "spark.sql.redaction.*"],
        "the platform sets Spark's security",
    ),
    **dict.fromkeys(["spark.ui.*", "spark.eventLog.*", "spark.metrics.*", "spark.local.dir"],
                    "it opens a port or writes outside the checkpoint"),
    **dict.fromkeys(
        ["spark.sql.catalog.*", "spark.sql.catalogImplementation", "spark.sql.defaultCatalog", "spark.sql.hive.*",
         "spark.sql.warehouse.dir", "spark.sql.artifact.*", "spark.sql.sources.*", "spark.sql.streaming.stateStore.*",
         "spark.sql.streaming.checkpointFileManagerClass", "spark.sql.streaming.commitProtocolClass",
         "spark.sql.execution.arrow.*", "spark.sql.execution.python.*", "spark.sql.execution.pyspark.*"],
        "it loads catalogs, state stores or data sources, or reads and writes outside the checkpoint",
    ),
    **dict.fromkeys(
        ["spark.sql.legacy.*", "spark.sql.variable.substitute*", "spark.sql.ansi.doubleQuotedIdentifiers",
         "spark.sql.scripting.*", "spark.sql.parser.*"],
        "it changes how SQL is parsed, which the platform's SQL checks rely on",
    ),
}  # fmt: skip
SECRET_LOOKING_KEY = re.compile(
    r"password|passwd|secret|token|jaas|credential|access[._-]?key|private[._-]?key|sasl", re.IGNORECASE
)


# Settings whose value names a class Spark or Hadoop loads: only Spark's own classes by default.
CLASS_NAME_KEY = re.compile(
    r"(class|classes|provider|providers|plugin|plugins|listener|listeners|factory|impl|serializer|registrator|"
    r"classesToRegister)$",
    re.I,
)
CLASS_NAME_VALUE = re.compile(r"^\s*[a-zA-Z_][\w$]*(\.[a-zA-Z_][\w$]*)+\.[A-Z][\w$]*\s*$")  # com.example.Thing
SPARK_CLASSES = "org.apache.spark."


def _class_conf(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for key, value in spec.runtime.spark_conf.items():
        if "${" in value:
            yield f".runtime.sparkConf.{key}", "${...} in a value is filled from Spark's configuration and the environment"
        elif (
            (CLASS_NAME_KEY.search(key) or any(CLASS_NAME_VALUE.match(v) for v in value.split(",")))
            and key not in policy.allowed_spark_conf
            and not all(v.strip().startswith(SPARK_CLASSES) for v in value.split(",") if v.strip())
        ):
            yield (
                f".runtime.sparkConf.{key}",
                (f"{key} names classes to load; only {SPARK_CLASSES}* unless the policy lists the key"),
            )


def _operator_conf(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for key in spec.runtime.spark_conf:
        reason = next((why for p, why in OPERATOR_SPARK_CONF.items() if matches(key, [p])), None)
        if reason is not None:
            yield f".runtime.sparkConf.{key}", f"{key} is set by the operator ({reason})"


def _secret_conf(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for key in spec.runtime.spark_conf:
        if SECRET_LOOKING_KEY.search(key):
            yield (
                f".runtime.sparkConf.{key}",
                (f"{key} looks like a secret: secrets come from a Secret (auth.secretRef), never from sparkConf"),
            )


def _fixed(key: str) -> bool:
    """Refused by a fixed rule, whatever the policy."""
    return bool(SECRET_LOOKING_KEY.search(key)) or matches(key, OPERATOR_SPARK_CONF)


def _refused_conf(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for key in spec.runtime.spark_conf:
        if _fixed(key):
            continue
        for pattern, reason in REFUSED_SPARK_CONF.items():
            opened = key in policy.allowed_spark_conf or pattern in policy.allowed_spark_conf
            if matches(key, [pattern]) and not opened:
                yield f".runtime.sparkConf.{key}", f"{key} is refused unless the policy lists it ({reason})"
                break


def _allowed_conf(spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None) -> Found:
    for key in spec.runtime.spark_conf:
        if _fixed(key) or matches(key, REFUSED_SPARK_CONF):
            continue  # reported by the rules above, or opened by naming it
        if not matches(key, policy.allowed_spark_conf):
            yield f".runtime.sparkConf.{key}", f"{key} is not allowed (allowed: {_listed(policy.allowed_spark_conf)})"


# --- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyRule:
    name: str  # as messages start: the Policy knob (policy.maxExecutors) or a fixed rule's name
    check: Callable[[QuerySpec, Policy, OperatorFacts, str | None], Iterable[tuple[str, str]]]


POLICY_RULES: tuple[PolicyRule, ...] = (
    PolicyRule("policy.allowedImages", _image),
    PolicyRule("policy.operatorServiceAccount", _operator_account),
    PolicyRule("policy.allowedServiceAccounts", _service_account),
    PolicyRule("policy.allowedSecrets", _secrets),
    PolicyRule("policy.allowedSQLFunctions", _sql_functions),
    PolicyRule("policy.allowedKafkaOptions", _kafka_options),
    PolicyRule("policy.deniedHosts", _endpoints),
    PolicyRule("policy.allowedHosts", _allowed_endpoints),
    PolicyRule("policy.allowExactlyOnce", _exactly_once),
    PolicyRule("policy.transactionalNames", _transactional_names),
    PolicyRule("policy.allowSparkUI", _spark_ui),
    PolicyRule("policy.allowStandby", _standby),
    PolicyRule("policy.allowedPriorityClasses", placement.priority_classes),
    PolicyRule("policy.operatorTolerations", placement.operator_tolerations),
    PolicyRule("policy.allowedTolerationKeys", placement.toleration_keys),
    PolicyRule("policy.allowedNodeLabels", placement.node_labels),
    PolicyRule("policy.reservedMetadata", placement.reserved_metadata),
    PolicyRule("policy.allowedLabelPrefixes", placement.labels),
    PolicyRule("policy.allowedAnnotationPrefixes", placement.annotations),
    PolicyRule("policy.allowedVolumes", _volumes),
    PolicyRule("policy.allowedClaims", _claims),
    PolicyRule("policy.hostPathPrefixes", _host_path),
    PolicyRule("policy.protectedPaths", _checkpoint_paths),
    PolicyRule("policy.checkpointRoots", _checkpoint_roots),
    PolicyRule("policy.remoteCheckpointPrefixes", _remote_checkpoint),
    PolicyRule("policy.allowNodeIdentity", _node_identity),
    PolicyRule("policy.derivedLocations", _derived_locations),
    PolicyRule("policy.maxExecutors", _executors),
    PolicyRule("policy.maxCores", _cores),
    PolicyRule("policy.maxMemory", _memory),
    PolicyRule("policy.maxExecutors", _at_most_executors(_executors)),
    PolicyRule("policy.maxCores", _at_most_executors(_cores)),
    PolicyRule("policy.maxMemory", _at_most_executors(_memory)),
    PolicyRule("policy.restarts", _restarts),
    PolicyRule("policy.operatorSparkConf", _operator_conf),
    PolicyRule("policy.secretSparkConf", _secret_conf),
    PolicyRule("policy.refusedSparkConf", _refused_conf),
    PolicyRule("policy.classSparkConf", _class_conf),
    PolicyRule("policy.allowedSparkConf", _allowed_conf),
)


def check_policy(
    spec: QuerySpec,
    policy: Policy,
    *,
    namespace: str | None = None,
    facts: OperatorFacts | None = None,
    prefix: str = "spec",
) -> list[Problem]:
    """Every way ``spec`` (of a query in ``namespace``) breaks ``policy``; [] when it keeps it."""
    facts = OperatorFacts() if facts is None else facts
    return [
        Problem(f"{prefix}{path}", f"{rule.name}: {message}")
        for rule in POLICY_RULES
        for path, message in rule.check(spec, policy, facts, namespace)
    ]


def is_policy_problem(problem: Problem) -> bool:
    """True for problems check_policy found (an event reason, a metric label)."""
    return problem.message.startswith("policy.")


CHART_NAME = "streamq"
DEFAULT_RELEASE = "streamq"


def chart_fullname(values: Mapping[str, Any], release: str = DEFAULT_RELEASE) -> str:
    """The chart's ``streamq.fullname`` (charts/streamq/templates/_helpers.tpl) for a release."""
    if values.get("fullnameOverride"):
        return str(values["fullnameOverride"])[:52].rstrip("-")
    name = values.get("nameOverride") or CHART_NAME
    return (release if name in release else f"{release}-{name}")[:52].rstrip("-")


def from_values(values: Mapping[str, Any] | None, release: str = DEFAULT_RELEASE) -> tuple[Policy, OperatorFacts]:
    """The policy and the operator facts a chart values file sets for ``release``; what it
    leaves out keeps the chart's default, as Helm does. A bare policy block is accepted too.
    The operator's own account is named after the release, as the chart names it."""
    values = dict(values or {})
    if "policy" not in values and values.keys() & {f.alias for f in Policy.model_fields.values()}:
        values = {"policy": values}
    policy = Policy.model_validate(values.get("policy") or {})
    default = OperatorFacts()
    repository, _, tag = default.job_image.rpartition(":")
    image = values.get("image") or {}
    operator_image = f"{image.get('repository') or repository}:{image.get('tag') or tag}"
    driver = ((values.get("driver") or {}).get("serviceAccount") or {}).get("name")
    operator = (values.get("serviceAccount") or {}).get("name") or f"{chart_fullname(values, release)}-operator"
    return policy, OperatorFacts(
        job_image=(values.get("jobs") or {}).get("image") or operator_image,
        driver_service_account=driver or default.driver_service_account,
        operator_service_account=operator,
    )
