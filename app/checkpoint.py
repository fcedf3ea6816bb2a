"""Read a Structured Streaming checkpoint without Spark.

Layout (Spark 4.x): ``metadata`` holds {"id": ...}; ``offsets/N`` is "v1", a
line of batch metadata (empty in continuous mode), then one JSON line per
source (Kafka: {"topic": {"partition": next_offset}}); ``commits/N`` marks
epoch/batch N as committed. Writers create hidden temp files and rename, so
only plain numeric names count.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CheckpointState:
    location: str
    exists: bool
    query_id: str | None = None
    last_committed: int | None = None  # epoch (continuous) or batch id
    committed_offsets: list[Any] = field(default_factory=list)  # one entry per source
    committed_at: float | None = None  # mtime of the commit marker, seconds since epoch
    in_flight: int | None = None  # planned but not committed

    def kafka_offsets(self) -> dict[str, dict[int, int]]:
        """{topic: {partition: next offset}} over every Kafka source."""
        merged: dict[str, dict[int, int]] = {}
        for source in self.committed_offsets:
            if not isinstance(source, dict):
                continue
            for topic, parts in source.items():
                if isinstance(parts, dict) and all(str(p).isdigit() and isinstance(o, int) for p, o in parts.items()):
                    merged.setdefault(topic, {}).update({int(p): o for p, o in parts.items()})
        return merged

    def to_json(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "exists": self.exists,
            "queryId": self.query_id,
            "lastCommitted": self.last_committed,
            "committedOffsets": self.committed_offsets,
            "committedAt": self.committed_at,
            "inFlight": self.in_flight,
        }


def _batch_ids(folder: Path) -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(folder) if name.isdigit())
    except FileNotFoundError:
        return []


def _read_offsets(path: Path) -> list[Any] | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    if not lines or not lines[0].startswith("v"):
        return None
    sources = []
    for line in lines[2:]:
        try:
            sources.append(json.loads(line) if line and line != "-" else None)
        except ValueError:
            sources.append(line)  # a source with a non-JSON offset format: keep it verbatim
    return sources


def _query_id(location: Path) -> str | None:
    try:
        return json.loads((location / "metadata").read_text()).get("id")
    except (OSError, ValueError, AttributeError):
        return None


def read_checkpoint(location: str | os.PathLike) -> CheckpointState:
    root = Path(str(location).removeprefix("file://"))
    if not root.is_dir():
        return CheckpointState(location=str(location), exists=False)
    commits = _batch_ids(root / "commits")
    planned = _batch_ids(root / "offsets")
    last = commits[-1] if commits else None
    offsets = _read_offsets(root / "offsets" / str(last)) if last is not None else None
    newest_planned = planned[-1] if planned else None
    return CheckpointState(
        location=str(location),
        exists=True,
        query_id=_query_id(root),
        last_committed=last,
        committed_offsets=offsets or [],
        committed_at=(root / "commits" / str(last)).stat().st_mtime if last is not None else None,
        in_flight=newest_planned if newest_planned is not None and newest_planned != last else None,
    )
