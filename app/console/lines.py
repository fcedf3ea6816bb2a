"""What a person reads on a terminal: one progress line per record, one line at the stop.

Pure functions over a progress record (contract.progress) and a checkpoint's
state; the JSON record stays what the operator reads.
"""

from __future__ import annotations

import json

from contract.checkpoint import CheckpointState
from contract.modes import Mode
from contract.progress import HealthState, ProgressRecord


def unit(mode: Mode | str | None) -> str:
    """Continuous processing commits epochs; the other engines commit batches."""
    return "epoch" if str(mode) == str(Mode.CONTINUOUS) else "batch"


def _rate(value: float | None) -> str:
    if value is None:
        return "- rows/s"
    return f"{value:,.0f} rows/s" if value >= 100 else f"{value:.1f} rows/s"


def progress_line(record: ProgressRecord) -> str:
    """``HH:MM:SS name: continuous epoch 87, 5.0 rows/s, lag 3, Healthy`` (and why, when not)."""
    clock = (record.timestamp or "")[11:19] or "--:--:--"
    batch = record.batch_id
    done = f"{unit(record.mode)} {batch if batch is not None else '-'}"
    rate = record.processed_rows_per_second
    if rate is None:
        rate = record.input_rows_per_second
    lag = record.total_lag
    health = record.health
    state = health.state if health is not None else HealthState.UNKNOWN
    why = f" ({health.message})" if health is not None and health.message and state != HealthState.HEALTHY else ""
    lag_text = f"lag {lag:,}" if lag is not None else "lag -"
    return f"{clock} {record.query or 'query'}: {record.mode or '?'} {done}, {_rate(rate)}, {lag_text}, {state}{why}"


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
