"""The standby driver of a query with ``spec.runtime.standby`` (pure).

A standby is the next attempt's driver pod, created once the current one runs: its
JVM and SparkSession start, then it waits for the query's Lease (app.driver.lease_holder). The
Lease, not this module, keeps the two from running the query at once; these
decisions only keep the pods and the status in step:

    pick     which pod is the standby (the newest live one of the spec that runs); others go
    ensure   the current driver runs its query (it printed progress, so it holds the Lease) and no
             standby exists: create one (attempt + 1)
    promote  the current driver failed or vanished: the standby becomes the current driver
             (counted as a restart, no backoff); its Lease is freed at once when the old
             driver's container is known to have ended, else it expires by itself
    drop     suspend, a terminal phase, a spec change, standby turned off: the standby goes
"""

from __future__ import annotations

from kubernetes.utils import parse_quantity

from contract.lease import lease_name
from contract.spec import QuerySpec
from controller.decide.draft import CreateDriver, Decision, Draft, ReleaseLease, ResizeDriver, Verb
from controller.observe import Driver
from controller.phases import Phase, Reason
from controller.run import Run
from controller.status import CheckpointStatus


def candidates(mine: list[Driver], attempt: int) -> list[Driver]:
    """Standby pods not promoted yet: created as standbys for an attempt after the current one."""
    return [x for x in mine if x.standby and (x.attempt or 0) > attempt]


def pick(d: Draft, standbys: list[Driver], run_spec: QuerySpec, run_hash: str, upgrading: bool = False) -> None:
    """Keep the newest live standby of the spec that runs (on ``d.standby``); delete the rest.
    ``upgrading``: a warm upgrade's new driver (a standby of the new spec) is kept too, standby
    query or not (controller.decide.upgrade); status.standby names only a standby query's."""
    standing_by = bool(run_spec.runtime.standby) and not run_spec.suspend
    wanted = standing_by or upgrading
    live = [x for x in standbys if x.active and not x.deleting and x.spec_hash == run_hash]
    keep = live[-1] if wanted and live else None
    for x in standbys:
        if x is not keep:
            d.delete(x, _why_not(x, wanted, run_hash))
    d.standby = keep
    d.status.standby = keep.name if keep is not None and standing_by else None


def _why_not(x: Driver, wanted: bool, run_hash: str) -> str:
    if not wanted:
        return "no standby wanted (spec.runtime.standby off, or suspended)"
    if not x.active:
        return "the standby ended"
    if x.spec_hash != run_hash:
        return "the standby runs an older spec"
    return "one standby is enough"


def drop(d: Draft, why: str) -> None:
    if d.standby is not None:
        d.delete(d.standby, why)
        d.standby = None
        d.status.standby = None


def ensure(d: Draft, current: Driver, run_spec: QuerySpec, checkpoint: CheckpointStatus, newest_attempt: int) -> None:
    """A running driver of a standby query gets a standby, once it runs the query: it prints progress
    only after it holds the Lease, so the standby cannot win the Lease from the driver status names."""
    if not run_spec.runtime.standby or d.standby is not None or current.deleting:
        return
    if d.status.progress is None or not d.status.progress.reported_by(current.attempt):
        return
    run = Run(query=d.inputs.name, namespace=d.inputs.namespace, attempt=newest_attempt + 1, spec=run_spec,
              checkpoint_location=checkpoint.location, standby=True)  # fmt: skip
    d.actions.append(CreateDriver(run))
    d.status.standby = run.driver_name
    d.event("Normal", Reason.STANDBY_CREATED, f"created standby driver {run.driver_name}: it takes over if {current.name} fails")


def promote(d: Draft, gone: Driver, reason: str, text: str, restarts: int, limit: str, run_spec: QuerySpec) -> Decision:
    """The standby takes over from ``gone``; the restart is counted by the caller. It grows to its CPU
    request now, as it takes the Lease, not a pass later: its start runs on a full share."""
    standby = d.standby
    assert standby is not None
    st = d.status
    st.attempt, st.driver, st.driver_kind = standby.attempt or st.attempt, standby.name, standby.kind
    st.driver_start_time, st.next_restart_time, st.standby = None, None, None
    d.standby = None
    known_dead = gone.phase.ended and gone.finished_at is not None  # the kubelet saw its container end
    if known_dead:
        d.actions.append(ReleaseLease(lease_name(d.inputs.name), gone.name))
    if not gone.deleting and gone.name != "?":
        d.delete(gone, f"replaced by standby {standby.name}")
    grow(d, standby, run_spec)
    how = "at once (its container ended)" if known_dead else "when the old driver's lease expires"
    d.event("Warning", reason, f"driver {gone.name} {'disappeared' if reason == Reason.DRIVER_LOST else 'ended'} ({text}); "
                               f"standby {standby.name} takes over {how} (restart {restarts}{limit})")  # fmt: skip
    d.phase(Phase.STARTING, Reason.STANDBY_PROMOTED, f"standby {standby.name} takes over from {gone.name}: {text}")
    return d.finish(Verb.PROMOTE)


def grow(d: Draft, current: Driver, run_spec: QuerySpec) -> bool:
    """A driver that waited on the Lease with a small CPU request (a promoted standby, a warm upgrade's
    new driver) runs the query now, or is about to: it grows in place to the request the spec gives it.
    True once it runs on that request, or cannot for now: the kubelet deferred it (the room of the driver
    it replaces comes free as that one goes; the kubelet retries), or the resize was refused. Meanwhile
    the driver runs on what it has (no CPU limit: only a smaller share under contention)."""
    want = run_spec.runtime.driver.cpu_request
    if current.kind != "Pod" or current.cpu_request is None or current.deleting:
        return True
    refused = d.status.resize_refused
    if refused and refused.startswith(f"{current.name}: "):
        why = refused.split(": ", 1)[1]
        d.status.message = f"{d.status.message or ''}; on its waiting CPU request {current.cpu_request}, not resized ({why})"
        return True
    d.status.resize_refused = None
    if parse_quantity(current.cpu_request) < parse_quantity(want):
        d.actions.append(ResizeDriver(current.name, want, current.cpu_request))
        return False
    if current.resize is not None:  # asked for; the kubelet has not granted it
        d.status.message = f"{d.status.message or ''}; its CPU resize to {want} waits ({current.resize})"
        return True
    # granted and being actuated; None: a kubelet that does not say (before 1.33)
    return current.cpu_allocated is None or parse_quantity(current.cpu_allocated) >= parse_quantity(want)
