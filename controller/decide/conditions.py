"""The Ready, Progressing and Degraded conditions of a query's status (pure).

Ready and Progressing follow the phase. Degraded says what is wrong, worst first:
a spec the checkpoint gate refused, a stall the driver reports, a driver that
stopped reporting, then a phase that is a failure. A condition's transition
time moves only when its status does.
"""

from __future__ import annotations

from datetime import datetime

from controller.phases import ConditionType, Phase, Reason
from controller.status import Condition, QueryStatus, format_time

# Reasons of a restart that say something went wrong (not a spec change or a requested restart).
_FAILED_RESTARTS = (Reason.DRIVER_FAILED, Reason.DRIVER_LOST, Reason.DRIVER_EXITED, Reason.STALLED)


def conditions(old: QueryStatus, new: QueryStatus, reason: str | None, *, refusal: str | None, stall: str | None,
               silence: str | None, now: datetime, generation: int) -> list[Condition]:  # fmt: skip
    """The conditions of ``new``; ``reason`` None keeps the reason Ready has in ``old``."""
    phase = new.phase or Phase.PENDING
    message = new.message or ""
    kept = old.condition(ConditionType.READY)
    reason = reason or (kept.reason if kept is not None else Reason.AS_EXPECTED)
    trouble, trouble_message = _degraded(phase, reason, message, refusal=refusal, stall=stall, silence=silence) or (None, "")
    wanted = [
        (ConditionType.READY, phase is Phase.RUNNING, reason, message),
        (ConditionType.PROGRESSING, phase in (Phase.PENDING, Phase.STARTING, Phase.RESTARTING), reason, message),
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


def _degraded(phase: Phase, reason: str, message: str, *, refusal: str | None, stall: str | None,
              silence: str | None) -> tuple[str, str] | None:  # fmt: skip
    """(reason, message) of what is wrong, None when nothing is."""
    if refusal is not None:
        return Reason.INCOMPATIBLE_CHANGE, refusal
    if stall is not None:
        return Reason.STALLED, stall
    if silence is not None:
        return Reason.UNRESPONSIVE, silence
    if phase in (Phase.FAILED, Phase.INVALID) or reason == Reason.DRIVER_CREATE_FAILED:
        return reason, message
    if phase is Phase.RESTARTING and reason in _FAILED_RESTARTS:
        return reason, message
    return None
