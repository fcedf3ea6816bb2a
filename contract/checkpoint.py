"""What a Structured Streaming checkpoint holds, as both sides see it (pure).

Spark 4.x layout: ``metadata`` holds {"id": ...}; ``offsets/N`` is "v1", a line
of batch metadata (empty in continuous mode), then one JSON line per source
(Kafka: {"topic": {"partition": next_offset}}); ``commits/N`` marks epoch/batch
N as committed. The job reads checkpoints (``app.checkpoints.reader``); the operator
only reasons about what they hold (``contract.compat``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

KafkaOffsets = dict[str, dict[int, int]]  # {topic: {partition: next offset}}
EARLIEST, LATEST = -2, -1  # Spark's markers in JSON startingOffsets


def local_path(location: str | os.PathLike[str]) -> str | None:
    """The filesystem path of a location (a path or file:// URI); None for remote URIs."""
    text = str(location)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return parsed.path or None
    return text if parsed.scheme == "" else None


def parse_offsets_json(text: str) -> KafkaOffsets:
    """Spark's JSON offsets {"topic":{"0":42}} with int partitions; {} for earliest/latest."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in data.items() if isinstance(parts, dict)}


def offsets_json(offsets: KafkaOffsets) -> str:
    return json.dumps({t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())},
                      separators=(",", ":"))  # fmt: skip


# --- what a checkpoint holds --------------------------------------------------------


@dataclass(frozen=True)
class StatefulOperator:
    id: int
    name: str | None  # Spark's operator name (stateStoreSave, dedupe, symmetricHashJoin...), None if unrecorded
    partitions: int | None = None


@dataclass(frozen=True)
class CheckpointState:
    location: str
    exists: bool
    query_id: str | None = None
    last_committed: int | None = None  # epoch (continuous) or batch id
    committed_offsets: list[Any] = field(default_factory=list)  # one entry per source
    committed_at: float | None = None  # mtime of the commit marker, seconds since epoch
    in_flight: int | None = None  # planned but not committed
    in_flight_offsets: list[Any] = field(default_factory=list)
    planned_at: float | None = None  # mtime of the in-flight batch's offsets
    sources: int | None = None  # source lines in the newest offsets file
    stateful_operators: tuple[StatefulOperator, ...] = ()
    problems: tuple[str, ...] = ()  # files that could not be read

    @property
    def resumable(self) -> bool:
        """Spark can restart from it: it exists and what it resumes from is readable."""
        return self.exists and not any(p.startswith(_BLOCKING) for p in self.problems)

    @property
    def has_commits(self) -> bool:
        return self.last_committed is not None

    def kafka_offsets(self) -> KafkaOffsets:
        """{topic: {partition: next offset}} over every Kafka source of the last committed batch."""
        return merge_kafka_offsets(self.committed_offsets)

    def in_flight_kafka_offsets(self) -> KafkaOffsets:
        return merge_kafka_offsets(self.in_flight_offsets)

    def source_kinds(self) -> list[str]:
        newest = self.in_flight_offsets or self.committed_offsets
        return [source_kind(s) for s in newest]

    def to_json(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        return {
            "location": self.location,
            "exists": self.exists,
            "resumable": self.resumable,
            "queryId": self.query_id,
            "lastCommitted": self.last_committed,
            "committedOffsets": self.committed_offsets,
            "committedAt": self.committed_at,
            "lastCommitAgeSeconds": _age(self.committed_at, now),
            "inFlight": self.in_flight,
            "inFlightOffsets": self.in_flight_offsets,
            "inFlightAgeSeconds": _age(self.planned_at, now),
            "sources": self.sources,
            "sourceKinds": self.source_kinds(),
            "statefulOperators": [{"id": o.id, "name": o.name, "partitions": o.partitions} for o in self.stateful_operators],
            "problems": list(self.problems),
        }


def _age(moment: float | None, now: float) -> float | None:
    return None if moment is None else round(max(0.0, now - moment), 3)


_BLOCKING = ("metadata", "the newest commit")


def is_kafka_offsets(source: Any) -> bool:
    return (
        isinstance(source, dict)
        and bool(source)
        and all(
            isinstance(parts, dict) and all(str(p).isdigit() and isinstance(o, int) for p, o in parts.items())
            for parts in source.values()
        )
    )


def source_kind(source: Any) -> str:
    return "kafka" if is_kafka_offsets(source) else "other"


def merge_kafka_offsets(sources: list[Any]) -> KafkaOffsets:
    merged: KafkaOffsets = {}
    for source in sources:
        if is_kafka_offsets(source):
            for topic, parts in source.items():
                merged.setdefault(topic, {}).update({int(p): o for p, o in parts.items()})
    return merged
