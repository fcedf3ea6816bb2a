"""A driver Kubernetes evicted from a lost node (restartPolicy.nodeLostAfter): a standby query's is
force-deleted as soon as its Lease shows it cannot write; without standby forceDeleteAfter decides."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.decide import DeleteDriver
from controller.decide.drivers import LEASE_CLOCK_SKEW_S
from controller.observe import DriverPhase, LeaseState
from controller.phases import Reason
from tests.unit.controller.test_decide_standby import creates, with_a_warm_standby
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

GRACE_S = 60  # the driver pod's terminationGracePeriodSeconds


def forced(decision) -> list[str]:
    return [a.name for a in decision.actions if isinstance(a, DeleteDriver) and a.force]


def evicted(w: World, name: str) -> None:
    """The taint manager deleted ``name``: DisruptionTarget DeletionByTaintManager; no kubelet confirms."""
    w.change(name, deleting=True, deletion_due=w.now + timedelta(seconds=GRACE_S), node_lost=True)


def lease(holder: str | None, renewed, duration_s: float = 8.0) -> LeaseState:
    return LeaseState(name="q-driver", holder=holder, renew_time=renewed, duration_s=duration_s)


def test_the_standby_took_the_lease_the_lost_driver_goes_at_once_and_the_standby_takes_over():
    w = with_a_warm_standby()
    w.advance(80)  # node-monitor grace, then nodeLostAfter: the standby took the Lease long ago
    evicted(w, "q-driver-1")
    w.lease = lease("q-driver-2", w.now - timedelta(seconds=1))
    d = w.reconcile()
    assert d.verb == "promote" and d.status.driver == "q-driver-2"
    assert forced(d) == ["q-driver-1"]  # not after forceDeleteAfter (5m): within its grace period even
    (event,) = [e for e in d.events if e.reason == Reason.DRIVER_FORCE_DELETED]
    assert "lost node" in event.message and "held by q-driver-2" in event.message


def test_both_on_the_lost_node_the_holder_goes_once_its_lease_has_certainly_expired():
    w = with_a_warm_standby()
    lost_at = w.now
    w.lease = lease("q-driver-1", lost_at)  # its last renew: then the node went
    w.advance(20)
    evicted(w, "q-driver-1")
    evicted(w, "q-driver-2")
    w.lease = lease("q-driver-1", lost_at, duration_s=60)  # a Lease that has not expired yet
    d = w.reconcile()
    assert forced(d) == ["q-driver-2"]  # the standby never held the Lease: it runs nothing
    assert "lost node" in d.status.message and "Lease" in d.status.message
    assert [e.reason for e in d.events].count(Reason.DRIVER_STUCK_TERMINATING) == 1
    expiry = lost_at + timedelta(seconds=60 + LEASE_CLOCK_SKEW_S)
    assert d.requeue_after <= (expiry - w.now).total_seconds()  # looks again when it has expired
    w.drivers = [x for x in w.drivers if x.name != "q-driver-2"]
    w.now = expiry - timedelta(seconds=1)  # expired on the holder's clock, not beyond what clocks may differ
    assert forced(w.reconcile()) == []
    w.now = expiry
    d = w.reconcile()
    assert forced(d) == ["q-driver-1"]
    (event,) = [e for e in d.events if e.reason == Reason.DRIVER_FORCE_DELETED]
    assert "expired" in event.message and "lost node" in event.message
    w.drivers = []  # the API removed it at once: the next driver starts, after the usual backoff
    w.reconcile()
    w.advance(5)
    assert [r.attempt for r in creates(w.reconcile())] == [2]  # the unpromoted standby's number is free


def test_a_lease_released_by_the_operator_or_never_taken_fences_too():
    w = with_a_warm_standby()
    evicted(w, "q-driver-2")  # the standby's node is lost; q-driver-1 runs on
    w.lease = lease(None, None)
    d = w.reconcile()
    assert forced(d) == ["q-driver-2"] and "held by nobody" in d.events[0].message


@pytest.mark.parametrize("known", [False, True])
def test_an_unknown_lease_or_one_still_held_waits_for_force_delete_after(known):
    w = with_a_warm_standby()
    w.lease = lease("q-driver-1", w.now + timedelta(seconds=3600)) if known else None  # renewed, or unread
    evicted(w, "q-driver-1")
    evicted(w, "q-driver-2")
    w.advance(GRACE_S + 5 * 60 - 1)
    assert forced(w.reconcile()) == (["q-driver-2"] if known else [])
    w.advance(1)
    assert "q-driver-1" in forced(w.reconcile())  # restartPolicy.forceDeleteAfter 5m: the default


def test_without_standby_the_lost_node_is_said_at_once_and_force_delete_after_decides():
    w = World(base_spec(**{"restartPolicy.forceDeleteAfter": "2m", "upgrade": {"strategy": "restart"}}))
    w.reconcile()
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now)
    w.reconcile()
    w.lease = lease(None, None)  # whatever a Lease says: this driver never held one (no standby, no warm upgrades)
    evicted(w, "q-driver-1")
    d = w.reconcile()
    assert forced(d) == []
    degraded = next(c for c in d.status.conditions if c.type == "Degraded")
    assert (degraded.status, degraded.reason) == ("True", Reason.DRIVER_STUCK_TERMINATING)
    assert "evicted from its lost node" in degraded.message and "without standby no Lease fences it" in degraded.message
    assert d.status.message == degraded.message
    assert [e.reason for e in d.events] == [Reason.DRIVER_STUCK_TERMINATING]
    w.advance(GRACE_S + 120)
    d = w.reconcile()
    assert forced(d) == ["q-driver-1"]
    (event,) = [e for e in d.events if e.reason == Reason.DRIVER_FORCE_DELETED]
    assert "its node is lost" in event.message and "forceDeleteAfter" in event.message


def test_a_driver_deleted_for_another_reason_keeps_the_stuck_rule_even_with_standby():
    w = with_a_warm_standby()
    w.lease = lease("q-driver-2", w.now)
    w.change("q-driver-1", deleting=True, deletion_due=w.now + timedelta(seconds=GRACE_S))  # no node_lost
    d = w.reconcile()
    assert forced(d) == [] and d.verb == "promote"
