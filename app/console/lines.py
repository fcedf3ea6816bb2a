"""What a person reads on a terminal: one progress line per record, one line at the stop.

Pure functions over the wire form of a progress record (app.contract.progress) and
a checkpoint's state; the JSON record stays what the operator reads.
"""

from __future__ import annotations

import json
from typing import Any

from app.contract.checkpoint import CheckpointState
from app.contract.modes import Mode


def unit(mode: Mode | str | None) -> str:
    """Continuous processing commits epochs; the other engines commit batches."""
    return "epoch" if str(mode) == str(Mode.CONTINUOUS) else "batch"


def _rate(value: float | None) -> str:
    if value is None:
        return "- rows/s"
    return f"{value:,.0f} rows/s" if value >= 100 else f"{value:.1f} rows/s"


def progress_line(record: dict[str, Any]) -> str:
    """``HH:MM:SS name: continuous epoch 87, 5.0 rows/s, lag 3, Healthy`` (and why, when not)."""
    clock = (record.get("timestamp") or "")[11:19] or "--:--:--"
    batch = record.get("batchId")
    done = f"{unit(record.get('mode'))} {batch if batch is not None else '-'}"
    rate = record.get("processedRowsPerSecond")
    if rate is None:
        rate = record.get("inputRowsPerSecond")
    lag = record.get("totalLag")
    health = record.get("health") or {}
    state = health.get("state") or "Unknown"
    why = f" ({health['message']})" if health.get("message") and state != "Healthy" else ""
    lag_text = f"lag {lag:,}" if lag is not None else "lag -"
    return f"{clock} {record.get('query') or 'query'}: {record.get('mode') or '?'} {done}, {_rate(rate)}, {lag_text}, {state}{why}"


def committed_summary(state: CheckpointState, mode: Mode) -> str:
    """What a stopped query leaves behind: the epoch/batch it resumes after, and its offsets."""
    if not state.exists or state.last_committed is None:
        return f"nothing committed yet in {state.location}"
    offsets = [o for o in state.committed_offsets if o is not None]
    shown = json.dumps(offsets[0] if len(offsets) == 1 else offsets, sort_keys=True, separators=(",", ":"))
    return f"committed {unit(mode)} {state.last_committed}, offsets {shown} in {state.location}"


LOG_FORMATS = ("auto", "json", "human")


def wants_human(log_format: str, stdout_is_terminal: bool) -> bool:
    """JSON lines are what the operator reads from a driver's log; people at a terminal get lines."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r}: expected one of {', '.join(LOG_FORMATS)}")
    return log_format == "human" or (log_format == "auto" and stdout_is_terminal)


HUMAN_EVERY_S = 5.0  # a commit every second is a record every tick: too many lines for a person


def due_for_people(last: tuple[float, str] | None, now: float, state: str | None, every_s: float = HUMAN_EVERY_S) -> bool:
    """Print this record's line? ``last`` is (when, health state) of the line printed last.
    A change of health is always shown at once."""
    return last is None or now - last[0] >= every_s or state != last[1]
