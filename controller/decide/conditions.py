"""The conditions of a query's status (pure).

Two audiences read them, and each condition has one meaning for both:

    Ready        the driver runs the query                 kubectl wait --for=condition=Ready, Argo CD
    Progressing  starting or restarting (Reconciling's older twin, kept for dashboards that read it)
    Reconciling  the spec is not realised yet, but will be  kstatus: InProgress
    Stalled      the spec cannot be realised until it changes: Invalid, out of restarts, a change
                 the checkpoint refuses                     kstatus: Failed
    Degraded     what is wrong, worst first: a refused change, a broker the driver waits for, a stall it reports, a driver
                 that stopped reporting, a driver that cannot start, a phase that is a failure

kstatus (Flux's `wait`, kpt, cli-utils) reads only Reconciling, Stalled and
status.observedGeneration; without either condition True it calls a resource
Current, so an Invalid query needs Stalled to look failed there. A driver that
cannot start (a missing PVC, an image it cannot pull) is Reconciling and
Degraded, never Stalled: the cause is outside the spec and may be fixed there.
A condition's transition time moves only when its status does.
"""

from __future__ import annotations

from datetime import datetime

from controller.phases import ConditionType, Phase, Reason
from controller.status import Condition, QueryStatus, format_time

# Reasons of a restart that say something went wrong (not a spec change or a requested restart).
_FAILED_RESTARTS = (Reason.DRIVER_FAILED, Reason.DRIVER_LOST, Reason.DRIVER_EXITED, Reason.STALLED)
_ON_ITS_WAY = (Phase.PENDING, Phase.STARTING, Phase.RESTARTING)
_STUCK = (Phase.FAILED, Phase.INVALID)  # terminal until the spec changes; Completed is not a failure


def conditions(old: QueryStatus, new: QueryStatus, reason: str | None, *, refusal: str | None, stall: str | None,
               silence: str | None, now: datetime, generation: int, blocked: str | None = None,
               unavailable: str | None = None, stuck: str | None = None) -> list[Condition]:  # fmt: skip
    """The conditions of ``new``; ``reason`` None keeps the reason Ready has in ``old``;
    ``blocked`` says why the driver cannot start."""
    phase = new.phase or Phase.PENDING
    message = new.message or ""
    kept = old.condition(ConditionType.READY)
    reason = reason or (kept.reason if kept is not None else Reason.AS_EXPECTED)
    trouble, trouble_message = _degraded(phase, reason, message, refusal=refusal, stall=stall, silence=silence,
                                         blocked=blocked, unavailable=unavailable, stuck=stuck) or (None, "")  # fmt: skip
    stalled, stalled_message = _stalled(phase, reason, message, refusal=refusal) or (None, "")
    # kstatus takes the first of the two that is True: never both, and a spec it cannot realise wins
    reconciling = phase in _ON_ITS_WAY and stalled is None
    wanted = [
        (ConditionType.READY, phase is Phase.RUNNING, reason, message),
        (ConditionType.PROGRESSING, phase in _ON_ITS_WAY, reason, message),
        (ConditionType.RECONCILING, reconciling, reason, message),
        (ConditionType.STALLED, stalled is not None, stalled or Reason.AS_EXPECTED, stalled_message),
        (ConditionType.DEGRADED, trouble is not None, trouble or Reason.AS_EXPECTED, trouble_message),
    ]
    out = []
    for kind, value, why, text in wanted:
        status = "True" if value else "False"
        previous = old.condition(kind)
        changed = previous is None or previous.status != status
        out.append(
            Condition(
                type=kind,
                status=status,
                reason=str(why),
                message=text,
                last_transition_time=format_time(now) if changed else previous.last_transition_time,
                observed_generation=generation,
            )
        )
    return out


def _stalled(phase: Phase, reason: str, message: str, *, refusal: str | None) -> tuple[str, str] | None:
    """(reason, message) when nothing will change until the spec does, None otherwise."""
    if refusal is not None:  # the previous spec may still run (Ready), but this generation never will
        return Reason.INCOMPATIBLE_CHANGE, refusal
    if phase in _STUCK:
        return reason, message
    return None


def _degraded(phase: Phase, reason: str, message: str, *, refusal: str | None, stall: str | None,
              silence: str | None, blocked: str | None, unavailable: str | None = None,
              stuck: str | None = None) -> tuple[str, str] | None:  # fmt: skip
    """(reason, message) of what is wrong, None when nothing is."""
    if refusal is not None:
        return Reason.INCOMPATIBLE_CHANGE, refusal
    if stuck is not None:
        return Reason.DRIVER_STUCK_TERMINATING, stuck
    if unavailable is not None:
        return Reason.SOURCE_UNAVAILABLE, unavailable
    if stall is not None:
        return Reason.STALLED, stall
    if silence is not None:
        return Reason.UNRESPONSIVE, silence
    if blocked is not None:
        return reason, blocked
    if phase in _STUCK or reason == Reason.DRIVER_CREATE_FAILED:
        return reason, message
    if phase is Phase.RESTARTING and reason in _FAILED_RESTARTS:
        return reason, message
    return None
