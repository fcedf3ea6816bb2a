"""The Lease decisions (pure): when a waiting driver may take over, when a holder must stop."""

from __future__ import annotations

import threading

import pytest

from app.driver.lease_holder import Candidate, DriverLease, Holder, Record
from contract.lease import DURATION_S, FENCE_GRACE_S, RENEW_DEADLINE_S, RENEW_EVERY_S

pytestmark = pytest.mark.unit


def held(by: str, renewed: str) -> Record:
    return Record(holder=by, renew_time=renewed, transitions=1, version="7")


def test_a_free_or_released_lease_is_taken_at_once():
    c = Candidate("b")
    assert c.decide(None, now=0.0) == "create"
    assert c.decide(Record(holder=None, renew_time="t1"), now=0.0) == "take"
    assert c.decide(Record(holder="", renew_time="t1"), now=0.0) == "take"
    assert c.decide(held("b", "t1"), now=0.0) == "mine"


def test_a_renewed_lease_is_never_taken():
    c = Candidate("b")
    for i in range(100):  # renewed every second for 100 s
        assert c.decide(held("a", f"t{i}"), now=float(i)) == "wait"


def test_an_unchanged_lease_is_taken_after_its_duration_on_the_candidates_own_clock():
    c = Candidate("b")
    assert c.decide(held("a", "t1"), now=100.0) == "wait"  # first seen at 100: the wait starts here
    assert c.decide(held("a", "t1"), now=100.0 + DURATION_S - 0.01) == "wait"
    assert c.expires_in(100.0 + DURATION_S - 1) == pytest.approx(1.0)
    assert c.decide(held("a", "t1"), now=100.0 + DURATION_S) == "take"


def test_a_new_holder_starts_the_wait_again():
    c = Candidate("c")
    c.decide(held("a", "t1"), now=0.0)
    assert c.decide(held("b", "t1"), now=DURATION_S + 1) == "wait"  # someone else took it: a new record
    assert c.decide(held("b", "t1"), now=2 * DURATION_S + 1) == "take"


def test_a_holder_expires_from_when_its_last_good_renew_was_sent():
    h = Holder(sent_at=10.0)
    h.renewed(sent_at=11.0)
    h.renewed(sent_at=10.5)  # an older answer arriving late does not move the deadline back
    assert not h.expired(11.0 + RENEW_DEADLINE_S - 0.01)
    assert h.expired(11.0 + RENEW_DEADLINE_S)
    assert h.deadline == 11.0 + RENEW_DEADLINE_S  # what the write fence is armed with (app.driver.write_fence)


def test_the_timings_leave_the_holder_gone_before_anyone_may_take_over():
    # the holder's last renew is sent at s; the candidate can only have seen it at s or later
    assert RENEW_DEADLINE_S + FENCE_GRACE_S < DURATION_S
    assert RENEW_EVERY_S * 3 <= RENEW_DEADLINE_S  # a renew or two may fail without losing the lease


def test_the_lease_is_configured_by_the_pods_environment_only():
    assert DriverLease.from_env({}) is None
    lease = DriverLease.from_env({"STREAMQ_LEASE": "q-driver", "POD_NAME": "q-driver-2", "POD_NAMESPACE": "team"})
    assert (lease.name, lease.me, lease.namespace) == ("q-driver", "q-driver-2", "team")


class _ReadOnly(DriverLease):
    """The Lease logic over a fixed record (no API server: the reads are what is decided on)."""

    def __init__(self, record, clock):
        super().__init__("q-driver", "ns", "me", api=object(), clock=clock)
        self.record, self.writes = record, []

    def read(self):
        return self.record

    def _write(self, record, holder, acquired):
        self.writes.append(holder)
        return True


def test_a_standby_sees_an_expired_lease_while_warming_up_and_takes_it_without_a_second_wait():
    now = [0.0]
    lease = _ReadOnly(Record("driver-1", "2026-11-23T10:00:00Z"), lambda: now[0])
    assert not lease.could_take()  # held: warm up
    now[0] = DURATION_S / 2
    assert not lease.could_take()
    now[0] = DURATION_S + 0.1
    assert lease.could_take()  # unchanged for the lease's duration on this pod's clock
    assert lease.acquire(threading.Event())  # the same watch: taken at once, not DURATION_S later
    assert lease.writes == ["me"]


def test_a_released_lease_ends_the_warm_up_at_once():
    lease = _ReadOnly(Record(None, None), lambda: 0.0)
    assert lease.could_take()
