"""A tiny in-memory world for decision tests: it applies a Decision's actions the way
the API would (creating a driver adds a Pending pod, deleting removes it) so that
sequences of reconciles read like what happens in a cluster. Not a Kubernetes fake:
it only replays ``controller.decide``'s own actions."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from contract.load import validate_spec
from contract.policy import Policy
from contract.progress import ProgressRecord
from controller.decide import CreateDriver, Decision, DeleteDriver, Inputs, ScaleExecutors, decide
from controller.observe import Driver, DriverPhase, LeaseState
from controller.render import lease_access
from controller.run import spec_hash
from controller.status import QueryStatus
from testbed.specs import changed, query_spec

UID = "0b5c-uid"
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


# The decision tests' query: any kafka -> kafka spec with a restart policy to count against.
WORLD_SPEC = {
    "source.kafka.startingOffsets": None,
    "transforms": [{"where": "value IS NOT NULL"}],
    "restartPolicy": {"backoff": {"initial": "5s", "max": "1m"}, "maxRestarts": 3, "stableAfter": "10m"},
}


def base_spec(**changes: Any) -> dict:
    """``query_spec`` with WORLD_SPEC and ``changes`` (dotted paths; None removes)."""
    return query_spec(WORLD_SPEC, sink_topic="out", location="/checkpoints/q", **changes)


class World:
    def __init__(self, spec: dict | None = None, name: str = "q", namespace: str = "ns"):
        self.name, self.namespace = name, namespace
        self.spec = spec if spec is not None else base_spec()
        self.generation = 1
        self.status = QueryStatus()
        self.drivers: list[Driver] = []
        self.now = T0
        self.history: list[Decision] = []
        self._report: ProgressRecord | None = None  # a progress record the next reconcile reads from the driver
        self._read = False  # whether the next reconcile reads the driver's progress
        self._refused: str | None = None  # ... and refuses what the driver answered, why
        self.lease: LeaseState | None = None  # the query's Lease, as observe read it (when it reads it)
        self.policy: Policy | None = None  # the platform's policy the operator decides with (None: none applies)

    # -- the user ------------------------------------------------------------------

    def edit(self, **changes: Any) -> None:
        self.spec = changed(self.spec, changes)
        self.generation += 1

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    # -- the cluster ---------------------------------------------------------------

    @property
    def driver(self) -> Driver:
        assert len(self.drivers) == 1, self.drivers
        return self.drivers[0]

    def _set(self, **fields: Any) -> None:
        self.drivers[-1] = replace(self.drivers[-1], **fields)

    def driver_runs(self) -> None:
        self._set(phase=DriverPhase.RUNNING, started_at=self.now)

    def named(self, name: str) -> Driver:
        return next(d for d in self.drivers if d.name == name)

    def change(self, name: str, **fields: Any) -> None:
        """One driver, by name, changed (its pod started, ended, is being deleted...)."""
        self.drivers = [replace(d, **fields) if d.name == name else d for d in self.drivers]

    def driver_exits(self, code: int, message: str = "boom") -> None:
        phase = DriverPhase.SUCCEEDED if code == 0 else DriverPhase.FAILED
        self._set(phase=phase, exit_code=code, message=message, finished_at=self.now,
                  reason="Completed" if code == 0 else "Error")  # fmt: skip

    def driver_reports(self, **record: Any) -> None:
        """The driver's newest progress line, as the operator reads it from the log (status field names)."""
        self._report = ProgressRecord.model_validate(record).for_status()
        self._read = True

    def driver_answers_no_record(self, why: str) -> None:
        """The driver's progress port answers what the operator refuses (controller.progress_read)."""
        self._read, self._refused = True, why

    def add_driver(self, **fields: Any) -> None:
        self.drivers.append(Driver(kind="Pod", name=fields.pop("name", "x"), phase=fields.pop("phase", DriverPhase.RUNNING),
                                   owner_uid=fields.pop("owner_uid", UID), **fields))  # fmt: skip

    # -- the operator --------------------------------------------------------------

    def inputs(self) -> Inputs:
        return Inputs(
            name=self.name, namespace=self.namespace, uid=UID, generation=self.generation,
            raw_spec=copy.deepcopy(self.spec), status=self.status.model_copy(deep=True),
            drivers=tuple(self.drivers), now=self.now, progress=self._report, lease=self.lease, policy=self.policy,
            progress_read=self._read, progress_refused=self._refused,
        )  # fmt: skip

    def reconcile(self, apply: bool = True) -> Decision:
        decision = decide(self.inputs())
        self._report, self._read, self._refused = None, False, None
        self.history.append(decision)
        if not apply:
            return decision
        # round-trip through the wire format, as the status subresource would
        self.status = QueryStatus.parse(decision.status.dump())
        for action in decision.actions:
            if isinstance(action, DeleteDriver):
                self.drivers = [d for d in self.drivers if d.name != action.name]
            elif isinstance(action, CreateDriver):
                run = action.run
                self.drivers.append(Driver(
                    kind="SparkApplication" if run.spec.runtime.backend.value == "sparkApplication" else "Pod",
                    name=run.driver_name, phase=DriverPhase.PENDING, attempt=run.attempt,
                    spec_hash=spec_hash(run.spec, run.checkpoint_location), owner_uid=UID,
                    restart_nonce=run.spec.restart_nonce or "", standby=run.standby,
                    fenced=lease_access.needs_lease(run, self.policy), created_at=self.now,
                    executors_wanted=run.spec.runtime.executors.instances if run.resizes_in_place else None,
                ))  # fmt: skip
            elif isinstance(action, ScaleExecutors):  # the pod's annotation, as act writes it
                self.change(action.name, executors_wanted=action.executors)
        return decision

    def settle(self, limit: int = 10) -> list[Decision]:
        """Reconcile until a pass changes nothing (no action, same status)."""
        out = []
        for _ in range(limit):
            before = self.status.dump()
            decision = self.reconcile()
            out.append(decision)
            if not decision.actions and decision.status.dump() == before:
                return out
        raise AssertionError(f"no steady state after {limit} passes: {[d.verb for d in out]}")

    def run_spec_hash(self, spec: dict | None = None, location: str | None = None) -> str:
        parsed = validate_spec(spec or self.spec)
        return spec_hash(parsed, location or parsed.checkpoint.location)
