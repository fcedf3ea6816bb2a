"""Lag-driven autoscaling's decision (controller.decide.autoscale), on recorded progress series.

A series is a progress record every 10 s; each decision reads the status the previous one wrote, as the
operator's passes do. One executor here processes 1,000 rows per second of batch time; targetUtilization 0.7.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from contract.load import validate_spec
from contract.policy import Policy
from contract.progress import ProgressRecord
from contract.spec import QuerySpec
from controller.decide import Decision, ScaleExecutors, Verb
from controller.decide.autoscale import MAX_SAMPLES, size
from controller.phases import Phase, Reason
from controller.status import AutoscalingStatus, format_time
from testbed.specs import changed
from tests.unit.controller.world import T0, World, base_spec

pytestmark = pytest.mark.unit

PER_EXECUTOR = 1000.0  # rows per second of batch time
STEP_S = 10


def spec(executors: int = 2, mode: str = "microBatch", cores: int = 1, **auto: Any) -> QuerySpec:
    raw = changed(base_spec(mode=mode), {
        "runtime.executors": {"instances": executors, "cores": cores},
        "autoscaling": {"minExecutors": 1, "maxExecutors": 10, **auto},
    })  # fmt: skip
    return validate_spec(raw)


def record(t: float, input_: float, executors: int, lag: int = 0, busy: float | None = None, **more: Any) -> ProgressRecord:
    """What a driver with ``executors`` reports at T0 + t s: it processes PER_EXECUTOR rows/s each while busy."""
    capacity = PER_EXECUTOR * executors
    busy = min(1.0, input_ / capacity) if busy is None else busy
    fields = {"input_rows_per_second": input_, "processed_rows_per_second": capacity, "busy_ratio": busy,
              "total_lag": lag, "updated_at": format_time(T0 + timedelta(seconds=t)), **more}  # fmt: skip
    return ProgressRecord.model_validate(fields)


def replay(
    inputs: list[float], executors: int = 2, previous: AutoscalingStatus | None = None, lag_growth: int = 0, **auto: Any
) -> list[AutoscalingStatus]:
    """Decide once per record of the series ``inputs`` (input rows/s), each from the last decision's status."""
    s, out, lag = spec(executors, **auto), [], 0
    for i, input_ in enumerate(inputs):
        t = i * STEP_S
        lag += lag_growth
        previous = size(s.autoscaling, s, previous=previous, record=record(t, input_, executors, lag),
                        now=T0 + timedelta(seconds=t + 1))  # fmt: skip
        out.append(previous)
    return out


def changes(series: list[AutoscalingStatus]) -> list[tuple[int, int]]:
    """(index, recommended executors) where the recommendation changed."""
    found, last = [], series[0].recommended_executors
    for i, status in enumerate(series):
        if status.recommended_executors != last:
            found.append((i, status.recommended_executors))
            last = status.recommended_executors
    return found


def test_steady_input_holds():
    series = replay([1000.0] * 12)
    assert changes(series) == [] and {s.decision for s in series} == {"Hold"}
    assert series[0].reason.startswith("hold: measuring at 2 executors (1 of 3 records")
    assert "= 2 executors" in series[-1].reason and "busy 50%" in series[-1].reason


def test_step_up_scales_up_within_the_window():
    """Input 1,000 -> 3,500 rows/s with a growing backlog: (backlog/5m + 3,500/0.7) / 1,000 is 5 and more."""
    series = replay([1000.0] * 6 + [3500.0] * 18, lag_growth=2000)
    found = changes(series)
    first_up = found[0][0]
    assert series[first_up].decision == "ScaleUp" and (first_up - 6) * STEP_S <= 60  # within the stabilization window
    assert series[-1].recommended_executors >= 6 and "backlog" in series[-1].reason
    assert all((b - a) * STEP_S >= 60 for (a, _), (b, _) in zip(found, found[1:], strict=False))  # once per window


