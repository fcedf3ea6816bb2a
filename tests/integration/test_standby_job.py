"""Two real drivers of one query (real Spark, a real broker, a real kube-apiserver): the standby
waits with its SparkSession up, takes over from the checkpoint when the active one dies, and an
active driver cut off from the API server stops and exits before the standby may run."""

from __future__ import annotations

import signal
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

from contract import ExitCode
from contract.lease import DURATION_S, FENCE_GRACE_S, RENEW_DEADLINE_S
from testbed.jobs import JobProcess, SteadyProducer
from testbed.kube import write_kubeconfig
from testbed.specs import flagged, query_spec, write_resource
from testbed.wait import wait_for
from tests.support.proxy import CuttableProxy
from tests.support.writers import written, written_after

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

CONTINUOUS = {"continuous": {"checkpointInterval": "500ms"}}
LEASE = "standby-driver"


@pytest.fixture
def lease_namespace(kube_apiserver) -> str:
    name = f"standby-{int(time.time() * 1000) % 10**8}"
    kube_apiserver.kubectl("create", "namespace", name)
    return name


def driver(spec_path: Path, workdir: Path, pod: str, namespace: str, kubeconfig: Path) -> JobProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    return JobProcess(spec_path, workdir, env={"STREAMQ_LEASE": LEASE, "POD_NAME": pod, "POD_NAMESPACE": namespace,
                                               "KUBECONFIG": str(kubeconfig), "STREAMQ_REPORT_PERIOD_SECONDS": "2"})  # fmt: skip


def commits(job: JobProcess) -> list[int]:
    return [r["batchId"] for r in job.records() if r.get("batchId") is not None]


def standing_by(job: JobProcess) -> bool:
    return "standing by: lease" in job.log()


def holds(job: JobProcess) -> bool:
    return "holding lease" in job.log()


def _setup(kafka_broker, kafka_topic, tmp_path):
    source, sink = kafka_topic(partitions=2), kafka_topic()
    spec = query_spec(
        bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=CONTINUOUS
    )
    spec_path = write_resource(tmp_path / "q.yaml", "standby", spec)
    producer = SteadyProducer(kafka_broker, source, per_batch=5, period_s=0.1)
    return source, sink, spec_path, producer


@contextmanager
def _active_and_standby(kafka_broker, kafka_topic, kube_apiserver, namespace: str, tmp_path: Path):
    """A steady producer, the active driver, and once it commits a warm standby: (sink, producer, active,
    standby); everything stopped after."""
    _, sink, spec_path, producer = _setup(kafka_broker, kafka_topic, tmp_path)
    producer.start()
    active = driver(spec_path, tmp_path / "a", "standby-driver-1", namespace, kube_apiserver.kubeconfig)
    standby = None
    try:
        standby = _standby_beside(active, spec_path, tmp_path, namespace, kube_apiserver.kubeconfig)
        yield sink, producer, active, standby
    finally:
        producer.stop()
        active.stop()
        if standby is not None:
            standby.stop()


def _standby_beside(active: JobProcess, spec_path: Path, tmp_path: Path, namespace: str, kubeconfig: Path) -> JobProcess:
    """Once the active driver commits: a second driver of the query, warmed up and waiting for the Lease."""
    wait_for(lambda: len(commits(active)) >= 2, 300, "commits of the active driver")
    standby = driver(spec_path, tmp_path / "b", "standby-driver-2", namespace, kubeconfig)
    try:
        wait_for(lambda: standing_by(standby), 300, "the standby waiting for the lease", ignore=(AssertionError,))
    except BaseException:
        standby.stop()
        raise
    return standby


def _check_output(kafka_broker, sink, producer, what: str) -> None:
    expected = set(flagged(producer.sent))
    out = kafka_broker.wait_for_records(sink, expected, timeout=180)
    duplicates = sum(n - 1 for n in Counter(out).values())
    print(f"{what}: {len(producer.sent)} payments, {len(expected)} flagged, all arrived, {duplicates} duplicates")
    assert set(out) <= expected


@pytest.mark.slow  # CI time (~90 s): tests/e2e/test_standby.py kills an active driver under a standby on the cluster
def test_the_standby_takes_over_from_a_killed_driver_losing_nothing(
    kafka_broker, kafka_topic, kube_apiserver, lease_namespace, tmp_path
):
    with _active_and_standby(kafka_broker, kafka_topic, kube_apiserver, lease_namespace, tmp_path) as (
        sink,
        producer,
        active,
        standby,
    ):
        # app/driver/warmup.py: it ran its plan into the noop sink before waiting, with its own checkpoint
        assert "standby: query warmed up in" in standby.log(), standby.log()[-3000:]
        time.sleep(DURATION_S + 2)  # longer than the lease lasts: the active driver's renewals keep it
        assert not holds(standby) and commits(standby) == [], "the standby ran while the active driver held the lease"
        last = commits(active)[-1]
        active.kill_all()  # no release: the lease must expire
        killed = time.monotonic()
        wait_for(lambda: any(b > last for b in commits(standby)), 120, "a commit of the standby")
        took = time.monotonic() - killed
        producer.stop()
        _check_output(kafka_broker, sink, producer, f"killed active driver, standby committed {took:.1f}s later")
        assert DURATION_S - 1 <= took <= DURATION_S + 20, took


