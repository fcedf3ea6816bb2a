"""Helpers of the e2e scenarios: Kafka from this machine, StreamingQueries through kubectl."""

from __future__ import annotations

import collections
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any, Self

import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from testbed.cluster.addons import E2E_NAMESPACE, KAFKA_SERVICE, OPERATOR_NAMESPACE
from testbed.specs import FRAUD_TRANSFORMS, flagged, payments, query_spec, resource
from testbed.wait import WaitTimeout, wait_for

NAMESPACE = E2E_NAMESPACE
FIGURES: list[tuple[str, str]] = []  # (test, line) printed in the run's summary
LOG_DIR = Path(os.environ.get("STREAMQ_E2E_LOG_DIR") or f"/tmp/streamq-e2e-logs/{time.strftime('%Y%m%d-%H%M%S')}")

__all__ = [
    "FRAUD_TRANSFORMS",
    "flagged",
    "payments",
    "Kafka",
    "Queries",
    "Output",
    "fraud_spec",
    "figure",
    "kafka_pod",
    "reconnect_kafka",
    "condition",
    "DriverWatch",
    "driver_log",
    "standby_waiting",
    "first_output_after",
    "SinkWatch",
]


def figure(test: str, line: str) -> None:
    print(f"[figure] {line}", flush=True)
    FIGURES.append((test, line))


# ---------------------------------------------------------------------- Kafka


class Kafka:
    """The broker in the cluster, seen from this machine (its external listener)."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def reconnect(self, bootstrap: str) -> None:
        """The same broker at another address (its pod was replaced: a new pod IP or port-forward)."""
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, name: str, partitions: int = 2) -> str:
        futures = self.admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        futures[name].result(60)
        wait_for(
            lambda: name in self.admin.list_topics(timeout=10).topics, 30, f"topic {name}", interval=0.5, ignore=(Exception,)
        )
        return name

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions, and wait until the broker names them all."""
        self.admin.create_partitions([NewPartitions(topic, total)])[topic].result(60)
        wait_for(lambda: len(self.admin.list_topics(topic, timeout=10).topics[topic].partitions) == total, 30,
                 f"{topic} with {total} partitions", interval=0.5, ignore=(Exception,))  # fmt: skip

    def produce(self, topic: str, records: list[tuple[str, str]]) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        for key, value in records:
            producer.produce(topic, key=key.encode(), value=value.encode())
            producer.poll(0)
        left = producer.flush(60)
        assert left == 0, f"{left} records not delivered to {topic}"

    def produce_paced(self, topic: str, records: list[tuple[str, str]], per_second: float) -> threading.Thread:
        """Produces in the background at about ``per_second`` records per second."""

        def run() -> None:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "enable.idempotence": True})
            start = time.monotonic()
            for i, (key, value) in enumerate(records):
                delay = start + i / per_second - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing the producer, not waiting for a condition
                producer.produce(topic, key=key.encode(), value=value.encode())
                producer.poll(0)
            producer.flush(60)

        thread = threading.Thread(target=run, name=f"produce-{topic}", daemon=True)
        thread.start()
        return thread

    def end_offsets(self, topic: str) -> dict[str, int]:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"e2e-{uuid.uuid4().hex}"})
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            out = {}
            for p in meta.partitions:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                out[str(p)] = high
            return out
        finally:
            consumer.close()

    def read_all(self, topic: str, quiet: float = 2.0, timeout: float = 30) -> list[tuple[str, str]]:
        """Every committed record of the topic, from the beginning to its current end.

        read_committed, as a reader of an exactlyOnce sink must: records of a transaction that
        was aborted (a writer killed before its commit) are not read, nor those of one still
        open. A topic written without transactions reads the same either way."""
        return [record for record, _ in self._read(topic, timeout)]

    def positions(self, topic: str, timeout: float = 30) -> dict[str, tuple[int, int]]:
        """Where each key of the topic was written: (partition, offset) of its last record."""
        return {key: where for (key, _), where in self._read(topic, timeout)}

    def _read(self, topic: str, timeout: float) -> list[tuple[tuple[str, str], tuple[int, int]]]:
        ends = self.end_offsets(topic)
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"e2e-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True,
            "isolation.level": "read_committed",
        })  # fmt: skip
        consumer.assign([TopicPartition(topic, int(p), 0) for p in ends])
        records: list[tuple[tuple[str, str], tuple[int, int]]] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        try:
            while len(done) < len(ends) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    # The end of what may be read now: the high watermark, or before a transaction still
                    # open (read_committed stops there, short of ``ends``, which counts its records too).
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        done.add(str(msg.partition()))
                    continue
                record = ((msg.key() or b"").decode(), (msg.value() or b"").decode())
                records.append((record, (msg.partition(), msg.offset())))
                if msg.offset() + 1 >= ends[str(msg.partition())]:
                    done.add(str(msg.partition()))
        finally:
            consumer.close()
        return records


