"""Where the green driver of a blue/green upgrade starts reading (thin I/O over app.checkpoints.reader).

A change the checkpoint cannot take runs on a fresh checkpoint. Starting it from the
spec's ``latest`` would skip what arrived meanwhile, from ``earliest`` replay everything.
Green instead starts at exactly the offsets blue committed last: it reads them from
blue's checkpoint once it holds the query's Lease, that is once blue has stopped and
committed nothing more (controller.decide.upgrade hands the Lease over). Nothing blue
committed is read twice; what blue wrote after its last commit is written again by
green (at-least-once), as after any restart.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from app.checkpoints.reader import CheckpointError, read_checkpoint
from app.driver.starting_offsets import StartPlan
from contract.checkpoint import offsets_json
from contract.resume import ResumeFrom

log = logging.getLogger("streamq.job")


def blue_committed(location: str, read=read_checkpoint) -> ResumeFrom | None:
    """The offsets blue's checkpoint at ``location`` committed last; None when it has no readable commit
    (the caller then keeps whatever else it had: status.progress's offsets, or the spec's)."""
    try:
        state = read(location)
    except CheckpointError as exc:
        log.warning("blue/green: cannot read blue's checkpoint %s: %s", location, exc)
        return None
    offsets = state.kafka_offsets() if state.resumable and state.has_commits else {}
    if not offsets:
        log.warning("blue/green: blue's checkpoint %s has no committed Kafka offsets", location)
        return None
    return ResumeFrom(offsets_json(offsets), state.last_committed, location)


def as_green(plan: StartPlan, blue: ResumeFrom) -> StartPlan:
    """Green's start from blue's offsets is what blue/green is for, not a lost checkpoint: said as such,
    and not reported as a recovery (the operator would warn CheckpointLost)."""
    if plan.starting_offsets is None:
        return plan
    note = (f"blue/green: a fresh checkpoint from the offsets blue committed last (batch {blue.batch_id} of "
            f"{blue.checkpoint}): {plan.starting_offsets}")  # fmt: skip
    return replace(plan, note=note, recovered=None)
