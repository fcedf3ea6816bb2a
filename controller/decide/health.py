"""What the running driver says about itself, read from its progress records (pure).

A stall it reports makes ``Degraded`` ``Stalled`` (the job decides whether to exit); a
broker it waits for, ``SourceUnavailable``; a restart in place (app.driver.restarts) is an event;
a driver that printed nothing for a while is ``Unresponsive``; a checkpoint it had
to start afresh (from the offsets recorded in status, contract.resume) is said
in an event. Reported, never acted on.
"""

from __future__ import annotations

from controller import progress as reports
from controller.decide.conditions import ProblemKind
from controller.decide.draft import Draft
from controller.observe import Driver
from controller.phases import ConditionType, Reason


def reported(d: Draft, current: Driver) -> None:
    """What the running driver said about itself: a stall, silence, a checkpoint it had to start afresh."""
    attempt = current.attempt or d.status.attempt
    _problem(d, current, ProblemKind.STALLED, reports.stalled(d.status.progress, attempt))
    _problem(d, current, ProblemKind.SOURCE_UNAVAILABLE, reports.unavailable(d.status.progress, attempt))
    restarts = reports.in_place_restarts(d.status.progress, attempt)
    if restarts > reports.in_place_restarts(d.old.progress, attempt):
        why = (d.status.progress.last_in_place_restart if d.status.progress else None) or "a transient failure"
        d.event("Warning", Reason.RESTARTED_IN_PLACE,
                f"driver {current.name} restarted its query from the checkpoint without a new pod "
                f"({restarts} so far): {why}")  # fmt: skip
    _problem(d, current, ProblemKind.PROGRESS_REFUSED, _refused(d))
    silence = _silence(d, current, attempt)
    if silence is not None:
        d.add_problem(ProblemKind.UNRESPONSIVE, silence)
    found = reports.recovered(d.status.progress, attempt)
    if found is not None and reports.recovered(d.old.progress, attempt) is None:
        location = d.status.checkpoint.location if d.status.checkpoint else "?"
        batch = f" committed at batch {found.batch_id}" if found.batch_id is not None else ""
        d.event("Warning", Reason.CHECKPOINT_LOST,
                f"the checkpoint at {location} was {found.reason}: driver {current.name} started a fresh "
                f"one from the offsets{batch} recorded in status (nothing skipped): {found.starting_offsets}")  # fmt: skip


def _problem(d: Draft, current: Driver, kind: ProblemKind, message: str | None) -> None:
    """A problem the driver reported: on the conditions, and in an event (the kind's reason) when
    Degraded did not say it already."""
    if message is None:
        return
    d.add_problem(kind, message)
    reason = kind.value.reason
    previous = d.old.condition(ConditionType.DEGRADED)
    # (every kind reported here has a reason of its own: only CANNOT_START has none)
    if reason is not None and (previous is None or previous.reason != reason or previous.status != "True"):
        d.event("Warning", reason, f"driver {current.name}: {message}")


def _refused(d: Draft) -> str | None:
    """What the driver answered on its progress port that was not a record: judged on a read, kept between reads."""
    if d.inputs.progress_read:
        why = d.inputs.progress_refused
        return f"{why}: status.progress keeps the last record it could read" if why else None
    previous = d.old.condition(ConditionType.DEGRADED)
    refused = previous is not None and previous.status == "True" and previous.reason == Reason.PROGRESS_REFUSED
    return previous.message if previous is not None and refused else None


def _silence(d: Draft, current: Driver, attempt: int) -> str | None:
    """A driver that printed nothing for a while may be hung (a JVM in a GC spiral, a
    stuck call): reported, not acted on. Judged only on a fresh read of its log, where
    the newest record in the tail is the newest it printed; between reads the last
    judgement stands, so the condition does not flap."""
    previous = d.old.condition(ConditionType.DEGRADED)
    was_silent = previous is not None and previous.status == "True" and previous.reason == Reason.UNRESPONSIVE
    if d.inputs.progress is None:
        return previous.message if previous is not None and was_silent else None
    age = reports.report_age(d.status.progress, attempt, d.inputs.now)
    if age is None or age <= d.inputs.silent_after_s:
        if was_silent:
            d.event("Normal", Reason.DRIVER_RUNNING, f"driver {current.name} reports progress again")
        return None
    message = (f"driver {current.name} has printed no progress for {age:.0f}s (limit {d.inputs.silent_after_s:g}s; "
               f"the job reports every 10s): it may be hung, see `kubectl logs {current.name}`")  # fmt: skip
    if not was_silent:
        d.event("Warning", Reason.UNRESPONSIVE, message)
    return message
