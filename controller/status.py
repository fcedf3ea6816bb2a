"""The status of a StreamingQuery: its layout (a model the CRD schema is generated
from too) and the helpers that read and write it.

    phase, mode, message, observedGeneration     what the query is doing, in short
    conditions[Ready, Progressing, Reconciling,  for kubectl wait, kstatus (Flux), Argo CD and dashboards
               Stalled, Degraded]               (docs/gitops.md)
    driver, driverKind, attempt, driverStartTime the current driver (pod or SparkApplication)
    restarts, nextRestartTime, lastFailure       failures and the backoff between restarts
    checkpoint{location, resets}                 where the running query keeps its state
    upgrade                                      a warm upgrade in progress (the new driver, its state),
                                                 or the last one that failed and why
    reconciled                                   what the checkpoint gate needs of the spec the
                                                 current checkpoint was written with: its hash,
                                                 checkpoint location, source and mode (not the spec:
                                                 status stays small and carries no sparkConf)
    progress                                     the latest progress record the driver printed: last
                                                 epoch/batch, committed offsets, lag, partitions, slots, health
    executors, executorSelector                  the current driver's executors: the /scale subresource
    autoscaling                                  the recommended size, the last decision and why, the recent
                                                 rates it was made from (controller.decide.autoscale)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from contract.compat import SourceIdentity
from contract.progress import Json, ProgressRecord
from contract.spec import QuerySpec
from controller.phases import ConditionType, Phase
from controller.run import DriverKind, fields_hash

ConditionStatus = Literal["True", "False", "Unknown"]
UpgradeState = Literal["Warming", "HandingOver", "Failed"]


def _timestamp(description: str, **default: Any) -> Any:
    """A field holding an RFC 3339 time: format date-time in the CRD schema. ``default=None`` where it may be absent."""
    return Field(description=description, json_schema_extra={"format": "date-time"}, **default)


class StatusModel(BaseModel):
    # Tolerant on read: an older or newer operator may have written other fields.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Condition(StatusModel):
    """One aspect of the query's state, in Kubernetes' convention (kubectl wait --for=condition=Ready)."""

    type: ConditionType = Field(
        description="Ready (the query runs), Progressing (moving towards its spec), Degraded (something is wrong), "
        "Reconciling and Stalled (kstatus: not realised yet, cannot be realised until the spec changes)."
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(description="Why, in one CamelCase word (DriverRunning, Unschedulable, InvalidSpec, ...).")
    message: str = Field(default="", description="Why, in a sentence.")
    last_transition_time: str | None = _timestamp("When status last changed.", default=None)
    observed_generation: int | None = Field(default=None, description="The metadata.generation it was set for.")


class Failure(StatusModel):
    """The last failure of a driver."""

    reason: str = Field(description="What happened, in one word (DriverFailed, DriverLost, Stalled, InvalidSpec, ...).")
    message: str = Field(default="", description="What the driver said on its way out, or what the operator saw.")
    time: str | None = _timestamp("When the operator saw it.", default=None)
    exit_code: int | None = Field(default=None, description="The driver's exit code, when it exited.")
    driver: str | None = Field(default=None, description="The driver that failed.")
    attempt: int | None = Field(default=None, description="Its attempt number: a failure is counted once.")


class CheckpointStatus(StatusModel):
    """The checkpoint the query runs on."""

    location: str = Field(description="The location the query runs on (spec.checkpoint.location, or a fresh one).")
    resets: int = Field(default=0, description="Fresh checkpoints made for incompatible changes.")


class ReconciledSource(StatusModel):
    """The source that checkpoint was written for."""

    kind: str = Field(description="kafka, rate, ...")
    topics: list[str] | None = Field(default=None, description="Kafka topics, sorted.")
    pattern: str | None = Field(default=None, description="Kafka topic pattern.")


class Reconciled(StatusModel):
    """What the checkpoint gate needs of the spec the current checkpoint was written with:
    whether a new spec differs at all (the hash), and whether the checkpoint can take the
    difference (its location, source and mode; contract.compat)."""

    spec_hash: str = Field(description="Hash of the fields a driver runs (controller.run.fields_hash).")
    checkpoint_location: str = Field(description="spec.checkpoint.location of that spec.")
    source: ReconciledSource
    mode: str | None = Field(default=None, description="Its trigger mode.")

    @classmethod
    def of(cls, spec: QuerySpec) -> Reconciled:
        identity = SourceIdentity.of(spec)
        topics = sorted(identity.topics) if identity.topics is not None else None
        return cls(
            spec_hash=fields_hash(spec), checkpoint_location=spec.checkpoint.location, mode=str(spec.mode),
            source=ReconciledSource(kind=identity.kind, topics=topics, pattern=identity.pattern),
        )  # fmt: skip

    @classmethod
    def of_json(cls, text: str | None) -> Reconciled | None:
        """From a spec's JSON; None when the current model cannot read it (written by an older one)."""
        if not text:
            return None
        try:
            return cls.of(QuerySpec.model_validate_json(text))
        except ValueError:
            return None

    @property
    def source_identity(self) -> SourceIdentity:
        s = self.source
        return SourceIdentity(kind=s.kind, topics=frozenset(s.topics) if s.topics is not None else None, pattern=s.pattern)


