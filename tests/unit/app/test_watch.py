"""The watchdog's judgement, observation by observation (no broker, no Spark, no clock)."""

import io
import json

import pytest

from app.checkpoints.reader import CheckpointState
from app.monitoring.reporting import ProgressSink, Rates
from app.monitoring.watchdog import Observation, Watch
from contract import ExitCode
from contract.load import validate_spec
from contract.progress import ProgressRecord, Recovered
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0


def spec(**health):
    base = with_change(query_spec(mode="continuous"), "health", {"stallAfterIntervals": 5, "minStallTime": "1s", **health})
    return validate_spec(with_change(base, "runtime", {}))  # 1s interval x 5 = 5s


def checkpoint(batch=None, offsets=None, at=None):
    if batch is None:
        return CheckpointState("/ck", True)
    return CheckpointState("/ck", True, last_committed=batch, committed_offsets=[{"payments": offsets}], committed_at=at)


def obs(t, state, latest=None, partitions=None, unreachable=None, earliest=None):
    latest = {"payments": {0: 100, 1: 100}} if latest is None else latest
    return Observation(now=t, wall=T0 + t, state=state, partitions=partitions or {"payments": 2}, latest=latest,
                       earliest=earliest, unreachable=unreachable)  # fmt: skip


def watch(s=None, starting="earliest"):
    return Watch(s or spec(), "fraud", slots=4, partitions={"payments": 2}, starting_offsets=starting, started_at=0.0,
                 report_every_s=10.0)  # fmt: skip


def test_a_query_that_never_commits_while_input_waits_is_stalled_after_the_window():
    w = watch()
    first = w.step(obs(1.0, checkpoint(), earliest={"payments": {0: 0, 1: 0}}))
    assert first.exit is None
    record = first.record
    assert (
        record.wire()["batchId"] is None
        and record.wire()["lag"] == {"payments": {"0": 100, "1": 100}}
        and record.wire()["totalLag"] == 200
    )
    assert record.wire()["partitions"] == {"payments": 2} and record.wire()["slots"] == 4
    assert record.wire()["health"] == {"state": "Healthy", "message": "", "waitingSeconds": 1.0, "stallAfterSeconds": 5.0}
    assert w.step(obs(4.0, checkpoint())).exit is None
    stalled = w.step(obs(6.0, checkpoint()))
    assert stalled.exit == (
        ExitCode.STALLED,
        "stalled: no commit for 6.0s (limit 5s) since the query started while 200 record(s) wait in the source",
    )
    assert stalled.record.wire()["health"]["state"] == "Stalled"


def test_report_only_keeps_running_and_says_so_once_per_change():
    w = watch(spec(onStall="report"))
    w.step(obs(1.0, checkpoint(), earliest={"payments": {0: 0, 1: 0}}))
    step = w.step(obs(7.0, checkpoint()))
    assert step.exit is None and step.record.wire()["health"]["state"] == "Stalled"
    assert w.step(obs(8.0, checkpoint())).record is None  # nothing new, no heartbeat yet
    assert w.step(obs(18.0, checkpoint())).record.wire()["health"]["state"] == "Stalled"  # heartbeat


def test_commits_keep_a_busy_query_healthy_and_lag_follows_the_committed_offsets():
    w = watch()
    w.step(obs(0.5, checkpoint(), earliest={"payments": {0: 0, 1: 0}}))
    for n, t in enumerate([3.0, 6.0, 9.0, 12.0]):
        step = w.step(obs(t, checkpoint(n, {"0": 20 * n, "1": 25 * n}, at=T0 + t)))
        assert step.exit is None and step.record is not None  # a record for every new commit
    record = step.record
    assert record.wire()["batchId"] == 3 and record.wire()["committedOffsets"] == {"payments": {"0": 60, "1": 75}}
    assert record.wire()["lag"] == {"payments": {"0": 40, "1": 25}} and record.wire()["totalLag"] == 65
    assert record.wire()["lastCommitTime"] == "2027-01-15T08:00:12.000Z"
    assert record.wire()["processedRowsPerSecond"] == pytest.approx(45 / 3.0)  # from offset deltas (continuous)
    assert record.wire()["numInputRows"] == 45


def test_an_idle_query_is_not_stalled():
    w = watch()
    w.step(obs(0.5, checkpoint(0, {"0": 100, "1": 100}), earliest={"payments": {0: 0, 1: 0}}))
    step = w.step(obs(600.0, checkpoint(0, {"0": 100, "1": 100})))
    assert step.exit is None and step.record.wire()["health"]["state"] == "Healthy" and step.record.wire()["totalLag"] == 0


def test_latest_starting_offsets_do_not_count_old_records_as_lag():
    w = watch(starting="latest")
    step = w.step(obs(1.0, checkpoint(), latest={"payments": {0: 500, 1: 500}}, earliest={"payments": {0: 0, 1: 0}}))
    assert step.record.wire()["totalLag"] == 0
    step = w.step(obs(3.0, checkpoint(), latest={"payments": {0: 510, 1: 500}}))
    assert step.record is None or step.record.wire()["totalLag"] == 10


def test_a_silent_broker_ends_the_run():
    step = watch().step(obs(1.0, checkpoint(), latest={}, unreachable="Kafka source k:9092 unreachable for 31s (limit 30s)"))
    assert step.exit == (ExitCode.QUERY_FAILED, "Kafka source k:9092 unreachable for 31s (limit 30s)")