def test_step_down_waits_for_the_cool_down_and_halves_at_most():
    high = replay([4000.0] * 6, executors=6)
    assert high[-1].recommended_executors == 6  # 4,000/0.7 / 1,000 = 5.7
    after_change = high[-1].model_copy(update={"last_scale_up_time": format_time(T0)})  # the last scale-up: at T0
    series = replay([4000.0] * 6 + [500.0] * 36, executors=6, previous=after_change)
    found = changes(series)
    assert found and found[0][1] == 3  # 6 -> at most 50% fewer in one step (500/0.6 needs 1)
    assert found[0][0] * STEP_S >= 300 - STEP_S  # not within coolDown 5m of the change
    assert "coolDown 5m after a scale-up" in series[found[0][0] - 1].reason
    later = changes(series)[1:]
    assert later and (later[0][0] - found[0][0]) * STEP_S == 60  # then once per window, not once per coolDown
    assert series[found[0][0]].decision == "ScaleDown"


@pytest.mark.parametrize("high", [1500.0, 1800.0, 2200.0])
def test_oscillating_input_changes_at_most_once_per_window(high):
    """Input alternating around what 2 executors keep up with at 0.7 (1,400 rows/s): no flapping."""
    series = replay([1000.0, high] * 30)  # 10 minutes
    found = changes(series)
    assert all((b - a) * STEP_S >= 60 for (a, _), (b, _) in zip(found, found[1:], strict=False))
    assert len(found) <= 1, found  # hysteresis: up once, never back down while the average stays
    directions = [n for _, n in found]
    assert directions == sorted(directions)


def test_a_stale_record_holds_and_says_so():
    s = spec()
    fresh = replay([3000.0] * 4)[-1]
    late = T0 + timedelta(seconds=30 + 95)
    decided = size(s.autoscaling, s, previous=fresh, record=record(30, 9000.0, 2, lag=10**6), now=late)
    assert decided.decision == fresh.decision and decided.recommended_executors == fresh.recommended_executors
    assert decided.reason == "hold: the newest progress record is 95s old (at most 60s): no decision on stale rates"
    assert decided.samples == fresh.samples  # nothing learnt from it
    missing = size(s.autoscaling, s, previous=fresh, record=None, now=late)
    assert missing.reason == "hold: no progress record from the current driver yet"


def test_no_busy_time_no_estimate():
    s, previous = spec(), None
    for t in range(0, 40, STEP_S):
        r = record(t, 5000.0, 2).model_copy(update={"busy_ratio": None})
        previous = size(s.autoscaling, s, previous=previous, record=r, now=T0 + timedelta(seconds=t))
    assert previous is not None and previous.decision == "Hold" and "reports no busy time" in previous.reason


@pytest.mark.parametrize(
    ("mode", "partitions", "cores", "wanted"),
    [("continuous", 12, 4, 4), ("realTime", 12, 4, 4), ("continuous", 3, 1, 4), ("continuous", 40, 4, 10)],
)
def test_one_task_per_partition_caps_the_size(mode, partitions, cores, wanted):
    """Continuous and realTime: partitions + 1 slots, no more however large the backlog (capped at maxExecutors)."""
    s, previous = spec(4, mode=mode, cores=cores), None
    for i in range(4):
        t = i * STEP_S
        r = record(t, 50_000.0, 4, lag=10_000 * (i + 1), partitions={"payments": partitions})
        previous = size(s.autoscaling, s, previous=previous, record=r, now=T0 + timedelta(seconds=t))
    assert previous is not None and previous.recommended_executors == wanted
    assert f"{partitions} partitions need {partitions + 1} task slots" in previous.reason
    assert "more cannot help" in previous.reason and "only more partitions help" in previous.reason


def _scaled_up(processed_after: float) -> AutoscalingStatus:
    """2 executors at 2,000 rows/s behind a growing backlog; then 4 run, processing ``processed_after``."""
    s2, s4 = spec(2), spec(4)
    previous = None
    for i in range(4):
        r = record(i * STEP_S, 5000.0, 2, lag=20_000 * (i + 1))
        previous = size(s2.autoscaling, s2, previous=previous, record=r, now=T0 + timedelta(seconds=i * STEP_S))
    assert previous is not None and previous.decision == "ScaleUp"
    for i in range(4, 14):
        r = record(i * STEP_S, 5000.0, 4, lag=20_000 * (i + 1)).model_copy(update={"processed_rows_per_second": processed_after})
        previous = size(s4.autoscaling, s4, previous=previous, record=r, now=T0 + timedelta(seconds=i * STEP_S))
    assert previous is not None
    return previous


