"""Operator settings: environment variables (the Deployment sets them) and CLI flags."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, JsonValue, ValidationError, model_validator
from pydantic_settings import SettingsConfigDict

from contract.environment import EnvSettings
from contract.names import DEFAULT_DRIVER_SERVICE_ACCOUNT, DEFAULT_JOB_IMAGE, DEFAULT_OPERATOR_SERVICE_ACCOUNT
from contract.policy import OperatorFacts, Policy

__all__ = ["DEFAULT_JOB_IMAGE", "POLICY_FILE_ENV", "Settings", "load_policy"]

# The platform's policy (the chart's `policy:` values, a ConfigMap mounted as a file).
POLICY_FILE_ENV = "STREAMQ_POLICY_FILE"


def _spark_version() -> str:
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:  # pragma: no cover - pyspark is a dependency
        return "4.3.0"


def _chart(values: str) -> dict[str, JsonValue]:
    """A field's note of the chart values that set its variable."""
    return {"chart": values}


class Settings(EnvSettings):
    """The operator's settings, one field a variable of its Deployment (``from_env``), or by field name (tests).

    A field's docstring is its description and json_schema_extra's ``chart`` the values of
    charts/streamq that set its variable (a unit test reads them): docs/reference.md's
    "Operator settings" (python -m controller.settings_doc).
    """

    model_config = SettingsConfigDict(use_attribute_docstrings=True)

    job_image: str = Field(
        DEFAULT_JOB_IMAGE,
        validation_alias="STREAMQ_JOB_IMAGE",
        json_schema_extra=_chart("`jobs.image` (empty: the operator's image)"),
    )
    """Image of drivers and executors when a query sets no spec.runtime.image. The policy always allows it (other
    images must be in allowedImages)."""
    image_pull_policy: str = Field(
        "IfNotPresent", validation_alias="STREAMQ_IMAGE_PULL_POLICY", json_schema_extra=_chart("`jobs.imagePullPolicy`")
    )
    """imagePullPolicy of driver pods, of executors (spark.kubernetes.container.image.pullPolicy) and of
    SparkApplications."""
    driver_service_account: str = Field(
        DEFAULT_DRIVER_SERVICE_ACCOUNT,
        validation_alias="STREAMQ_DRIVER_SERVICE_ACCOUNT",
        json_schema_extra=_chart("`driver.serviceAccount.name`"),
    )
    """ServiceAccount of drivers that start executors (runtime.executors.instances > 0) when the query names none
    (spec.runtime.serviceAccountName); it must exist in the query's namespace."""
    # The operator's own account and namespace: the Deployment passes them from the downward API.
    operator_service_account: str = Field(
        DEFAULT_OPERATOR_SERVICE_ACCOUNT,
        validation_alias="STREAMQ_OPERATOR_SERVICE_ACCOUNT",
        json_schema_extra=_chart("`serviceAccount.name`, the operator pod's own account (downward API)"),
    )
    """The operator's own ServiceAccount: no query may run as it."""
    operator_namespace: str | None = Field(
        None, validation_alias="STREAMQ_OPERATOR_NAMESPACE", json_schema_extra=_chart("the release's namespace (downward API)")
    )
    """The operator's namespace. Unset: the operator's account is refused as a query's account in every namespace,
    not only in this one."""
    policy_file: str | None = Field(
        None, validation_alias=POLICY_FILE_ENV, json_schema_extra=_chart("`policy` (a ConfigMap mounted as a file)")
    )
    """YAML or JSON file with the platform's policy (docs/security.md): what queries may ask of the cluster. Unset:
    the chart's default policy. A file that cannot be read or is not a policy fails the start-up."""
    # What queries may ask of the cluster (contract.policy), no variable's: policy_file's (_policy_from_file),
    # else the chart's defaults.
    policy: Policy = Field(default_factory=Policy)
    run_as_user: int = Field(1000, validation_alias="STREAMQ_RUN_AS_USER", json_schema_extra=_chart("`jobs.runAsUser`"))
    """runAsUser, runAsGroup and fsGroup of driver and executor pods (the job image's user is 1000)."""
    termination_grace_seconds: int = Field(
        60, validation_alias="STREAMQ_TERMINATION_GRACE_SECONDS", json_schema_extra=_chart("`jobs.terminationGracePeriodSeconds`")
    )
    """terminationGracePeriodSeconds of driver pods: the time a driver gets to stop its query cleanly (Spark's
    stopTimeout is 30 s)."""
    spark_version: str = Field(
        default_factory=_spark_version,
        validation_alias="STREAMQ_SPARK_VERSION",
        json_schema_extra={"default": "the installed pyspark's"},
    )
    """spec.sparkVersion of the SparkApplications the sparkApplication backend submits."""
    spark_app_main_file: str = Field("local:///opt/streamq/app/__main__.py", validation_alias="STREAMQ_SPARK_APP_MAIN_FILE")
    """spec.mainApplicationFile of those SparkApplications: the job's entry point inside the image."""
    progress_interval_s: float = Field(15.0, validation_alias="STREAMQ_PROGRESS_INTERVAL_SECONDS")
    """Seconds between reads of a running driver's progress (status.progress, the lag); a running query is also
    reconciled at least this often."""
    progress_port: int = Field(8090, ge=0, le=65535, validation_alias="STREAMQ_PROGRESS_PORT")
    """The port drivers serve their newest progress record on (the container port `progress`); the operator reads
    it from the pod's IP (controller.progress_read), the API server and the kubelet stay out of it. 0: drivers
    serve none, and the operator reads the last lines of their log instead (the older channel)."""
    resync_interval_s: float = Field(60.0, validation_alias="STREAMQ_RESYNC_INTERVAL_SECONDS")
    """Seconds between two reconciles of a query at most, even when nothing changes."""
    silent_after_s: float = Field(120.0, validation_alias="STREAMQ_SILENT_AFTER_SECONDS")
    """A running driver whose newest progress line is older than this many seconds is Unresponsive (the job prints
    one at least every 10 s, idle or not)."""
    spark_ui_ingress_host: str = Field(
        "", validation_alias="STREAMQ_SPARK_UI_INGRESS_HOST", json_schema_extra=_chart("`sparkUI.ingress.host`")
    )
    """Host of an Ingress per query in front of its Spark UI Service (spec.runtime.sparkUI), a template of {query}
    and {namespace}. Empty: no Ingress."""
    spark_ui_ingress_class: str = Field(
        "",
        validation_alias="STREAMQ_SPARK_UI_INGRESS_CLASS",
        json_schema_extra=_chart("`sparkUI.ingress.className` (with a host)"),
    )
    """ingressClassName of those Ingresses. Empty: the cluster's default class."""

    @model_validator(mode="before")
    @classmethod
    def _policy_from_file(cls, data: Any) -> Any:
        """The policy in policy_file, unless a policy is given outright (load_policy's errors stop the start-up)."""
        if isinstance(data, dict) and "policy" not in data:
            path = data.get(POLICY_FILE_ENV) or data.get("policy_file")
            if path:
                return {**data, "policy": load_policy(path)}
        return data

    @property
    def facts(self) -> OperatorFacts:
        """What the policy checks need to know about this installation."""
        return OperatorFacts(
            job_image=self.job_image,
            driver_service_account=self.driver_service_account,
            operator_service_account=self.operator_service_account,
            operator_namespace=self.operator_namespace,
        )


def load_policy(path: str | Path) -> Policy:
    """The policy block in a YAML or JSON file. A file that cannot be read or breaks the
    model stops the operator at start-up: a typo must not silently open the cluster."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{POLICY_FILE_ENV}={path}: cannot read the policy: {exc}") from None
    try:
        return Policy.model_validate(data or {})
    except ValidationError as exc:
        raise ValueError(f"{POLICY_FILE_ENV}={path}: not a valid policy: {exc}") from None
