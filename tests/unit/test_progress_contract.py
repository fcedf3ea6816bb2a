"""The progress record crosses from the job to the operator through one model."""

import io

import pytest

from app.monitoring.health import Verdict
from app.monitoring.reporting import ProgressSink, Rates, progress_record
from contract.checkpoint import CheckpointState
from contract.modes import Mode
from contract.progress import CheckpointHolds, HealthState, ProgressRecord, field_path
from controller.progress import last_progress, stalled

pytestmark = pytest.mark.unit


def _printed_record() -> str:
    state = CheckpointState(location="/ck", exists=True, last_committed=7, committed_offsets=[{"t": {"0": 40}}])
    record = progress_record(
        query="q", mode=Mode.CONTINUOUS, state=state, rates=Rates(), lag={"t": {0: 3}}, partitions={"t": 1}, slots=3,
        verdict=Verdict(HealthState.STALLED, "no commit for 70s", 70.0), stall_after_s=60.0, holds=CheckpointHolds(), recovered=None,
        now=1767268800.0,
    )  # fmt: skip
    stream = io.StringIO()
    ProgressSink(None, stream).emit(record)
    return "INFO something before\n" + stream.getvalue()


def test_what_the_job_prints_is_what_the_operator_reads():
    progress = last_progress(_printed_record())
    assert progress.batch_id == 7 and progress.committed_offsets == {"t": {"0": 40}}
    assert progress.total_lag == 3 and progress.lag == {"t": {"0": 3}} and progress.slots == 3
    assert progress.updated_at == "2026-01-01T12:00:00.000Z"
    assert stalled(progress.for_status(1), 1) == "no commit for 70s"
    shown = progress.for_status(1).status_fields()
    assert shown["updatedAt"] == "2026-01-01T12:00:00.000Z" and shown["attempt"] == 1 and "event" not in shown


def test_a_line_that_is_not_a_record_is_skipped():
    assert ProgressRecord.from_line('{"event": "other", "batchId": 1}') is None
    assert ProgressRecord.from_line('{"event": "progress", "batchId": "not a number"}') is None
    assert ProgressRecord.from_line("plain text") is None


def test_columns_name_fields_that_exist():
    assert field_path("batch_id") == ".status.progress.batchId"
    assert field_path("health.state") == ".status.progress.health.state"
    with pytest.raises(KeyError):
        field_path("batch")


def test_busy_time_is_optional_both_ways():
    """A driver from before autoscaling prints no busy time and still parses; a newer one's reaches status."""
    old = ProgressRecord.from_line('{"event": "progress", "batchId": 3, "processedRowsPerSecond": 10.0}')
    assert old is not None and old.busy_ratio is None and old.batch_duration_ms is None
    new = ProgressRecord.from_line('{"event": "progress", "batchId": 3, "busyRatio": 0.42, "batchDurationMs": 1200}')
    assert new is not None and new.for_status(1).status_fields()["busyRatio"] == 0.42