@pytest.mark.slow  # CI time: tests/integration/test_driver_lease.py cuts a holder off in 13 s; this is the whole job's version
def test_a_driver_cut_off_from_the_api_server_stops_before_the_standby_runs(
    kafka_broker, kafka_topic, kube_apiserver, lease_namespace, tmp_path
):
    source, sink, spec_path, producer = _setup(kafka_broker, kafka_topic, tmp_path)
    server = urlparse(kube_apiserver.server)
    proxy = CuttableProxy(server.hostname, server.port)
    through_proxy = write_kubeconfig(tmp_path / "proxied-kubeconfig", f"https://{proxy.address}", kube_apiserver.pki)
    producer.start()
    active = driver(spec_path, tmp_path / "a", "standby-driver-1", lease_namespace, through_proxy)
    standby = None
    try:
        standby = _standby_beside(active, spec_path, tmp_path, lease_namespace, kube_apiserver.kubeconfig)
        proxy.cut()
        cut = time.monotonic()
        seen: dict[str, float] = {}
        while time.monotonic() - cut < DURATION_S + 60 and len(seen) < 2:
            if "active exited" not in seen and active.proc.poll() is not None:
                seen["active exited"] = time.monotonic() - cut
            if "standby holds" not in seen and holds(standby):
                seen["standby holds"] = time.monotonic() - cut
            time.sleep(0.1)  # the poll interval: two events timed to a tenth of a second
        print(f"seconds after the cut: {seen}; active exit code {active.proc.returncode}")
        assert active.proc.returncode == ExitCode.LEASE_LOST, active.log()[-3000:]
        assert "lost lease" in active.log() and "lost the driver lease" in active.termination_message()
        assert seen["active exited"] <= RENEW_DEADLINE_S + FENCE_GRACE_S + 2
        assert seen["active exited"] < seen["standby holds"], "the standby ran before the cut-off driver had stopped"
        producer.stop()
        _check_output(kafka_broker, sink, producer, "cut-off active driver")
    finally:
        producer.stop()
        proxy.close()
        active.stop()
        if standby is not None:
            standby.stop()


@pytest.mark.slow  # CI time: every warm upgrade of tests/e2e/test_upgrade.py hands over this way
def test_a_stopped_driver_hands_the_lease_over_at_once_as_a_warm_upgrade_needs(kafka_broker, kafka_topic, kube_apiserver,
                                                                               lease_namespace, tmp_path):  # fmt: skip
    """The operator stops the old driver of a warm upgrade with SIGTERM (controller.decide.upgrade): it
    stops its query and releases the Lease as soon as no task runs, before Spark itself stops, so the
    warm driver waiting beside it takes over in seconds, not after the Lease's expiry."""
    with _active_and_standby(kafka_broker, kafka_topic, kube_apiserver, lease_namespace, tmp_path) as (
        sink,
        producer,
        active,
        standby,
    ):
        last = commits(active)[-1]
        active.signal(signal.SIGTERM)
        stopped = time.monotonic()
        wait_for(lambda: holds(standby), 60, "the standby holding the lease", interval=0.05)
        took_lease = time.monotonic() - stopped
        wait_for(lambda: any(b > last for b in commits(standby)), 120, "a commit of the standby")
        assert active.wait(60) == 0, active.log()[-3000:]
        log = active.log()
        producer.stop()
        _check_output(
            kafka_broker, sink, producer, f"SIGTERM to the active driver, the standby held the lease {took_lease:.1f}s later"
        )
        assert took_lease < DURATION_S - 1, took_lease  # released, not expired
        assert "released lease" in log and log.index("released lease") < log.index("query stopped"), log[-3000:]


@pytest.mark.slow  # minutes on a 2-core machine: `hack/test.sh -m slow` (CI time, tests/e2e/README.md)
def test_a_frozen_driver_that_wakes_up_after_the_takeover_writes_nothing(
    kafka_broker, kafka_topic, kube_apiserver, lease_namespace, tmp_path
):
    """A paused node, in one process group: SIGSTOP freezes the active driver (Python and its JVM)
    mid-stream; the standby takes over once the Lease has expired; SIGCONT wakes every thread of
    the old driver at once, its writing tasks among them. The write fence (app/driver/write_fence.py)
    refuses their records: none of the old driver's records was handed to its producer after the freeze."""
    with _active_and_standby(kafka_broker, kafka_topic, kube_apiserver, lease_namespace, tmp_path) as (
        sink,
        producer,
        active,
        standby,
    ):
        before = written(kafka_broker.bootstrap, sink)
        assert before and {r.writer for r in before} == {"standby-driver-1"}, {r.writer for r in before}
        active.freeze()
        frozen_at = time.time()
        try:
            wait_for(lambda: any(r.writer == "standby-driver-2" for r in written(kafka_broker.bootstrap, sink)), 120,
                     lambda: "output of the standby\n" + standby.log()[-3000:])  # fmt: skip
            took_over = time.time() - frozen_at
            time.sleep(3)  # the standby writes on while the old driver is woken up
        finally:
            active.thaw()
        code = active.wait(60)  # fenced: it stops by itself
        time.sleep(3)  # anything its producer still held has been sent by now
        producer.stop()
        late = written_after(written(kafka_broker.bootstrap, sink), "standby-driver-1", frozen_at + 0.5)
        print(f"frozen driver: standby's first output {took_over:.1f}s after the freeze; the old one exited {code} "
              f"after waking up; {len(late)} of its records created after the freeze")  # fmt: skip
        assert late == [], f"the frozen driver wrote {len(late)} records after waking up, e.g. {late[:3]}"
        assert code != 0, active.log()[-3000:]
        _check_output(kafka_broker, sink, producer, "frozen active driver")
