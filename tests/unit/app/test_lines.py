"""What a person at a terminal reads: the progress line, the stop line, the output choice."""

import pytest

from app.checkpoints.reader import CheckpointState
from app.console.lines import HUMAN_EVERY_S, committed_summary, due_for_people, progress_line, wants_human
from app.console.terminal import QUIET_S, at_boundary
from contract.modes import Mode
from contract.progress import ProgressRecord

pytestmark = pytest.mark.unit


def record(**changes):
    base = {"event": "progress", "query": "fraud", "mode": "continuous", "batchId": 87, "totalLag": 3,
            "processedRowsPerSecond": 5.0, "inputRowsPerSecond": None, "timestamp": "2026-11-23T06:15:01.809Z",
            "health": {"state": "Healthy", "message": "", "waitingSeconds": 0.0, "stallAfterSeconds": 60.0}}  # fmt: skip
    return ProgressRecord.model_validate({**base, **changes})


def test_a_continuous_record_reads_as_one_line_with_epoch_rate_and_lag():
    assert progress_line(record()) == "06:15:01 fraud: continuous epoch 87, 5.0 rows/s, lag 3, Healthy"


def test_other_modes_count_batches_and_large_rates_get_separators():
    line = progress_line(record(mode="microBatch", batchId=4, processedRowsPerSecond=12345.6, totalLag=20000))
    assert line == "06:15:01 fraud: microBatch batch 4, 12,346 rows/s, lag 20,000, Healthy"


def test_unknowns_are_dashes_and_an_unhealthy_query_says_why():
    stalled = {"state": "Stalled", "message": "no commit for 61.0s", "waitingSeconds": 61.0, "stallAfterSeconds": 60.0}
    line = progress_line(record(batchId=None, totalLag=None, processedRowsPerSecond=None, health=stalled))
    assert line == "06:15:01 fraud: continuous epoch -, - rows/s, lag -, Stalled (no commit for 61.0s)"


def test_the_input_rate_stands_in_when_nothing_was_processed_yet():
    assert "7.5 rows/s" in progress_line(record(processedRowsPerSecond=None, inputRowsPerSecond=7.5))


def test_the_stop_line_names_the_committed_epoch_and_its_offsets():
    state = CheckpointState("/ck", True, last_committed=19, committed_offsets=[{"payments": {"0": 1756, "1": 1721}}])
    assert committed_summary(state, Mode.CONTINUOUS) == 'committed epoch 19, offsets {"payments":{"0":1756,"1":1721}} in /ck'
    assert committed_summary(CheckpointState("/ck", True), Mode.MICRO_BATCH) == "nothing committed yet in /ck"


@pytest.mark.parametrize("requested, tty, human", [
    ("auto", True, True), ("auto", False, False), ("json", True, False), ("human", False, True),
])  # fmt: skip
def test_json_lines_unless_a_person_reads_them(requested, tty, human):
    assert wants_human(requested, tty) is human


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError):
        wants_human("yaml", True)


def test_a_line_waits_for_the_end_of_a_console_block():
    assert at_boundary(b"", 0.0)  # nothing printed yet
    assert at_boundary(b"|\n\n", 0.0)  # a block ends with an empty line
    assert not at_boundary(b"+\n", 0.0)  # a table is being printed
    assert at_boundary(b"+\n", QUIET_S)  # ... or the JVM has gone quiet after a whole line
    assert not at_boundary(b"ab", 10.0)  # never in the middle of a line


def test_people_get_a_line_every_few_seconds_and_at_once_when_health_changes():
    assert due_for_people(None, 100.0, "Healthy")
    assert not due_for_people((100.0, "Healthy"), 102.0, "Healthy")
    assert due_for_people((100.0, "Healthy"), 100.0 + HUMAN_EVERY_S, "Healthy")
    assert due_for_people((100.0, "Healthy"), 101.0, "Stalled")
