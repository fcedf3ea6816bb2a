"""The progress record: what the job prints (one JSON line) and the operator reads back.

The job's watchdog builds a ``ProgressRecord`` and prints it on stderr; the
operator finds the newest one in the driver's log tail (``from_line``), keeps it,
typed, in its status model (``for_status``: with the attempt that reported it) and
writes ``status_fields()`` into ``status.progress``. The record is a dict only where it
becomes JSON (``wire``, ``status_fields``). Metrics and printer columns name fields
through ``field_path`` so a renamed field fails at import, not in a cluster.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

from contract.modes import Mode

EVENT: Literal["progress"] = "progress"


class HealthState(StrEnum):
    HEALTHY = "Healthy"
    STALLED = "Stalled"
    UNKNOWN = "Unknown"  # the broker did not say how much input waits
    SOURCE_UNAVAILABLE = "SourceUnavailable"  # the query stopped on a broker that does not answer; it waits for it


class _Wire(BaseModel):
    # Unknown fields are kept out, not refused: a newer job may print more than this operator knows.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class ProgressHealth(_Wire):
    state: HealthState
    message: str = ""
    waiting_seconds: float = 0.0
    stall_after_seconds: float = 0.0


Offsets = dict[str, dict[str, int]]  # {"topic": {"0": 42}}: JSON keys are strings
Json = dict[str, JsonValue]  # a record as it is printed or written into status


class CheckpointHolds(_Wire):
    """What the checkpoint holds, as far as reusing it matters (contract.compat.Holds)."""

    source_kinds: list[str] = Field(default_factory=list)  # one per source, in query order: "kafka" | "other"
    topics: list[str] = Field(default_factory=list)
    stateful_operators: list[str] = Field(default_factory=list)


class Recovered(_Wire):
    """The query started without a (readable) checkpoint, from offsets kept outside it."""

    reason: str
    batch_id: int | None = None
    starting_offsets: str | None = None


class ProgressRecord(_Wire):
    """The job fills every field it measured; a reader takes what is there (an older or newer
    job may print less or more), so only the event marker is required."""

    event: Literal["progress"] = EVENT  # required on a log line (from_line); status keeps no marker
    query: str | None = None
    mode: Mode | None = None
    batch_id: int | None = Field(default=None, description="Last committed epoch (continuous) or batch id")
    committed_offsets: Offsets | None = None
    last_commit_time: str | None = None
    in_flight: int | None = None
    num_input_rows: int | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    lag: Offsets | None = None
    total_lag: int | None = Field(default=None, description="Records waiting in the source, all partitions")
    partitions: dict[str, int] | None = None
    slots: int | None = None
    # What lag-driven autoscaling reads (controller.decide.autoscale); a job before them prints none.
    batch_duration_ms: int | None = Field(
        default=None, description="How long the last micro-batch ran (Spark's durationMs.triggerExecution)"
    )
    busy_ratio: float | None = Field(
        default=None,
        description="Share of the last minute the query spent running batches (micro-batch: the batches' "
        "triggerExecution against the wall clock), 0 to 1",
    )
    health: ProgressHealth | None = None
    checkpoint: str | None = None
    checkpoint_holds: CheckpointHolds | None = None
    recovered: Recovered | None = None
    in_place_restarts: int | None = Field(
        default=None, description="Times this driver restarted its query from the checkpoint without a new pod"
    )
    last_in_place_restart: str | None = Field(default=None, description="Why the query was last restarted in place")
    timestamp: str | None = None
    # Status only (never printed): when the record was measured, and which driver attempt printed it.
    updated_at: str | None = None
    attempt: int | None = None

    def wire(self) -> Json:
        """The record as printed: camelCase keys, None fields as null (recovered only when set)."""
        out = self.model_dump(mode="json", by_alias=True, exclude=_STATUS_ONLY)
        if self.recovered is None:
            out.pop("recovered")
        return out

    def to_line(self) -> str:
        return json.dumps(self.wire(), sort_keys=True)

    @classmethod
    def from_line(cls, line: str) -> ProgressRecord | None:
        """The record on a log line, or None when the line is not one."""
        line = line.strip()
        if not (line.startswith("{") and f'"{EVENT}"' in line):
            return None
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("event") != EVENT:
            return None
        try:
            return cls.model_validate(data)
        except ValidationError:
            return None

    def for_status(self, attempt: int | None = None) -> ProgressRecord:
        """The record as status.progress keeps it: when it was measured and, once the operator
        knows it, the attempt of the driver that printed it."""
        updated_at = self.timestamp if self.timestamp is not None else self.updated_at
        return self.model_copy(update={"updated_at": updated_at, "attempt": attempt if attempt is not None else self.attempt})

    def status_fields(self) -> Json:
        """What status.progress shows: every measured field that is set, when it was measured, by which attempt."""
        out = self.model_dump(mode="json", by_alias=True, exclude=_NOT_IN_STATUS)
        return {k: v for k, v in out.items() if v is not None}

    def reported_by(self, attempt: int | None) -> bool:
        return self.attempt == attempt


_STATUS_ONLY = {"updated_at", "attempt"}
_NOT_IN_STATUS = {"event", "query", "mode", "timestamp"}


def field_path(name: str) -> str:
    """`.status.progress.<wireName>` for a field of the record (KeyError when there is none)."""
    if "." in name:
        head, rest = name.split(".", 1)
        return f"{field_path(head)}.{rest}"
    return f".status.progress.{ProgressRecord.model_fields[name].alias}"
