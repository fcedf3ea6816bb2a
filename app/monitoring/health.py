"""Is a running query keeping up? Lag, stalls and slots, as pure functions.

The job's watchdog feeds these with what it reads (the checkpoint, the
broker's offsets, the clock) and reports the verdicts; the operator only
shows them. Nothing here does I/O or reads the clock itself.

    lag        per partition: the broker's latest offset minus the next offset the
               query will read (its last commit, else where it started)
    stalled    no new commit for ``spec.stall_after_ms`` while records waited
    slots      continuous and realTime hold one task slot per source partition
"""

from __future__ import annotations

from dataclasses import dataclass

from app.pipeline.kafka_checks import slot_shortage
from contract import ExitCode
from contract.checkpoint import EARLIEST, LATEST, KafkaOffsets, parse_offsets_json
from contract.progress import HealthState
from contract.spec import QuerySpec

# --- lag ------------------------------------------------------------------------------


def starting_positions(starting: str, earliest: KafkaOffsets, latest: KafkaOffsets) -> KafkaOffsets:
    """Where a query without a commit starts reading each partition, as Spark resolves
    ``startingOffsets`` ("earliest", "latest" or JSON with -2/-1 markers). Partitions the
    JSON does not name (added later) are read from the earliest offset, as Spark does."""
    if starting == "latest":
        return {t: dict(parts) for t, parts in latest.items()}
    if starting == "earliest":
        return {t: dict(parts) for t, parts in earliest.items()}
    given = parse_offsets_json(starting)
    out: KafkaOffsets = {}
    for topic, parts in earliest.items():
        for p, low in parts.items():
            o = given.get(topic, {}).get(p, EARLIEST)
            out.setdefault(topic, {})[p] = low if o == EARLIEST else latest.get(topic, {}).get(p, low) if o == LATEST else o
    return out


def compute_lag(latest: KafkaOffsets, committed: KafkaOffsets, start: KafkaOffsets) -> dict[str, dict[int, int]]:
    """Records each partition still has to read; partitions with no known position are left out."""
    lag: dict[str, dict[int, int]] = {}
    for topic, parts in latest.items():
        for p, end in parts.items():
            position = committed.get(topic, {}).get(p, start.get(topic, {}).get(p))
            if position is not None:
                lag.setdefault(topic, {})[p] = max(0, end - position)
    return lag


def total(offsets: dict[str, dict[int, int]]) -> int:
    return sum(sum(parts.values()) for parts in offsets.values())


# --- the rate source ------------------------------------------------------------------
#
# No broker to ask: the rate source makes rowsPerSecond rows a second, spread over its
# partitions, each stamped with the time it is due. What it has made by now and what
# the query committed follow from the spec and the checkpoint alone.
#
#   continuous   {"<partition>": {"value": v, "runTimeMs": t}}: the last row each partition
#                emitted, its value stepping by numPartitions, due at t
#   micro-batch  N: whole seconds since the source was created


RATE_TOPIC = "rate"  # the name the rate source's lag is reported under, beside Kafka topics


def rate_rows(sources: list, num_partitions: int, rows_per_second: int) -> int | None:
    """Rows a rate source had emitted at its committed offsets (a running count: deltas are rows)."""
    for source in sources:
        if isinstance(source, dict) and source and all(isinstance(o, dict) and "value" in o for o in source.values()):
            return sum(int(o["value"]) for o in source.values()) // num_partitions
        if isinstance(source, int) and not isinstance(source, bool):
            return source * rows_per_second
    return None


def rate_lag(sources: list, num_partitions: int, rows_per_second: int, now: float,
             committed_at: float | None = None) -> dict[str, dict[int, int]] | None:  # fmt: skip
    """Rows due by ``now`` that the committed offsets do not cover, per partition.

    Continuous offsets say when each partition's last committed row was due; a micro-batch
    offset only counts seconds, so the rows made since the commit stand for what waits."""
    per_partition = rows_per_second / num_partitions
    for source in sources:
        if isinstance(source, dict) and source and all(isinstance(o, dict) and "runTimeMs" in o for o in source.values()):
            return {RATE_TOPIC: {int(p): max(0, int((now - o["runTimeMs"] / 1000.0) * per_partition))
                                 for p, o in source.items()}}  # fmt: skip
        if isinstance(source, int) and not isinstance(source, bool) and committed_at is not None:
            return {RATE_TOPIC: {0: max(0, int((now - committed_at) * rows_per_second))}}
    return None


# --- stalls ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    state: HealthState
    message: str
    waiting_s: float  # how long input has waited without a commit


class StallClock:
    """Time since the query last made progress *while input waited*.

    The clock restarts on a new commit and whenever nothing waits (an idle
    micro-batch query commits nothing, and that is fine). Time is passed in.
    """

    def __init__(self, started_at: float):
        self._since = started_at
        self._last_committed: int | None = None
        self._seen_first = False

    def observe(self, now: float, last_committed: int | None, total_lag: int | None) -> float:
        if not self._seen_first:
            self._seen_first, self._last_committed = True, last_committed
        elif last_committed != self._last_committed:
            self._last_committed, self._since = last_committed, now
        if total_lag == 0:
            self._since = now
        return max(0.0, now - self._since)


def judge(waiting_s: float, stall_after_s: float, total_lag: int | None, last_committed: int | None) -> Verdict:
    if total_lag is None:
        return Verdict(HealthState.UNKNOWN, "the source's latest offsets are unknown", waiting_s)
    if total_lag > 0 and waiting_s > stall_after_s:
        since = f"epoch/batch {last_committed}" if last_committed is not None else "the query started"
        return Verdict(
            HealthState.STALLED,
            f"no commit for {waiting_s:.1f}s (limit {stall_after_s:g}s) since {since} while {total_lag} "
            "record(s) wait in the source",
            waiting_s,
        )
    return Verdict(HealthState.HEALTHY, "", waiting_s)


# --- slots (slot_shortage is pipeline's: app.pipeline.kafka_checks) ------------------


def partitions_changed(spec: QuerySpec, before: dict[str, int], now: dict[str, int], slots: int) -> tuple[ExitCode, str] | None:
    """The source gained partitions while the query ran: restart if the slots no longer suffice."""
    if now == before:
        return None
    shortage = slot_shortage(spec, now, slots)
    if shortage is None:
        return None  # Spark picks the new partitions up on its own
    auto, executors = spec.autoscaling, spec.runtime.executors
    if auto is not None and not auto.recommend_only and executors.instances > 0:
        if slot_shortage(spec, now, auto.max_executors * executors.cores) is None:
            # Autoscaling acts: the operator moves the query to a driver of the size the partitions need
            # (controller.decide.autoscale, from this record's partitions), warm where it can. Meanwhile
            # the tasks that have slots run on; what the others miss is read again from the last commit.
            return None
    grew = ", ".join(f"{t} {before.get(t, 0)}->{n}" for t, n in sorted(now.items()) if n != before.get(t, 0))
    if spec.runtime.auto_sized:
        wanted = spec.runtime.task_slots(spec.mode, sum(now.values()))
        return ExitCode.PARTITIONS_CHANGED, f"source partitions grew ({grew}): {shortage}; restarting with local[{wanted}]"
    return ExitCode.INVALID_SPEC, (
        f"source partitions grew ({grew}): {shortage} "
        f"(set spec.runtime.parallelism to at least {sum(now.values()) + 1}, or leave it unset to size it automatically)"
    )