class Output:
    """What a sink topic holds compared with what should be there."""

    def __init__(self, records: list[tuple[str, str]], expected: list[tuple[str, str]]):
        self.records = records
        self.expected = expected
        counts = collections.Counter(records)
        self.unique = set(counts)
        self.duplicates = sum(n - 1 for n in counts.values())
        self.missing = set(expected) - self.unique
        self.unexpected = self.unique - set(expected)

    @property
    def complete(self) -> bool:
        return not self.missing

    def summary(self) -> str:
        return (
            f"{len(self.records)} records out, {len(self.unique)} distinct, {len(self.expected)} expected, "
            f"{len(self.missing)} missing, {len(self.unexpected)} unexpected, {self.duplicates} duplicates"
        )


def wait_output(
    kafka: Kafka, topic: str, expected: list[tuple[str, str]], timeout: float, diagnose: Callable[[], str] | None = None
) -> Output:
    """Reads the sink topic until every expected record is there (then once more after
    a short pause, to count late duplicates)."""
    last: list[Output] = []

    def complete() -> Output | None:
        out = Output(kafka.read_all(topic), expected)
        last[:] = [out]
        return out if out.complete else None

    wait_for(complete, timeout,
             lambda: f"{len(expected)} records in {topic}\n" + (last[0].summary() if last else "")
             + ("\n" + diagnose() if diagnose else ""), interval=2, ignore=(Exception,))  # fmt: skip
    # On purpose: a pause in which nothing more should arrive, so that late duplicates are counted.
    time.sleep(2)
    return Output(kafka.read_all(topic), expected)


def kafka_pod(cluster) -> dict[str, Any] | None:
    """The broker's pod that is not being deleted (None while there is none)."""
    pods = cluster.kubectl_json("-n", NAMESPACE, "get", "pods", "-l", "app=kafka")["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live[0] if live else None


def reconnect_kafka(cluster, kafka: Kafka, replaced: str | None = None, timeout: float = 240) -> str:
    """After the broker's pod was replaced (deleted, or scaled to 0 and back): waits for a
    new pod (not ``replaced``) to be Ready, points ``kafka`` and ``cluster.kafka_bootstrap``
    at it (its pod IP, or a new port-forward on kind) and returns the new bootstrap."""

    def ready() -> dict[str, Any] | None:
        pod = kafka_pod(cluster)
        if pod is None or pod["metadata"]["name"] == replaced:
            return None
        ok = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])
        return pod if ok and pod["status"].get("podIP") else None

    pod = wait_for(ready, timeout, lambda: "a new Ready broker pod\n" + cluster.kubectl(
        "-n", NAMESPACE, "get", "pods", "-l", "app=kafka", "-o", "wide", check=False).stdout, interval=1, ignore=(Exception,))  # fmt: skip
    host, port = cluster.kafka_external()
    if hasattr(cluster, "start_kafka_port_forward"):  # kind: the old port-forward went with the old pod
        old = getattr(cluster, "_port_forward", None)
        if old is not None:
            old.terminate()
            old.wait(10)
        cluster.start_kafka_port_forward(NAMESPACE)
    if not host:
        host = pod["status"]["podIP"]
    bootstrap = f"{host}:{port}"

    def answers() -> bool:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        return bool(admin.list_topics(timeout=5).topics)

    wait_for(answers, 120, f"the broker answering at {bootstrap}", interval=1, ignore=(Exception,))
    kafka.reconnect(bootstrap)
    cluster.kafka_bootstrap = bootstrap
    return bootstrap


