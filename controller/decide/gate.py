"""The checkpoint gate: which spec runs, on which checkpoint (pure).

A change the checkpoint cannot take (app.contract.compat: the source's kind,
topics or pattern; state the new spec would not keep, as the job reported the
checkpoint holds) is refused, and the previous spec keeps running, unless the
checkpoint location changed too, or ``onIncompatibleChange: newCheckpoint`` asks
for a fresh checkpoint next to the old one.
"""

from __future__ import annotations

from typing import Any

from app.contract.compat import Holds, checkpoint_differences, fresh_checkpoint_location, refusal, spec_differences
from app.contract.spec import IncompatibleChange, QuerySpec
from controller.decide.draft import Draft
from controller.phases import ConditionType, Reason
from controller.run import run_fields
from controller.status import CheckpointStatus


def load_last_spec(text: str | None) -> QuerySpec | None:
    if not text:
        return None
    try:
        return QuerySpec.model_validate_json(text)
    except ValueError:
        return None  # written by an older model: treated as unknown


def checkpoint_gate(d: Draft, desired: QuerySpec) -> tuple[QuerySpec | None, QuerySpec, CheckpointStatus]:
    """(the last reconciled spec, the spec to run, the checkpoint to run it on). A refusal
    is left in ``d.refusal`` (and said in an event when it is new)."""
    old = d.old
    last = load_last_spec(old.last_reconciled_spec)
    run_spec = desired
    incompatible = _incompatibility(last, desired, old.checkpoint, d.status.progress)
    if incompatible and desired.checkpoint.on_incompatible_change is IncompatibleChange.REFUSE:
        d.refusal = refusal(incompatible, last.checkpoint.location) + " The previous spec keeps running."
        run_spec = last.model_copy(update={"suspend": desired.suspend})
        previous = old.condition(ConditionType.DEGRADED)
        if previous is None or previous.reason != Reason.INCOMPATIBLE_CHANGE or previous.message != d.refusal:
            d.event("Warning", Reason.INCOMPATIBLE_CHANGE, d.refusal)
        incompatible = None
    checkpoint = _effective_checkpoint(desired, last, old.checkpoint, fresh=incompatible is not None)
    return last, run_spec, checkpoint


def _incompatibility(last: QuerySpec | None, desired: QuerySpec, current: CheckpointStatus | None,
                     progress: dict[str, Any] | None) -> str | None:  # fmt: skip
    """The first reason the desired spec cannot run on the current checkpoint: from the spec it
    was written with, else from what the job reported the checkpoint holds."""
    if last is None or desired.checkpoint.location != last.checkpoint.location:
        return None
    found = spec_differences(last, desired)
    if not found and current is not None and run_fields(last) != run_fields(desired):
        holds = Holds.from_json((progress or {}).get("checkpointHolds"))
        if holds is not None and (progress or {}).get("checkpoint") == current.location:
            found = checkpoint_differences(holds, desired)
    return found[0] if found else None


def _effective_checkpoint(
    desired: QuerySpec, last: QuerySpec | None, current: CheckpointStatus | None, fresh: bool
) -> CheckpointStatus:
    location = desired.checkpoint.location
    if last is None or current is None or last.checkpoint.location != location:
        return CheckpointStatus(location=location, resets=0)
    if fresh:
        resets = current.resets + 1
        return CheckpointStatus(location=fresh_checkpoint_location(location, resets), resets=resets)
    return current
