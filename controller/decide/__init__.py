"""The next step for one query, from what is desired and what exists (pure).

``decide(inputs)`` reads the resource (spec, generation, status) and the
observed drivers at time ``now`` and returns a :class:`Decision`: the status to
write, the drivers to create or delete, the events to post and when to look
again. It never talks to Kubernetes, so every transition is a table-driven
unit test.

A pass decides once, or twice when acting did not go as decided: reconcile then
puts what acting came to (``Inputs.acted``: a creation the API refused, and why,
as a typed ``acted.Refusal``; UI names another object holds; a resize refused)
in the inputs and calls ``decide`` again. That second decision starts from the
decision that was carried out (the same inputs decide the same) and says what
the refusal means: ``creation_failed`` (said, tried again), a warm upgrade's
driver refused (``upgrade.create_refused``: no room under a quota, else the
upgrade fails), a UI without its Service (``spark_ui.name_taken``), a resize
refused (``drivers.resize_refused``). It carries no actions: what it could do
was done or refused, so acting is never looped.

The rules of a first decision, in the order ``decide`` applies them:

1. A spec the static rules refuse is ``Invalid``: its driver is stopped.
2. The checkpoint gate (``gate``): a change the checkpoint cannot take is refused
   (the previous spec keeps running) or, if asked, runs on a fresh checkpoint.
3. ``Failed``, ``Invalid`` and ``Completed`` stay until the spec changes.
4. ``suspend`` deletes the driver and keeps the checkpoint (``drivers``).
5. Never two drivers writing to one checkpoint; a driver that runs an outdated spec
   is upgraded warm: the new spec's driver warms up beside it and takes over
   through the Lease (``upgrade``), or, when that cannot be, replaced at once
   (``drivers``). A standby query's second pod waits for the Lease and takes over
   when the current driver fails (``standby``).
6. A driver that ended is classified by its exit code and restarted, or not,
   under the restart policy (``restart``).
7. What the running driver reports goes into status.progress and the conditions
   (``health``, ``conditions``).

    draft       the inputs, the decision, its verbs, and the draft each step writes into
    acted       what carrying out a decision came to (a refusal...), as the next decision reads it
    gate        which spec runs, on which checkpoint
    drivers     starting, replacing and stopping the driver
    restart     exit codes, backoff, maxRestarts, stableAfter
    health      stalls, silence and lost checkpoints the running driver reports
    standby     the warm second driver of spec.runtime.standby: create, promote, drop
    upgrade     warm upgrades: the new spec's driver beside the running one, then the hand-over
    spark_ui    the Service in front of the current driver's UI (spec.runtime.sparkUI)
    autoscale   the executors a running query needs, from its recent records (spec.autoscaling; recommends)
    conditions  Ready, Progressing, Reconciling, Stalled and Degraded
"""

from __future__ import annotations

from dataclasses import replace

from contract.credentials import credential_secret_problems, refused_for_a_secret
from contract.derived import derived_location_problems
from contract.load import validate_spec
from contract.names import KIND, query_name_problem
from contract.problems import Problem, SpecError
from contract.spec import QuerySpec
from controller.decide import autoscale, drivers, restart, spark_ui, standby, upgrade
from controller.decide.acted import ActOutcome, CreateRefused, Refusal, ResizeRefused
from controller.decide.conditions import ProblemKind
from controller.decide.draft import (
    WAIT_FOR_DELETION_S,
    ApplySparkUIService,
    CreateDriver,
    Decision,
    DeleteDriver,
    DeleteSparkUIService,
    Draft,
    Event,
    Inputs,
    ReleaseLease,
    ResizeDriver,
    ScaleExecutors,
    Verb,
)
from controller.decide.gate import checkpoint_gate, held
from controller.observe import DriverPhase
from controller.phases import ConditionType, Phase, Reason
from controller.run import spec_hash
from controller.status import Reconciled

__all__ = [
    "ActOutcome",
    "ApplySparkUIService",
    "CreateDriver",
    "CreateRefused",
    "Decision",
    "DeleteDriver",
    "DeleteSparkUIService",
    "Event",
    "Inputs",
    "Refusal",
    "ReleaseLease",
    "ResizeDriver",
    "ResizeRefused",
    "ScaleExecutors",
    "Verb",
    "creation_failed",
    "decide",
    "parse_spec",
]

CREATE_RETRY_S = 15.0  # a refused creation is tried again this much later (a quota may free up, RBAC be fixed)


def decide(inputs: Inputs) -> Decision:
    if inputs.acted is not None:  # the pass's second decision: what acting came to, first
        return _after_acting(inputs, inputs.acted, decide(replace(inputs, acted=None)))
    return spark_ui.follow(inputs, _decide(inputs))


