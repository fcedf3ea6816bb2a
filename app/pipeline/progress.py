"""Progress of a running query: one JSON line per event, the latest kept in a file.

Micro-batch and real-time queries report through Spark's listener. Continuous
queries emit no progress events at all, so for them the committed epochs are
read from the checkpoint, the same record Spark resumes from.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.checkpoint import read_checkpoint


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_offset(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _kafka_offsets(sources: list[Any]) -> dict[str, dict[str, int]]:
    merged: dict[str, dict[str, int]] = {}
    for source in sources:
        if isinstance(source, dict):
            for topic, parts in source.items():
                if isinstance(parts, dict) and all(isinstance(o, int) for o in parts.values()):
                    merged.setdefault(topic, {}).update({str(p): o for p, o in parts.items()})
    return merged


def record_from_progress(query: str, mode: str, progress: Any) -> dict[str, Any]:
    """A listener's StreamingQueryProgress as our progress record."""
    sources = [_parse_offset(s.endOffset) for s in progress.sources]
    return {
        "event": "progress",
        "query": query,
        "mode": mode,
        "batchId": progress.batchId,
        "committedOffsets": _kafka_offsets(sources),
        "numInputRows": progress.numInputRows,
        "inputRowsPerSecond": _finite(progress.inputRowsPerSecond),
        "processedRowsPerSecond": _finite(progress.processedRowsPerSecond),
        "timestamp": _now(),
    }


def record_from_checkpoint(query: str, mode: str, location: str) -> dict[str, Any] | None:
    state = read_checkpoint(location)
    if state.last_committed is None:
        return None
    return {
        "event": "progress",
        "query": query,
        "mode": mode,
        "batchId": state.last_committed,
        "committedOffsets": {t: {str(p): o for p, o in parts.items()} for t, parts in state.kafka_offsets().items()},
        "numInputRows": None,
        "inputRowsPerSecond": None,
        "processedRowsPerSecond": None,
        "timestamp": _now(),
    }


def _finite(value: float | None) -> float | None:
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return round(float(value), 3)


class ProgressSink:
    """Writes each record as a JSON line to a stream and keeps the latest in a file."""

    def __init__(self, path: str | None, stream=None):
        self.path = Path(path) if path else None
        self.stream = stream or sys.stderr
        self.latest: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def emit(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True)
        with self._lock:
            self.latest = record
            print(line, file=self.stream, flush=True)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".progress-")
                with os.fdopen(fd, "w") as handle:
                    handle.write(line + "\n")
                os.replace(tmp, self.path)  # readers never see half a record


def make_listener(sink: ProgressSink, query: str, mode: str):
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            sink.emit(record_from_progress(query, mode, event.progress))

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return Listener()


class CheckpointWatcher(threading.Thread):
    """Emits a record each time a new epoch is committed (continuous mode)."""

    def __init__(self, sink: ProgressSink, query: str, mode: str, location: str, period_s: float = 0.5):
        super().__init__(name="streamq-checkpoint-watcher", daemon=True)
        self.sink, self.query, self.mode, self.location, self.period_s = sink, query, mode, location, period_s
        self._stopped = threading.Event()
        self._last_seen: int | None = None

    def poll_once(self) -> None:
        record = record_from_checkpoint(self.query, self.mode, self.location)
        if record is not None and record["batchId"] != self._last_seen:
            self._last_seen = record["batchId"]
            self.sink.emit(record)

    def run(self) -> None:
        while not self._stopped.wait(self.period_s):
            self.poll_once()

    def stop(self) -> None:
        self._stopped.set()
