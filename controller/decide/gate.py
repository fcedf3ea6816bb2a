"""The checkpoint gate: which spec runs, on which checkpoint (pure).

A change the checkpoint cannot take (contract.compat: the source's kind,
topics or pattern; state the new spec would not keep, as the job reported the
checkpoint holds) is refused, unless the checkpoint location changed too, or
``onIncompatibleChange: newCheckpoint`` asks for a fresh checkpoint next to the
old one, or ``upgrade.strategy: blueGreen`` does (then the new driver starts it at
the offsets the old one committed last: controller.decide.upgrade, app.driver.bluegreen).

What the gate compares with is ``status.reconciled``: a hash and the few fields
of the last started spec a checkpoint depends on, not the spec itself (status
stays small and holds no copy of sparkConf). So a refused change keeps the
previous spec's driver running, but the operator cannot start that spec again:
when its driver ends (or the query is suspended and resumed) nothing runs until
the spec is one the checkpoint can take. The job refuses an incompatible
checkpoint on its own too (app/driver/run.py), so no path writes a checkpoint the
spec cannot read.
"""

from __future__ import annotations

from contract.compat import Holds, checkpoint_differences, fresh_checkpoint_location, refusal, spec_differences
from contract.policy import warm_upgrades
from contract.progress import ProgressRecord
from contract.spec import IncompatibleChange, QuerySpec, UpgradeStrategy
from controller.decide.conditions import ProblemKind
from controller.decide.draft import Decision, Draft, Verb
from controller.phases import ConditionType, Phase, Reason
from controller.run import fields_hash
from controller.status import CheckpointStatus, Reconciled


def checkpoint_gate(d: Draft, desired: QuerySpec) -> tuple[QuerySpec, CheckpointStatus]:
    """(the spec to run, the checkpoint to run it on). A refusal is a REFUSED_CHANGE problem
    (and said in an event when it is new): the spec returned is then the desired one,
    which is not started (``held``); only its ``suspend`` and restart policy apply."""
    old = d.old
    last = old.reconciled
    incompatible = _incompatibility(last, desired, old.checkpoint, d.status.progress)
    blue_green = desired.upgrade_policy.strategy is UpgradeStrategy.BLUE_GREEN and warm_upgrades(desired, d.inputs.policy)
    if incompatible and desired.checkpoint.on_incompatible_change is IncompatibleChange.REFUSE and not blue_green:
        # (an incompatibility is found only on the checkpoint the last spec ran on: desired's location is that one)
        message = refusal(incompatible, desired.checkpoint.location) + " The previous spec keeps running."
        d.add_problem(ProblemKind.REFUSED_CHANGE, message)
        previous = old.condition(ConditionType.DEGRADED)
        if previous is None or previous.reason != Reason.INCOMPATIBLE_CHANGE or previous.message != message:
            d.event("Warning", Reason.INCOMPATIBLE_CHANGE, message)
        incompatible = None
    checkpoint = _effective_checkpoint(desired, last, old.checkpoint, fresh=incompatible is not None)
    return desired, checkpoint


def held(d: Draft) -> Decision:
    """A refused change and no driver of the previous spec: nothing to start (see above)."""
    d.status.driver_start_time, d.status.next_restart_time = None, None
    d.phase(Phase.PENDING, Reason.INCOMPATIBLE_CHANGE,
            "no driver runs: the previous spec's driver is gone and the new spec is refused (see Degraded)")  # fmt: skip
    return d.finish(Verb.REFUSED)


def _incompatibility(last: Reconciled | None, desired: QuerySpec, current: CheckpointStatus | None,
                     progress: ProgressRecord | None) -> str | None:  # fmt: skip
    """The first reason the desired spec cannot run on the current checkpoint: from the spec it
    was written with, else from what the job reported the checkpoint holds."""
    if last is None or desired.checkpoint.location != last.checkpoint_location:
        return None
    found = spec_differences(last.source_identity, desired)
    if not found and current is not None and last.spec_hash != fields_hash(desired) and progress is not None:
        holds = Holds.from_wire(progress.checkpoint_holds)
        if holds is not None and progress.checkpoint == current.location:
            found = checkpoint_differences(holds, desired)
    return found[0] if found else None


def _effective_checkpoint(
    desired: QuerySpec, last: Reconciled | None, current: CheckpointStatus | None, fresh: bool
) -> CheckpointStatus:
    location = desired.checkpoint.location
    if last is None or current is None or last.checkpoint_location != location:
        return CheckpointStatus(location=location, resets=0)
    if fresh:
        resets = current.resets + 1
        return CheckpointStatus(location=fresh_checkpoint_location(location, resets), resets=resets)
    return current
