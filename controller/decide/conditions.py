"""The conditions of a query's status (pure).

Two audiences read them, and each condition has one meaning for both:

    Ready        the driver runs the query                 kubectl wait --for=condition=Ready, Argo CD
    Progressing  starting or restarting (Reconciling's older twin, kept for dashboards that read it)
    Reconciling  the spec is not realised yet, but will be  kstatus: InProgress
    Stalled      the spec cannot be realised until it changes: Invalid, out of restarts, a change
                 the checkpoint refuses, a warm upgrade whose driver could not start
                                                            kstatus: Failed
    Degraded     what is wrong, worst first: the worst :class:`Problem` a decision found (the
                 table :class:`ProblemKind`), else a phase that is a failure

kstatus (Flux's `wait`, kpt, cli-utils) reads only Reconciling, Stalled and
status.observedGeneration; without either condition True it calls a resource
Current, so an Invalid query needs Stalled to look failed there. A driver that
cannot start (a missing PVC, an image it cannot pull) is Reconciling and
Degraded, never Stalled: the cause is outside the spec and may be fixed there.
A condition's transition time moves only when its status does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, unique

from controller.phases import ConditionType, Phase, Reason
from controller.status import Condition, ConditionStatus, QueryStatus, format_time

# Reasons of a restart that say something went wrong (not a spec change or a requested restart).
_FAILED_RESTARTS = (Reason.DRIVER_FAILED, Reason.DRIVER_LOST, Reason.DRIVER_EXITED, Reason.STALLED)
# Upgrading: the old spec's driver serves until the new one takes over, so the spec is not realised yet.
_ON_ITS_WAY = (Phase.PENDING, Phase.STARTING, Phase.RESTARTING, Phase.UPGRADING)
_STUCK = (Phase.FAILED, Phase.INVALID)  # terminal until the spec changes; Completed is not a failure


@dataclass(frozen=True)
class Effect:
    """What a kind of problem does to the conditions. Every problem makes Degraded True
    (when it is the worst present, with its reason and message); none touches Ready,
    which is the phase's alone (a driver that runs is Ready, whatever it reports)."""

    about: str  # what the problem is (and what keeps two kinds apart in the enum)
    reason: str | None  # Degraded's reason; None: each problem gives its own (the cause varies)
    stalls: bool = False  # Stalled too, with the same reason and message: nothing changes until the spec does


@unique
class ProblemKind(Enum):
    """Every kind of problem a decision can find, worst first: the table the conditions follow.
    A new kind is one entry here; a decision step says it with ``Draft.add_problem``."""

    REFUSED_CHANGE = Effect("the checkpoint gate refused the spec", Reason.INCOMPATIBLE_CHANGE, stalls=True)
    UPGRADE_FAILED = Effect("the new spec's driver could not start; the old one runs on", Reason.UPGRADE_FAILED, stalls=True)
    STUCK_TERMINATING = Effect("a driver pod Terminating long past its grace period", Reason.DRIVER_STUCK_TERMINATING)
    SOURCE_UNAVAILABLE = Effect("the running driver waits for a broker that does not answer", Reason.SOURCE_UNAVAILABLE)
    STALLED = Effect("the running driver reports a stall", Reason.STALLED)
    UNRESPONSIVE = Effect("the running driver stopped reporting", Reason.UNRESPONSIVE)
    PROGRESS_REFUSED = Effect("the running driver's progress answer was refused", Reason.PROGRESS_REFUSED)
    CANNOT_START = Effect("the driver cannot start (unschedulable, an image it cannot pull)", None)

    @property
    def rank(self) -> int:
        """0 for the worst."""
        return _RANKS[self]


_RANKS = {kind: i for i, kind in enumerate(ProblemKind)}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a query, found by one decision."""

    kind: ProblemKind
    reason: str  # the condition's reason: the kind's, or the problem's own when the kind has none
    message: str

    @classmethod
    def of(cls, kind: ProblemKind, message: str, reason: str | None = None) -> Problem:
        why = reason or kind.value.reason
        if why is None:
            raise ValueError(f"a problem of kind {kind.name} says its own reason")
        return cls(kind, why, message)


def conditions(old: QueryStatus, new: QueryStatus, reason: str | None, problems: Sequence[Problem] = (), *,
               now: datetime, generation: int) -> list[Condition]:  # fmt: skip
    """The conditions of ``new``; ``reason`` None keeps the reason Ready has in ``old``;
    ``problems`` is what the decision found wrong (any order)."""
    phase = new.phase or Phase.PENDING
    message = new.message or ""
    kept = old.condition(ConditionType.READY)
    reason = reason or (kept.reason if kept is not None else Reason.AS_EXPECTED)
    worst_first = sorted(problems, key=lambda p: p.kind.rank)
    trouble, trouble_message = _degraded(phase, reason, message, worst_first) or (None, "")
    stalled, stalled_message = _stalled(phase, reason, message, worst_first) or (None, "")
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
        status: ConditionStatus = "True" if value else "False"
        previous = old.condition(kind)
        out.append(
            Condition(
                type=kind,
                status=status,
                reason=str(why),
                message=text,
                last_transition_time=(
                    format_time(now) if previous is None or previous.status != status else previous.last_transition_time
                ),
                observed_generation=generation,
            )
        )
    return out


def _stalled(phase: Phase, reason: str, message: str, worst_first: list[Problem]) -> tuple[str, str] | None:
    """(reason, message) when nothing will change until the spec does, None otherwise."""
    for p in worst_first:  # a refused change: the previous spec may still run (Ready), but this generation never will
        if p.kind.value.stalls:
            return p.reason, p.message
    if phase in _STUCK:
        return reason, message
    return None


def _degraded(phase: Phase, reason: str, message: str, worst_first: list[Problem]) -> tuple[str, str] | None:
    """(reason, message) of what is wrong, None when nothing is."""
    if worst_first:
        return worst_first[0].reason, worst_first[0].message
    if phase in _STUCK or reason in (Reason.DRIVER_CREATE_FAILED, Reason.NAME_CONFLICT):
        return reason, message
    if phase is Phase.RESTARTING and reason in _FAILED_RESTARTS:
        return reason, message
    return None
