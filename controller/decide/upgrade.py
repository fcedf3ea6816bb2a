"""Warm upgrades: a spec change reaches a running query without a cold start (pure).

A running driver whose spec is outdated is not deleted first. A driver of the new spec
starts beside it as a standby (the next attempt, label role=standby): its JVM,
SparkSession and plan warm up (app.driver.warmup) while it waits on the query's Lease, which the
running driver holds. Once its pod is Ready (app.driver.ready: warm), the running driver is
deleted: on SIGTERM it stops its query, releases the Lease as soon as no task runs, and
the new one takes the Lease and resumes from the same checkpoint. The Lease, not these
decisions, keeps the two from writing at once (contract.lease).

    outdated     the entry point: warm, or a plain restart (drivers.replace_outdated) and why
    warming      the new driver exists: wait for Ready, give up, or hand over
    taking_over  the new driver is the current one: Upgrading until it reports progress
    create_refused  the API refused the new driver (read by the pass's second decision: Inputs.acted)

What can go wrong, and what follows:

    the running driver holds no Lease     a plain restart (it was started by an older operator,
    (not fenced), the query runs            or with strategy restart); only a standby query's caps
    executors without a standby, or its     count a second driver's executors; an emptyDir checkpoint
    checkpoint is the pod's own             is one pod's
    no room: the new pod Unschedulable,   a plain restart, said in an event and the message
    or its creation refused by a quota
    the new driver ends, cannot start     the upgrade is aborted: the running driver goes on;
    (image, config), or is not Ready        Degraded and Stalled say why (UpgradeFailed) until the
    within upgrade.readyWithin              spec changes again
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from contract.lease import lease_name
from contract.policy import Policy, warm_upgrades
from contract.spec import Backend, QuerySpec, UpgradeStrategy, duration_ms
from controller.decide import drivers, standby
from controller.decide.acted import CreateRefused, Refusal
from controller.decide.conditions import ProblemKind
from controller.decide.draft import CreateDriver, Decision, Draft, Inputs, ReleaseLease, Verb
from controller.observe import Driver, DriverPhase
from controller.phases import Phase, Reason
from controller.run import Run, spec_hash
from controller.status import CheckpointStatus, Reconciled, UpgradeStatus, format_time, parse_time

WARMING: Final = "Warming"
HANDING_OVER: Final = "HandingOver"
FAILED: Final = "Failed"
GROW_LOOK_S = 1.0  # a resize the kubelet grants is actuated within a second or two
LOOK_AGAIN_S = 2.0  # pod events wake the reconciler sooner (Ready, ended); this is the safety net
NO_ROOM = ("Unschedulable",)  # the scheduler's verdict on the new pod: no node has room for a second driver


def wanted(run_spec: QuerySpec, current: Driver | None, run_hash: str, policy: Policy | None) -> bool:
    """Whether a driver of ``run_hash`` beside ``current`` is (or may become) a warm upgrade's:
    standby.pick keeps it then, even for a query without spec.runtime.standby."""
    return (current is not None and current.spec_hash != run_hash and warm_upgrades(run_spec, policy)
            and not run_spec.suspend)  # fmt: skip


def outdated(d: Draft, current: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus, run_hash: str,
             newest_attempt: int) -> Decision:  # fmt: skip
    """``current`` runs another spec than ``run_spec``: upgrade it warm when it can be, else restart."""
    cold = _why_cold(d, current, run_spec, checkpoint)
    record = d.old.upgrade if d.old.upgrade is not None and d.old.upgrade.spec_hash == run_hash else None
    if cold is None and (current.phase is not DriverPhase.RUNNING or current.deleting):
        # not serving (it ended, or is going): a new driver already there takes over at once, else a restart
        new = _the_new_driver(d, record, run_hash)
        if new is not None and new.active and not new.deleting:
            return _hand_over(d, current, new, run_spec, checkpoint)
        cold = ""
    if cold is not None:
        return _restart(d, current, run_spec, checkpoint, cold)
    if record is not None and record.state == FAILED:
        return _failed_stays(d, current, run_spec, record)
    if record is not None and record.no_room:
        return _no_room(d, current, run_spec, checkpoint, record.message or "the new driver's creation was refused")
    new = _the_new_driver(d, record, run_hash)
    if new is None:
        return _start(d, current, run_spec, checkpoint, newest_attempt)
    return warming(d, current, new, run_spec, checkpoint)


def _why_cold(d: Draft, current: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus) -> str | None:
    """Why this change is a plain restart, None when it can be warm."""
    if run_spec.upgrade_policy.strategy is UpgradeStrategy.RESTART:
        return ""  # asked for: nothing to explain
    if run_spec.runtime.backend is not Backend.POD:
        return ""  # spark-operator starts its driver: no Lease fences it
    if not run_spec.checkpoint.shared:
        return "the checkpoint is the driver pod's own (an emptyDir): a second driver would not see it"
    if not run_spec.warm_upgrades:
        return ("the query runs executors and has no standby: the platform's caps count a second driver's "
                "executors only for a standby query (runtime.standby)")  # fmt: skip
    if not warm_upgrades(run_spec, d.inputs.policy):
        return "the platform turned second drivers and their Lease off (policy.allowStandby: false)"
    if drivers.only_the_nonce_changed(current, None, run_spec, checkpoint.location):
        return ""  # restartNonce asks for a restart: the driver may be the trouble, a graceful hand-over may not come
    if (
        _blue(d, run_spec, checkpoint) is None
        and d.old.checkpoint is not None
        and d.old.checkpoint.location != checkpoint.location
    ):
        return "the new spec runs on another checkpoint"
    if current.kind != "Pod" or not current.fenced:
        return (f"driver {current.name} holds no Lease (started before warm upgrades, or with upgrade.strategy "
                "restart), so nothing would keep two drivers from writing")  # fmt: skip
    return None


def _blue(d: Draft, run_spec: QuerySpec, checkpoint: CheckpointStatus) -> str | None:
    """Blue/green: the running driver's checkpoint, when the new spec runs on a fresh one made for it."""
    old = d.old.checkpoint
    if run_spec.upgrade_policy.strategy is not UpgradeStrategy.BLUE_GREEN or old is None:
        return None
    return old.location if checkpoint.resets > old.resets and checkpoint.location != old.location else None