def test_an_ineffective_scale_up_is_not_repeated():
    stuck = _scaled_up(processed_after=2050.0)  # 4 executors, and the same rows per batch second: a bottleneck elsewhere
    assert stuck.last_scaling is not None and stuck.last_scaling.ineffective
    assert (stuck.last_scaling.from_executors, stuck.last_scaling.to_executors) == (2, 4)
    assert stuck.recommended_executors == 4 and stuck.decision == "Hold"
    assert "did not raise the processed rate" in stuck.reason
    helped = _scaled_up(processed_after=4000.0)
    assert helped.last_scaling is not None and helped.last_scaling.ineffective is False
    assert helped.recommended_executors > 4


def test_the_policy_caps_the_recommendation():
    """The spec keeps the policy when admitted; a policy lowered since caps the recommendation too."""
    s, previous = spec(2), None
    for i in range(4):
        t = i * STEP_S
        previous = size(s.autoscaling, s, previous=previous, record=record(t, 9000.0, 2, lag=10**5),
                        now=T0 + timedelta(seconds=t), policy=Policy(max_executors=3))  # fmt: skip
    assert previous is not None and previous.recommended_executors == 3
    assert "capped at 3 by policy.maxExecutors 3" in previous.reason
    assert size(s.autoscaling, s, previous=None, record=record(0, 9e9, 2), now=T0).recommended_executors == 2  # measuring


def test_max_and_min_executors_bound_it():
    assert replay([50_000.0] * 4, maxExecutors=5)[-1].recommended_executors == 5
    assert "capped at maxExecutors 5" in replay([50_000.0] * 4, maxExecutors=5)[-1].reason
    assert replay([10.0] * 4, executors=2, minExecutors=2)[-1].recommended_executors == 2


def test_the_history_is_bounded():
    series = replay([1000.0] * 200, stabilizationWindow="5m", coolDown="30m")
    assert max(len(s.samples) for s in series) == MAX_SAMPLES


# --- wired into decide: status only, and an event when the recommendation changes ---------------


def running_world() -> World:
    """A micro-batch query with 2 executors and autoscaling up to 8, its driver running."""
    w = World(changed(base_spec(mode="microBatch"), {
        "runtime.executors": {"instances": 2}, "autoscaling": {"maxExecutors": 8},
    }))  # fmt: skip
    w.reconcile()
    w.driver_runs()
    w.reconcile()
    return w


def test_a_running_query_reports_its_recommendation_and_changes_nothing():
    w = running_world()
    assert w.status.executors == 2 and w.status.executor_selector is not None
    assert "executor" in w.status.executor_selector
    decisions = []
    for i in range(6):
        w.advance(STEP_S)
        fields = record(0, 6000.0, 2, lag=30_000 * (i + 1)).model_dump(exclude_none=True)
        fields["updated_at"] = format_time(w.now)
        w.driver_reports(**{**fields, "timestamp": fields["updated_at"]})
        decisions.append(w.reconcile())
    assert all(d.verb is Verb.RUNNING and d.actions == () for d in decisions)
    auto = w.status.autoscaling
    assert auto is not None and auto.decision == "ScaleUp" and auto.recommended_executors == 8
    events = [e for d in decisions for e in d.events if e.reason == Reason.SCALE_RECOMMENDED]
    assert len(events) == 1 and events[0].message.startswith("8 executors recommended, 2 run (recommendOnly")
    assert w.status.dump()["autoscaling"]["recommendedExecutors"] == 8  # as the status subresource keeps it


