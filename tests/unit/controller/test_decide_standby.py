"""Decisions for spec.runtime.standby: a warm second driver that takes over without a backoff."""

from __future__ import annotations

import pytest

from controller.decide import CreateDriver, DeleteDriver, ReleaseLease
from controller.observe import DriverPhase
from controller.phases import Phase, Reason
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

STANDBY = {"runtime.standby": True, "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "ck"}}}


def creates(decision) -> list:
    return [a.run for a in decision.actions if isinstance(a, CreateDriver)]


def deletes(decision) -> list[str]:
    return [a.name for a in decision.actions if isinstance(a, DeleteDriver)]


def releases(decision) -> list[ReleaseLease]:
    return [a for a in decision.actions if isinstance(a, ReleaseLease)]


def with_a_warm_standby() -> World:
    w = World(base_spec(**STANDBY))
    w.reconcile()  # q-driver-1
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now)
    assert creates(w.reconcile()) == []  # its pod runs, its query may not yet (it holds the Lease once it reports)
    w.driver_reports(batchId=1)
    d = w.reconcile()
    (run,) = creates(d)
    assert (run.driver_name, run.attempt, run.standby) == ("q-driver-2", 2, True)
    assert d.status.standby == "q-driver-2" and d.status.driver == "q-driver-1" and d.status.attempt == 1
    assert Reason.STANDBY_CREATED in [e.reason for e in d.events]
    w.change("q-driver-2", phase=DriverPhase.RUNNING, started_at=w.now)  # JVM up, waiting for the lease
    assert w.reconcile().actions == ()  # steady: one driver, one standby
    return w


def test_the_standby_is_created_only_once_the_first_driver_runs():
    w = World(base_spec(**STANDBY))
    d = w.reconcile()
    assert [r.standby for r in creates(d)] == [False]
    assert creates(w.reconcile()) == []  # still starting: one JVM at a time
    with_a_warm_standby()


def test_a_failed_driver_is_replaced_by_its_standby_at_once_and_its_lease_freed():
    w = with_a_warm_standby()
    w.change(
        "q-driver-1", phase=DriverPhase.FAILED, exit_code=70, message="QUERY_FAILED: boom", finished_at=w.now, reason="Error"
    )
    d = w.reconcile()
    assert d.verb == "promote" and d.restarted
    st = d.status
    assert (st.driver, st.attempt, st.restarts, st.standby, st.next_restart_time) == ("q-driver-2", 2, 1, None, None)
    assert st.phase is Phase.STARTING and st.last_failure.exit_code == 70
    assert deletes(d) == ["q-driver-1"] and creates(d) == []
    assert releases(d) == [ReleaseLease("q-driver", "q-driver-1")]  # the query's Lease, held by the dead driver
    # the promoted standby runs: Running, and a new standby once it reports progress
    d = w.reconcile()
    assert d.status.phase is Phase.RUNNING and d.status.driver == "q-driver-2" and creates(d) == []
    w.driver_reports(batchId=9)
    d = w.reconcile()
    (run,) = creates(d)
    assert (run.driver_name, run.standby) == ("q-driver-3", True) and d.status.standby == "q-driver-3"


def test_a_vanished_driver_is_replaced_by_its_standby_but_its_lease_is_left_to_expire():
    """No container end was seen (a lost node, a force-deleted pod): it may still run, so only
    the Lease's expiry lets the standby in."""
    w = with_a_warm_standby()
    w.drivers = [x for x in w.drivers if x.name != "q-driver-1"]
    d = w.reconcile()
    assert d.verb == "promote" and d.status.driver == "q-driver-2" and d.status.restarts == 1
    assert releases(d) == [] and d.status.last_failure.reason == Reason.DRIVER_LOST
    assert "when the old driver's lease expires" in d.events[-1].message


def test_a_driver_pod_being_deleted_hands_over_to_the_standby():
    w = with_a_warm_standby()
    w.change("q-driver-1", deleting=True)
    d = w.reconcile()
    assert d.verb == "promote" and d.status.driver == "q-driver-2" and deletes(d) == []  # already going


def test_out_of_restarts_the_query_fails_and_the_standby_goes():
    w = with_a_warm_standby()
    w.status.restarts = 3  # maxRestarts 3 in the world's spec
    w.change("q-driver-1", phase=DriverPhase.FAILED, exit_code=70, finished_at=w.now, reason="Error")
    d = w.reconcile()
    assert d.status.phase is Phase.FAILED and d.status.driver == "q-driver-1"
    d = w.reconcile()
    assert "q-driver-2" in deletes(d)


@pytest.mark.parametrize("change", [{"suspend": True}, {"runtime.standby": False}])
def test_suspend_or_standby_off_removes_the_standby(change):
    w = with_a_warm_standby()
    w.edit(**change)
    d = w.reconcile()
    assert "q-driver-2" in deletes(d) and d.status.standby is None