def _after_acting(inputs: Inputs, acted: ActOutcome, carried_out: Decision) -> Decision:
    """The decision ``carried_out`` was acted on, and acting came to ``inputs.acted``: the status and
    events that say so. Its actions are dropped: each was carried out already, or refused."""
    decision = carried_out
    for action in acted.resized:
        decision = drivers.resized(decision, action)
    for refusal in acted.resize_refused:
        decision = drivers.resize_refused(decision, refusal.action, refusal.message)
    for scale in acted.scale_refused:
        decision = autoscale.scale_refused(decision, inputs.status, scale.action, scale.message)
    for why in acted.ui_taken:  # the query runs on, without its UI
        decision = spark_ui.name_taken(decision, why)
    refused = acted.refused
    if refused is not None and refused.reason is Refusal.NAME_CONFLICT:  # nothing was written over
        decision = creation_failed(decision, inputs, refused.message, reason=Reason.NAME_CONFLICT)
    elif refused is not None:  # a warm upgrade's driver: no room (a quota), or the upgrade fails
        decision = upgrade.create_refused(inputs, decision, refused) or creation_failed(decision, inputs, refused.message)
    return replace(decision, actions=())


def _decide(inputs: Inputs) -> Decision:
    d = Draft.start(inputs)
    old = inputs.status

    try:
        bad_name = query_name_problem(inputs.name)  # stored before the CRD's rule on names, or without it
        if bad_name is not None:
            raise SpecError([Problem("metadata.name", bad_name)])
        desired = inputs.desired if inputs.desired is not None else parse_spec(inputs)
        if isinstance(desired, SpecError):
            raise SpecError(desired.problems)  # a new one: raising the kept one again would grow its traceback
        credentials = credential_secret_problems(desired, inputs.secrets)  # what the named Secrets are, not their names
        if credentials:
            raise SpecError(credentials)
    except SpecError as exc:
        return drivers.invalid_spec(d, exc)

    # Only what this query controls is ever changed or deleted (Kubernetes' IsControlledBy). A pod
    # another controller made, or anyone labelled like ours, is not touched and does not count; the
    # drivers of an earlier StreamingQuery of the same name go with it (garbage collection) and block
    # a new driver until gone: two drivers never write to one checkpoint.
    mine = [x for x in inputs.drivers if x.owner_uid == inputs.uid]
    predecessors = [x for x in inputs.drivers if x.owner_uid != inputs.uid and x.owner_kind == KIND]

    if inputs.progress is not None:  # what the current driver reported; kept while no newer comes
        d.status.progress = inputs.progress.for_status(old.attempt)

    # 2. the checkpoint gate; the location it picked reaches the pod, so it keeps the spec's rules too
    run_spec, checkpoint = checkpoint_gate(d, desired)
    run_spec = autoscale.sized(run_spec, old.autoscaling)  # continuous, realTime: the size is a new driver's
    derived = derived_location_problems(run_spec, checkpoint.location, policy=inputs.policy, facts=inputs.facts,
                                        namespace=inputs.namespace, why=f"checkpoint reset {checkpoint.resets}")  # fmt: skip
    if derived:
        return drivers.invalid_spec(d, SpecError(derived))
    drivers.terminating(d, mine, desired)  # a pod its lost node never lets go: said, then forced
    run_hash = spec_hash(run_spec, checkpoint.location)
    refused = d.problem(ProblemKind.REFUSED_CHANGE) is not None
    d.status.mode = run_spec.mode if not refused else (old.mode or run_spec.mode)  # refused: the old one runs

    # the current driver: the newest of ours that is not a waiting standby; older ones must go
    standbys = standby.candidates(mine, old.attempt)
    drivers_ = [x for x in mine if x not in standbys]
    attempt = max([old.attempt, *[x.attempt or 0 for x in drivers_]])
    current = next((x for x in drivers_ if (x.attempt or 0) == attempt and attempt > 0), None)
    for x in drivers_:
        if x is not current:
            d.delete(x, "superseded by a newer attempt")
    standby.pick(
        d, standbys, run_spec, run_hash, upgrading=not refused and upgrade.wanted(run_spec, current, run_hash, inputs.policy)
    )
    blockers = [x for x in (*mine, *predecessors) if x is not current and x is not d.standby]
    if current is not None and old.attempt < attempt:  # created, but the status write was lost
        d.status.attempt, d.status.driver, d.status.driver_kind = attempt, current.name, current.kind
        if current.spec_hash == run_hash:
            d.status.reconciled = Reconciled.of(run_spec)
            d.status.checkpoint = checkpoint

    # 3. terminal phases stay until the spec changes; but a query refused for a Secret it names (outside
    # the spec) starts once that Secret is a credentials Secret, with no edit of the spec
    secret_fixed = old.phase is Phase.INVALID and refused_for_a_secret(old.message)
    if old.phase is not None and old.phase.terminal and not secret_fixed:
        if old.observed_generation == inputs.generation:
            if current is not None and current.active:
                d.delete(current, f"the query is {old.phase}")
            standby.drop(d, f"the query is {old.phase}")
            return d.finish(Verb.NOTHING)
        standby.drop(d, "spec changed after the query ended")
        d.status.restarts, d.status.next_restart_time = 0, None
        d.event("Normal", Reason.SPEC_CHANGED, f"spec changed (generation {inputs.generation}): starting again")
        if current is not None:
            d.delete(current, "spec changed after the query ended")
            d.phase(Phase.RESTARTING, Reason.SPEC_CHANGED, f"spec changed: replacing driver {current.name}")
            d.wait(WAIT_FOR_DELETION_S)
            return d.finish(Verb.DELETE)
        d.status.phase = Phase.PENDING
    if secret_fixed:
        d.status.phase = Phase.PENDING

    # 4. suspend (pick dropped the standby already)
    if run_spec.suspend:
        return drivers.suspend(d, current)

    # a refused change: the previous spec's driver goes on; none is started (gate.held)
    if refused:
        if current is None:
            return held(d)

    # 5. no driver: create one, unless another still exists or a backoff runs
    if current is None:
        return drivers.no_driver(d, run_spec, checkpoint, attempt, blockers)
    # (refused: the spec that runs is the current driver's)
    if current.deleting and d.standby is not None and (refused or current.spec_hash == run_hash):
        gone = replace(current, phase=DriverPhase.FAILED, reason=Reason.DRIVER_LOST, message="the driver pod is being deleted")
        return restart.failed(d, gone, run_spec, reason=Reason.DRIVER_LOST)
    if current.deleting:
        d.wait(WAIT_FOR_DELETION_S)
        stuck = d.problem(ProblemKind.STUCK_TERMINATING)
        if stuck is not None:  # what the user must know first: nothing starts until that pod is gone
            d.phase(d.status.phase or Phase.PENDING, Reason.DRIVER_STUCK_TERMINATING, stuck.message)
        elif d.status.phase is None:
            d.phase(Phase.PENDING, Reason.WAITING_FOR_OLD_DRIVER, f"waiting for driver {current.name} to terminate")
        return d.finish(Verb.WAIT)

    # 6. a driver exists
    newest = max([attempt, *[x.attempt or 0 for x in mine]])
    if not refused and current.spec_hash != run_hash:  # warm when it can be, else a plain restart (upgrade)
        return upgrade.outdated(d, current, run_spec, checkpoint, run_hash, newest)
    taking_over = upgrade.taking_over(d, current)
    if taking_over is not None:
        return taking_over
    if current.phase is DriverPhase.RUNNING:
        standby.ensure(d, current, run_spec, checkpoint, newest)
        return drivers.running(d, current, run_spec)
    if current.phase is DriverPhase.UNKNOWN:  # its node stopped reporting: wait for news, change nothing
        d.status.message = f"the state of driver {current.name} is unknown (is its node reachable?)"
        return d.finish(Verb.WAIT)
    if current.active:  # on its way, or blocked by a cause outside the spec (a missing PVC...)
        return drivers.starting(d, current)
    return restart.ended(d, current, run_spec)


def parse_spec(inputs: Inputs) -> QuerySpec | SpecError:
    """The query's spec under the platform's policy, typed, or why it is refused (``Inputs.desired``)."""
    try:
        return validate_spec(inputs.raw_spec, policy=inputs.policy, facts=inputs.facts, namespace=inputs.namespace)
    except SpecError as exc:
        return exc


def creation_failed(
    decision: Decision, inputs: Inputs, error: str, retry_in: float = CREATE_RETRY_S, reason: Reason = Reason.DRIVER_CREATE_FAILED
) -> Decision:
    """The API refused to create the driver, or a name it needs is another object's (NAME_CONFLICT):
    keep the old status, say why, try again later."""
    d = Draft.start(inputs)
    d.status.mode = decision.status.mode
    if d.status.phase is None:
        d.status.phase = Phase.PENDING
    d.reason = reason
    d.status.message = f"cannot create the driver: {error}"
    previous = inputs.status.condition(ConditionType.DEGRADED)
    if previous is None or previous.message != d.status.message:
        d.event("Warning", reason, d.status.message)
    d.wait(retry_in)
    return d.finish(Verb.CREATE_FAILED)