def _the_new_driver(d: Draft, record: UpgradeStatus | None, run_hash: str) -> Driver | None:
    """The upgrade's driver: the one status names, else a live standby of the new spec (its creation's
    status write was lost)."""
    if record is not None and record.driver:
        named = next((x for x in d.inputs.drivers if x.name == record.driver and x.owner_uid == d.inputs.uid), None)
        if named is not None and named.spec_hash == run_hash:
            return named
    return d.standby


def _start(d: Draft, current: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus, newest_attempt: int) -> Decision:
    inputs = d.inputs
    # past a failed upgrade's number too: its pod may still be terminating under that name
    tried = (d.old.upgrade.attempt or 0) if d.old.upgrade is not None else 0
    blue = _blue(d, run_spec, checkpoint)
    run = Run(query=inputs.name, namespace=inputs.namespace, attempt=max(newest_attempt, tried) + 1, spec=run_spec,
              checkpoint_location=checkpoint.location, standby=True, handover_from=blue)  # fmt: skip
    d.actions.append(CreateDriver(run))
    d.status.upgrade = UpgradeStatus(spec_hash=spec_hash(run_spec, checkpoint.location), driver=run.driver_name, attempt=run.attempt,
                                     replaces=current.name, state=WARMING, started_at=format_time(inputs.now),
                                     blue_green=True if blue else None)  # fmt: skip
    d.status.next_restart_time = None
    if blue:
        text = (f"the spec changed in a way checkpoint {blue} cannot take: blue/green, starting driver {run.driver_name} "
                f"(green) beside {current.name} (blue); once it is warm it takes over on the fresh checkpoint "
                f"{checkpoint.location}, starting at the offsets blue committed last; {blue} is kept")  # fmt: skip
    else:
        text = (f"the spec changed: starting driver {run.driver_name} beside {current.name}; it takes over from the "
                "checkpoint once it is warm")  # fmt: skip
    d.event("Normal", Reason.UPGRADE_STARTED, text)
    d.phase(Phase.UPGRADING, Reason.UPGRADE_STARTED, text)
    d.wait(LOOK_AGAIN_S)
    return d.finish(Verb.UPGRADE)


