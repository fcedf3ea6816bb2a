"""The driver Lease against a real kube-apiserver: one holder at a time, takeover after a release or
an expiry, and a holder cut off from the API server that stops before anyone may take over."""

from __future__ import annotations

import threading
import time
from urllib.parse import urlparse

import pytest
from kubernetes import client

from app.driver.lease_holder import REQUEST_TIMEOUT_S, DriverLease
from contract.lease import DURATION_S, FENCE_GRACE_S, RENEW_DEADLINE_S, RENEW_EVERY_S
from tests.support.proxy import CuttableProxy, InterposingProxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def coordination(api_client, host: str | None = None) -> client.CoordinationV1Api:
    """The Lease API as a driver builds it (DriverLease.client_for), on the test's credentials."""
    conf = api_client.configuration.__class__()
    for key, value in vars(api_client.configuration).items():
        setattr(conf, key, value)
    conf.host = host or conf.host
    return DriverLease.client_for(conf)


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


def test_a_renew_is_one_write_and_a_try_that_hangs_is_followed_at_once(kube_apiserver, lease_namespace, tmp_path):
    """Issue 36: a loaded node's API server answered one renew late; the client's own retries (three, of
    2 s each) and a read before every write spent the holder's 5 s, and a healthy driver lost its Lease.
    A renew is one conditional write now, a try that hangs is given up after REQUEST_TIMEOUT_S and the
    next starts at once; the hung write that lands late is refused (409: its resourceVersion is gone) and
    changes nothing."""
    kube_apiserver.kubectl("-n", lease_namespace, "create", "serviceaccount", "driver")
    kube_apiserver.kubectl("-n", lease_namespace, "create", "role", "lease", "--verb=get,create,update", "--resource=leases")
    kube_apiserver.kubectl("-n", lease_namespace, "create", "rolebinding", "lease", "--role=lease",
                           f"--serviceaccount={lease_namespace}:driver")  # fmt: skip
    proxy = InterposingProxy(kube_apiserver.server, kube_apiserver.pki)  # a token passes through it, a client cert would not
    from kubernetes import client as k8s
    from kubernetes import config

    settings = k8s.Configuration()
    kubeconfig = proxy.kubeconfig_through(kube_apiserver.service_account_kubeconfig(lease_namespace, "driver"),
                                          tmp_path / "kubeconfig")  # fmt: skip
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=settings)
    holder = DriverLease("q-driver", lease_namespace, "q-driver-1", api=DriverLease.client_for(settings))
    sent: list[tuple[float, str]] = []
    hang = threading.Event()

    def before(method: str, path: str) -> None:
        sent.append((time.monotonic(), method))
        if hang.is_set() and method == "PUT":
            hang.clear()
            time.sleep(REQUEST_TIMEOUT_S + 1.0)  # the client gives up first; then the write goes on, late

    proxy.before = before
    try:
        assert holder.acquire(threading.Event())
        holder.keep(on_lost=lambda reason: None, code=77)
        time.sleep(3 * RENEW_EVERY_S + 0.5)  # three renewals: how many requests each costs
        renewing = [method for _, method in sent[2:]]  # after acquire's read and write
        hang.set()
        hung_at = time.monotonic()
        time.sleep(REQUEST_TIMEOUT_S + 3 * RENEW_EVERY_S)  # the hung try, its late landing, the tries after
        after = [(round(at - hung_at, 2), method) for at, method in sent if at >= hung_at]
    finally:
        holder.release()
        proxy.close()
    assert renewing and set(renewing) == {"PUT"}, f"a renew is one write, without a read first: {renewing}"
    assert not holder.lost.is_set(), holder.lost_reason
    assert after[0][1] == "PUT" and after[1][1] == "PUT", after
    waited = after[1][0] - after[0][0]
    assert REQUEST_TIMEOUT_S - 0.2 <= waited <= REQUEST_TIMEOUT_S + 0.5, f"the next try {waited}s after the hung one: {after}"
    late = [answer for answer in proxy.answers if answer[0] == "PUT" and answer[2] == 409]
    assert len(late) == 1, proxy.answers  # the hung write, refused on its stale resourceVersion