def running_world_that_resizes(**auto: Any) -> World:
    """As running_world, with recommendOnly false: the driver pod resizes in place."""
    w = World(changed(base_spec(mode="microBatch"), {
        "runtime.executors": {"instances": 2},
        "autoscaling": {"maxExecutors": 8, "recommendOnly": False, "stabilizationWindow": "30s", "coolDown": "2m", **auto},
    }))  # fmt: skip
    w.reconcile()
    w.driver_runs()
    w.reconcile()
    return w


def feed(w: World, input_: float, lag: int) -> Decision:
    """One pass on a new record of ``input_`` rows/s with ``lag`` rows waiting, from the executors the pod has."""
    w.advance(STEP_S)
    executors = w.driver.executors_wanted or w.status.executors or 0
    fields = record(0, input_, executors, lag=lag).model_dump(exclude_none=True)
    fields["updated_at"] = format_time(w.now)
    w.driver_reports(**{**fields, "timestamp": fields["updated_at"]})
    return w.reconcile()


def test_recommend_only_false_resizes_the_running_driver_in_place_once_per_window():
    w = running_world_that_resizes()
    assert w.driver.executors_wanted == 2 and w.status.executors == 2
    decisions = [feed(w, 6000.0, 30_000 * (i + 1)) for i in range(3)]
    scaled = [a for d in decisions for a in d.actions]
    assert [(type(a).__name__, a.executors, a.before) for a in scaled] == [("ScaleExecutors", 8, 2)]
    assert decisions[-1].verb is Verb.RUNNING  # in place: no driver created or deleted
    assert w.driver.executors_wanted == 8 and w.status.executors == 8
    events = [e for d in decisions for e in d.events if e.reason == Reason.SCALED]
    assert len(events) == 1 and events[0].message.startswith(f"driver {w.driver.name}: 2 -> 8 executors: ")
    more = [feed(w, 6000.0, 0) for _ in range(3)]  # measured at 8: holds, the window is not over
    assert all(d.actions == () for d in more)
    assert w.status.autoscaling is not None and w.status.autoscaling.current_executors == 8


def test_recommend_only_false_scales_back_down_after_the_cool_down_only():
    w = running_world_that_resizes()
    for i in range(3):
        feed(w, 6000.0, 30_000 * (i + 1))
    assert w.driver.executors_wanted == 8
    quiet = [feed(w, 500.0, 0) for _ in range(18)]  # 3 minutes at 500 rows/s
    downs = [(a.before, a.executors, d_i) for d_i, d in enumerate(quiet) for a in d.actions]
    assert downs and downs[0][:2] == (8, 4), downs  # at most half fewer in one step
    assert downs[0][2] * STEP_S >= 120 - 3 * STEP_S, "not within coolDown 2m of the scale-up"
    assert w.driver.executors_wanted < 8


def test_recommend_only_false_with_a_driver_that_cannot_resize_says_so_and_changes_nothing():
    w = running_world_that_resizes()
    w.change(w.driver.name, executors_wanted=None)  # a driver made before resizing in place
    decisions = [feed(w, 6000.0, 30_000 * (i + 1)) for i in range(3)]
    assert all(d.actions == () for d in decisions)
    events = [e for d in decisions for e in d.events if e.reason == Reason.SCALE_RECOMMENDED]
    assert len(events) == 1 and "this driver cannot be resized in place" in events[0].message


def test_autoscaling_removed_clears_its_status():
    w = running_world()
    assert w.status.autoscaling is not None
    w.edit(autoscaling=None)
    decision = w.reconcile()
    assert w.status.autoscaling is None and decision.actions == ()  # not a run field: no new driver


