"""The trigger modes and what each one allows: the only place their names are spelled.

Each mode is a key of ``spec.trigger`` on the wire. What a mode can read, write
and emit is a property of the mode here, so the validator, the CRD's CEL and
the job's planner all ask the same question of the same enum.
"""

from __future__ import annotations

from enum import StrEnum


class OutputMode(StrEnum):
    APPEND = "append"
    UPDATE = "update"
    COMPLETE = "complete"


class Mode(StrEnum):
    CONTINUOUS = "continuous"  # long-running tasks, epochs, ~ms; map-like steps only
    REAL_TIME = "realTime"  # long-running tasks per long batch (Spark 4.1+); Kafka in, update out
    MICRO_BATCH = "microBatch"  # every operation; latency floor ~100 ms
    AVAILABLE_NOW = "availableNow"  # what is there, then the query completes

    @property
    def long_running(self) -> bool:
        """Tasks run for the query's life, holding one task slot per source partition."""
        return self in (Mode.CONTINUOUS, Mode.REAL_TIME)

    @property
    def sources(self) -> frozenset[str]:
        """Source kinds (keys of spec.source) this mode can read (Spark 4.x)."""
        return frozenset({"kafka"}) if self is Mode.REAL_TIME else frozenset({"kafka", "rate"})

    @property
    def sinks(self) -> frozenset[str]:
        return frozenset({"kafka", "console", "memory"})

    @property
    def only_output(self) -> OutputMode | None:
        """The one output mode Spark accepts in this mode, if it accepts only one."""
        return {Mode.CONTINUOUS: OutputMode.APPEND, Mode.REAL_TIME: OutputMode.UPDATE}.get(self)

    @property
    def default_output(self) -> OutputMode:
        return self.only_output or OutputMode.APPEND

    @property
    def map_like_only(self) -> bool:
        """No aggregation, join, ordering or current-time functions."""
        return self is Mode.CONTINUOUS

    @property
    def interval_field(self) -> str | None:
        """The trigger's duration field (wire name): how often the query commits."""
        return {
            Mode.CONTINUOUS: "checkpointInterval",
            Mode.REAL_TIME: "batchDuration",
            Mode.MICRO_BATCH: "interval",
        }.get(self)

    @property
    def needs_positive_interval(self) -> bool:
        """0 means "as fast as possible" for micro-batches, but no epoch/batch at all here."""
        return self.long_running

    @property
    def restarts_when_done(self) -> bool:
        """An exit 0 of a query in this mode is an end, not a failure (availableNow)."""
        return self is not Mode.AVAILABLE_NOW
