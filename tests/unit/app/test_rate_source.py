"""The rate source has no broker to ask: its rows and lag follow from its rate and the checkpoint."""

import pytest

from app.checkpoints.reader import CheckpointState
from app.monitoring.health import rate_lag, rate_rows
from app.monitoring.watchdog import Observation, Watch
from contract.load import validate_spec
from testbed.specs import query_spec

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0


def continuous(values_and_due: dict[int, tuple[int, float]]) -> list:
    return [{str(p): {"value": v, "runTimeMs": int(due * 1000)} for p, (v, due) in values_and_due.items()}]


def test_continuous_offsets_count_rows_over_every_partition():
    # two partitions, values stepping by 2: partition 0 made 0,2,..,10 and partition 1 made 1,3,..,11
    assert rate_rows(continuous({0: (10, T0), 1: (11, T0)}), num_partitions=2, rows_per_second=10) == 10
    assert rate_rows([], 2, 10) is None and rate_rows([{"payments": {"0": 5}}], 2, 10) is None


def test_micro_batch_offsets_count_seconds():
    assert rate_rows([12], num_partitions=1, rows_per_second=5) == 60


def test_the_lag_is_the_rows_due_since_each_partitions_last_committed_row():
    lag = rate_lag(continuous({0: (10, T0 - 2.0), 1: (11, T0 - 0.5)}), num_partitions=2, rows_per_second=10, now=T0)
    assert lag == {"rate": {0: 10, 1: 2}}  # 5 rows/s per partition
    assert rate_lag(continuous({0: (10, T0 + 1)}), 1, 10, now=T0) == {"rate": {0: 0}}  # never negative


def test_micro_batch_lag_counts_the_rows_made_since_the_commit_and_nothing_without_one():
    assert rate_lag([12], 1, 5, now=T0, committed_at=T0 - 3) == {"rate": {0: 15}}
    assert rate_lag([12], 1, 5, now=T0) is None
    assert rate_lag([], 1, 5, now=T0) is None


def rate_watch():
    spec = validate_spec(query_spec(mode="continuous", source={"rate": {"rowsPerSecond": 10, "numPartitions": 1}},
                                    runtime={"parallelism": 2}))  # fmt: skip
    return Watch(spec, "rate", slots=2, partitions={}, starting_offsets="latest", started_at=0.0)


def state(epoch, value, due):
    return CheckpointState("/ck", True, last_committed=epoch, committed_offsets=continuous({0: (value, due)}), committed_at=due)


def test_a_rate_query_is_healthy_with_rows_per_second_from_its_committed_offsets():
    w = rate_watch()
    first = w.step(Observation(now=1.0, wall=T0 + 1, state=state(3, 100, T0 + 0.5), partitions={}))
    assert first.record.wire()["health"]["state"] == "Healthy" and first.record.wire()["totalLag"] == 5
    second = w.step(Observation(now=3.0, wall=T0 + 3, state=state(5, 120, T0 + 2.5), partitions={}))
    assert second.record.wire()["processedRowsPerSecond"] == pytest.approx(10.0) and second.record.wire()["numInputRows"] == 20
    assert second.record.wire()["lag"] == {"rate": {"0": 5}}


def test_a_rate_query_that_stops_committing_is_stalled_not_unknown():
    w = rate_watch()
    w.step(Observation(now=1.0, wall=T0 + 1, state=state(3, 100, T0 + 0.5), partitions={}))
    late = w.step(Observation(now=400.0, wall=T0 + 400, state=state(3, 100, T0 + 0.5), partitions={}))
    assert late.record.wire()["health"]["state"] == "Stalled" and late.record.wire()["totalLag"] > 0