def test_a_refused_write_of_the_driver_pod_keeps_its_size_and_warns_once():
    from dataclasses import replace

    from controller.decide import ActOutcome, ScaleExecutors, decide
    from controller.decide.acted import ScaleRefused

    w = running_world_that_resizes()
    for i in range(2):
        feed(w, 6000.0, 30_000 * (i + 1))
    w.advance(STEP_S)
    fields = record(0, 6000.0, 2, lag=90_000).model_dump(exclude_none=True)
    fields["updated_at"] = format_time(w.now)
    w.driver_reports(**{**fields, "timestamp": fields["updated_at"]})
    inputs = w.inputs()
    decided = decide(inputs)
    action = next(a for a in decided.actions if isinstance(a, ScaleExecutors))
    refused = ActOutcome(scale_refused=(ScaleRefused(action, 'pods "q-driver-1" is forbidden'),))
    after = decide(replace(inputs, acted=refused))
    assert after.status.executors == 2 and after.status.autoscaling is not None
    assert after.status.autoscaling.reason.endswith('not resized in place: pods "q-driver-1" is forbidden')
    assert [e.reason for e in after.events if e.reason in (Reason.SCALED, Reason.SCALE_REFUSED)] == [Reason.SCALE_REFUSED]
    again = decide(replace(inputs, status=after.status, acted=refused))  # the next pass, still refused: no new event
    assert not [e for e in again.events if e.reason == Reason.SCALE_REFUSED]


@pytest.mark.parametrize("change", [{"autoscaling.recommendOnly": True}, {"autoscaling": None}])
def test_a_driver_left_at_another_size_goes_back_to_the_spec_when_nothing_resizes_it(change):
    w = running_world_that_resizes()
    for i in range(3):
        feed(w, 6000.0, 30_000 * (i + 1))
    assert w.driver.executors_wanted == 8
    w.edit(**change)  # not a run field: the same driver
    decision = w.reconcile()
    assert [(a.before, a.executors) for a in decision.actions if isinstance(a, ScaleExecutors)] == [(8, 2)]
    assert w.driver.executors_wanted == 2 and w.status.executors == 2
    assert any(e.reason == Reason.SCALED and "8 -> 2 executors: runtime.executors.instances" in e.message
               for e in decision.events)  # fmt: skip
    assert w.reconcile().actions == ()  # and then nothing more


def test_small_batches_idle_most_of_the_time_do_not_hold_a_size_up():
    """What the e2e cluster showed: at 67 rows/s a batch is mostly its fixed cost, so its rows per second
    of batch time (47 per executor) understate an executor; 19% busy with nothing waiting is room enough."""
    s, previous = spec(2, coolDown="1m"), None
    for i in range(8):
        t = i * STEP_S
        fields = {"processed_rows_per_second": 94.0, "busy_ratio": 0.19}
        previous = size(s.autoscaling, s, previous=previous, record=record(t, 67.0, 2, lag=0, **fields),
                        now=T0 + timedelta(seconds=t + 1))  # fmt: skip
    assert previous.recommended_executors == 1, previous.reason
    assert "busy 19% with no backlog: ceil(2 x 0.19 / 0.7) = 1" in previous.reason


CONTINUOUS_STANDBY = {
    "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "ck"}},  # a second driver reaches it
    "runtime.executors": {"instances": 2, "cores": 1},
    "runtime.standby": True,  # warm upgrades with executors: the caps count a second driver's set
}


def continuous_with_a_standby(**auto: Any) -> World:
    """A continuous query of 2 one-core executors with recommendOnly false: q-driver-1 runs, q-driver-2 waits."""
    from controller.observe import DriverPhase

    w = World(changed(base_spec(mode="continuous"), {
        **CONTINUOUS_STANDBY, "autoscaling": {"maxExecutors": 8, "recommendOnly": False, "stabilizationWindow": "30s", **auto},
    }))  # fmt: skip
    w.reconcile()
    w.driver_runs()
    w.driver_reports(batchId=1)
    w.reconcile()  # the standby
    w.change("q-driver-2", phase=DriverPhase.RUNNING, started_at=w.now)  # its JVM up, waiting on the Lease
    assert w.reconcile().actions == ()
    return w


def report_partitions(w: World, partitions: int) -> Decision:
    w.advance(STEP_S)
    fields = record(0, 900.0, w.status.executors or 0, partitions={"payments": partitions}).model_dump(exclude_none=True)
    w.driver_reports(**{**fields, "updated_at": format_time(w.now), "timestamp": format_time(w.now)})
    return w.reconcile()