def warming(d: Draft, current: Driver, new: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus) -> Decision:
    record = d.status.upgrade or UpgradeStatus(spec_hash=new.spec_hash or "", driver=new.name, attempt=new.attempt,
                                               replaces=current.name, started_at=format_time(new.created_at or d.inputs.now))  # fmt: skip
    d.status.upgrade = record
    if new.phase.ended:
        what = f"exit code {new.exit_code}" if new.exit_code is not None else (new.reason or "ended")
        return _abort(d, current, new, record, run_spec, f"driver {new.name} of the new spec ended ({what}"
                                                 f"{': ' + new.message if new.message else ''})")  # fmt: skip
    if new.waiting_reason in NO_ROOM:
        return _no_room(d, current, run_spec, checkpoint, f"driver {new.name} cannot be scheduled: {new.waiting}", new)
    if new.waiting_reason is not None:
        return _abort(d, current, new, record, run_spec, f"driver {new.name} of the new spec cannot start: {new.waiting}")
    if new.ready and new.phase is DriverPhase.RUNNING:
        # Warm: it grows to its CPU request first, so it takes over on a full share, not its waiting one
        # (on the 2-core e2e node, handing over at 50m made the gaps 3x longer). When the node has no room
        # for both (Deferred) it hands over at once: the old driver's exit frees that room.
        if not standby.grow(d, new, run_spec):
            d.phase(Phase.UPGRADING, Reason.UPGRADE_STARTED,
                    f"driver {new.name} of the new spec is warm: growing to its CPU request before it takes over")  # fmt: skip
            d.wait(GROW_LOOK_S)
            return d.finish(Verb.GROW)
        return _hand_over(d, current, new, run_spec, checkpoint)
    started = parse_time(record.started_at) or new.created_at or d.inputs.now
    bound = timedelta(milliseconds=duration_ms(run_spec.upgrade_policy.ready_within))
    if d.inputs.now - started >= bound:
        return _abort(d, current, new, record, run_spec, f"driver {new.name} of the new spec was not Ready (warm) within "
                                                 f"upgrade.readyWithin ({run_spec.upgrade_policy.ready_within})")  # fmt: skip
    d.phase(Phase.UPGRADING, Reason.UPGRADE_STARTED,
            f"driver {new.name} of the new spec is warming up beside {current.name}, which runs the query meanwhile")  # fmt: skip
    d.wait(min(LOOK_AGAIN_S, (started + bound - d.inputs.now).total_seconds()))
    return d.finish(Verb.WAIT)


def _hand_over(d: Draft, current: Driver, new: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus) -> Decision:
    """The new driver is warm: stop the running one (SIGTERM: it stops at a commit and releases the
    Lease) and make the new one the current driver."""
    st = d.status
    if st.upgrade is None:
        st.upgrade = UpgradeStatus(spec_hash=new.spec_hash or "", driver=new.name, attempt=new.attempt,
                                   replaces=current.name, started_at=format_time(d.inputs.now))  # fmt: skip
    d.delete(current, f"warm upgrade: {new.name} takes over")
    standby.grow(d, new, run_spec)  # deferred before: asked again (the room of the one it replaces comes free)
    if current.phase.ended and current.finished_at is not None:  # not serving and surely gone: free its Lease now
        d.actions.append(ReleaseLease(lease_name(d.inputs.name), current.name))
    st.attempt, st.driver, st.driver_kind = new.attempt or st.attempt, new.name, new.kind
    st.driver_start_time, st.next_restart_time = None, None
    st.reconciled, st.checkpoint = Reconciled.of(run_spec), checkpoint
    if d.standby is not None and d.standby.name == new.name:
        d.standby = None
    st.standby = None
    st.upgrade = st.upgrade.model_copy(update={"state": HANDING_OVER, "driver": new.name, "attempt": new.attempt})
    text = f"driver {new.name} of the new spec is warm: stopping {current.name} at a commit; {new.name} takes over from the checkpoint"
    d.event("Normal", Reason.UPGRADE_HANDOVER, text)
    d.phase(Phase.UPGRADING, Reason.UPGRADE_HANDOVER, text)
    d.wait(LOOK_AGAIN_S)
    return d.finish(Verb.HANDOVER)


