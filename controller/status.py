"""The status of a StreamingQuery: its layout (a model the CRD schema is generated
from too) and the helpers that read and write it.

    phase, mode, message, observedGeneration     what the query is doing, in short
    conditions[Ready, Progressing, Degraded]     for kubectl wait and dashboards
    driver, driverKind, attempt, driverStartTime the current driver (pod or SparkApplication)
    restarts, nextRestartTime, lastFailure       failures and the backoff between restarts
    checkpoint{location, resets}                 where the running query keeps its state
    lastReconciledSpec                           the spec the current checkpoint was written with
    progress                                     the latest progress record the driver printed: last
                                                 epoch/batch, committed offsets, lag, partitions, slots, health
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from controller.phases import ConditionType, Phase


class StatusModel(BaseModel):
    # Tolerant on read: an older or newer operator may have written other fields.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Condition(StatusModel):
    type: ConditionType
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    observed_generation: int | None = None


class Failure(StatusModel):
    reason: str
    message: str = ""
    time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    exit_code: int | None = None
    driver: str | None = Field(default=None, description="The driver that failed.")
    attempt: int | None = Field(default=None, description="Its attempt number: a failure is counted once.")


class CheckpointStatus(StatusModel):
    location: str = Field(description="The location the query runs on (spec.checkpoint.location, or a fresh one).")
    resets: int = Field(default=0, description="Fresh checkpoints made for incompatible changes.")


class QueryStatus(StatusModel):
    phase: Phase | None = None
    mode: str | None = Field(default=None, description="The trigger mode: continuous, realTime, microBatch, availableNow.")
    message: str | None = None
    observed_generation: int | None = None
    driver: str | None = Field(default=None, description="Name of the current driver pod or SparkApplication.")
    driver_kind: Literal["Pod", "SparkApplication"] | None = None
    attempt: int = Field(default=0, description="Drivers created so far; the current driver's number.")
    driver_start_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    restarts: int = Field(default=0, description="Restarts after failures since the query last ran stably.")
    next_restart_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    last_failure: Failure | None = None
    checkpoint: CheckpointStatus | None = None
    last_reconciled_spec: str | None = Field(
        default=None, description="JSON of the spec the current driver was started with."
    )
    conditions: list[Condition] = Field(default_factory=list)
    progress: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The latest progress record of the driver: batchId (last committed epoch/batch), committedOffsets, "
            "lastCommitTime, inputRowsPerSecond, processedRowsPerSecond, lag and totalLag, partitions, slots, "
            "health (Healthy/Stalled), updatedAt."
        ),
    )

    @classmethod
    def parse(cls, raw: Any) -> "QueryStatus":
        if not isinstance(raw, dict):
            return cls()
        try:
            return cls.model_validate(raw)
        except ValueError:
            # A status we cannot read (hand-edited?) is rebuilt from the world, not trusted.
            keep = {k: raw[k] for k in ("attempt", "restarts") if isinstance(raw.get(k), int)}
            return cls.model_validate(keep)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def condition(self, kind: ConditionType) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)


def status_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning status `old` into `new`, top-level keys only
    (lists and nested objects are replaced whole); None deletes a key."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if old.get(key) != value:
            patch[key] = value
    owned = {f.alias or name for name, f in QueryStatus.model_fields.items()} - {"progress"}
    for key in old:
        if key not in new and key in owned:
            patch[key] = None
    return patch


# --- time ---------------------------------------------------------------------


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None