def test_recommend_only_false_in_continuous_mode_moves_to_a_driver_of_the_new_size():
    """Continuous tasks are fixed at start: partitions added while running need more slots than the driver has.
    The recommendation becomes the executors of the next driver, a warm upgrade through the Lease; the spec
    keeps the size its author wrote, and nothing is started again once the new driver runs."""
    from controller.decide import CreateDriver, DeleteDriver
    from controller.observe import DriverPhase

    w = continuous_with_a_standby()
    assert [report_partitions(w, 1).actions for _ in range(3)] == [(), (), ()]  # 1 partition: 2 slots, as it has
    grown = report_partitions(w, 4)  # 3 partitions added: 5 slots, 5 executors of 1 core
    scaled = [e.message for e in grown.events if e.reason == Reason.SCALED]
    assert len(scaled) == 1 and scaled[0].startswith(
        "2 -> 5 executors: a driver of 5 takes over from q-driver-1 (a warm upgrade): "
    )
    assert grown.actions == () and grown.requeue_after is not None and grown.requeue_after <= 1.0
    started = w.reconcile()  # the next pass: the run spec has the recommended size, a new spec_hash
    assert [a.name for a in started.actions if isinstance(a, DeleteDriver)] == ["q-driver-2"]  # the old size's standby
    (create,) = [a for a in started.actions if isinstance(a, CreateDriver)]
    assert (create.run.driver_name, create.run.standby, create.run.spec.runtime.executors.instances) == ("q-driver-3", True, 5)
    assert w.status.phase is Phase.UPGRADING and w.status.upgrade is not None and w.status.upgrade.state == "Warming"
    assert validate_spec(w.spec).runtime.executors.instances == 2  # the spec is the author's: no write to it
    w.change("q-driver-3", phase=DriverPhase.RUNNING, started_at=w.now, ready=True)  # warm
    handed = w.reconcile()
    assert [a.name for a in handed.actions if isinstance(a, DeleteDriver)] == ["q-driver-1"]
    later = w.settle()
    later.append(report_partitions(w, 4))
    assert w.status.driver == "q-driver-3" and w.status.phase is Phase.RUNNING and w.status.executors == 5
    later += [report_partitions(w, 4) for _ in range(4)]  # measured at 5: holds; its new standby is of 5 too
    created = [a.run for d in later for a in d.actions if isinstance(a, CreateDriver)]
    assert [(r.standby, r.spec.runtime.executors.instances) for r in created] == [(True, 5)]
    assert w.status.autoscaling is not None and w.status.autoscaling.current_executors == 5


def test_without_a_standby_a_continuous_query_is_resized_by_a_restart_and_says_so():
    from controller.decide import CreateDriver

    w = World(changed(base_spec(mode="continuous"), {
        **CONTINUOUS_STANDBY, "runtime.standby": False, "autoscaling": {"maxExecutors": 8, "recommendOnly": False},
    }))  # fmt: skip
    w.reconcile()
    w.driver_runs()
    w.reconcile()
    decisions = [report_partitions(w, 4) for _ in range(4)]
    decisions += w.settle()
    events = [e.message for d in decisions for e in d.events if e.reason == Reason.SCALED]
    assert len(events) == 1 and "(a restart: no warm upgrade for this query)" in events[0]
    why = "not a warm upgrade: the query runs executors and has no standby"
    assert any(why in (d.status.message or "") for d in decisions), [d.status.message for d in decisions]
    created = [a.run.spec.runtime.executors.instances for d in decisions for a in d.actions if isinstance(a, CreateDriver)]
    assert created == [5]


def test_turning_recommend_only_back_on_in_continuous_mode_returns_to_the_specs_size():
    from controller.decide import CreateDriver

    w = continuous_with_a_standby()
    for _ in range(4):
        report_partitions(w, 4)
    w.reconcile()
    assert w.status.upgrade is not None and w.status.upgrade.state == "Warming"  # to 5 executors
    w.edit(**{"autoscaling.recommendOnly": True})  # before it took over: back to the spec's 2, warm again
    d = w.reconcile()
    created = [a.run.spec.runtime.executors.instances for a in d.actions if isinstance(a, CreateDriver)]
    assert created == [2]
