"""Operator settings: environment variables (the Deployment sets them) and CLI flags."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata

DEFAULT_JOB_IMAGE = "streamq:0.1.0"


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
    driver_service_account: str = "streamq-driver"
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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        base = cls()
        return cls(
            job_image=env.get("STREAMQ_JOB_IMAGE", base.job_image),
            image_pull_policy=env.get("STREAMQ_IMAGE_PULL_POLICY", base.image_pull_policy),
            driver_service_account=env.get("STREAMQ_DRIVER_SERVICE_ACCOUNT", base.driver_service_account),
            run_as_user=int(env.get("STREAMQ_RUN_AS_USER", base.run_as_user)),
            termination_grace_seconds=int(env.get("STREAMQ_TERMINATION_GRACE_SECONDS", base.termination_grace_seconds)),
            spark_version=env.get("STREAMQ_SPARK_VERSION", base.spark_version),
            spark_app_main_file=env.get("STREAMQ_SPARK_APP_MAIN_FILE", base.spark_app_main_file),
            progress_interval_s=float(env.get("STREAMQ_PROGRESS_INTERVAL_SECONDS", base.progress_interval_s)),
            resync_interval_s=float(env.get("STREAMQ_RESYNC_INTERVAL_SECONDS", base.resync_interval_s)),
            silent_after_s=float(env.get("STREAMQ_SILENT_AFTER_SECONDS", base.silent_after_s)),
        )