def test_a_spec_change_drops_the_old_standby_and_upgrades_warm():
    w = with_a_warm_standby()
    w.edit(transforms=[{"where": "value IS NULL"}])
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"]  # the standby of the old spec; the driver runs on meanwhile
    (run,) = creates(d)
    assert run.standby and run.attempt == 3 and run.spec.transforms[0].where == "value IS NULL"
    assert d.status.phase is Phase.UPGRADING and d.status.driver == "q-driver-1"


def test_a_spec_change_with_strategy_restart_replaces_both_and_waits_for_them_to_go():
    w = with_a_warm_standby()
    w.edit(transforms=[{"where": "value IS NULL"}], upgrade={"strategy": "restart"})
    d = w.reconcile()
    assert sorted(deletes(d)) == ["q-driver-1", "q-driver-2"]
    d = w.reconcile()  # both gone in the world: the new spec's driver (the unpromoted standby's number is free)
    (run,) = creates(d)
    assert run.standby is False and run.attempt == 2 and run.spec.transforms[0].where == "value IS NULL"


def test_a_standby_that_ended_is_replaced():
    w = with_a_warm_standby()
    w.change("q-driver-2", phase=DriverPhase.FAILED, exit_code=1, finished_at=w.now)
    w.driver_reports(batchId=2)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"]
    (run,) = creates(d)  # a fresh one at once, under a new name
    assert run.standby and run.attempt == 3 and d.status.standby == "q-driver-3" and d.status.driver == "q-driver-1"


def test_the_first_driver_of_a_standby_query_holds_a_lease_and_has_an_account():
    from controller import render
    from controller.config import Settings

    w = World(base_spec(**STANDBY))
    (run,) = creates(w.reconcile())
    pod = render.driver_pod(run, Settings())
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    # the query's own Lease account (controller.render.lease_access), not the driver account: no executors
    assert env["STREAMQ_LEASE"] == "q-driver" and pod["spec"]["serviceAccountName"] == "q-lease"
    assert "streamq.io/role" not in pod["metadata"]["labels"]
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now)
    w.reconcile()
    w.driver_reports(batchId=1)
    (standby,) = creates(w.reconcile())
    assert render.driver_pod(standby, Settings())["metadata"]["labels"]["streamq.io/role"] == "standby"
    plain = render.driver_pod(creates(World(base_spec(upgrade={"strategy": "restart"})).reconcile())[0], Settings())
    assert "STREAMQ_LEASE" not in {e["name"] for e in plain["spec"]["containers"][0]["env"]}
    assert plain["spec"]["automountServiceAccountToken"] is False  # no API access without standby, warm upgrades or executors


# --- a driver stuck Terminating (its node is gone): said, then force-deleted -------------


def test_a_driver_stuck_terminating_is_said_then_force_deleted_after_the_users_grace():
    from datetime import timedelta

    w = World(base_spec(**{"restartPolicy.forceDeleteAfter": "2m"}))
    w.reconcile()
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now)
    w.reconcile()
    w.change("q-driver-1", deleting=True, deletion_due=w.now + timedelta(seconds=60))  # deleted, 60 s grace
    w.advance(60 + 20)
    d = w.reconcile()
    assert all(e.reason != Reason.DRIVER_STUCK_TERMINATING for e in d.events)  # 20 s late: merely slow
    w.advance(20)  # 40 s past its grace
    d = w.reconcile()
    degraded = next(c for c in d.status.conditions if c.type == "Degraded")
    assert (degraded.status, degraded.reason) == ("True", Reason.DRIVER_STUCK_TERMINATING)
    assert "Terminating 40s past its grace period" in degraded.message and "force-deleted at" in degraded.message
    assert d.status.message == degraded.message  # the first line users read (kubectl get sq) says it too
    assert [e.reason for e in d.events] == [Reason.DRIVER_STUCK_TERMINATING] and d.actions == ()
    assert d.requeue_after <= 80  # looks again by the time the grace the user set is over
    assert w.reconcile().events == ()  # said once
    w.advance(80)
    d = w.reconcile()
    (force,) = [a for a in d.actions if isinstance(a, DeleteDriver)]
    assert (force.name, force.force) == ("q-driver-1", True)
    assert Reason.DRIVER_FORCE_DELETED in [e.reason for e in d.events]
    w.drivers = []  # the API removed it at once
    d = w.reconcile()
    assert d.status.phase is Phase.RESTARTING and d.status.last_failure.reason == Reason.DRIVER_LOST
    w.advance(5)  # the backoff
    assert [r.attempt for r in creates(w.reconcile())] == [2]  # the next driver is no longer blocked
