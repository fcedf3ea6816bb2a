"""The driver's progress, from the JSON lines the job prints (app.pipeline.progress)."""

from __future__ import annotations

import json
from typing import Any

# Fields of a progress record copied into status.progress.
FIELDS = ("batchId", "committedOffsets", "numInputRows", "inputRowsPerSecond", "processedRowsPerSecond")


def last_progress(log_text: str) -> dict[str, Any] | None:
    """The newest progress record in a log tail, shaped for status.progress; None if none."""
    for line in reversed(log_text.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and '"progress"' in line):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("event") != "progress":
            continue
        out = {k: record[k] for k in FIELDS if record.get(k) is not None}
        if record.get("timestamp"):
            out["updatedAt"] = record["timestamp"]
        return out
    return None
