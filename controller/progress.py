"""The driver's progress, from the JSON lines the job prints (app.monitoring.reporting).

The operator has no access to the checkpoint or to Kafka credentials: the job
measures (committed offsets, lag, health) and the operator shows the newest
record in ``status.progress``, reading it from the driver's log.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.contract.progress import HealthState, ProgressRecord
from controller.status import parse_time



def last_progress(log_text: str) -> dict[str, Any] | None:
    """The newest progress record in a log tail, shaped for status.progress; None if none."""
    for line in reversed(log_text.splitlines()):
        record = ProgressRecord.from_line(line)
        if record is not None:
            return record.status_fields()
    return None


def _reported(progress: dict[str, Any] | None, attempt: int, state: HealthState, default: str) -> str | None:
    """The health message the current driver reported in ``state``, None otherwise."""
    if not isinstance(progress, dict) or progress.get("attempt") != attempt:
        return None
    health = progress.get("health")
    if isinstance(health, dict) and health.get("state") == state:
        return str(health.get("message") or default)
    return None


def stalled(progress: dict[str, Any] | None, attempt: int) -> str | None:
    """The job's own stall report, if the current driver made it."""
    return _reported(progress, attempt, HealthState.STALLED, "no commit while input waits")


def unavailable(progress: dict[str, Any] | None, attempt: int) -> str | None:
    """The job's report that it stopped its query on a silent broker and waits for it."""
    return _reported(progress, attempt, HealthState.SOURCE_UNAVAILABLE, "the source's broker does not answer")


def in_place_restarts(progress: dict[str, Any] | None, attempt: int) -> int:
    """How often the current driver restarted its query without a new pod."""
    if not isinstance(progress, dict) or progress.get("attempt") != attempt:
        return 0
    found = progress.get("inPlaceRestarts")
    return found if isinstance(found, int) else 0


def recovered(progress: dict[str, Any] | None, attempt: int) -> dict[str, Any] | None:
    if not isinstance(progress, dict) or progress.get("attempt") != attempt:
        return None
    found = progress.get("recovered")
    return found if isinstance(found, dict) else None


def report_age(progress: dict[str, Any] | None, attempt: int, now: datetime) -> float | None:
    """Seconds since the current driver printed its newest progress record (None: unknown)."""
    if not isinstance(progress, dict) or progress.get("attempt") != attempt:
        return None
    moment = parse_time(progress.get("updatedAt"))
    return None if moment is None else max(0.0, (now - moment).total_seconds())


def last_commit_age(progress: dict[str, Any] | None, now: datetime) -> float | None:
    moment = parse_time((progress or {}).get("lastCommitTime"))
    return None if moment is None else max(0.0, (now - moment).total_seconds())
