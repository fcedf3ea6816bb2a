"""Operator settings: environment variables (the Deployment sets them) and CLI flags."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from app.contract.environment import EmptyIsUnset, EnvSettings
from app.contract.names import DEFAULT_DRIVER_SERVICE_ACCOUNT, DEFAULT_JOB_IMAGE, DEFAULT_OPERATOR_SERVICE_ACCOUNT
from app.contract.policy import OperatorFacts, Policy

__all__ = ["DEFAULT_JOB_IMAGE", "POLICY_FILE_ENV", "Settings", "load_policy"]

# The platform's policy (the chart's `policy:` values, a ConfigMap mounted as a file).
POLICY_FILE_ENV = "STREAMQ_POLICY_FILE"


def _spark_version() -> str:
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:  # pragma: no cover - pyspark is a dependency
        return "4.3.0"


@dataclass(frozen=True)
class Settings:
    job_image: str = DEFAULT_JOB_IMAGE  # STREAMQ_JOB_IMAGE: when spec.runtime.image is not set
    image_pull_policy: str = "IfNotPresent"
    # ServiceAccount of drivers that start executors, when the spec names none.
    driver_service_account: str = DEFAULT_DRIVER_SERVICE_ACCOUNT
    # The operator's own account and namespace (the Deployment passes them from the downward API):
    # no query may run as that account.
    operator_service_account: str = DEFAULT_OPERATOR_SERVICE_ACCOUNT
    operator_namespace: str | None = None
    # What queries may ask of the cluster (app.contract.policy); the chart's defaults unless a file says otherwise.
    policy: Policy = field(default_factory=Policy)
    run_as_user: int = 1000  # the job image's non-root user
    termination_grace_seconds: int = 60  # Spark stops a query within spark.sql.streaming.stopTimeout (30s)
    spark_version: str = field(default_factory=_spark_version)
    # Where the job's __main__ lives inside the image, for SparkApplication (spark-submit runs a file).
    spark_app_main_file: str = "local:///opt/streamq/app/__main__.py"
    progress_interval_s: float = 15.0  # how often the driver's log is read for progress
    resync_interval_s: float = 60.0  # a reconcile at least this often, even without events
    # A running driver whose newest progress line is older than this is Unresponsive.
    # The job prints one at least every 10 s (STREAMQ_REPORT_PERIOD_SECONDS), even when idle.
    silent_after_s: float = 120.0
    # spec.runtime.sparkUI: an Ingress per query in front of its UI Service when a host is set; the
    # host is a template of {query} and {namespace} (chart: sparkUI.ingress).
    spark_ui_ingress_host: str = ""
    spark_ui_ingress_class: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The Deployment's environment (os.environ when ``env`` is None); unset variables keep the defaults above."""
        given = _SettingsEnv.read(env).given()
        policy_file = given.pop("policy_file", None)
        if policy_file:
            given["policy"] = load_policy(policy_file)
        return cls(**given)

    @property
    def facts(self) -> OperatorFacts:
        """What the policy checks need to know about this installation."""
        return OperatorFacts(
            job_image=self.job_image,
            driver_service_account=self.driver_service_account,
            operator_service_account=self.operator_service_account,
            operator_namespace=self.operator_namespace,
        )


