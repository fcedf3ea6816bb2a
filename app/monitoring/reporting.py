"""Progress of a running query: one JSON line per record on stderr, the latest kept in a file.

The watchdog (app.monitoring.watchdog) writes the records, in every mode: the
committed epoch/batch and its offsets come from the checkpoint (what Spark
resumes from; continuous queries emit no progress events at all), lag and
partitions from the broker, rates from Spark's listener where Spark reports
them (micro-batch, realTime) and from offset deltas otherwise. The operator
reads the newest line of the driver's log into ``status.progress``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from app.console.lines import due_for_people
from app.monitoring.health import Verdict
from contract.checkpoint import CheckpointState, KafkaOffsets
from contract.modes import Mode
from contract.progress import EVENT, CheckpointHolds, ProgressHealth, ProgressRecord, Recovered


def iso(moment: float | None = None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _finite(value: float | None) -> float | None:
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return round(float(value), 3)


def wire_offsets(offsets: KafkaOffsets | dict[str, dict[int, int]]) -> dict[str, dict[str, int]]:
    """JSON keys are strings: {"topic": {"0": 42}}."""
    return {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


@dataclass(frozen=True)
class Rates:
    """Rows and rates of the last batch: Spark's listener's (micro-batch, realTime) or, where Spark
    reports none (continuous), the watchdog's own from offset deltas."""

    batch_id: int | None = None
    num_input_rows: int | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    batch_duration_ms: int | None = None  # the last batch's triggerExecution
    busy_ratio: float | None = None  # share of the last BUSY_WINDOW_S spent in batches

    def __bool__(self) -> bool:
        return self != Rates()


BUSY_WINDOW_S = 60.0  # busy_ratio's window: long enough to hold several batches of a 10 s trigger


def _trigger_ms(progress) -> int | None:  # pyspark's StreamingQueryProgress
    durations = getattr(progress, "durationMs", None) or {}
    value = durations.get("triggerExecution") if isinstance(durations, dict) else None
    return int(value) if isinstance(value, int | float) and value >= 0 else None


class ListenerRates:
    """The numbers Spark's listener reports for each micro-batch (none in continuous mode), and the time the
    query was busy: each batch's triggerExecution, summed over the last BUSY_WINDOW_S (the processing time
    autoscaling reads, never CPU)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._latest = Rates()
        self._clock = clock
        self._since = clock()  # the window never reaches back before the listener existed
        self._batches: list[tuple[float, int]] = []  # (when it ended, how long it ran, ms), within the window

    def update(self, progress) -> None:  # pyspark's StreamingQueryProgress
        busy = _trigger_ms(progress)
        with self._lock:
            if busy is not None:
                now = self._clock()
                self._batches = [b for b in self._batches if now - b[0] < BUSY_WINDOW_S] + [(now, busy)]
            self._latest = Rates(
                batch_id=progress.batchId,
                num_input_rows=progress.numInputRows,
                input_rows_per_second=_finite(progress.inputRowsPerSecond),
                processed_rows_per_second=_finite(progress.processedRowsPerSecond),
                batch_duration_ms=busy,
            )

    def latest(self) -> Rates:
        with self._lock:
            latest = self._latest
            if latest.batch_duration_ms is None:
                return latest
            return replace(latest, busy_ratio=self._busy_ratio(self._clock()))

    def _busy_ratio(self, now: float) -> float:
        """Batch time in the window (the part of each batch that falls inside it) over the window's length."""
        start = max(now - BUSY_WINDOW_S, self._since)
        span = now - start
        if span <= 0:
            return 0.0
        busy = sum(max(0.0, min(end, now) - max(end - ms / 1000.0, start)) for end, ms in self._batches)
        return round(min(1.0, busy / span), 3)


def make_listener(rates: ListenerRates, wake: threading.Event | None = None):
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            rates.update(event.progress)
            if wake is not None:
                wake.set()  # a batch ended: the watchdog reports it now

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return Listener()


def progress_record(
    *,
    query: str,
    mode: Mode,
    state: CheckpointState,
    rates: Rates,
    lag: dict[str, dict[int, int]] | None,
    partitions: dict[str, int],
    slots: int,
    verdict: Verdict,
    stall_after_s: float,
    holds: CheckpointHolds,
    recovered: Recovered | None,
    now: float,
    in_place_restarts: int | None = None,
    last_in_place_restart: str | None = None,
) -> ProgressRecord:
    """The record the operator reads back (contract.progress)."""
    return ProgressRecord(
        event=EVENT,
        query=query,
        mode=mode,
        batch_id=state.last_committed,
        committed_offsets=wire_offsets(state.kafka_offsets()),
        last_commit_time=iso(state.committed_at),
        in_flight=state.in_flight,
        num_input_rows=rates.num_input_rows,
        input_rows_per_second=rates.input_rows_per_second,
        processed_rows_per_second=rates.processed_rows_per_second,
        batch_duration_ms=rates.batch_duration_ms,
        busy_ratio=rates.busy_ratio,
        lag=wire_offsets(lag) if lag is not None else None,
        total_lag=sum(sum(p.values()) for p in lag.values()) if lag is not None else None,
        partitions=dict(sorted(partitions.items())),
        slots=slots,
        health=ProgressHealth(
            state=verdict.state,
            message=verdict.message,
            waiting_seconds=round(verdict.waiting_s, 1),
            stall_after_seconds=stall_after_s,
        ),
        checkpoint=state.location,
        checkpoint_holds=holds,
        recovered=recovered,
        in_place_restarts=in_place_restarts,
        last_in_place_restart=last_in_place_restart,
        timestamp=iso(now),
    )


class ProgressSink:
    """Writes each record as a line to a stream (JSON, unless ``render`` says otherwise:
    the human line on a terminal) and keeps the latest as JSON in a file."""

    def __init__(self, path: str | None, stream=None, render: Callable[[ProgressRecord], str] | None = None):
        self.path = Path(path) if path else None
        self.stream = stream or sys.stderr
        self.render = render
        self.latest: ProgressRecord | None = None
        self._lock = threading.Lock()
        self._shown: tuple[float, str] | None = None  # the last human line: when, health state

    def emit(self, record: ProgressRecord) -> None:
        line = record.to_line()
        with self._lock:
            self.latest = record
            if self.render is None:
                print(line, file=self.stream, flush=True)
            else:
                now, state = time.monotonic(), record.health.state if record.health is not None else None
                if due_for_people(self._shown, now, state):
                    self._shown = (now, state)
                    print(self.render(record), file=self.stream, flush=True)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".progress-")
                with os.fdopen(fd, "w") as handle:
                    handle.write(line + "\n")
                os.replace(tmp, self.path)  # readers never see half a record
