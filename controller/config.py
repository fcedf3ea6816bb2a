"""Operator settings: environment variables (the Deployment sets them) and CLI flags."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import yaml
from pydantic import ValidationError

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
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        base = cls()
        return cls(
            job_image=env.get("STREAMQ_JOB_IMAGE", base.job_image),
            image_pull_policy=env.get("STREAMQ_IMAGE_PULL_POLICY", base.image_pull_policy),
            driver_service_account=env.get("STREAMQ_DRIVER_SERVICE_ACCOUNT", base.driver_service_account),
            operator_service_account=env.get("STREAMQ_OPERATOR_SERVICE_ACCOUNT") or base.operator_service_account,
            operator_namespace=env.get("STREAMQ_OPERATOR_NAMESPACE") or base.operator_namespace,
            policy=load_policy(env[POLICY_FILE_ENV]) if env.get(POLICY_FILE_ENV) else base.policy,
            run_as_user=int(env.get("STREAMQ_RUN_AS_USER", base.run_as_user)),
            termination_grace_seconds=int(env.get("STREAMQ_TERMINATION_GRACE_SECONDS", base.termination_grace_seconds)),
            spark_version=env.get("STREAMQ_SPARK_VERSION", base.spark_version),
            spark_app_main_file=env.get("STREAMQ_SPARK_APP_MAIN_FILE", base.spark_app_main_file),
            progress_interval_s=float(env.get("STREAMQ_PROGRESS_INTERVAL_SECONDS", base.progress_interval_s)),
            resync_interval_s=float(env.get("STREAMQ_RESYNC_INTERVAL_SECONDS", base.resync_interval_s)),
            silent_after_s=float(env.get("STREAMQ_SILENT_AFTER_SECONDS", base.silent_after_s)),
            spark_ui_ingress_host=env.get("STREAMQ_SPARK_UI_INGRESS_HOST", base.spark_ui_ingress_host),
            spark_ui_ingress_class=env.get("STREAMQ_SPARK_UI_INGRESS_CLASS", base.spark_ui_ingress_class),
        )

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
