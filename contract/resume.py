"""Offsets recorded outside the checkpoint: the operator keeps them in status and hands
them to the next driver in an annotation, for a checkpoint that was lost (``app.driver.starting_offsets``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from contract.checkpoint import offsets_json
from contract.progress import ProgressRecord


@dataclass(frozen=True)
class ResumeFrom:
    """Offsets recorded outside the checkpoint: where the previous run had committed."""

    starting_offsets: str  # Spark's form: JSON {"topic":{"0":42}}, or earliest/latest
    batch_id: int | None = None
    checkpoint: str | None = None  # the checkpoint they were committed to

    def to_annotation(self) -> str:
        data = {"startingOffsets": self.starting_offsets, "batchId": self.batch_id, "checkpoint": self.checkpoint}
        return json.dumps({k: v for k, v in data.items() if v is not None}, sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str | None) -> ResumeFrom | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(str(data["startingOffsets"]), data.get("batchId"), data.get("checkpoint"))
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def from_progress(cls, progress: ProgressRecord | None, checkpoint: str) -> ResumeFrom | None:
        """From status.progress, when it was committed to this checkpoint."""
        if progress is None or progress.checkpoint != checkpoint or not progress.committed_offsets:
            return None
        try:
            parsed = {t: {int(p): int(o) for p, o in parts.items()} for t, parts in progress.committed_offsets.items()}
        except ValueError:  # a partition that is not a number
            return None
        return cls(offsets_json(parsed), progress.batch_id, checkpoint)
