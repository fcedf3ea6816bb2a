"""The driver's progress, from the JSON lines the job prints (app.monitoring.reporting).

The operator has no access to the checkpoint or to Kafka credentials: the job
measures (committed offsets, lag, health) and the operator shows the newest
record in ``status.progress``, reading it from the driver's log.
"""

from __future__ import annotations

from datetime import datetime

from contract.progress import HealthState, ProgressRecord, Recovered
from controller.status import parse_time


def last_progress(log_text: str) -> ProgressRecord | None:
    """The newest progress record in a log tail, as status.progress keeps it; None if none."""
    for line in reversed(log_text.splitlines()):
        record = ProgressRecord.from_line(line)
        if record is not None:
            return record.for_status()
    return None


def _current(progress: ProgressRecord | None, attempt: int) -> ProgressRecord | None:
    """The record, when the current driver printed it (an earlier driver's report says nothing now)."""
    return progress if progress is not None and progress.reported_by(attempt) else None


def _reported(progress: ProgressRecord | None, attempt: int, state: HealthState, default: str) -> str | None:
    """The health message the current driver reported in ``state``, None otherwise."""
    current = _current(progress, attempt)
    if current is None or current.health is None or current.health.state != state:
        return None
    return current.health.message or default


def stalled(progress: ProgressRecord | None, attempt: int) -> str | None:
    """The job's own stall report, if the current driver made it."""
    return _reported(progress, attempt, HealthState.STALLED, "no commit while input waits")


def unavailable(progress: ProgressRecord | None, attempt: int) -> str | None:
    """The job's report that it stopped its query on a silent broker and waits for it."""
    return _reported(progress, attempt, HealthState.SOURCE_UNAVAILABLE, "the source's broker does not answer")


def in_place_restarts(progress: ProgressRecord | None, attempt: int) -> int:
    """How often the current driver restarted its query without a new pod."""
    current = _current(progress, attempt)
    return current.in_place_restarts or 0 if current is not None else 0


def recovered(progress: ProgressRecord | None, attempt: int) -> Recovered | None:
    current = _current(progress, attempt)
    return current.recovered if current is not None else None


def report_age(progress: ProgressRecord | None, attempt: int, now: datetime) -> float | None:
    """Seconds since the current driver printed its newest progress record (None: unknown)."""
    current = _current(progress, attempt)
    moment = parse_time(current.updated_at) if current is not None else None
    return None if moment is None else max(0.0, (now - moment).total_seconds())


def last_commit_age(progress: ProgressRecord | None, now: datetime) -> float | None:
    moment = parse_time(progress.last_commit_time if progress is not None else None)
    return None if moment is None else max(0.0, (now - moment).total_seconds())
