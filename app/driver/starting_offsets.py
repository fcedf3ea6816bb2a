"""Where a query starts reading when its checkpoint is gone (pure).

Spark reads ``startingOffsets`` only for a query without a checkpoint; with
one it resumes after the last committed batch. When the checkpoint is lost
(a deleted volume, a wiped directory) or cannot be read, restarting with the
spec's ``latest`` would skip everything that arrived meanwhile. The operator
keeps the offsets the job last committed in ``status.progress`` and hands them
to the next driver (the query document's ``streamq.io/resume-from``
annotation; ``streamq run --starting-offsets`` by hand); the job uses them
only when the checkpoint has no commit to resume from. Replays are possible
(at-least-once), skips are not.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.checkpoint import EARLIEST, CheckpointState, KafkaOffsets, offsets_json, parse_offsets_json
from contract.progress import Recovered
from contract.resume import ResumeFrom


@dataclass(frozen=True)
class StartPlan:
    starting_offsets: str | None  # overrides the spec's startingOffsets; None keeps it
    note: str | None = None  # what happened, for the log and the progress records
    recovered: Recovered | None = None  # when resuming without a checkpoint


def complete_offsets(offsets: KafkaOffsets, partitions: dict[str, int]) -> KafkaOffsets:
    """Spark wants every partition of every subscribed topic in JSON startingOffsets:
    partitions with no recorded offset (added since) start at the earliest (-2)."""
    if not partitions:
        return offsets
    return {t: {p: offsets.get(t, {}).get(p, EARLIEST) for p in range(n)} for t, n in partitions.items()}


def _why(state: CheckpointState) -> str:
    if not state.exists:
        return "missing"
    if not state.resumable:
        return "unreadable (" + "; ".join(state.problems) + ")"
    return "empty (nothing committed)"


def plan_start(state: CheckpointState, resume: ResumeFrom | None, partitions: dict[str, int]) -> StartPlan:
    if state.resumable and state.has_commits:
        note = None
        if resume is not None:
            note = f"resuming from checkpoint batch {state.last_committed}; the recorded starting offsets are not needed"
        return StartPlan(None, note)
    if resume is None:
        return StartPlan(None)
    why = _why(state)
    given = parse_offsets_json(resume.starting_offsets)
    starting = offsets_json(complete_offsets(given, partitions)) if given else resume.starting_offsets
    since = f" committed at batch {resume.batch_id}" if resume.batch_id is not None else ""
    note = f"the checkpoint at {state.location} is {why}: starting a fresh one from the offsets{since}: {starting}"
    recovered = Recovered(reason=why, batch_id=resume.batch_id, starting_offsets=starting)
    return StartPlan(starting, note, recovered)