_OPEN_OBJECT = {"anyOf": [{"additionalProperties": True, "type": "object"}, {"type": "null"}]}


class UpgradeStatus(StatusModel):
    """A warm upgrade in progress, or the last one that failed (controller.decide.upgrade)."""

    spec_hash: str = Field(description="The spec hash the new driver runs (controller.run.spec_hash).")
    driver: str | None = Field(default=None, description="The new driver pod, started beside the running one.")
    attempt: int | None = Field(default=None, description="Its attempt number.")
    replaces: str | None = Field(default=None, description="The driver it takes over from.")
    blue_green: bool | None = Field(
        default=None,
        description="Blue/green: the new driver runs on a fresh checkpoint "
        "that starts at the offsets the old one committed last.",
    )
    state: UpgradeState = Field(
        default="Warming",
        description="Warming: the new driver starts and warms up; HandingOver: the old one stops and releases "
        "the Lease; Failed: the new driver could not start and the old one goes on (until the spec changes).",
    )
    started_at: str | None = _timestamp("When the upgrade started.", default=None)
    message: str | None = Field(default=None, description="Why it failed, or why a plain restart was chosen.")
    no_room: bool | None = Field(
        default=None, description="Creating the new driver was refused for want of quota: the next pass restarts instead."
    )


AutoscalingVerdict = Literal["ScaleUp", "ScaleDown", "Hold"]


class RateSample(StatusModel):
    """One progress record as the autoscaler keeps it (controller.decide.autoscale): rates, busy time, backlog."""

    at: str = _timestamp("When the driver measured it.")
    executors: int = Field(description="Executors the driver ran with.")
    input: float | None = Field(default=None, description="Input rows per second.")
    processed: float | None = Field(default=None, description="Rows processed per second of batch time.")
    busy: float | None = Field(default=None, description="Share of the time the query ran batches, 0 to 1.")
    lag: int | None = Field(default=None, description="Records waiting in the source.")


class ScaleChange(StatusModel):
    """A change of the executors the query runs with, as the autoscaler saw it."""

    from_executors: int = Field(description="Executors before.")
    to_executors: int = Field(description="Executors after.")
    at: str = _timestamp("When it was first seen.")
    # Both are kept only for a scale-up: ineffective scaling compares the processed rate before and after it.
    processed_before: float | None = Field(default=None, description="Rows processed per second of batch time before it.")
    ineffective: bool | None = Field(
        default=None,
        description="A scale-up that did not raise the processed rate: no larger size is recommended again until "
        "the query's executors change.",
    )


class AutoscalingStatus(StatusModel):
    """What lag-driven autoscaling recommends (spec.autoscaling; controller.decide.autoscale), and why."""

    current_executors: int = Field(description="Executors the query runs with.")
    recommended_executors: int = Field(description="Executors it needs, within minExecutors and maxExecutors.")
    decision: AutoscalingVerdict = Field(description="ScaleUp, ScaleDown or Hold: the recommendation against the current size.")
    reason: str = Field(description="Why, in a sentence: the rates and backlog it was computed from, or why it holds.")
    last_change_time: str | None = _timestamp(
        "When the recommendation last changed (at most once per stabilizationWindow).", default=None
    )
    last_scale_up_time: str | None = _timestamp(
        "When the recommendation last grew: no smaller one within coolDown.", default=None
    )
    last_scaling: ScaleChange | None = Field(default=None, description="The last change of the executors it saw.")
    samples: list[RateSample] = Field(
        default_factory=list,
        max_length=64,
        description="The recent progress records it decides from, oldest first (a bounded window).",
    )