class _SettingsEnv(EnvSettings):
    """The variables ``Settings.from_env`` reads, one a field of ``Settings`` (None: not set)."""

    # description: docs/reference.md's "Operator settings" (python -m controller.settings_doc);
    # chart: the values of charts/streamq that set the variable (a unit test reads them).
    job_image: str | None = Field(
        None,
        validation_alias="STREAMQ_JOB_IMAGE",
        json_schema_extra={"chart": "`jobs.image` (empty: the operator's image)"},
        description="Image of drivers and executors when a query sets no spec.runtime.image. The policy always "
        "allows it (other images must be in allowedImages).",
    )
    image_pull_policy: str | None = Field(
        None,
        validation_alias="STREAMQ_IMAGE_PULL_POLICY",
        json_schema_extra={"chart": "`jobs.imagePullPolicy`"},
        description="imagePullPolicy of driver pods, of executors (spark.kubernetes.container.image.pullPolicy) "
        "and of SparkApplications.",
    )
    driver_service_account: str | None = Field(
        None,
        validation_alias="STREAMQ_DRIVER_SERVICE_ACCOUNT",
        json_schema_extra={"chart": "`driver.serviceAccount.name`"},
        description="ServiceAccount of drivers that start executors (runtime.executors.instances > 0) when the query "
        "names none (spec.runtime.serviceAccountName); it must exist in the query's namespace.",
    )
    operator_service_account: EmptyIsUnset = Field(
        None,
        validation_alias="STREAMQ_OPERATOR_SERVICE_ACCOUNT",
        json_schema_extra={"chart": "`serviceAccount.name`, the operator pod's own account (downward API)"},
        description="The operator's own ServiceAccount: no query may run as it.",
    )
    operator_namespace: EmptyIsUnset = Field(
        None,
        validation_alias="STREAMQ_OPERATOR_NAMESPACE",
        json_schema_extra={"chart": "the release's namespace (downward API)"},
        description="The operator's namespace. Unset: the operator's account is refused as a query's account in "
        "every namespace, not only in this one.",
    )
    policy_file: EmptyIsUnset = Field(  # read by load_policy
        None,
        validation_alias=POLICY_FILE_ENV,
        json_schema_extra={"chart": "`policy` (a ConfigMap mounted as a file)"},
        description="YAML or JSON file with the platform's policy (docs/security.md): what queries may ask of the "
        "cluster. Unset: the chart's default policy. A file that cannot be read or is not a policy fails the start-up.",
    )
    run_as_user: int | None = Field(
        None,
        validation_alias="STREAMQ_RUN_AS_USER",
        json_schema_extra={"chart": "`jobs.runAsUser`"},
        description="runAsUser, runAsGroup and fsGroup of driver and executor pods (the job image's user is 1000).",
    )
    termination_grace_seconds: int | None = Field(
        None,
        validation_alias="STREAMQ_TERMINATION_GRACE_SECONDS",
        json_schema_extra={"chart": "`jobs.terminationGracePeriodSeconds`"},
        description="terminationGracePeriodSeconds of driver pods: the time a driver gets to stop its query "
        "cleanly (Spark's stopTimeout is 30 s).",
    )
    spark_version: str | None = Field(
        None,
        validation_alias="STREAMQ_SPARK_VERSION",
        json_schema_extra={"default": "the installed pyspark's"},
        description="spec.sparkVersion of the SparkApplications the sparkApplication backend submits.",
    )
    spark_app_main_file: str | None = Field(
        None,
        validation_alias="STREAMQ_SPARK_APP_MAIN_FILE",
        description="spec.mainApplicationFile of those SparkApplications: the job's entry point inside the image.",
    )
    progress_interval_s: float | None = Field(
        None,
        validation_alias="STREAMQ_PROGRESS_INTERVAL_SECONDS",
        description="Seconds between reads of a driver's log for its progress (status.progress, the lag); a "
        "running query is also reconciled at least this often.",
    )
    resync_interval_s: float | None = Field(
        None,
        validation_alias="STREAMQ_RESYNC_INTERVAL_SECONDS",
        description="Seconds between two reconciles of a query at most, even when nothing changes.",
    )
    silent_after_s: float | None = Field(
        None,
        validation_alias="STREAMQ_SILENT_AFTER_SECONDS",
        description="A running driver whose newest progress line is older than this many seconds is Unresponsive "
        "(the job prints one at least every 10 s, idle or not).",
    )
    spark_ui_ingress_host: str | None = Field(
        None,
        validation_alias="STREAMQ_SPARK_UI_INGRESS_HOST",
        json_schema_extra={"chart": "`sparkUI.ingress.host`"},
        description="Host of an Ingress per query in front of its Spark UI Service (spec.runtime.sparkUI), a "
        "template of {query} and {namespace}. Empty: no Ingress.",
    )
    spark_ui_ingress_class: str | None = Field(
        None,
        validation_alias="STREAMQ_SPARK_UI_INGRESS_CLASS",
        json_schema_extra={"chart": "`sparkUI.ingress.className` (with a host)"},
        description="ingressClassName of those Ingresses. Empty: the cluster's default class.",
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
