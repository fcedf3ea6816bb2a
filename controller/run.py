"""One driver attempt, and which spec fields it runs (pure).

A :class:`Run` is what the decisions hand to the renderers. ``spec_hash`` is the
identity of what a driver runs: a spec change that alters it needs a new driver;
one that does not (``suspend``, ``restartPolicy``) is taken by the running one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from contract.modes import Mode
from contract.resume import ResumeFrom
from contract.spec import Backend, QuerySpec
from controller import names

DriverKind = Literal["Pod", "SparkApplication"]  # the kind of the object that is a driver
SPARK_APP_KIND: Final = "SparkApplication"
POD_KIND: Final = "Pod"

# Fields whose change does not need a new driver.
_NOT_RUN_FIELDS = ("suspend", "restartPolicy", "upgrade", "autoscaling")


@dataclass(frozen=True)
class Run:
    """One driver attempt: everything the renderers need."""

    query: str
    namespace: str
    attempt: int
    spec: QuerySpec
    checkpoint_location: str  # the effective one (spec's, or a fresh one after a reset)
    # Where the previous run had committed: used by the job only if the checkpoint is gone.
    # Not part of what the driver runs (spec_hash): it changes with every commit.
    resume: ResumeFrom | None = None
    standby: bool = False  # a standby driver: it waits for the query's Lease before it runs anything
    # A blue/green upgrade's green driver: blue's checkpoint, whose last committed offsets its fresh one starts at.
    handover_from: str | None = None

    @property
    def driver_name(self) -> str:
        return names.driver_name(self.query, self.attempt)

    @property
    def driver_kind(self) -> DriverKind:
        """The kind of the object that is the driver: a Pod, or a SparkApplication."""
        return SPARK_APP_KIND if self.spec.runtime.backend is Backend.SPARK_APPLICATION else POD_KIND

    @property
    def uses_executors(self) -> bool:
        return self.spec.runtime.executors.instances > 0

    @property
    def resizes_in_place(self) -> bool:
        """A micro-batch driver pod with executors: its executors follow its pod's EXECUTORS_ANNOTATION
        (app.driver.executors), so autoscaling.recommendOnly may turn false without a new driver."""
        return resizes_in_place(self.spec)


def resizes_in_place(spec: QuerySpec) -> bool:
    return (spec.runtime.executors.instances > 0 and spec.mode is Mode.MICRO_BATCH
            and spec.runtime.backend is Backend.POD)  # fmt: skip


def run_fields(spec: QuerySpec) -> dict[str, Any]:
    """The spec as the driver runs it: without the fields a running driver takes as they change."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    for key in _NOT_RUN_FIELDS:
        data.pop(key, None)
    return data


def fields_hash(spec: QuerySpec) -> str:
    """What a driver of this spec runs, wherever its checkpoint is, in 16 hex digits: equal
    hashes, nothing for a new driver to do differently (status.reconciled keeps it)."""
    payload = json.dumps(run_fields(spec), sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def spec_hash(spec: QuerySpec, checkpoint_location: str) -> str:
    """What a driver runs, in 16 hex digits: a different hash needs a new driver."""
    payload = json.dumps({"spec": run_fields(spec), "checkpoint": checkpoint_location}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