# ---------------------------------------------------------------------- queries


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition ``kind`` of a status ({} when it has none)."""
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def driver_log(sq: Queries, pod: str) -> str:
    return sq.kubectl("logs", pod, "-c", "driver", check=False, timeout=30).stdout


def standby_waiting(sq: Queries, name: str) -> str:
    """The standby driver pod of a query once it logs that it waits for the Lease."""

    def waiting() -> str | None:
        standby = sq.status(name).get("standby")
        if standby and "standing by: lease" in driver_log(sq, standby):
            return standby
        return None

    return wait_for(waiting, 420, f"the standby of {name} waiting for the lease", interval=2, ignore=(Exception,))


def first_output_after(kafka: Kafka, sink: str, before: set, timeout: float) -> float:
    """Seconds until a record not in ``before`` arrives on the sink."""
    t0 = time.monotonic()

    def new() -> bool:
        return bool(set(kafka.read_all(sink, quiet=0.3, timeout=10)) - before)

    wait_for(new, timeout, "a record written after the kill", interval=0.2)
    return time.monotonic() - t0


class SinkWatch:
    """Reads the sink from the start and stamps each record with the wall-clock time it arrived here."""

    def __init__(self, bootstrap: str, topic: str):
        self.records: list[tuple[float, str, str]] = []
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{uuid.uuid4().hex}",
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                   "fetch.wait.max.ms": 20, "isolation.level": "read_committed"})  # fmt: skip
        self._consumer.assign([TopicPartition(topic, 0, 0)])
        self._thread = threading.Thread(target=self._run, name=f"sink-{topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.05)
            if msg is None or msg.error():
                continue
            self.records.append((time.time(), (msg.key() or b"").decode(), (msg.value() or b"").decode()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()

    def largest_gap(self, since: float, until: float) -> float:
        times = [since] + [t for t, _, _ in self.records if since <= t <= until] + [until]
        return max(b - a for a, b in pairwise(times))


class Poller:
    """Calls ``poll`` in a background thread, then every ``interval`` seconds, for as long as a ``with``
    block lasts (the samplers of the e2e scenarios)."""

    def __init__(self, name: str, interval: float, join_s: float = 30.0):
        self.interval, self.join_s = interval, join_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.join_s)

    def poll(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            self.poll()
            if self._stop.wait(self.interval):
                return


class DriverWatch(Poller):
    """Polls a query's driver pods in the background (terminating ones included) and
    keeps the most seen at once: "never two drivers" holds only if ``most`` stays <= 1."""

    def __init__(self, sq: Queries, name: str, interval: float = 0.3):
        super().__init__(f"drivers-{name}", interval)
        self.sq, self.name = sq, name
        self.most = 0
        self.seen: set[str] = set()
        self.samples = 0
        self.overlaps: list[list[str]] = []

    def poll(self) -> None:
        selector = f"streamq.io/query={self.name},streamq.io/component=driver"
        out = self.sq.kubectl("get", "pods", "-l", selector, "-o", "name", check=False, timeout=20).stdout
        pods = sorted(line.split("/", 1)[-1] for line in out.splitlines() if line.strip())
        self.samples += 1
        self.seen.update(pods)
        self.most = max(self.most, len(pods))
        if len(pods) > 1:
            self.overlaps.append(pods)


# The e2e tests' changes to query_spec: more room for the driver, restarts enough to ride out kills.
E2E_QUERY: dict[str, Any] = {
    "runtime.driver": {"cores": 1, "memory": "1536Mi"},
    "restartPolicy": {"type": "Always", "maxRestarts": 10, "backoff": {"initial": "2s", "max": "20s"}},
}


def fraud_spec(source: str, sink: str, checkpoint_dir: str | None, **extra: Any) -> dict[str, Any]:
    """query_spec's fraud filter in continuous mode, reading and writing the in-cluster
    broker, its checkpoint on a hostPath of the node (None: an emptyDir, lost with the pod)."""
    volume = {"hostPath": checkpoint_dir} if checkpoint_dir is not None else {"emptyDir": {}}
    return query_spec(E2E_QUERY, {"checkpoint.volume": volume}, bootstrap=KAFKA_SERVICE,
                      topic=source, sink_topic=sink, location="/checkpoints/query", **extra)  # fmt: skip


def fraud_spec_s3(source: str, sink: str, name: str, store: Any, bucket: str, secret: str, **extra: Any) -> dict[str, Any]:
    """fraud_spec with its checkpoint in an S3-compatible store (``store``: testbed.seaweedfs.SeaweedS3)
    at s3a://<bucket>/<namespace>/<name>: a checkpoint every node reaches."""
    return query_spec(E2E_QUERY, bootstrap=KAFKA_SERVICE, topic=source, sink_topic=sink,
                      location=f"s3a://{bucket}/{NAMESPACE}/{name}", **{"checkpoint.s3": store.s3_block(secret)},
                      **extra)  # fmt: skip


