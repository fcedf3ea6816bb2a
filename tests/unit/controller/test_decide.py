"""Reconcile decisions, table by table: every phase transition without a cluster."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from contract.compat import source_change
from controller.decide import CreateDriver, DeleteDriver
from controller.decide.restart import backoff_delay
from controller.observe import DriverPhase
from controller.phases import ConditionType, Phase, Reason
from controller.status import QueryStatus, format_time, parse_time
from tests.unit.controller.world import UID, World, base_spec

pytestmark = pytest.mark.unit


def conditions(status: QueryStatus) -> dict[str, str]:
    return {c.type.value: c.status for c in status.conditions}


def creates(decision) -> list[CreateDriver]:
    return [a for a in decision.actions if isinstance(a, CreateDriver)]


def deletes(decision) -> list[str]:
    return [a.name for a in decision.actions if isinstance(a, DeleteDriver)]


def event_reasons(decision) -> list[str]:
    return [e.reason for e in decision.events]


def running_world(**spec_changes) -> World:
    w = World(base_spec(**spec_changes))
    w.reconcile()
    w.driver_runs()
    w.reconcile()
    assert w.status.phase is Phase.RUNNING
    return w


# --- start, run, stay still --------------------------------------------------------


def test_a_new_query_gets_its_first_driver():
    w = World()
    d = w.reconcile()
    assert d.verb == "create"
    (create,) = creates(d)
    assert create.run.attempt == 1 and create.run.driver_name == "q-driver-1"
    assert create.run.checkpoint_location == "/checkpoints/q"
    st = d.status
    assert (st.phase, st.attempt, st.driver, st.driver_kind, st.restarts) == (Phase.STARTING, 1, "q-driver-1", "Pod", 0)
    assert st.observed_generation == 1 and st.mode == "continuous"
    assert (st.reconciled.source.kind, st.reconciled.source.topics) == ("kafka", ["payments"])
    assert st.reconciled.checkpoint_location == "/checkpoints/q" and st.reconciled.mode == "continuous"
    assert st.checkpoint.location == "/checkpoints/q" and st.checkpoint.resets == 0
    assert conditions(st) == {
        "Ready": "False",
        "Progressing": "True",
        "Reconciling": "True",
        "Stalled": "False",
        "Degraded": "False",
    }
    assert event_reasons(d) == [Reason.CREATED]


def test_reconciling_again_changes_nothing():
    w = World()
    w.reconcile()
    before = w.status.dump()
    d = w.reconcile()
    assert d.verb == "wait" and d.actions == () and d.events == ()
    assert d.status.dump() == before


def test_a_running_driver_makes_the_query_ready_once():
    w = World()
    w.reconcile()
    w.driver_runs()
    d = w.reconcile()
    assert d.status.phase is Phase.RUNNING
    assert conditions(d.status) == {
        "Ready": "True",
        "Progressing": "False",
        "Reconciling": "False",
        "Stalled": "False",
        "Degraded": "False",
    }
    assert d.status.driver_start_time == "2026-01-01T12:00:00Z"
    assert event_reasons(d) == [Reason.DRIVER_RUNNING]
    ready = d.status.condition(ConditionType.READY)
    w.advance(30)
    again = w.reconcile()
    assert again.events == () and again.actions == ()
    assert again.status.condition(ConditionType.READY).last_transition_time == ready.last_transition_time


# --- failures, backoff, limits ---------------------------------------------------------


def test_a_failed_driver_is_restarted_after_the_backoff_on_the_same_checkpoint():
    w = running_world()
    w.advance(60)
    w.driver_exits(70, "QUERY_FAILED: task failed")
    d = w.reconcile()
    assert d.verb == "backoff" and d.actions == ()  # the failed pod stays for `kubectl logs`
    st = d.status
    assert st.phase is Phase.RESTARTING and st.restarts == 1
    assert st.next_restart_time == "2026-01-01T12:01:05Z"
    assert st.last_failure.exit_code == 70 and st.last_failure.attempt == 1
    assert "QUERY_FAILED: task failed" in st.last_failure.message
    assert conditions(st) == {
        "Ready": "False",
        "Progressing": "True",
        "Reconciling": "True",
        "Stalled": "False",
        "Degraded": "True",
    }  # retried: not Stalled
    assert d.requeue_after == pytest.approx(5)
    assert event_reasons(d) == [Reason.DRIVER_FAILED] and d.events[0].type == "Warning"
    assert d.restarted

    w.advance(4)
    d = w.reconcile()
    assert d.verb == "backoff" and d.actions == () and d.events == ()
    assert d.status.restarts == 1 and d.requeue_after == pytest.approx(1)

    w.advance(1)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and not creates(d)  # the old driver goes first
    d = w.reconcile()
    (create,) = creates(d)
    assert create.run.attempt == 2 and create.run.checkpoint_location == "/checkpoints/q"
    assert d.status.restarts == 1 and d.status.phase is Phase.STARTING
    assert "restarting" in d.events[0].message


@pytest.mark.parametrize(
    ("initial", "maximum", "expected"),
    [
        ("5s", "5m", [5, 10, 20, 40, 80, 160, 300, 300]),
        ("1s", "8s", [1, 2, 4, 8, 8]),
        ("500ms", "1s", [0.5, 1, 1]),
        ("2s", "2s", [2, 2, 2]),
    ],
)
def test_backoff_doubles_up_to_the_cap(initial, maximum, expected):
    assert [backoff_delay(n, initial, maximum) for n in range(1, len(expected) + 1)] == expected


def test_the_backoff_sequence_through_reconciles():
    w = World(base_spec(**{"restartPolicy.backoff": {"initial": "1s", "max": "4s"}, "restartPolicy.maxRestarts": None}))
    w.reconcile()
    delays = []
    for _ in range(5):
        w.driver_runs()
        w.reconcile()
        w.driver_exits(70)
        d = w.reconcile()
        delays.append((parse_time(d.status.next_restart_time) - w.now).total_seconds())
        w.advance(delays[-1])
        w.settle()  # delete, create
    assert delays == [1, 2, 4, 4, 4]
    assert w.status.restarts == 5 and w.status.attempt == 6


def test_max_restarts_exhausted_means_failed_and_stays_failed():
    w = World(base_spec(**{"restartPolicy.maxRestarts": 2, "restartPolicy.backoff": {"initial": "1s", "max": "1s"}}))
    w.reconcile()
    for _ in range(2):
        w.driver_exits(70)
        w.reconcile()
        w.advance(1)
        w.settle()
    assert w.status.restarts == 2 and w.status.attempt == 3
    w.driver_exits(70, "QUERY_FAILED: again")
    d = w.reconcile()
    assert d.verb == "fail" and d.actions == ()
    assert d.status.phase is Phase.FAILED
    assert d.status.message.startswith("gave up after 2 restart(s) (maxRestarts 2)")
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.RESTART_LIMIT)
    assert event_reasons(d) == [Reason.RESTART_LIMIT]
    w.advance(3600)
    still = w.reconcile()
    assert still.verb == "nothing" and still.actions == () and still.events == ()
    assert still.status.dump() == d.status.dump()


def test_max_restarts_zero_fails_on_the_first_failure():
    w = World(base_spec(**{"restartPolicy.maxRestarts": 0}))
    w.reconcile()
    w.driver_exits(70)
    assert w.reconcile().status.phase is Phase.FAILED


def test_max_restarts_minus_one_never_gives_up():
    w = World(base_spec(**{"restartPolicy.maxRestarts": -1, "restartPolicy.backoff": {"initial": "1s", "max": "1s"}}))
    w.reconcile()
    for _ in range(15):  # beyond the default limit of 10
        w.driver_exits(70)
        d = w.reconcile()
        assert d.status.phase is Phase.RESTARTING
        assert "restart " in d.status.message and "/" not in d.status.message.split(" at ")[0]
        w.advance(1)
        w.settle()
    assert w.status.restarts == 15


def test_an_unwritable_checkpoint_is_retried_and_named():
    w = World()
    w.reconcile()
    w.driver_exits(73, "CHECKPOINT_UNWRITABLE: cannot write checkpoint /checkpoints/q: directory /checkpoints is owned by uid 0")
    d = w.reconcile()
    assert d.status.phase is Phase.RESTARTING and d.status.last_failure.reason == Reason.CHECKPOINT_UNWRITABLE
    assert "exit 73 (CHECKPOINT_UNWRITABLE)" in d.status.message and "owned by uid 0" in d.status.message
    assert event_reasons(d) == [Reason.CHECKPOINT_UNWRITABLE]


@pytest.mark.parametrize(("code", "reason"), [(64, Reason.INVALID_SPEC), (65, Reason.QUERY_REFUSED)])
def test_exit_64_and_65_mean_invalid_and_are_never_retried(code, reason):
    w = World()
    w.reconcile()
    w.driver_exits(code, "QUERY_REFUSED: Continuous processing does not support Aggregate operations.")
    d = w.reconcile()
    assert d.verb == "invalid" and d.actions == () and not d.restarted
    assert d.status.phase is Phase.INVALID and d.status.restarts == 0
    assert d.status.last_failure.exit_code == code and d.status.last_failure.reason == reason
    assert "does not support Aggregate" in d.status.message
    assert conditions(d.status)["Degraded"] == "True"
    for _ in range(3):
        w.advance(600)
        again = w.reconcile()
        assert again.verb == "nothing" and again.actions == () and again.events == ()


@pytest.mark.parametrize(
    ("policy", "mode", "code", "phase"),
    [
        ("Always", "continuous", 70, Phase.RESTARTING),
        ("Always", "continuous", 69, Phase.RESTARTING),
        ("Always", "continuous", 130, Phase.RESTARTING),
        ("Always", "continuous", 137, Phase.RESTARTING),
        ("Always", "continuous", 0, Phase.RESTARTING),
        ("OnFailure", "continuous", 70, Phase.RESTARTING),
        ("OnFailure", "continuous", 0, Phase.COMPLETED),
        ("Never", "continuous", 70, Phase.FAILED),
        ("Never", "continuous", 0, Phase.COMPLETED),
        ("Always", "availableNow", 0, Phase.COMPLETED),
        ("Always", "microBatch", 0, Phase.RESTARTING),
        ("Never", "availableNow", 65, Phase.INVALID),
    ],
)
def test_how_an_ended_driver_is_classified(policy, mode, code, phase):
    triggers = {"continuous": {"continuous": {}}, "availableNow": {"availableNow": {}}, "microBatch": {"microBatch": {}}}
    w = World(base_spec(**{"restartPolicy.type": policy, "trigger": triggers[mode]}))
    w.reconcile()
    w.driver_runs()
    w.reconcile()
    w.driver_exits(code)
    assert w.reconcile().status.phase is phase


def test_running_stably_resets_the_restart_counter():
    w = World(base_spec(**{"restartPolicy.backoff": {"initial": "1s", "max": "1s"}, "restartPolicy.stableAfter": "10m"}))
    w.reconcile()
    for _ in range(2):
        w.driver_exits(70)
        w.reconcile()
        w.advance(1)
        w.settle()
    w.driver_runs()
    d = w.reconcile()
    assert d.status.restarts == 2 and d.requeue_after == pytest.approx(600)
    w.advance(599)
    d = w.reconcile()
    assert d.status.restarts == 2 and d.requeue_after == pytest.approx(1)
    w.advance(1)
    d = w.reconcile()
    assert d.status.restarts == 0 and event_reasons(d) == [Reason.STABLE]
    assert d.status.last_failure is not None  # history stays
    assert w.reconcile().events == ()


def test_a_driver_that_disappears_counts_as_a_failure():
    w = running_world()
    w.drivers.clear()  # deleted by someone, or its node died
    d = w.reconcile()
    assert d.status.phase is Phase.RESTARTING and d.status.restarts == 1
    assert d.status.last_failure.reason == Reason.DRIVER_LOST and d.status.last_failure.attempt == 1
    assert d.actions == ()
    w.advance(5)
    d = w.reconcile()
    assert creates(d)[0].run.attempt == 2
    assert d.status.restarts == 1  # counted once


def test_a_driver_deleted_during_the_backoff_is_not_counted_twice():
    w = running_world()
    w.driver_exits(70)
    w.reconcile()
    w.drivers.clear()
    d = w.reconcile()
    assert d.verb == "backoff" and d.status.restarts == 1


# --- never two drivers -------------------------------------------------------------------


def test_nothing_is_created_while_another_driver_is_terminating():
    w = running_world()
    w.edit(**{"transforms": [{"where": "value > 1"}], "upgrade": {"strategy": "restart"}})
    d = w.reconcile(apply=False)
    assert deletes(d) == ["q-driver-1"]
    w.drivers[0] = w.drivers[0].__class__(**{**w.drivers[0].__dict__, "deleting": True})
    w.status = d.status
    for _ in range(3):
        d = w.reconcile()
        assert d.verb == "wait" and not creates(d) and not deletes(d)
    w.drivers.clear()
    assert creates(w.reconcile())[0].run.attempt == 2


def test_a_driver_left_by_an_earlier_query_of_the_same_name_blocks_until_collected_never_deleted_by_us():
    w = World()
    w.add_driver(name="q-driver-1", attempt=1, owner_uid="older-uid", owner_kind="StreamingQuery", phase=DriverPhase.RUNNING)
    d = w.reconcile()
    assert not deletes(d) and not creates(d)  # garbage collection removes it with the query that owned it
    assert d.status.phase is Phase.PENDING and "waiting for q-driver-1" in d.status.message
    w.drivers.clear()
    assert creates(w.reconcile())[0].run.attempt == 1


@pytest.mark.parametrize("owner_kind", [None, "ReplicaSet", "Job"])
def test_a_pod_labelled_like_a_driver_that_the_query_does_not_control_is_neither_deleted_nor_counted(owner_kind):
    w = World()
    w.add_driver(name="q-driver-1", attempt=5, owner_uid="someone-else", owner_kind=owner_kind, phase=DriverPhase.RUNNING)
    d = w.reconcile()
    assert not deletes(d)
    assert [c.run.attempt for c in creates(d)] == [1]  # its attempt label is not believed either


def test_an_invalid_spec_stops_only_the_query_own_drivers():
    w = World()
    w.add_driver(name="other", attempt=1, owner_uid="someone-else", owner_kind="ReplicaSet", phase=DriverPhase.RUNNING)
    w.spec["trigger"] = {"bogus": {}}
    assert not deletes(w.reconcile())


@pytest.mark.parametrize("name", ["fraud.filter", "a" * 41, "Payments"])
def test_a_query_whose_name_would_make_ambiguous_children_is_invalid_before_any_child(name):
    w = World()
    w.name = name
    d = w.reconcile()
    assert d.status.phase is Phase.INVALID and not creates(d)
    assert "metadata.name" in d.status.message


def test_a_driver_created_just_before_a_crash_is_adopted_not_duplicated():
    w = World()
    w.reconcile()
    created = w.drivers[0]
    w.status = QueryStatus()  # the status write was lost
    d = w.reconcile()
    assert not creates(d) and not deletes(d)
    assert d.status.attempt == 1 and d.status.driver == created.name
    assert d.status.reconciled == QueryStatus.model_validate(w.history[0].status.dump()).reconciled


def test_an_older_attempt_still_present_is_deleted():
    w = running_world()
    w.add_driver(name="q-driver-0", attempt=0, spec_hash="x")
    w.drivers.reverse()
    d = w.reconcile()
    assert deletes(d) == ["q-driver-0"]


# --- spec changes -----------------------------------------------------------------------


def test_a_compatible_change_with_strategy_restart_restarts_on_the_same_checkpoint():
    w = running_world()
    w.edit(**{"transforms": [{"where": "value > 1"}], "upgrade": {"strategy": "restart"}})
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and d.status.phase is Phase.RESTARTING
    assert event_reasons(d) == [Reason.SPEC_CHANGED] and d.status.observed_generation == 2
    d = w.reconcile()
    (create,) = creates(d)
    assert create.run.attempt == 2 and create.run.checkpoint_location == "/checkpoints/q"
    assert create.run.spec.transforms[0].where == "value > 1"
    assert d.status.restarts == 0  # a change is not a failure


def test_restart_policy_changes_do_not_restart_the_driver():
    w = running_world()
    w.edit(**{"restartPolicy.maxRestarts": 50})
    d = w.reconcile()
    assert d.actions == () and d.status.phase is Phase.RUNNING and d.status.observed_generation == 2


def test_a_new_restart_nonce_forces_a_restart():
    w = running_world()
    w.edit(restartNonce="2026-01-01")
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and event_reasons(d) == [Reason.RESTART_REQUESTED]
    assert creates(w.reconcile())[0].run.attempt == 2


def test_a_nonce_restart_is_named_so_even_when_the_status_write_after_the_create_was_lost():
    w = World()
    w.reconcile()  # creates driver 1 ...
    w.status = QueryStatus()  # ... but the status write lost a race with the user's edit:
    w.edit(restartNonce="again")
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and event_reasons(d) == [Reason.RESTART_REQUESTED]


def test_a_real_change_with_a_nonce_is_a_spec_change():
    w = running_world()
    w.edit(restartNonce="again", transforms=[{"where": "value > 1"}])
    assert event_reasons(w.reconcile()) == [Reason.SPEC_CHANGED]


def test_drivers_without_a_recorded_nonce_restart_on_a_new_nonce_as_on_a_spec_change():
    """Status no longer keeps the last spec to tell a nonce-only change apart for a driver made
    before the nonce annotation: it is still replaced, named as a spec change."""
    w = running_world()
    w.drivers[0] = replace(w.drivers[0], restart_nonce=None, fenced=False)  # made by an operator before the annotation
    w.edit(restartNonce="again")
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and event_reasons(d) == [Reason.SPEC_CHANGED]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"source.kafka.topics": ["orders"]}, "spec.source.kafka.topics"),
        ({"source.kafka.topics": ["payments", "refunds"]}, "spec.source.kafka.topics"),
        ({"source.kafka.topics": None, "source.kafka.pattern": "pay.*"}, "spec.source.kafka"),
        ({"source": {"rate": {"numPartitions": 1}}}, "spec.source changed from kafka to rate"),
    ],
)
def test_an_incompatible_source_change_is_refused_naming_the_field(change, field):
    w = running_world()
    w.edit(**change)
    d = w.reconcile()
    assert d.actions == ()  # the running query is left alone
    assert d.status.phase is Phase.RUNNING and d.status.observed_generation == 2
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.INCOMPATIBLE_CHANGE)
    assert field in degraded.message and "spec.checkpoint.location" in degraded.message
    assert event_reasons(d) == [Reason.INCOMPATIBLE_CHANGE] and d.events[0].type == "Warning"
    assert (d.status.reconciled.source.kind, d.status.reconciled.source.topics) == ("kafka", ["payments"])  # the old one
    again = w.reconcile()
    assert again.events == () and again.actions == ()  # said once


def test_a_refused_change_does_not_restart_the_previous_spec_once_its_driver_ended():
    """Status keeps a hash and the source of the previous spec, not the spec: its driver runs on,
    but when it ends nothing is started until the spec is one the checkpoint can take."""
    w = running_world()
    w.edit(**{"source.kafka.topics": ["orders"]})
    w.reconcile()
    w.driver_exits(70)
    w.settle()
    w.advance(600)
    w.settle()
    assert not w.drivers and w.status.phase is Phase.PENDING
    assert w.status.condition(ConditionType.READY).reason == Reason.INCOMPATIBLE_CHANGE
    assert w.status.condition(ConditionType.DEGRADED).reason == Reason.INCOMPATIBLE_CHANGE
    assert w.status.mode == "continuous"
    w.edit(**{"source.kafka.topics": ["payments"], "transforms": [{"where": "value > 3"}]})  # compatible again
    (create,) = creates(w.reconcile())
    assert create.run.spec.transforms[0].where == "value > 3" and create.run.checkpoint_location == "/checkpoints/q"


def test_status_keeps_what_the_gate_needs_not_the_spec():
    w = World(
        base_spec(**{"runtime.sparkConf": {"spark.sql.shuffle.partitions": "7"}, "transforms": [{"where": "value > 424242"}]})
    )
    w.reconcile()
    text = json.dumps(w.status.dump())
    assert "424242" not in text and "shuffle" not in text and "kafka:9092" not in text
    assert set(w.status.dump()["reconciled"]) == {"specHash", "checkpointLocation", "source", "mode"}


def test_a_status_written_by_the_previous_release_is_read_then_rewritten_without_the_spec():
    """streamq 0.1.0 kept the whole spec in status.lastReconciledSpec: the gate still reads it
    (one release), and the first status patch removes it."""
    from contract.load import dump_spec, validate_spec
    from controller.status import status_patch

    w = running_world()
    wire = w.status.dump()
    del wire["reconciled"]
    wire["lastReconciledSpec"] = dump_spec(validate_spec(w.spec))
    w.status = QueryStatus.parse(wire)
    w.edit(**{"source.kafka.topics": ["orders"]})
    d = w.reconcile()
    assert d.actions == () and d.status.condition(ConditionType.DEGRADED).reason == Reason.INCOMPATIBLE_CHANGE
    patch = status_patch(wire, d.status.dump())
    assert patch["lastReconciledSpec"] is None and patch["reconciled"]["source"]["topics"] == ["payments"]


def test_reordering_topics_is_not_a_source_change():
    w = World(base_spec(**{"source.kafka.topics": ["a", "b"]}))
    w.reconcile()
    w.edit(**{"source.kafka.topics": ["b", "a"]})
    d = w.reconcile()
    assert d.status.condition(ConditionType.DEGRADED).status == "False"


def test_a_source_change_with_a_new_checkpoint_location_is_accepted():
    w = running_world()
    w.edit(**{"source.kafka.topics": ["orders"], "checkpoint.location": "/checkpoints/q-orders"})
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"]
    d = w.reconcile()
    (create,) = creates(d)
    assert create.run.checkpoint_location == "/checkpoints/q-orders"
    assert d.status.checkpoint.location == "/checkpoints/q-orders"
    assert d.status.condition(ConditionType.DEGRADED).status == "False"


def test_new_checkpoint_policy_starts_a_fresh_checkpoint_next_to_the_old_one():
    w = running_world(**{"checkpoint.onIncompatibleChange": "newCheckpoint"})
    w.edit(**{"source.kafka.topics": ["orders"]})
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"]
    d = w.reconcile()
    (create,) = creates(d)
    assert create.run.checkpoint_location == "/checkpoints/q-reset-1"
    assert d.status.checkpoint.resets == 1
    assert Reason.NEW_CHECKPOINT in event_reasons(d)
    w.driver_runs()
    w.settle()
    assert w.status.checkpoint.location == "/checkpoints/q-reset-1"  # and it stays there
    w.edit(**{"transforms": [{"where": "value > 2"}]})
    w.settle()
    assert w.drivers[-1].spec_hash == w.run_spec_hash(location="/checkpoints/q-reset-1")


def test_a_refused_change_can_still_be_suspended():
    w = running_world()
    w.edit(**{"source.kafka.topics": ["orders"], "suspend": True})
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and d.status.phase is Phase.SUSPENDED


def test_source_change_helper():
    from contract.load import validate_spec

    a = validate_spec(base_spec())
    assert source_change(a, a) is None
    assert source_change(a, validate_spec(base_spec(**{"source.kafka.bootstrapServers": "other:9092"}))) is None


# --- suspend / resume ----------------------------------------------------------------------


def test_suspend_deletes_the_driver_and_resume_starts_a_new_one():
    w = running_world()
    w.edit(suspend=True)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and d.status.phase is Phase.SUSPENDED
    assert event_reasons(d) == [Reason.SUSPENDED]
    assert conditions(d.status) == {
        "Ready": "False",
        "Progressing": "False",
        "Reconciling": "False",
        "Stalled": "False",
        "Degraded": "False",
    }
    d = w.reconcile()
    assert d.actions == () and d.events == () and d.status.phase is Phase.SUSPENDED
    assert d.status.message.startswith("suspended")
    w.edit(suspend=False)
    d = w.reconcile()
    (create,) = creates(d)
    assert create.run.attempt == 2 and create.run.checkpoint_location == "/checkpoints/q"
    assert Reason.RESUMED in event_reasons(d)


def test_a_query_created_suspended_never_starts():
    w = World(base_spec(suspend=True))
    d = w.reconcile()
    assert d.actions == () and d.status.phase is Phase.SUSPENDED


# --- invalid specs ---------------------------------------------------------------------------


def test_a_spec_the_static_rules_refuse_is_invalid_with_every_problem_listed():
    spec = base_spec(
        transforms=[{"sql": "SELECT count(*) FROM input GROUP BY key"}],
        **{"runtime.parallelism": 1, "source": {"rate": {"numPartitions": 2}}},
    )
    w = World(spec)
    d = w.reconcile()
    assert d.verb == "invalid" and d.actions == ()
    assert d.status.phase is Phase.INVALID
    assert "spec.transforms[0].sql" in d.status.message and "spec.runtime.parallelism" in d.status.message
    assert event_reasons(d) == [Reason.INVALID_SPEC]
    assert w.reconcile().events == ()


def test_an_update_to_an_invalid_spec_stops_the_driver_and_a_fix_starts_it_again():
    w = running_world()
    good = w.spec
    w.edit(transforms=[{"select": ["count(*)"]}])
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and d.status.phase is Phase.INVALID
    w.spec, w.generation = good, w.generation + 1
    d = w.reconcile()
    assert creates(d)[0].run.attempt == 2 and d.status.phase is Phase.STARTING


def test_a_terminal_query_starts_again_when_the_spec_changes():
    w = World(base_spec(**{"restartPolicy.maxRestarts": 0}))
    w.reconcile()
    w.driver_exits(70)
    w.reconcile()
    assert w.status.phase is Phase.FAILED
    w.edit(**{"restartPolicy.maxRestarts": 5})
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and d.status.phase is Phase.RESTARTING and d.status.restarts == 0
    d = w.reconcile()
    assert creates(d)[0].run.attempt == 2


def test_create_failure_is_reported_and_retried():
    from controller.decide import creation_failed

    w = World()
    inputs = w.inputs()
    d = w.reconcile(apply=False)
    failed = creation_failed(d, inputs, 'pods "q-driver-1" is forbidden: exceeded quota', 15)
    assert failed.status.phase is Phase.PENDING and failed.status.attempt == 0
    degraded = failed.status.condition(ConditionType.DEGRADED)
    assert degraded.status == "True" and degraded.reason == Reason.DRIVER_CREATE_FAILED
    assert "exceeded quota" in failed.status.message and failed.requeue_after == 15


# --- the transition table ---------------------------------------------------------------------


def _world_in(phase: str) -> World:
    w = World(base_spec(**{"restartPolicy.maxRestarts": 1, "restartPolicy.backoff": {"initial": "1s", "max": "1s"}}))
    w.reconcile()
    if phase == "Starting":
        return w
    if phase == "Running":
        w.driver_runs()
        w.reconcile()
    elif phase == "Restarting":
        w.driver_exits(70)
        w.reconcile()
    elif phase == "Suspended":
        w.edit(suspend=True)
        w.settle()
    elif phase == "Failed":
        w.edit(**{"restartPolicy.maxRestarts": 0})
        w.driver_exits(70)
        w.reconcile()
    elif phase == "Invalid":
        w.driver_exits(65)
        w.reconcile()
    elif phase == "Completed":
        w.edit(**{"restartPolicy.type": "Never"})
        w.driver_exits(0)
        w.reconcile()
    assert w.status.phase.value == phase
    return w


@pytest.mark.parametrize(
    ("start", "event", "expected"),
    [
        ("Pending", "reconcile", "Starting"),
        ("Starting", "driver runs", "Running"),
        ("Starting", "driver fails", "Restarting"),
        ("Starting", "driver refused", "Invalid"),
        ("Starting", "suspend", "Suspended"),
        ("Running", "driver fails", "Restarting"),
        ("Running", "driver lost", "Restarting"),
        ("Running", "spec change", "Starting"),  # replaced at once, no backoff (its checkpoint is the pod's own: not warm)
        ("Running", "suspend", "Suspended"),
        ("Running", "invalid spec", "Invalid"),
        ("Restarting", "backoff elapses", "Starting"),
        ("Restarting", "suspend", "Suspended"),
        ("Suspended", "resume", "Starting"),
        ("Failed", "spec change", "Starting"),
        ("Invalid", "spec change", "Starting"),
        ("Completed", "spec change", "Starting"),
        ("Failed", "time passes", "Failed"),
        ("Invalid", "time passes", "Invalid"),
        ("Completed", "time passes", "Completed"),
    ],
)
def test_phase_transitions(start, event, expected):
    if start == "Pending":
        w = World()
    else:
        w = _world_in(start)
    match event:
        case "reconcile":
            pass
        case "driver runs":
            w.driver_runs()
        case "driver fails":
            w.driver_exits(70)
        case "driver refused":
            w.driver_exits(65)
        case "driver lost":
            w.drivers.clear()
        case "spec change":
            w.edit(**{"transforms": [{"where": "value > 7"}]})
        case "suspend":
            w.edit(suspend=True)
        case "resume":
            w.edit(suspend=False)
        case "invalid spec":
            w.edit(**{"transforms": [{"select": ["max(value)"]}]})
        case "backoff elapses":
            w.advance(1)
        case "time passes":
            w.advance(86400)
    w.settle()
    assert w.status.phase.value == expected
    assert w.status.observed_generation == w.generation
    assert len([d for d in w.drivers if d.active]) <= 1


def test_every_decision_reaches_a_steady_state_and_every_status_round_trips():
    w = running_world()
    w.driver_exits(70)
    for decision in w.settle():
        dumped = decision.status.dump()
        assert QueryStatus.parse(dumped).dump() == dumped
    assert w.drivers and all(d.owner_uid == UID for d in w.drivers)


def test_a_driver_that_cannot_start_says_why():
    w = World()
    w.reconcile()
    w.drivers[0] = replace(w.drivers[0], waiting="ErrImagePull: image streamq:test not found", waiting_reason="ErrImagePull")
    d = w.reconcile()
    assert d.status.phase is Phase.STARTING and "ErrImagePull: image streamq:test not found" in d.status.message
    assert w.reconcile().status.dump() == d.status.dump()


def test_an_unknown_driver_state_changes_nothing_but_the_message():
    w = running_world()
    w.drivers[0] = w.drivers[0].__class__(**{**w.drivers[0].__dict__, "phase": DriverPhase.UNKNOWN})
    d = w.reconcile()
    assert d.actions == () and d.status.phase is Phase.RUNNING and "unknown" in d.status.message


# --- what the driver reports: progress, stalls, a lost checkpoint --------------------------

HEALTHY = {"state": "Healthy", "message": "", "waitingSeconds": 0.5, "stallAfterSeconds": 10.0}
STALLED = {"state": "Stalled", "message": "no commit for 12s (limit 10s) since epoch 4 while 300 record(s) wait in the source",
           "waitingSeconds": 12.0, "stallAfterSeconds": 10.0}  # fmt: skip


def report(batch=4, health=HEALTHY, **extra):
    return {"batchId": batch, "committedOffsets": {"payments": {"0": 40, "1": 12}}, "totalLag": 300,
            "lag": {"payments": {"0": 200, "1": 100}}, "health": health, "checkpoint": "/checkpoints/q",
            "lastCommitTime": "2026-01-01T12:00:00Z", **extra}  # fmt: skip


def test_progress_goes_into_status_with_the_attempt_that_reported_it():
    w = running_world()
    w.driver_reports(**report())
    d = w.reconcile()
    assert (
        d.status.dump()["progress"]["batchId"] == 4
        and d.status.dump()["progress"]["attempt"] == 1
        and d.status.dump()["progress"]["totalLag"] == 300
    )
    assert conditions(d.status)["Degraded"] == "False"
    assert w.reconcile().status.dump()["progress"]["batchId"] == 4  # kept until the next read


def test_a_stall_the_driver_reports_is_degraded_stalled_with_one_event():
    w = running_world()
    w.driver_reports(**report(health=STALLED))
    d = w.reconcile()
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.STALLED) and "no commit for 12s" in degraded.message
    assert d.status.phase is Phase.RUNNING and d.actions == ()  # the job decides whether to exit (spec.health.onStall)
    assert event_reasons(d) == [Reason.STALLED] and d.events[0].type == "Warning"
    assert w.reconcile().events == ()  # said once
    w.driver_reports(**report(batch=5))
    d = w.reconcile()
    assert d.status.condition(ConditionType.DEGRADED).status == "False"


UNAVAILABLE = {"state": "SourceUnavailable", "message": "Kafka source b:9092 unreachable for 31s (limit 30s); the query "
               "stopped and restarts when the broker answers"}  # fmt: skip


def test_a_driver_waiting_for_its_broker_is_degraded_source_unavailable_with_one_event_then_ready_again():
    w = running_world()
    w.driver_reports(**report(health=UNAVAILABLE))
    d = w.reconcile()
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.SOURCE_UNAVAILABLE) and "unreachable for 31s" in degraded.message
    assert d.status.phase is Phase.RUNNING and d.actions == ()  # the driver waits for the broker itself: no new pod
    assert event_reasons(d) == [Reason.SOURCE_UNAVAILABLE] and d.events[0].type == "Warning"
    assert w.reconcile().events == ()  # said once
    w.driver_reports(**report(batch=5, inPlaceRestarts=1, lastInPlaceRestart="Kafka source b:9092 unreachable for 31s"))
    d = w.reconcile()
    assert conditions(d.status)["Degraded"] == "False" and conditions(d.status)["Ready"] == "True"
    assert event_reasons(d) == [Reason.RESTARTED_IN_PLACE]
    assert "(1 so far): Kafka source b:9092 unreachable" in d.events[0].message
    assert d.status.restarts == 0 and d.status.dump()["progress"]["inPlaceRestarts"] == 1  # pod restarts and in-place ones apart
    assert w.reconcile().events == ()


def test_in_place_restarts_of_an_earlier_driver_are_not_announced_again():
    w = running_world()
    w.driver_reports(**report(inPlaceRestarts=2))
    assert event_reasons(w.reconcile()) == [Reason.RESTARTED_IN_PLACE]
    w.driver_reports(**report(batch=6, inPlaceRestarts=2))
    assert w.reconcile().events == ()


def _at(w, seconds_ago: float) -> str:
    return format_time(w.now - timedelta(seconds=seconds_ago))


def test_a_driver_that_stops_printing_progress_is_unresponsive_once_then_recovers():
    w = running_world()
    w.driver_reports(**report(updatedAt=_at(w, 5)))
    assert conditions(w.reconcile().status)["Degraded"] == "False"
    w.advance(200)
    w.driver_reports(**report(updatedAt=_at(w, 200)))  # the newest line in the tail is 200 s old
    d = w.reconcile()
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.UNRESPONSIVE)
    assert "no progress for 200s (limit 120s" in degraded.message
    assert d.status.phase is Phase.RUNNING and d.actions == ()  # reported, not acted on
    assert event_reasons(d) == [Reason.UNRESPONSIVE]
    again = w.reconcile()  # a pass without a log read keeps the judgement, quietly
    assert again.status.condition(ConditionType.DEGRADED).reason == Reason.UNRESPONSIVE and again.events == ()
    w.driver_reports(**report(updatedAt=_at(w, 1)))
    d = w.reconcile()
    assert conditions(d.status)["Degraded"] == "False" and event_reasons(d) == [Reason.DRIVER_RUNNING]


def test_a_progress_answer_that_is_no_record_is_degraded_on_that_query_until_a_record_comes():
    w = running_world()
    w.driver_reports(**report(updatedAt=_at(w, 1)))
    w.reconcile()
    w.driver_answers_no_record("the driver's progress record is larger than 64 KiB")
    d = w.reconcile()
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.PROGRESS_REFUSED)
    assert degraded.message.startswith("the driver's progress record is larger than 64 KiB: status.progress keeps")
    assert d.status.progress is not None and d.status.progress.batch_id == 4  # the last record it could read stays
    assert d.status.phase is Phase.RUNNING and d.actions == () and event_reasons(d) == [Reason.PROGRESS_REFUSED]
    again = w.reconcile()  # a pass without a read keeps the judgement, quietly
    assert again.status.condition(ConditionType.DEGRADED).reason == Reason.PROGRESS_REFUSED and again.events == ()
    w.driver_reports(**report(updatedAt=_at(w, 1)))
    assert conditions(w.reconcile().status)["Degraded"] == "False"


def test_silence_is_judged_only_on_records_of_the_current_driver_with_a_time():
    w = running_world()
    w.driver_reports(**report())  # no updatedAt: nothing to judge
    w.advance(600)
    assert conditions(w.reconcile().status)["Degraded"] == "False"
    w.driver_reports(**report(updatedAt=_at(w, 119)))
    assert conditions(w.reconcile().status)["Degraded"] == "False"


def test_a_driver_that_exits_stalled_is_restarted_and_degraded_stalled():
    w = running_world()
    w.driver_exits(75, "STALLED: stalled: no commit for 12s (limit 10s)")
    d = w.reconcile()
    assert d.status.phase is Phase.RESTARTING and d.status.last_failure.reason == Reason.STALLED
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.STALLED)
    assert event_reasons(d) == [Reason.STALLED] and "restart 1/3" in d.events[0].message


def test_a_stalled_driver_with_restart_policy_never_fails():
    w = running_world(**{"restartPolicy.type": "Never"})
    w.driver_exits(75, "STALLED: stalled")
    d = w.reconcile()
    assert d.status.phase is Phase.FAILED and d.status.last_failure.reason == Reason.STALLED


def test_outgrown_partitions_restart_without_degrading():
    w = running_world()
    w.driver_exits(76, "PARTITIONS_CHANGED: source partitions grew (payments 2->4)")
    d = w.reconcile()
    assert d.status.phase is Phase.RESTARTING and d.status.last_failure.reason == Reason.PARTITIONS_CHANGED
    assert d.status.condition(ConditionType.DEGRADED).status == "False"


def test_the_next_driver_gets_the_committed_offsets_for_a_lost_checkpoint():
    w = running_world()
    w.driver_reports(**report())
    w.reconcile()
    w.driver_exits(70, "QUERY_FAILED: boom")
    w.reconcile()
    w.advance(5)
    w.settle()
    create = next(c for d in w.history for c in creates(d) if c.run.attempt == 2)
    assert create.run.resume.starting_offsets == '{"payments":{"0":40,"1":12}}'
    assert create.run.resume.batch_id == 4 and create.run.resume.checkpoint == "/checkpoints/q"


def test_offsets_of_another_checkpoint_are_not_handed_on():
    w = running_world(**{"checkpoint.onIncompatibleChange": "newCheckpoint"})
    w.driver_reports(**report())
    w.reconcile()
    w.edit(**{"source.kafka.topics": ["orders"]})
    w.settle()
    create = next(c for d in w.history for c in creates(d) if c.run.attempt == 2)
    assert create.run.checkpoint_location == "/checkpoints/q-reset-1" and create.run.resume is None


def test_a_recovered_checkpoint_is_said_in_an_event_once():
    w = running_world()
    recovered = {"reason": "missing", "batchId": 4, "startingOffsets": '{"payments":{"0":40,"1":12}}'}
    w.driver_reports(**report(batch=None, recovered=recovered))
    d = w.reconcile()
    assert event_reasons(d) == [Reason.CHECKPOINT_LOST]
    assert "the checkpoint at /checkpoints/q was missing" in d.events[0].message
    assert "committed at batch 4" in d.events[0].message and "nothing skipped" in d.events[0].message
    w.driver_reports(**report(batch=0, recovered=recovered))
    assert w.reconcile().events == ()


def test_a_change_the_checkpoint_cannot_take_is_refused_from_what_the_job_reported_it_holds():
    w = running_world(transforms=[{"sql": "SELECT key, count(*) AS n FROM input GROUP BY key"}],
                      trigger={"microBatch": {"interval": "1s"}})  # fmt: skip
    holds = {"sourceKinds": ["kafka"], "topics": ["payments"], "statefulOperators": ["stateStoreSave"]}
    w.driver_reports(**report(checkpointHolds=holds))
    w.reconcile()
    w.edit(transforms=[{"where": "value IS NOT NULL"}])
    d = w.reconcile()
    degraded = d.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.INCOMPATIBLE_CHANGE)
    assert degraded.message.startswith("spec.transforms: the checkpoint holds the state of stateful operator(s) stateStoreSave")
    assert d.actions == ()  # the previous spec keeps running
    w.edit(transforms=[{"sql": "SELECT key, count(*) AS n FROM input WHERE value IS NOT NULL GROUP BY key"}])
    assert deletes(w.reconcile()) == ["q-driver-1"]  # still stateful: Spark's own checks decide
