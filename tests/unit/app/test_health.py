"""Lag, stalls and slots: the watchdog's arithmetic, without a broker or a clock."""

import pytest

from app.monitoring.health import (
    HealthState,
    StallClock,
    compute_lag,
    judge,
    partitions_changed,
    starting_positions,
)
from app.pipeline.kafka_checks import slot_shortage
from contract import ExitCode
from contract.checkpoint import offsets_json, parse_offsets_json
from contract.load import validate_spec
from testbed.specs import changed, query_spec, with_change

pytestmark = pytest.mark.unit

EARLIEST = {"t": {0: 5, 1: 0}}
LATEST = {"t": {0: 50, 1: 20}}


@pytest.mark.parametrize(("starting", "expected"), [
    ("earliest", {"t": {0: 5, 1: 0}}),
    ("latest", {"t": {0: 50, 1: 20}}),
    ('{"t":{"0":7,"1":-1}}', {"t": {0: 7, 1: 20}}),
    ('{"t":{"0":-2}}', {"t": {0: 5, 1: 0}}),  # a partition the JSON does not name starts at the earliest
])  # fmt: skip
def test_where_a_query_without_a_commit_starts(starting, expected):
    assert starting_positions(starting, EARLIEST, LATEST) == expected


def test_lag_is_latest_minus_committed_else_the_start():
    committed = {"t": {0: 45}}
    assert compute_lag(LATEST, committed, EARLIEST) == {"t": {0: 5, 1: 20}}
    assert compute_lag(LATEST, {"t": {0: 60, 1: 20}}, EARLIEST) == {"t": {0: 0, 1: 0}}  # never negative
    assert compute_lag({"t": {0: 9}, "new": {0: 3}}, {}, {"t": {0: 1}}) == {"t": {0: 8}}  # unknown start: left out


def test_offsets_json_round_trip():
    text = offsets_json({"b": {1: 2, 0: 1}, "a": {0: 9}})
    assert text == '{"a":{"0":9},"b":{"0":1,"1":2}}'
    assert parse_offsets_json(text) == {"a": {0: 9}, "b": {0: 1, 1: 2}}
    assert parse_offsets_json("latest") == {} and parse_offsets_json("[1]") == {}


def test_the_stall_clock_runs_only_while_input_waits_without_a_commit():
    clock = StallClock(started_at=0.0)
    assert clock.observe(1.0, None, 10) == 1.0  # input waits since the start
    assert clock.observe(5.0, None, 10) == 5.0
    assert clock.observe(6.0, 0, 10) == 0.0  # a commit
    assert clock.observe(9.0, 0, 10) == 3.0
    assert clock.observe(10.0, 0, 0) == 0.0  # caught up: an idle query is not stalled
    assert clock.observe(30.0, 0, 0) == 0.0
    assert clock.observe(31.0, 0, 4) == 1.0  # input again; the clock starts at the last idle look
    assert clock.observe(40.0, 0, None) == 10.0  # lag unknown: keeps running


def test_a_resumed_query_does_not_count_its_old_commit_as_new():
    clock = StallClock(started_at=100.0)
    assert clock.observe(101.0, 41, 7) == 1.0
    assert clock.observe(120.0, 41, 7) == 20.0


def test_judge():
    assert judge(30.0, 10.0, 5, 3).state is HealthState.STALLED
    verdict = judge(30.0, 10.0, 5, None)
    assert "no commit for 30.0s (limit 10s) since the query started while 5 record(s) wait" in verdict.message
    assert judge(30.0, 10.0, 0, 3).state is HealthState.HEALTHY
    assert judge(5.0, 10.0, 5, 3).state is HealthState.HEALTHY
    assert judge(30.0, 10.0, None, 3).state is HealthState.UNKNOWN


def _spec(mode="continuous", parallelism=None):
    return validate_spec(
        with_change(query_spec(mode=mode), "runtime", {} if parallelism is None else {"parallelism": parallelism})
    )


def test_slot_shortage_only_in_long_running_modes():
    assert slot_shortage(_spec(), {"t": 3}, 3) == (
        "continuous mode holds one task slot per source partition: 3 partitions need more than 3 slots, the query has 3"
    )
    assert slot_shortage(_spec(), {"t": 3}, 4) is None
    assert slot_shortage(_spec("microBatch"), {"t": 30}, 4) is None
    assert slot_shortage(_spec("realTime"), {"a": 2, "b": 2}, 4) is not None


def test_more_partitions_than_slots_restart_an_auto_sized_query_and_refuse_a_fixed_one():
    assert partitions_changed(_spec(), {"t": 2}, {"t": 2}, 4) is None
    assert partitions_changed(_spec(), {"t": 2}, {"t": 3}, 4) is None  # still fits: Spark takes them on
    code, message = partitions_changed(_spec(), {"t": 2}, {"t": 4}, 4)
    assert code is ExitCode.PARTITIONS_CHANGED
    assert "source partitions grew (t 2->4)" in message and "restarting with local[6]" in message
    code, message = partitions_changed(_spec(parallelism=4), {"t": 2}, {"t": 4}, 4)
    assert code is ExitCode.INVALID_SPEC and "spec.runtime.parallelism to at least 5" in message
    assert partitions_changed(_spec("microBatch"), {"t": 2}, {"t": 40}, 4) is None


def test_an_autoscaled_query_waits_for_the_operator_to_resize_it_within_its_max_executors():
    def autoscaled(max_executors: int):
        return validate_spec(changed(query_spec(mode="continuous"), {
            "runtime.executors": {"instances": 2, "cores": 2},
            "autoscaling": {"maxExecutors": max_executors, "recommendOnly": False}}))  # fmt: skip

    assert partitions_changed(autoscaled(3), {"t": 2}, {"t": 5}, 4) is None  # 6 slots at 3 executors: the operator's
    code, message = partitions_changed(autoscaled(2), {"t": 2}, {"t": 5}, 4)  # maxExecutors cannot hold them
    assert code is ExitCode.INVALID_SPEC and "source partitions grew (t 2->5)" in message
    recommending = changed(query_spec(mode="continuous"), {
        "runtime.executors": {"instances": 2, "cores": 2}, "autoscaling": {"maxExecutors": 3}})  # fmt: skip
    assert partitions_changed(validate_spec(recommending), {"t": 2}, {"t": 5}, 4) is not None  # nothing acts