def event_time(event: dict[str, Any]) -> str:
    """When an event last happened (RFC 3339, UTC: sorts as text)."""
    return (event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
            or event["metadata"].get("creationTimestamp") or "")  # fmt: skip


class Queries:
    """StreamingQueries of one test, in one namespace (streamq-e2e unless told)."""

    def __init__(self, cluster, test: str, namespace: str = NAMESPACE):
        self.cluster, self.namespace = cluster, namespace
        self.test = test
        self.names: list[str] = []
        self.t0 = time.monotonic()

    def name(self, base: str) -> str:
        return f"{base}-{uuid.uuid4().hex[:5]}"

    def kubectl(self, *args: str, **kw):
        return self.cluster.kubectl("-n", self.namespace, *args, **kw)

    def apply(self, name: str, spec: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(resource(spec, name, self.namespace)))
        if name not in self.names:
            self.names.append(name)

    def patch(self, name: str, patch: dict[str, Any]) -> None:
        self.kubectl("patch", "sq", name, "--type=merge", "-p", json.dumps(patch))

    def get(self, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", "sq", name, "-o", "json").stdout)

    def status(self, name: str) -> dict[str, Any]:
        return self.get(name).get("status") or {}

    def describe(self, name: str) -> str:
        st = self.status(name)
        pods = self.kubectl("get", "pods", "-l", f"streamq.io/query={name}", "-o", "wide", check=False).stdout
        driver = st.get("driver")
        logs = ""
        if driver:
            logs = self.kubectl("logs", driver, "--tail=40", check=False).stdout
        return (
            f"status: {json.dumps({k: v for k, v in st.items() if k != 'lastReconciledSpec'}, indent=1)[:3000]}\n"
            f"pods:\n{pods}\ndriver log tail:\n{logs[-3000:]}"
        )

    def wait_phase(self, name: str, *phases: str, timeout: float = 300, since_attempt: int | None = None) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            st = self.status(name)
            if st.get("phase") in phases and (since_attempt is None or st.get("attempt", 0) > since_attempt):
                return st
            return None

        return self._wait_on_status(name, reached, f"{name} in phase {'/'.join(phases)}", timeout)

    def wait_running(self, name: str, timeout: float = 300, since_attempt: int | None = None) -> dict[str, Any]:
        """Running with a driver that has reported progress (the query has started in Spark)."""
        return self.wait_phase(name, "Running", timeout=timeout, since_attempt=since_attempt)

    def wait_committed(self, name: str, topic: str, offsets: dict[str, int], timeout: float = 120) -> dict[str, Any]:
        """Until status.progress says the query committed at least these source offsets."""

        def committed() -> dict[str, Any] | None:
            progress = self.status(name).get("progress") or {}
            done = (progress.get("committedOffsets") or {}).get(topic) or {}
            ok = all(int(done.get(p, -1)) >= o for p, o in offsets.items())
            return progress if ok else None

        return self._wait_on_status(name, committed, f"{name} committing {topic} up to {offsets}", timeout)

    def _wait_on_status(self, name: str, found: Callable[[], dict[str, Any] | None], what: str, timeout: float) -> dict[str, Any]:
        """Each second until ``found`` returns the part of the status it waits for; a failed read is tried
        again (the API server may be restarting), and a timeout says what the query was doing."""
        return wait_for(found, timeout, lambda: f"{what}\n{self.describe(name)}", interval=1, ignore=(Exception,))

    def events(self, name: str) -> list[dict[str, Any]]:
        """The StreamingQuery's events (core/v1), oldest first."""
        out = self.kubectl("get", "events", "--field-selector",
                           f"involvedObject.kind=StreamingQuery,involvedObject.name={name}", "-o", "json").stdout  # fmt: skip
        items = json.loads(out)["items"]
        return sorted(items, key=event_time)

    def driver_pod(self, name: str) -> dict[str, Any]:
        driver = self.status(name)["driver"]
        return json.loads(self.kubectl("get", "pod", driver, "-o", "json").stdout)

    def children(self, name: str) -> list[str]:
        out = self.kubectl(
            "get", "pods,configmaps,services,secrets", "-l", f"streamq.io/query={name}", "-o", "name", check=False
        ).stdout
        return [line for line in out.splitlines() if line.strip()]

    def report(self) -> None:
        """kubectl get sq -o wide, the queries' events and the operator's log: printed
        (pytest shows it for failures, or with -rA) and kept in LOG_DIR/<test>.log."""
        parts = [f"===== {self.test}: kubectl get sq -o wide =====", self.kubectl("get", "sq", "-o", "wide", check=False).stdout]
        for name in self.names:
            out = self.kubectl(
                "get",
                "events",
                "--field-selector",
                f"involvedObject.kind=StreamingQuery,involvedObject.name={name}",
                "--sort-by=.lastTimestamp",
                check=False,
            ).stdout
            parts.append(f"===== events of StreamingQuery {name} =====\n{out}")
        ops = self.cluster.kubectl(
            "-n", OPERATOR_NAMESPACE, "logs", "deployment/streamq-operator", "--tail=400", check=False
        ).stdout
        noise = ("GET /healthz", "Handler '", "Activity 'reconcilers'")
        lines = [line for line in ops.splitlines() if not any(n in line for n in noise)]
        parts.append("===== operator log (tail, without probes and handler bookkeeping) =====\n" + "\n".join(lines[-25:]))
        text = "\n".join(parts)
        print("\n" + text)
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        (LOG_DIR / f"{self.test}.log").write_text(text + "\n")

    def cleanup(self) -> None:
        for name in self.names:
            self.kubectl("delete", "sq", name, "--ignore-not-found", "--wait=false", check=False)
        for name in self.names:
            try:
                wait_for(lambda: self.kubectl("get", "sq", name, check=False).returncode != 0, 90, f"{name} deleted",  # noqa: B023
                         interval=1)  # fmt: skip
            except WaitTimeout:
                pass  # best effort: a query left behind is reported by the next test's namespace, not here
