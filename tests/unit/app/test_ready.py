"""The job's readiness file (app.driver.ready) and the order of a clean stop: the Lease is released as
soon as no task runs, before Spark itself stops (a warm upgrade's new driver waits on it)."""

from __future__ import annotations

import pytest

from app.driver import run as job
from app.driver.ready import mark_ready
from contract import READY_FILE_ENV

pytestmark = pytest.mark.unit


def test_the_ready_file_is_written_where_the_operator_says(tmp_path, monkeypatch):
    path = tmp_path / "streamq" / "ready"
    monkeypatch.setenv(READY_FILE_ENV, str(path))
    mark_ready("warm")
    assert path.read_text() == "warm\n"


def test_no_ready_file_outside_a_pod(tmp_path, monkeypatch):
    monkeypatch.delenv(READY_FILE_ENV, raising=False)
    mark_ready("warm")  # nothing to do, nothing raised
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_ready_file_is_said_not_raised(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    mark_ready("warm", path=str(blocker / "ready"))  # a file where a directory should be
    assert "cannot write the ready file" in caplog.text


class _Spark:
    """Tasks that end after two looks; records when Spark is stopped."""

    def __init__(self, log: list[str]):
        self.log, self.looks = log, 0

    def stop(self) -> None:
        self.log.append("spark stopped")


def test_the_lease_goes_once_no_task_runs_and_before_spark_stops(monkeypatch):
    log: list[str] = []
    spark = _Spark(log)

    def running_tasks(s) -> int:
        s.looks += 1
        log.append("tasks looked at")
        return 1 if s.looks < 3 else 0

    monkeypatch.setattr(job, "running_tasks", running_tasks)
    job._stop_spark(spark, seconds=5, tasks_ended=lambda: log.append("lease released"))
    assert log == ["tasks looked at"] * 3 + ["lease released", "spark stopped"]
