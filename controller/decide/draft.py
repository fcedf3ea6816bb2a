"""What a decision is made of, and the draft every decision step writes into (pure).

A step reads :class:`Inputs`, changes the draft's status, adds actions, events,
waits and the problems it finds (``conditions.ProblemKind``), and ends with
``draft.finish(verb)``: the :class:`Decision` the reconciler carries out. The
:class:`Verb` says in one word what was decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from contract.policy import OperatorFacts, Policy
from contract.problems import SpecError
from contract.progress import ProgressRecord
from contract.spec import QuerySpec
from controller.decide.conditions import Problem, ProblemKind, conditions
from controller.observe import Driver, LeaseState
from controller.phases import Phase
from controller.run import Run
from controller.status import QueryStatus

if TYPE_CHECKING:  # acted's types name ResizeDriver, defined here
    from controller.decide.acted import ActOutcome

WAIT_FOR_DELETION_S = 5.0  # pod events wake the reconciler sooner; this is a safety net


@dataclass(frozen=True)
class Inputs:
    name: str
    namespace: str
    uid: str
    generation: int
    raw_spec: Any
    status: QueryStatus
    drivers: tuple[Driver, ...]
    now: datetime
    progress: ProgressRecord | None = None  # the driver's newest progress record, if read this pass
    progress_read: bool = False  # whether this pass read the driver's progress (between reads, judgements stand)
    progress_refused: str | None = None  # why the driver's answer on its progress port was refused, if it was
    silent_after_s: float = 120.0  # a newest record older than this: Unresponsive
    policy: Policy | None = None  # the platform's policy (chart values); None: none applies
    facts: OperatorFacts | None = None  # this installation's job image and accounts, for the policy
    lease: LeaseState | None = None  # a standby query's Lease, read when a fenced driver's node is lost
    # The Secrets the spec names for credentials: name -> their type and labels, None for a missing one
    # (contract.credentials); None: not read, not judged.
    secrets: Mapping[str, Mapping[str, Any] | None] | None = None
    # What carrying out this pass's decision came to (a refusal...): set for the pass's second decision only.
    acted: ActOutcome | None = None
    # raw_spec as contract.load.validate_spec parsed it, or why it refused it, under this policy and
    # namespace (reconcile.parse_spec: once per full pass, kept by a progress-only one); None: decide parses it.
    desired: QuerySpec | SpecError | None = None


@dataclass(frozen=True)
class CreateDriver:
    run: Run


@dataclass(frozen=True)
class DeleteDriver:
    kind: str
    name: str
    reason: str
    force: bool = False  # grace period 0: for a pod its kubelet will never confirm gone


@dataclass(frozen=True)
class ReleaseLease:
    """Free a standby query's driver Lease held by ``holder``, whose container has ended."""

    name: str
    holder: str


@dataclass(frozen=True)
class ResizeDriver:
    """Grow a driver pod that waited on the Lease to the CPU request it runs with (in-place resize)."""

    name: str
    cpu: str
    waited_on: str  # the request it had while it waited


@dataclass(frozen=True)
class ScaleExecutors:
    """Resize a running micro-batch driver's executors in place (autoscaling.recommendOnly false): its pod's
    EXECUTORS_ANNOTATION, which the driver reads through the downward API (app.driver.executors)."""

    name: str
    executors: int
    before: int


@dataclass(frozen=True)
class ApplySparkUIService:
    """Create the query's UI Service selecting the drivers of ``attempt``, or move its selector there."""

    query: str
    namespace: str
    attempt: int


@dataclass(frozen=True)
class DeleteSparkUIService:
    query: str
    namespace: str


Action = CreateDriver | DeleteDriver | ReleaseLease | ResizeDriver | ScaleExecutors | ApplySparkUIService | DeleteSparkUIService


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


class Verb(StrEnum):
    """What a decision did, in one word: the label of the metric streamq_reconciles_total, and what tests read."""

    NOTHING = "nothing"
    WAIT = "wait"
    CREATE = "create"
    CREATE_FAILED = "create-failed"  # the API refused the driver: said, and tried again
    DELETE = "delete"
    RUNNING = "running"
    SUSPEND = "suspend"
    INVALID = "invalid"
    REFUSED = "refused"  # a change the checkpoint cannot take
    BACKOFF = "backoff"
    FAIL = "fail"
    COMPLETE = "complete"
    PROMOTE = "promote"  # a standby takes over
    UPGRADE = "upgrade"  # a warm upgrade's driver is created
    GROW = "grow"
    HANDOVER = "handover"
    NO_ROOM = "no-room"  # a quota refused a warm upgrade's driver: a plain restart next
    UPGRADE_FAILED = "upgrade-failed"


@dataclass(frozen=True)
class Decision:
    verb: Verb
    status: QueryStatus
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None  # seconds until the next look, if time alone changes things
    restarted: bool = False  # a failure was counted as a restart


@dataclass
class Draft:
    """One decision, step by step: starts as a copy of the status it was read with."""

    inputs: Inputs
    status: QueryStatus
    reason: str | None = None  # None: keep the reason the conditions have
    problems: list[Problem] = field(default_factory=list)  # what is wrong: at most one of each kind
    standby: Driver | None = None  # a live standby driver of the spec that runs (spec.runtime.standby)
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue: list[float] = field(default_factory=list)
    restarted: bool = False

    @classmethod
    def start(cls, inputs: Inputs) -> Draft:
        # A copy the steps may change. Validating a dump is a third of a deep copy's CPU (a status holds the
        # offsets of every partition): what a progress-only pass pays for each read (bench/profile_pass.py).
        draft = cls(inputs=inputs, status=QueryStatus.model_validate(inputs.status.model_dump()))
        draft.status.observed_generation = inputs.generation
        return draft

    @property
    def old(self) -> QueryStatus:
        return self.inputs.status

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def delete(self, d: Driver, reason: str, force: bool = False) -> None:
        """Once per driver and pass: two steps may each find a reason (an ended standby, a failed upgrade)."""
        queued = any(isinstance(a, DeleteDriver) and a.name == d.name and (a.force or not force) for a in self.actions)
        if (not d.deleting or force) and not queued:
            self.actions.append(DeleteDriver(d.kind, d.name, reason, force))

    def wait(self, seconds: float) -> None:
        self.requeue.append(max(0.0, seconds))

    def phase(self, phase: Phase, reason: str, message: str) -> None:
        self.status.phase, self.reason, self.status.message = phase, reason, message

    def add_problem(self, kind: ProblemKind, message: str, reason: str | None = None) -> None:
        """Say what is wrong (the conditions follow ``kind``); a later one of the same kind replaces it."""
        self.problems = [p for p in self.problems if p.kind is not kind] + [Problem.of(kind, message, reason)]

    def problem(self, kind: ProblemKind) -> Problem | None:
        return next((p for p in self.problems if p.kind is kind), None)

    def finish(self, verb: Verb) -> Decision:
        self.status.conditions = conditions(
            self.old, self.status, self.reason, self.problems, now=self.inputs.now, generation=self.inputs.generation
        )
        return Decision(
            verb=verb,
            status=self.status,
            actions=tuple(self.actions),
            events=tuple(self.events),
            requeue_after=min(self.requeue) if self.requeue else None,
            restarted=self.restarted,
        )