def test_partitions_beyond_the_slots_restart_an_auto_sized_query():
    w = watch()
    w.step(obs(1.0, checkpoint(), earliest={"payments": {0: 0, 1: 0}}))
    grown = {"payments": {0: 100, 1: 100, 2: 3, 3: 0}}
    step = w.step(
        obs(3.0, checkpoint(), latest=grown, partitions={"payments": 4}, earliest={"payments": {0: 0, 1: 0, 2: 0, 3: 0}})
    )
    assert step.exit[0] is ExitCode.PARTITIONS_CHANGED and "restarting with local[6]" in step.exit[1]
    assert step.record.wire()["partitions"] == {"payments": 4} and step.record.wire()["lag"]["payments"]["2"] == 3


def test_unknown_offsets_leave_health_unknown():
    w = watch()
    step = w.step(Observation(now=1.0, wall=T0, state=checkpoint()))
    assert (
        step.record.wire()["lag"] is None
        and step.record.wire()["totalLag"] is None
        and step.record.wire()["health"]["state"] == "Unknown"
    )


def test_records_carry_what_the_checkpoint_holds_and_a_recovery():
    w = Watch(spec(), "fraud", slots=4, partitions={"payments": 2}, starting_offsets="earliest", started_at=0.0,
              recovered=Recovered(reason="missing", batch_id=7, starting_offsets="{}"))  # fmt: skip
    record = w.step(obs(1.0, checkpoint(0, {"0": 1, "1": 1}), earliest={"payments": {0: 0, 1: 0}})).record
    assert record.wire()["checkpointHolds"] == {"sourceKinds": ["kafka"], "topics": ["payments"], "statefulOperators": []}
    assert record.wire()["recovered"]["batchId"] == 7 and record.wire()["checkpoint"] == "/ck"


def test_listener_rates_win_over_offset_deltas():
    w = Watch(validate_spec(query_spec(mode="microBatch")), "fraud", slots=4, partitions={"payments": 2},
              starting_offsets="earliest", started_at=0.0)  # fmt: skip
    rates = Rates(num_input_rows=12, input_rows_per_second=3.5, processed_rows_per_second=40.0)
    record = w.step(obs(1.0, checkpoint(0, {"0": 6, "1": 6}), earliest={"payments": {0: 0, 1: 0}}), rates).record
    assert (record.wire()["numInputRows"], record.wire()["inputRowsPerSecond"], record.wire()["processedRowsPerSecond"]) == (
        12,
        3.5,
        40.0,
    )


def test_sink_writes_a_line_per_record_and_keeps_the_latest(tmp_path):
    stream = io.StringIO()
    sink = ProgressSink(str(tmp_path / "progress.json"), stream)
    sink.emit(ProgressRecord(batch_id=1))
    sink.emit(ProgressRecord(batch_id=2))
    assert [json.loads(line)["batchId"] for line in stream.getvalue().splitlines()] == [1, 2]
    assert json.loads((tmp_path / "progress.json").read_text()) == ProgressRecord(batch_id=2).wire()
    assert sink.latest == ProgressRecord(batch_id=2)
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]  # no temp files left


def test_listener_numbers_are_kept_finite():
    from types import SimpleNamespace

    from app.monitoring.reporting import ListenerRates

    rates = ListenerRates()
    rates.update(SimpleNamespace(batchId=7, numInputRows=200, inputRowsPerSecond=float("nan"), processedRowsPerSecond=1234.5678))
    assert rates.latest() == Rates(batch_id=7, num_input_rows=200, input_rows_per_second=None, processed_rows_per_second=1234.568)


def test_the_watchdog_thread_reports_and_stops_on_a_verdict():
    from app.monitoring.watchdog import Watchdog

    class Canned(Watchdog):
        looks = 0

        def observe(self):
            self.looks += 1  # one second per look
            return obs(float(self.looks), checkpoint(), earliest={"payments": {0: 0, 1: 0}})

    stream = io.StringIO()
    dog = Canned(watch(), spec(), ProgressSink(None, stream), broker_timeout_s=30, period_s=0.01)
    dog.start()
    dog.join(10)
    assert not dog.is_alive() and dog.exit[0] is ExitCode.STALLED and dog.looks == 6
    states = [json.loads(line)["health"]["state"] for line in stream.getvalue().splitlines()]
    assert states[0] == "Healthy" and states[-1] == "Stalled"


def test_the_listener_reports_busy_time_from_trigger_execution():
    """Autoscaling reads the time batches ran (Spark's durationMs.triggerExecution) against the wall clock, never
    CPU: 3 batches of 2 s in the last 20 s is 30% busy; a minute later without a batch, 0%."""
    from types import SimpleNamespace

    from app.monitoring.reporting import BUSY_WINDOW_S, ListenerRates

    now = [1000.0]
    rates = ListenerRates(clock=lambda: now[0])
    assert rates.latest() == Rates()  # nothing yet: no busy time claimed
    for _ in range(3):
        now[0] += 20 / 3
        rates.update(SimpleNamespace(batchId=1, numInputRows=10, inputRowsPerSecond=5.0, processedRowsPerSecond=5.0,
                                     durationMs={"triggerExecution": 2000, "addBatch": 1500}))  # fmt: skip
    latest = rates.latest()
    assert latest.batch_duration_ms == 2000 and latest.busy_ratio == 0.3
    now[0] += BUSY_WINDOW_S + 1
    assert rates.latest().busy_ratio == 0.0
    rates.update(SimpleNamespace(batchId=2, numInputRows=0, inputRowsPerSecond=0.0, processedRowsPerSecond=0.0))
    assert rates.latest().batch_duration_ms is None and rates.latest().busy_ratio is None  # an older Spark: no durations
