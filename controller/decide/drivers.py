"""Starting, replacing and stopping the query's driver (pure).

Never two drivers for one checkpoint: nothing is created while any other driver
of the query still exists, even one that is terminating. A driver that runs an
outdated spec (a spec change, a new restartNonce) is replaced at once. The next
driver gets the last committed offsets, for the case its checkpoint is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from contract.policy import is_policy_problem
from contract.problems import SpecError
from contract.resume import ResumeFrom
from contract.spec import QuerySpec, duration_ms
from controller.decide import autoscale, health, restart, standby
from controller.decide.conditions import ProblemKind
from controller.decide.draft import WAIT_FOR_DELETION_S, CreateDriver, Decision, Draft, Event, ResizeDriver, Verb
from controller.observe import Driver, LeaseState
from controller.phases import ConditionType, Phase, Reason
from controller.run import POD_KIND, Run, run_fields, spec_hash
from controller.status import CheckpointStatus, Reconciled, format_time, parse_time

STUCK_SLACK_S = 30.0  # past its grace period this long, a pod is stuck (not merely slow to report)
# A Lease's renewTime is written on the holder's clock and read here on the operator's: an expiry
# is trusted only this much later, for clocks that differ (NTP keeps them within a second or so).
LEASE_CLOCK_SKEW_S = 10.0


def terminating(d: Draft, drivers: Sequence[Driver], run_spec: QuerySpec) -> None:
    """Drivers still Terminating long after their grace period ended: a node or kubelet that is
    gone never confirms the deletion, and the next driver waits for it forever. Said at once
    (Degraded, one event); force-deleted after restartPolicy.forceDeleteAfter.

    A driver Kubernetes evicted from a lost node (``Driver.node_lost``) is said at once, grace
    period or not. If it is a standby query's (``Driver.fenced``) it is force-deleted as soon as
    the query's Lease shows it cannot write (``_fenced_off``): the Lease, not the pod's deletion,
    is what keeps two drivers from writing. Without a Lease only time says the node is down."""
    now = d.inputs.now
    force_after = timedelta(milliseconds=duration_ms(run_spec.restart_policy.force_delete_after))
    for x in drivers:
        if not x.deleting or x.deletion_due is None:
            continue
        lost = x.node_lost and x.kind == POD_KIND
        if lost and x.fenced:
            why, look_at = _fenced_off(x, d.inputs.lease, now)
            if why is not None:
                d.delete(x, f"evicted from its lost node and {why}", force=True)
                d.event("Warning", Reason.DRIVER_FORCE_DELETED,
                        f"driver {x.name} was evicted from its lost node (not ready or unreachable past "
                        f"restartPolicy.nodeLostAfter) and {why}: it cannot write any more; force-deleted")  # fmt: skip
                continue
            if look_at is not None:
                d.wait((look_at - now).total_seconds())
        if not lost and now < x.deletion_due + timedelta(seconds=STUCK_SLACK_S):
            continue
        late = (now - x.deletion_due).total_seconds()
        force_at = x.deletion_due + force_after
        if now >= force_at:
            d.delete(x, f"Terminating {late:.0f}s past its grace period", force=True)
            gone = "its node is lost" if lost else "its node is gone?"
            d.event("Warning", Reason.DRIVER_FORCE_DELETED,
                    f"driver {x.name} was Terminating {late:.0f}s past its grace period ({gone}): force-deleted "
                    f"after restartPolicy.forceDeleteAfter {run_spec.restart_policy.force_delete_after}")  # fmt: skip
            continue
        if lost:
            when = (f"once the query's Lease shows it stopped, at the latest at {format_time(force_at)}" if x.fenced
                    else f"at {format_time(force_at)} (restartPolicy.forceDeleteAfter; without standby no Lease "
                         "fences it, so only time says the node is down)")  # fmt: skip
            stuck = (f"driver {x.name} was evicted from its lost node (not ready or unreachable past "
                     f"restartPolicy.nodeLostAfter) and is still Terminating; the next driver waits for it; it is "
                     f"force-deleted {when}")  # fmt: skip
        else:
            stuck = (f"driver {x.name} has been Terminating {late:.0f}s past its grace period (is its node down?); the "
                     f"next driver waits for it; it is force-deleted at {format_time(force_at)} "
                     "(restartPolicy.forceDeleteAfter)")  # fmt: skip
        d.add_problem(ProblemKind.STUCK_TERMINATING, stuck)
        previous = d.old.condition(ConditionType.DEGRADED)
        if previous is None or previous.reason != Reason.DRIVER_STUCK_TERMINATING or previous.status != "True":
            d.event("Warning", Reason.DRIVER_STUCK_TERMINATING, stuck)
        d.wait((force_at - now).total_seconds())


def _fenced_off(x: Driver, lease: LeaseState | None, now: datetime) -> tuple[str | None, datetime | None]:
    """Why the fenced driver ``x`` certainly writes no more, from the query's Lease (app.driver.lease_holder: a
    holder that cannot renew stops its query within RENEW_DEADLINE_S + FENCE_GRACE_S, less than the
    Lease's duration; a driver that does not hold it runs nothing): another pod (the standby) or
    nobody holds it, or ``x``'s hold has expired. Else (None, when to look again); (None, None)
    when the Lease is unknown: then forceDeleteAfter decides."""
    if lease is None:
        return None, None
    if lease.holder != x.name:
        return f"its Lease {lease.name} is held by {lease.holder or 'nobody'}", None
    expires = lease.expires_at
    if expires is None:
        return None, None
    trusted = expires + timedelta(seconds=LEASE_CLOCK_SKEW_S)
    if now >= trusted:
        return f"its hold of Lease {lease.name} expired at {format_time(expires)}", None
    return None, trusted


def invalid_spec(d: Draft, exc: SpecError) -> Decision:
    message = "invalid spec: " + "; ".join(str(p) for p in exc.problems)
    old = d.old
    for x in d.inputs.drivers:
        if x.owner_uid == d.inputs.uid:  # never another's (decide: only what the query controls)
            d.delete(x, "the spec is invalid")
    reason = Reason.POLICY_VIOLATION if any(is_policy_problem(p) for p in exc.problems) else Reason.INVALID_SPEC
    if old.phase is not Phase.INVALID or old.message != message:
        d.event("Warning", reason, message)
    d.status.next_restart_time = None
    d.phase(Phase.INVALID, reason, message)
    return d.finish(Verb.INVALID)


def suspend(d: Draft, current: Driver | None) -> Decision:
    d.status.next_restart_time = None
    d.status.driver_start_time = None
    d.status.executors = None  # none run: the /scale subresource's status.replicas
    if current is not None and not current.deleting:
        d.delete(current, "suspended")
    waiting = current is not None
    message = (
        f"suspending: stopping driver {current.name}"
        if current is not None
        else "suspended: no driver runs; the checkpoint is kept"
    )
    if d.old.phase is not Phase.SUSPENDED:
        d.event("Normal", Reason.SUSPENDED, "suspend: true, stopping the query (the checkpoint is kept)")
    d.phase(Phase.SUSPENDED, Reason.SUSPENDED, message)
    if waiting:
        d.wait(WAIT_FOR_DELETION_S)
    return d.finish(Verb.SUSPEND)


def no_driver(d: Draft, run_spec: QuerySpec, checkpoint: CheckpointStatus, attempt: int,
              blockers: list[Driver]) -> Decision:  # fmt: skip
    """None of ours exists: create the next, unless another still exists or the restart policy says wait."""
    if blockers:
        names_ = ", ".join(x.name for x in blockers)
        if d.status.phase is None:
            d.status.phase = Phase.PENDING
        stuck = d.problem(ProblemKind.STUCK_TERMINATING)
        d.reason = Reason.DRIVER_STUCK_TERMINATING if stuck else Reason.WAITING_FOR_OLD_DRIVER
        d.status.message = stuck.message if stuck else f"waiting for {names_} to be deleted before starting a driver"
        d.wait(WAIT_FOR_DELETION_S)
        return d.finish(Verb.WAIT)
    held_back = restart.lost_or_waiting(d, run_spec)
    if held_back is not None:
        return held_back
    return _create(d, run_spec, checkpoint, attempt + 1)


def _create(d: Draft, run_spec: QuerySpec, checkpoint: CheckpointStatus, attempt: int) -> Decision:
    old, inputs = d.old, d.inputs
    resume = ResumeFrom.from_progress(d.status.progress, checkpoint.location)
    run = Run(query=inputs.name, namespace=inputs.namespace, attempt=attempt, spec=run_spec,
              checkpoint_location=checkpoint.location, resume=resume)  # fmt: skip
    kind = run.driver_kind
    d.actions.append(CreateDriver(run))
    st = d.status
    st.attempt, st.driver, st.driver_kind = attempt, run.driver_name, kind
    st.driver_start_time, st.next_restart_time = None, None
    st.reconciled = Reconciled.of(run_spec)
    if old.checkpoint is not None and checkpoint.resets > old.checkpoint.resets:
        d.event("Normal", Reason.NEW_CHECKPOINT, f"the source changed: starting on a fresh checkpoint at {checkpoint.location}")
    st.checkpoint = checkpoint
    if old.phase is Phase.SUSPENDED:
        d.event("Normal", Reason.RESUMED, f"suspend: false, starting driver {run.driver_name}")
    what = "restarting" if old.phase is Phase.RESTARTING else "starting"
    d.event(
        "Normal",
        Reason.CREATED,
        f"{what} the query: created {kind.lower() if kind == POD_KIND else kind} {run.driver_name} (attempt {attempt})",
    )
    d.phase(Phase.STARTING, Reason.CREATED, f"driver {run.driver_name} created (attempt {attempt})")
    return d.finish(Verb.CREATE)


def replace_outdated(d: Draft, current: Driver, last: QuerySpec | None, run_spec: QuerySpec, location: str,
                     cold: str | None = None) -> Decision:  # fmt: skip
    """A plain restart: the driver goes, the next starts once it is gone. ``cold``: why a warm
    upgrade (controller.decide.upgrade) was not possible, said in the event and the message."""
    nonce_only = only_the_nonce_changed(current, last, run_spec, location)
    reason = Reason.RESTART_REQUESTED if nonce_only else Reason.SPEC_CHANGED
    why = "restartNonce changed" if nonce_only else "the spec changed"
    note = f" (not a warm upgrade: {cold})" if cold else ""
    d.delete(current, why)
    d.status.next_restart_time = None
    d.event("Normal", reason, f"{why}: stopping driver {current.name}; the query restarts on its checkpoint{note}")
    d.phase(Phase.RESTARTING, reason, f"{why}: replacing driver {current.name}{note}")
    d.wait(WAIT_FOR_DELETION_S)
    return d.finish(Verb.DELETE)


def only_the_nonce_changed(current: Driver, last: QuerySpec | None, run_spec: QuerySpec, location: str) -> bool:
    """Whether the driver differs from the spec in restartNonce alone. The driver's own record
    (its nonce and hash) answers even when the status write after its creation was lost; the
    last reconciled spec answers for drivers made before the nonce was recorded."""
    if current.restart_nonce is not None:
        with_its_nonce = run_spec.model_copy(update={"restart_nonce": current.restart_nonce or None})
        return current.restart_nonce != (run_spec.restart_nonce or "") and (
            spec_hash(with_its_nonce, location) == current.spec_hash
        )
    return (
        last is not None
        and last.restart_nonce != run_spec.restart_nonce
        and run_fields(last.model_copy(update={"restart_nonce": None}))
        == run_fields(run_spec.model_copy(update={"restart_nonce": None}))
    )


# Kubernetes reasons that name one cause: the kubelet alternates them between pulls, and a
# condition that flapped between them would post an event each time.
_SAME_CAUSE = {
    "ErrImagePull": Reason.IMAGE_PULL_FAILED,
    "ImagePullBackOff": Reason.IMAGE_PULL_FAILED,
    "ErrImageNeverPull": Reason.IMAGE_PULL_FAILED,
    "RegistryUnavailable": Reason.IMAGE_PULL_FAILED,
}


def blocked_reason(waiting_reason: str) -> str:
    """The condition reason of a driver that cannot start: Kubernetes' own reason
    (Unschedulable, InvalidImageName, CreateContainerConfigError...), one per cause."""
    return _SAME_CAUSE.get(waiting_reason, waiting_reason)


def starting(d: Draft, current: Driver) -> Decision:
    """A driver that exists and does not run yet: on its way, or blocked by a cause outside
    the spec (a missing PVC or Secret, an image it cannot pull, too little room on the
    nodes). Blocked is said at once, in the message, the reason and one Warning event, and
    stays Starting: the pod starts by itself once the cause is fixed, and nothing here
    counts as a restart."""
    old = d.old
    previous = old.condition(ConditionType.DEGRADED)
    was_blocked = (
        old.phase is Phase.STARTING
        and previous is not None
        and previous.status == "True"
        and (previous.reason != Reason.INCOMPATIBLE_CHANGE)
    )
    if current.waiting_reason is None:
        if old.phase is not Phase.STARTING or was_blocked:
            d.phase(Phase.STARTING, Reason.DRIVER_STARTING, f"driver {current.name} is starting")
        return d.finish(Verb.WAIT)
    reason = blocked_reason(current.waiting_reason)
    message = f"driver {current.name} cannot start (it starts by itself once this is fixed): {current.waiting}"
    same_cause = was_blocked and previous is not None and previous.reason == reason
    if same_cause and current.waiting_reason.endswith("BackOff") and old.message:
        message = old.message  # a back-off says less than the failure before it did
    if not same_cause:
        d.event("Warning", reason, message)
    d.phase(Phase.STARTING, reason, message)
    d.add_problem(ProblemKind.CANNOT_START, message, reason)
    return d.finish(Verb.WAIT)


def running(d: Draft, current: Driver, run_spec: QuerySpec) -> Decision:
    old, now = d.old, d.inputs.now
    started = current.started_at or parse_time(old.driver_start_time) or now
    d.status.driver_start_time = format_time(started)
    if old.phase is not Phase.RUNNING:
        d.event("Normal", Reason.DRIVER_RUNNING, f"driver {current.name} is running")
    d.phase(Phase.RUNNING, Reason.DRIVER_RUNNING, f"driver {current.name} is running")
    health.reported(d, current)
    restart.reset_when_stable(d, started, run_spec)
    standby.grow(d, current, run_spec)
    autoscale.recommend(d, current, run_spec)
    return d.finish(Verb.RUNNING)


def resized(decision: Decision, action: ResizeDriver) -> Decision:
    """The API server took the resize: said in an event (the kubelet actuates it within a second or two)."""
    message = (
        f"driver {action.name} waited on the Lease with {action.waited_on} of CPU; "
        f"it grows in place to {action.cpu} as it takes over"
    )
    event = Event("Normal", Reason.RESIZED, message)
    return replace(decision, events=(*decision.events, event))


def resize_refused(decision: Decision, action: ResizeDriver, why: str) -> Decision:
    """The API server refused the resize (no in-place resize before Kubernetes 1.33, or turned off):
    said once, in status and an event; the driver runs on."""
    status = decision.status.model_copy(deep=True)
    status.resize_refused = f"{action.name}: {why}"
    event = Event("Warning", Reason.RESIZE_REFUSED,
                  f"driver {action.name} stays on its waiting CPU request {action.waited_on}, not {action.cpu}: "
                  f"in-place resize refused ({why}); the next driver starts with {action.cpu}")  # fmt: skip
    return replace(decision, status=status, events=(*decision.events, event))