def taking_over(d: Draft, current: Driver) -> Decision | None:
    """After the hand-over: Upgrading until the new driver reports progress (it prints it only while it
    holds the Lease, so then it serves); None when no upgrade is under way (or it just completed)."""
    record = d.old.upgrade
    if record is not None and record.state == FAILED:
        d.status.upgrade = None  # the spec runs after all (changed back): the failure is history
        return None
    if record is None or record.state != HANDING_OVER or record.driver != current.name:
        return None
    if d.status.progress is not None and d.status.progress.attempt == current.attempt:
        d.status.upgrade = None
        took = ""
        started = parse_time(record.started_at)
        if started is not None:
            took = f" ({(d.inputs.now - started).total_seconds():.0f}s after the change was seen)"
        d.event("Normal", Reason.UPGRADE_COMPLETED, f"driver {current.name} runs the query on the new spec{took}")
        return None
    if current.phase.ended:
        d.status.upgrade = None  # a failure of the new driver: the restart policy takes it from here
        return None
    old = record.replaces or "the old driver"
    d.phase(Phase.UPGRADING, Reason.UPGRADE_HANDOVER,
            f"driver {current.name} takes over once {old} has stopped and released the Lease")  # fmt: skip
    d.wait(LOOK_AGAIN_S / 2)
    return d.finish(Verb.WAIT)


def _abort(d: Draft, current: Driver, new: Driver, record: UpgradeStatus, run_spec: QuerySpec, why: str) -> Decision:
    """The new driver cannot come up: it goes (its pod is deleted), the running driver goes on."""
    d.delete(new, "the warm upgrade failed")
    if d.standby is not None and d.standby.name == new.name:
        d.standby, d.status.standby = None, None
    message = f"{why}; the upgrade is aborted and {current.name} keeps running the previous spec (change the spec to try again)"
    d.status.upgrade = record.model_copy(update={"state": FAILED, "message": message})
    d.event("Warning", Reason.UPGRADE_FAILED, message)
    return _failed_stays(d, current, run_spec, d.status.upgrade)


def _failed_stays(d: Draft, current: Driver, run_spec: QuerySpec, record: UpgradeStatus) -> Decision:
    d.add_problem(ProblemKind.UPGRADE_FAILED, record.message or "the warm upgrade failed")
    return drivers.running(d, current, run_spec)


def _no_room(d: Draft, current: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus, why: str,
             new: Driver | None = None) -> Decision:  # fmt: skip
    if new is not None:
        d.delete(new, "no room for a second driver")
    if d.standby is not None:
        d.delete(d.standby, "no room for a second driver")
        d.standby, d.status.standby = None, None
    d.event("Warning", Reason.NO_ROOM_FOR_UPGRADE, f"{why}: no room for a second driver, so a plain restart instead")
    return _restart(d, current, run_spec, checkpoint, f"no room for a warm upgrade: {why}")


def _restart(d: Draft, current: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus, why: str) -> Decision:
    d.status.upgrade = None
    return drivers.replace_outdated(d, current, None, run_spec, checkpoint.location, cold=why or None)


def create_refused(inputs: Inputs, decision: Decision, refused: CreateRefused) -> Decision | None:
    """The API refused to create a warm upgrade's driver (``decision`` created it): a quota's refusal
    is 'no room' (the next pass restarts plainly); any other refusal aborts the upgrade (the running
    driver goes on). None when the refused creation was not an upgrade's."""
    record = decision.status.upgrade
    if decision.verb is not Verb.UPGRADE or record is None:
        return None
    error = refused.message
    d = Draft.start(inputs)
    d.status = decision.status.model_copy(deep=True)
    if refused.reason is Refusal.QUOTA:
        d.status.upgrade = record.model_copy(
            update={"no_room": True, "message": f"creating {record.driver} was refused: {error}"}
        )
        d.phase(Phase.UPGRADING, Reason.NO_ROOM_FOR_UPGRADE, f"no room for driver {record.driver}: {error}; restarting instead")
        d.wait(0.0)
        return d.finish(Verb.NO_ROOM)
    message = (f"cannot create driver {record.driver} of the new spec: {error}; the upgrade is aborted and "
               f"{record.replaces} keeps running the previous spec (change the spec to try again)")  # fmt: skip
    d.status.upgrade = record.model_copy(update={"state": FAILED, "message": message})
    d.status.phase, d.status.message = inputs.status.phase, inputs.status.message
    d.reason = None
    d.event("Warning", Reason.UPGRADE_FAILED, message)
    d.add_problem(ProblemKind.UPGRADE_FAILED, message)
    return d.finish(Verb.UPGRADE_FAILED)
