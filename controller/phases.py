"""The one vocabulary of phases, condition types and reasons."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    PENDING = "Pending"  # accepted, no driver yet
    STARTING = "Starting"  # driver created, not running yet
    RUNNING = "Running"
    RESTARTING = "Restarting"  # driver gone or going; the next starts after a backoff
    SUSPENDED = "Suspended"  # spec.suspend: no driver, checkpoint kept
    FAILED = "Failed"  # out of restarts, or restartPolicy said no
    INVALID = "Invalid"  # the spec cannot run: fix the resource
    COMPLETED = "Completed"  # the query ended on its own (availableNow, or exit 0 without Always)

    @property
    def terminal(self) -> bool:
        """Nothing happens in these phases until the spec changes (a new generation)."""
        return self in (Phase.FAILED, Phase.INVALID, Phase.COMPLETED)


class ConditionType(StrEnum):
    READY = "Ready"  # the query runs (kubectl wait --for=condition=Ready)
    PROGRESSING = "Progressing"  # the operator is moving the query towards its spec
    DEGRADED = "Degraded"  # something is wrong: a failure, a refused change, an invalid spec


class Reason(StrEnum):
    """Reasons of conditions, events and lastFailure."""

    CREATED = "Created"
    DRIVER_STARTING = "DriverStarting"
    DRIVER_RUNNING = "DriverRunning"
    DRIVER_FAILED = "DriverFailed"
    DRIVER_EXITED = "DriverExited"
    DRIVER_LOST = "DriverLost"
    DRIVER_CREATE_FAILED = "DriverCreateFailed"
    WAITING_FOR_OLD_DRIVER = "WaitingForOldDriver"
    BACKOFF = "BackOff"
    SPEC_CHANGED = "SpecChanged"
    RESTART_REQUESTED = "RestartRequested"
    INCOMPATIBLE_CHANGE = "IncompatibleChange"
    NEW_CHECKPOINT = "NewCheckpoint"
    INVALID_SPEC = "InvalidSpec"
    POLICY_VIOLATION = "PolicyViolation"  # the spec asks for more than the platform's policy allows
    QUERY_REFUSED = "QueryRefused"
    STALLED = "Stalled"  # no commit while input waited (the job's watchdog)
    UNRESPONSIVE = "Unresponsive"  # the running driver stopped printing progress (hung?)
    PARTITIONS_CHANGED = "PartitionsChanged"  # the source outgrew the task slots: restarted, sized again
    CHECKPOINT_UNWRITABLE = "CheckpointUnwritable"  # the driver's user cannot write the checkpoint volume
    CHECKPOINT_LOST = "CheckpointLost"  # the job started a fresh checkpoint from the offsets in status
    RESTART_LIMIT = "RestartLimitReached"
    RESTART_POLICY_NEVER = "RestartPolicyNever"
    SUSPENDED = "Suspended"
    RESUMED = "Resumed"
    COMPLETED = "Completed"
    STABLE = "Stable"
    AS_EXPECTED = "AsExpected"
