"""The one vocabulary of phases, condition types and reasons."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    PENDING = "Pending"  # accepted, no driver yet
    STARTING = "Starting"  # driver created, not running yet
    RUNNING = "Running"
    RESTARTING = "Restarting"  # driver gone or going; the next starts after a backoff
    UPGRADING = "Upgrading"  # a driver of the new spec warms up beside the running one, then takes over
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
    # kstatus (Flux, kpt, cli-utils) reads these two and status.observedGeneration, never Ready:
    RECONCILING = "Reconciling"  # the spec is not realised yet: starting, restarting (InProgress)
    STALLED = "Stalled"  # the operator cannot realise the spec until it changes: Invalid, Failed, refused (Failed)


class Reason(StrEnum):
    """Reasons of conditions, events and lastFailure."""

    CREATED = "Created"
    DRIVER_STARTING = "DriverStarting"
    DRIVER_RUNNING = "DriverRunning"
    DRIVER_FAILED = "DriverFailed"
    DRIVER_EXITED = "DriverExited"
    DRIVER_LOST = "DriverLost"
    DRIVER_CREATE_FAILED = "DriverCreateFailed"
    NAME_CONFLICT = "NameConflict"  # a child's name is taken by an object the query does not control: never adopted
    # The driver exists but cannot start, for a cause outside the spec (retried, never Invalid):
    UNSCHEDULABLE = "Unschedulable"  # the scheduler's verdict: a missing PVC, too little CPU or memory, a taint
    IMAGE_PULL_FAILED = "ImagePullFailed"  # ErrImagePull and ImagePullBackOff alternate: one reason for both
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
    SOURCE_UNAVAILABLE = "SourceUnavailable"  # the driver stopped its query on a silent broker and waits for it
    DRIVER_STUCK_TERMINATING = "DriverStuckTerminating"  # past its grace period: its node or kubelet is gone
    DRIVER_FORCE_DELETED = "DriverForceDeleted"
    STANDBY_CREATED = "StandbyCreated"
    STANDBY_PROMOTED = "StandbyPromoted"  # the standby driver took over from a failed one
    RESIZED = "DriverResized"  # a driver that waited on the Lease grew in place to its CPU request
    RESIZE_REFUSED = "DriverResizeRefused"  # ... and the API server refused that resize: it runs on its waiting request
    SCALE_RECOMMENDED = "ScaleRecommended"  # autoscaling recommends another number of executors (recommendOnly)
    SCALED = "ScaledExecutors"  # autoscaling resized a running driver's executors in place
    SCALE_REFUSED = "ScaleRefused"  # ... and the API server refused the write of the driver pod
    UPGRADE_STARTED = "UpgradeStarted"  # a driver of the changed spec starts beside the running one (warm)
    UPGRADE_HANDOVER = "UpgradeHandover"  # the new driver is warm: the running one stops and hands the Lease over
    UPGRADE_COMPLETED = "UpgradeCompleted"  # the new driver runs the query
    UPGRADE_FAILED = "UpgradeFailed"  # the new driver could not start: the running one goes on
    NO_ROOM_FOR_UPGRADE = "NoRoomForUpgrade"  # no room (scheduler, quota) for a second driver: a plain restart
    UPGRADE_NOT_WARM = "UpgradeNotWarm"  # the running driver is not fenced by the Lease: a plain restart
    RESTARTED_IN_PLACE = "RestartedInPlace"  # the driver restarted its query from the checkpoint, same pod
    UNRESPONSIVE = "Unresponsive"  # the running driver stopped printing progress (hung?)
    PROGRESS_REFUSED = "ProgressRefused"  # its progress endpoint answered what is not a record (too large, malformed)
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