class QueryStatus(StatusModel):
    phase: Phase | None = Field(
        default=None,
        description="Pending (no driver yet), Starting, Running, Restarting (a backoff before the next driver), "
        "Upgrading (a driver of the new spec warms up), Suspended, Failed (out of restarts, or restartPolicy "
        "Never), Invalid (the spec cannot run: fix it), Completed (the query ended on its own).",
    )
    mode: str | None = Field(default=None, description="The trigger mode: continuous, realTime, microBatch, availableNow.")
    message: str | None = Field(default=None, description="What the query is doing, or what is wrong, in a sentence.")
    observed_generation: int | None = Field(default=None, description="The metadata.generation this status describes.")
    driver: str | None = Field(default=None, description="Name of the current driver pod or SparkApplication.")
    driver_kind: DriverKind | None = Field(default=None, description="Pod or SparkApplication (spec.runtime.backend).")
    attempt: int = Field(default=0, description="Drivers created so far; the current driver's number.")
    driver_start_time: str | None = _timestamp(
        "When the current driver started running (restartPolicy.stableAfter counts from it).", default=None
    )
    standby: str | None = Field(default=None, description="Name of the standby driver pod (spec.runtime.standby).")
    executors: int | None = Field(
        default=None,
        description="Executors the current driver runs with: runtime.executors.instances of the spec it runs, or "
        "the size autoscaling resized it to in place (recommendOnly false). The /scale subresource's status.replicas.",
    )
    executor_selector: str | None = Field(
        default=None,
        description="The label selector of the query's executor pods: the /scale subresource's status.selector "
        "(what an HorizontalPodAutoscaler reads pod metrics through).",
    )
    autoscaling: AutoscalingStatus | None = Field(
        default=None, description="What lag-driven autoscaling recommends, and why (spec.autoscaling)."
    )
    resize_refused: str | None = Field(
        default=None,
        description="A driver that waited on the Lease and could not be resized in place to its CPU request: "
        "'<pod>: <why>'. It runs on its waitingCoreRequest (no CPU limit); its next driver starts with the full request.",
    )  # fmt: skip
    spark_ui: str | None = Field(
        default=None,
        alias="sparkUI",
        description="The Spark UI of the current driver, through its Service (spec.runtime.sparkUI): http://<query>-ui.<namespace>.svc:4040.",
    )
    restarts: int = Field(default=0, description="Restarts after failures since the query last ran stably.")
    next_restart_time: str | None = _timestamp("When the next driver starts, after the backoff (phase Restarting).", default=None)
    last_failure: Failure | None = None
    checkpoint: CheckpointStatus | None = None
    upgrade: UpgradeStatus | None = Field(default=None, description="A warm upgrade in progress, or the last that failed.")
    reconciled: Reconciled | None = None
    # Written by streamq 0.1.0: the whole spec. Read once (into `reconciled`) and never
    # written again, so the first status patch of this operator removes it (status_patch).
    legacy_spec: str | None = Field(
        default=None,
        alias="lastReconciledSpec",
        exclude=True,
        description="Deprecated: the whole last spec, as streamq 0.1.0 kept it; replaced by reconciled.",
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready, Progressing, Degraded, Reconciling and Stalled, one of each type."
    )
    # The CRD keeps the record open (x-kubernetes-preserve-unknown-fields): a newer job may print more.
    progress: Annotated[ProgressRecord | None, WithJsonSchema(_OPEN_OBJECT)] = Field(
        default=None,
        description=(
            "The latest progress record of the driver: batchId (last committed epoch/batch), committedOffsets, "
            "lastCommitTime, inputRowsPerSecond, processedRowsPerSecond, busyRatio and batchDurationMs (micro-batch), "
            "lag and totalLag, partitions, slots, health (Healthy/Stalled), updatedAt."
        ),
    )

    @field_validator("progress", mode="wrap")
    @classmethod
    def _progress_or_nothing(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> ProgressRecord | None:
        # A record this operator cannot read (hand-edited, another version's) is dropped, not the status.
        try:
            record: ProgressRecord | None = handler(value)
        except ValidationError:
            return None
        return record

    @field_serializer("progress")
    def _progress_as_shown(self, progress: ProgressRecord | None) -> Json | None:
        return None if progress is None else progress.status_fields()

    @model_validator(mode="after")
    def _read_legacy_spec(self) -> QueryStatus:
        if self.reconciled is None and self.legacy_spec:
            self.reconciled = Reconciled.of_json(self.legacy_spec)
        self.legacy_spec = None
        return self

    @classmethod
    def parse(cls, raw: Any) -> QueryStatus:
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
