"""The progress record: what the job prints (one JSON line) and the operator reads back.

The job's watchdog builds a ``ProgressRecord`` and prints it on stderr; the
operator finds the newest one in the driver's log tail (``from_line``) and copies
``status_fields()`` into ``status.progress``. Metrics and printer columns name
fields through ``field_path`` so a renamed field fails at import, not in a cluster.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from app.contract.modes import Mode

EVENT = "progress"


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


class ProgressRecord(_Wire):
    """The job fills every field it measured; a reader takes what is there (an older or newer
    job may print less or more), so only the event marker is required."""

    event: Literal["progress"]
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
    health: ProgressHealth | None = None
    checkpoint: str | None = None
    checkpoint_holds: dict[str, Any] | None = None
    recovered: dict[str, Any] | None = None
    in_place_restarts: int | None = Field(
        default=None, description="Times this driver restarted its query from the checkpoint without a new pod"
    )
    last_in_place_restart: str | None = Field(default=None, description="Why the query was last restarted in place")
    timestamp: str | None = None

    def wire(self) -> dict[str, Any]:
        """The record as printed: camelCase keys, None fields as null (recovered only when set)."""
        out = self.model_dump(mode="json", by_alias=True)
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

    def status_fields(self) -> dict[str, Any]:
        """What status.progress shows: every measured field that is set, and when it was measured."""
        out = {k: v for k, v in self.wire().items() if k not in _NOT_IN_STATUS and v is not None}
        if self.timestamp is not None:
            out["updatedAt"] = self.timestamp
        return out


_NOT_IN_STATUS = {"event", "query", "mode", "timestamp"}


def field_path(name: str) -> str:
    """`.status.progress.<wireName>` for a field of the record (KeyError when there is none)."""
    if "." in name:
        head, rest = name.split(".", 1)
        return f"{field_path(head)}.{rest}"
    return f".status.progress.{ProgressRecord.model_fields[name].alias}"
