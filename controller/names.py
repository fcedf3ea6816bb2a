"""Names and labels of everything the operator creates for a query: one helper each,
so a retry always finds the object an earlier attempt made."""

from __future__ import annotations

import hashlib

from contract import GROUP, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_QUERY, MANAGED_BY, PROGRESS_PORT_NAME
from contract.policy import LEASE_ACCOUNT_SUFFIX, OPERATOR_SECRET_SUFFIX

LABEL_ATTEMPT = f"{GROUP}/attempt"
LABEL_ROLE = f"{GROUP}/role"  # "standby" on a standby driver pod; it keeps the label once it takes over
ROLE_STANDBY = "standby"
# kopf's finalizer on every query (the reconciler is a kopf daemon); the chart's uninstall hook removes it
FINALIZER = f"{GROUP}/finalizer"
ANNOTATION_SPEC_HASH = f"{GROUP}/spec-hash"
ANNOTATION_CHECKPOINT = f"{GROUP}/checkpoint-location"
ANNOTATION_RESTART_NONCE = f"{GROUP}/restart-nonce"  # the spec's restartNonce when the driver was made ("" if none)
COMPONENT_DRIVER = "driver"
COMPONENT_EXECUTOR = "executor"
COMPONENT_QUERY_CONFIG = "query-config"
COMPONENT_DRIVER_SERVICE = "driver-service"
COMPONENT_LEASE = "lease"  # a standby query's Lease and the account, Role and RoleBinding that reach it
COMPONENT_SPARK_AUTH = "spark-auth"  # the query's Spark auth Secret
COMPONENT_DISRUPTION = "disruption-budget"  # a standby query's PodDisruptionBudget
COMPONENT_SPARK_UI = "spark-ui"  # the Service (and Ingress) in front of the current driver's Spark UI

DRIVER_CONTAINER = "driver"
EXECUTOR_CONTAINER = "executor"  # in the executor pod template Spark starts executors from
# spark-operator names the driver container of a SparkApplication itself, and its pod `<application>-driver`
SPARK_APP_DRIVER_CONTAINER = "spark-kubernetes-driver"
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
# Port names of the driver container and the Services in front of it; the chart's PodMonitor
# scrapes drivers by PORT_SPARK_UI's name.
PORT_DRIVER_RPC = "driver-rpc"
PORT_BLOCK_MANAGER = "blockmanager"
PORT_SPARK_UI = "spark-ui"
PORT_PROGRESS = PROGRESS_PORT_NAME  # app.monitoring.endpoint; the operator finds the port by this name

_MAX_LABEL = 63


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def child_name(query: str, suffix: str) -> str:
    """`<query>-<suffix>`. A query's name is a DNS-1035 label of at most MAX_QUERY_NAME characters
    (the CRD, ``streamq validate`` and the decision refuse others), so this is a valid label, and
    one-to-one: no suffix the operator uses ends with `-<another suffix>`, so two queries never
    map to one child name (tests/unit/app/test_names_property.py)."""
    return f"{query}-{suffix}"


def executor_prefix(query: str, attempt: int) -> str:
    """Spark names an attempt's executor pods `<prefix>-exec-<n>` and wants the prefix at most
    47 characters: `<query>-<attempt>` fits for every attempt below a million."""
    return f"{query}-{attempt}"


def driver_name(query: str, attempt: int) -> str:
    """The driver (pod or SparkApplication) of one attempt. The attempt number goes up by
    one for every new driver, so restarts never reuse a name still terminating."""
    return child_name(query, f"driver-{attempt}")


def config_map_name(query: str) -> str:
    return child_name(query, "query")


def driver_service_name(query: str) -> str:
    return child_name(query, "driver-svc")


def lease_access_name(query: str) -> str:
    """The ServiceAccount, Role and RoleBinding that reach the query's Lease (controller.render.lease_access);
    the policy refuses a Secret named like its token (contract.policy.LEASE_ACCOUNT_SUFFIX)."""
    return child_name(query, LEASE_ACCOUNT_SUFFIX.removeprefix("-"))


def auth_secret_name(query: str) -> str:
    """The query's Spark auth Secret; the policy refuses a spec that names one (OPERATOR_SECRET_SUFFIX)."""
    return child_name(query, OPERATOR_SECRET_SUFFIX.removeprefix("-"))


def disruption_budget_name(query: str) -> str:
    return child_name(query, "drivers")


def spark_ui_service_name(query: str) -> str:
    """The UI Service, and the Ingress in front of it (a name per kind)."""
    return child_name(query, "ui")


def spark_app_driver_pod_name(application: str) -> str:
    """The driver pod spark-operator makes for a SparkApplication."""
    return f"{application}-driver"


def query_label(query: str) -> str:
    """The value of LABEL_QUERY: the query's name when it fits a label value."""
    if len(query) <= _MAX_LABEL:
        return query
    return f"{query[: _MAX_LABEL - 9].rstrip('-.')}-{_short_hash(query)}"


def labels(query: str, component: str, attempt: int | None = None) -> dict[str, str]:
    out = {LABEL_QUERY: query_label(query), LABEL_COMPONENT: component, LABEL_MANAGED_BY: MANAGED_BY}
    if attempt is not None:
        out[LABEL_ATTEMPT] = str(attempt)
    return out


def selector(query: str, component: str = COMPONENT_DRIVER) -> str:
    """A label selector string for the query's objects of one component."""
    return f"{LABEL_QUERY}={query_label(query)},{LABEL_COMPONENT}={component},{LABEL_MANAGED_BY}={MANAGED_BY}"


def driver_pod_selector() -> str:
    """Every driver pod the operator manages (server-side filter of its pod watch)."""
    return f"{LABEL_COMPONENT}={COMPONENT_DRIVER},{LABEL_MANAGED_BY}={MANAGED_BY}"
