"""The driver Lease against a real kube-apiserver: one holder at a time, takeover after a release or
an expiry, and a holder cut off from the API server that stops before anyone may take over."""

from __future__ import annotations

import threading
import time
from urllib.parse import urlparse

import pytest
from kubernetes import client

from app.driver.lease_holder import DriverLease
from contract.lease import DURATION_S, FENCE_GRACE_S, RENEW_DEADLINE_S
from tests.support.proxy import CuttableProxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def coordination(api_client, host: str | None = None) -> client.CoordinationV1Api:
    if host is None:
        return client.CoordinationV1Api(api_client)
    conf = api_client.configuration.__class__()
    for key, value in vars(api_client.configuration).items():
        setattr(conf, key, value)
    conf.host = host
    return client.CoordinationV1Api(client.ApiClient(conf))


class Clock:
    """When things happened, on one monotonic clock (both 'drivers' run in this process)."""

    def __init__(self):
        self.at: dict[str, float] = {}

    def mark(self, what: str) -> None:
        self.at.setdefault(what, time.monotonic())


def acquire_in_thread(lease: DriverLease, clock: Clock, what: str, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        if lease.acquire(stop):
            clock.mark(what)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture
def lease_namespace(kube_apiserver) -> str:
    name = f"lease-{int(time.time() * 1000) % 10**8}"
    kube_apiserver.kubectl("create", "namespace", name)
    return name


def test_a_standby_waits_while_the_holder_renews_and_takes_over_at_once_after_a_release(api_client, lease_namespace):
    clock, stop = Clock(), threading.Event()
    active = DriverLease("q-driver", lease_namespace, "q-driver-1", api=coordination(api_client))
    standby = DriverLease("q-driver", lease_namespace, "q-driver-2", api=coordination(api_client))
    assert active.acquire(stop)
    active.keep(on_lost=lambda reason: clock.mark("active lost"), code=77)
    waiter = acquire_in_thread(standby, clock, "standby holds", stop)
    time.sleep(DURATION_S * 1.5)  # longer than the lease lasts: renewals keep it
    assert "standby holds" not in clock.at and "active lost" not in clock.at
    released = time.monotonic()
    active.release()
    waiter.join(10)
    took = clock.at["standby holds"] - released
    print(f"standby took the released lease after {took:.2f}s")
    assert took < 1.5
    lease = coordination(api_client).read_namespaced_lease("q-driver", lease_namespace)
    assert lease.spec.holder_identity == "q-driver-2" and lease.spec.lease_transitions == 1
    stop.set()


def test_a_holder_cut_off_from_the_api_server_stops_before_the_standby_takes_over(api_client, lease_namespace):
    """The partition: the active driver's API traffic goes through a proxy that is cut. It must stop its
    query (on_lost) and be gone (hard exit) before the standby, which still reaches the API, holds the lease."""
    server = urlparse(api_client.configuration.host)
    proxy = CuttableProxy(server.hostname, server.port)
    clock, stop = Clock(), threading.Event()
    exits: list[int] = []
    active = DriverLease("q-driver", lease_namespace, "q-driver-1",
                         api=coordination(api_client, f"https://{proxy.address}"),
                         exit_hard=lambda code: (exits.append(code), clock.mark("active exits")))  # fmt: skip
    standby = DriverLease("q-driver", lease_namespace, "q-driver-2", api=coordination(api_client))
    try:
        assert active.acquire(stop)
        active.keep(on_lost=lambda reason: clock.mark("active stops its query"), code=77)
        waiter = acquire_in_thread(standby, clock, "standby holds", stop)
        time.sleep(3)  # the holder renews a few times first: the cut comes between two renewals, not at the start
        proxy.cut()
        clock.mark("cut")
        waiter.join(DURATION_S + RENEW_DEADLINE_S + 10)
        time.sleep(FENCE_GRACE_S + 0.5)  # the fence's grace must pass with no second writer: the duration is the check
    finally:
        stop.set()
        proxy.close()
    at = {k: round(v - clock.at["cut"], 2) for k, v in clock.at.items()}
    print(f"seconds after the cut: {at}")
    assert exits == [77], "the cut-off holder never exited"
    assert "standby holds" in at, "the standby never took over"
    assert at["active stops its query"] < at["active exits"] < at["standby holds"]
    assert at["active stops its query"] <= RENEW_DEADLINE_S + 0.5
    assert at["standby holds"] >= DURATION_S - 1.0  # the standby waited the lease out (the last renew was < 1 s before the cut)
    assert "lost lease q-driver" in active.lost_reason


def test_two_candidates_for_a_free_lease_get_one_holder(api_client, lease_namespace):
    clock, stop = Clock(), threading.Event()
    leases = [DriverLease("q-driver", lease_namespace, f"q-driver-{i}", api=coordination(api_client)) for i in range(4)]
    threads = [acquire_in_thread(lease, clock, lease.me, stop) for lease in leases]
    time.sleep(3)  # the race itself: four candidates try for 3 s, and exactly one may have won by then
    stop.set()
    for t in threads:
        t.join(5)
    assert len(clock.at) == 1, clock.at
    holder = coordination(api_client).read_namespaced_lease("q-driver", lease_namespace).spec.holder_identity
    assert set(clock.at) == {holder}
