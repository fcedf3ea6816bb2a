"""A real single-node Kafka broker (KRaft) on loopback: the one the tests, the benchmarks and `make dev` start.

The broker is made of Maven jars that ``hack/install-jars.sh`` puts in the
cache (``${STREAMQ_CACHE:-~/.cache/streamq}/kafka/<version>/libs``); it runs
as ``java -cp 'libs/*' kafka.Kafka server.properties`` in a temporary
directory, listening on 127.0.0.1 only, on free ports.

    broker = KafkaBroker()          # or KafkaBroker(libs_dir=...)
    broker.start()                  # returns once the broker answers
    broker.create_topic("t", partitions=2)
    broker.produce("t", [(b"k", b"v"), ("k2", "v2")])
    broker.consume_all("t", timeout=10, expected_count=2)
    broker.kill(); broker.restart()  # same ports, same data
    broker.stop()                   # SIGTERM, then SIGKILL; removes the dir

    KafkaBroker(tls=TlsListener(...))  # also an SSL listener (testbed/tls.py makes the PKI):
    broker.tls_bootstrap               # "127.0.0.1:PORT", mTLS required by default

Also: ``cache_dir()``, ``jars_dir()`` (Spark's Kafka connector jars for
``spark.jars``), ``spark_kafka_jars()``, ``kafka_libs_dir()``. It reads the checkout
(hack/maven's pom, hack/kafka/log4j2.properties): a testbed part, not in the wheel.
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed.wait import WaitTimeout, wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTALL_HINT = "run hack/install-jars.sh (it installs them into ${STREAMQ_CACHE:-~/.cache/streamq})"
KAFKA_BROKER_POM = REPO_ROOT / "hack" / "maven" / "kafka-broker" / "pom.xml"

Record = tuple[object, object]  # (key, value): bytes, str or None

# librdkafka logs every refused connection at ERROR level on stderr; the
# kill/restart tests make plenty of those on purpose, and a broker stopping makes some.
CLIENT_LOGGER = "streamq.kafka.client"
_CLIENT_LOGGER = logging.getLogger(CLIENT_LOGGER)
_CLIENT_LOGGER.addHandler(logging.NullHandler())  # kept for pytest's log capture, not printed


class JarsMissing(RuntimeError):
    """The cache has no complete install of the jars; run hack/install-jars.sh."""


class BrokerError(RuntimeError):
    """The broker did not start, died, or refused an operation."""


@dataclass(frozen=True)
class TlsListener:
    """An SSL listener beside the PLAINTEXT one (which the tests' own clients keep using).
    PEM files: ``keystore`` the broker's key and certificate in one file, ``truststore`` the CA
    its clients' certificates must come from."""

    keystore: Path
    truststore: Path
    client_auth: str = "required"  # ssl.client.auth: required, requested or none


# --------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """Root of the jar cache: ``$STREAMQ_CACHE`` or ``~/.cache/streamq``."""
    env = os.environ.get("STREAMQ_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "streamq"


def _complete(folder: Path) -> bool:
    return (folder / ".complete").is_file()


def jars_dir() -> Path:
    """Folder with Spark's Kafka connector and the deps pyspark lacks.

    Every ``*.jar`` in it goes on ``spark.jars``. ``$STREAMQ_JARS_DIR`` (what
    the job reads too, e.g. in the image) wins over the cache. Raises
    JarsMissing when the install is absent or incomplete.
    """
    env = os.environ.get("STREAMQ_JARS_DIR")
    if env:
        folder = Path(env)
        if not any(folder.glob("spark-sql-kafka-0-10_*.jar")):
            raise JarsMissing(f"STREAMQ_JARS_DIR={env} has no spark-sql-kafka-0-10 jar: {INSTALL_HINT}")
        return folder
    folder = cache_dir() / "jars" / "spark-kafka"
    if not _complete(folder) or not any(folder.glob("*.jar")):
        raise JarsMissing(f"Spark's Kafka connector jars are missing from {folder}: {INSTALL_HINT}")
    return folder


def spark_kafka_jars() -> list[Path]:
    """The jar files of :func:`jars_dir`, sorted (for ``spark.jars``)."""
    return sorted(jars_dir().glob("*.jar"))


def spark_jars_conf() -> str:
    """Value for ``spark.jars``: the connector jars, comma separated."""
    return ",".join(str(p) for p in spark_kafka_jars())


def kafka_version() -> str:
    """Broker version: ``$STREAMQ_KAFKA_VERSION`` or the default in the broker POM."""
    env = os.environ.get("STREAMQ_KAFKA_VERSION") or os.environ.get("KAFKA_VERSION")
    if env:
        return env
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", KAFKA_BROKER_POM.read_text())
    if not match:
        raise JarsMissing(f"no <kafka.version> in {KAFKA_BROKER_POM}")
    return match.group(1).strip()


def kafka_home() -> Path:
    """``<cache>/kafka/<version>``, checked complete (has libs/ and config/)."""
    home = cache_dir() / "kafka" / kafka_version()
    if not _complete(home) or not any((home / "libs").glob("kafka_2.13-*.jar")):
        raise JarsMissing(f"the Kafka broker jars are missing from {home}: {INSTALL_HINT}")
    return home


def kafka_libs_dir() -> Path:
    """``<cache>/kafka/<version>/libs``: the broker's classpath."""
    return kafka_home() / "libs"


# ------------------------------------------------------------------- helpers


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _to_bytes(x: object) -> bytes | None:
    if x is None or isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"keys and values must be bytes, str or None, not {type(x).__name__}")


def _java() -> str:
    if os.environ.get("STREAMQ_JAVA"):
        return os.environ["STREAMQ_JAVA"]
    if os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if not found:
        raise BrokerError("java not found (Java 17+ is needed for the Kafka broker)")
    return found


_LIVE_BROKERS: weakref.WeakSet[KafkaBroker] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:  # a crashed test run must not leave brokers behind
    for broker in list(_LIVE_BROKERS):
        try:
            broker.stop()
        except Exception:  # noqa: BLE001 - at exit, one broker that fails to stop must not keep the others running
            pass


# -------------------------------------------------------------------- broker


def new_cluster_id() -> str:
    """16 random bytes, URL-safe base64 without padding, as Kafka wants; never
    starting with '-', which the storage tool would read as an option."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


class KafkaBroker:
    """One KRaft node (broker + controller) on 127.0.0.1.

    ``bootstrap`` is ``"127.0.0.1:PORT"``. Ports and the data directory stay the
    same across :meth:`kill` / :meth:`restart`, so the data survive a restart.
    """

    def __init__(
        self,
        libs_dir: Path | str | None = None,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        workdir: Path | str | None = None,
        heap: str = "512m",
        start_timeout: float | None = None,
        extra_properties: dict[str, object] | None = None,
        tls: TlsListener | None = None,
    ) -> None:
        self.libs_dir = Path(libs_dir) if libs_dir else kafka_libs_dir()
        log4j = self.libs_dir.parent / "config" / "log4j2.properties"
        if not log4j.is_file():
            log4j = REPO_ROOT / "hack" / "kafka" / "log4j2.properties"
        self.log4j_config = log4j
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="streamq-kafka-"))
        self.data_dir = self.workdir / "data"
        self.properties_file = self.workdir / "server.properties"
        self.log_file = self.workdir / "broker.log"
        self.heap = heap
        self.start_timeout = float(start_timeout or os.environ.get("STREAMQ_KAFKA_START_TIMEOUT", 90))
        self.extra_properties = dict(extra_properties or {})
        self.tls = tls
        self.tls_port = free_port() if tls is not None else None
        while self.tls_port in (self.port, self.controller_port):
            self.tls_port = free_port()
        self.cluster_id = new_cluster_id()
        self.process: subprocess.Popen | None = None
        self._formatted = False
        self._removed = False

    # ------------------------------------------------------------ properties
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def tls_bootstrap(self) -> str:
        if self.tls_port is None:
            raise BrokerError("this broker has no TLS listener (KafkaBroker(tls=...))")
        return f"127.0.0.1:{self.tls_port}"

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return f"<KafkaBroker {self.bootstrap} {state} dir={self.workdir}>"

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------- lifecycle
    def server_properties(self) -> dict[str, object]:
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            # After a kill -9 the restarted node is refused (DUPLICATE_BROKER_REGISTRATION)
            # until the dead incarnation's session expires: 9 s by default.
            "broker.session.timeout.ms": 3000,
            "broker.heartbeat.interval.ms": 500,
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "num.network.threads": 2,
            "num.io.threads": 4,
            "log.flush.interval.messages": 9223372036854775807,
        }
        if self.tls is not None:
            props.update(self._tls_properties(self.tls))
        props.update(self.extra_properties)
        return props

    def _tls_properties(self, tls: TlsListener) -> dict[str, object]:
        listeners = (f"PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.tls_port},"
                     f"CONTROLLER://127.0.0.1:{self.controller_port}")  # fmt: skip
        return {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.location": str(tls.keystore),
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(tls.truststore),
            "listener.name.ssl.ssl.client.auth": tls.client_auth,
        }

    def _write_properties(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        lines = [f"{k}={v}" for k, v in self.server_properties().items()]
        self.properties_file.write_text("\n".join(lines) + "\n")

    def _java_cmd(self, main: str, *args: str) -> list[str]:
        return [
            _java(),
            f"-Xmx{self.heap}",
            "-Xms64m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_config}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            str(self.libs_dir / "*"),
            main,
            *args,
        ]

    def _format(self) -> None:
        cmd = self._java_cmd(
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(self.properties_file),
            "--standalone",
        )
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        with self.log_file.open("a") as f:
            f.write(f"$ {' '.join(cmd)}\n{res.stdout}{res.stderr}")
        if res.returncode != 0:
            raise BrokerError(f"kafka StorageTool format failed ({res.returncode}):\n{res.stdout}{res.stderr}")
        self._formatted = True

    def start(self) -> KafkaBroker:
        """Start (formatting storage the first time) and wait until it answers."""
        if self._removed:
            raise BrokerError("this broker was stopped and its directory removed; make a new one")
        if self.is_running:
            return self
        self._write_properties()
        if not self._formatted:
            self._format()
        self._wait_ports_free()
        with self.log_file.open("a") as log:
            log.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n")
            log.flush()
            self.process = subprocess.Popen(
                self._java_cmd("kafka.Kafka", str(self.properties_file)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                start_new_session=True,
            )
        _LIVE_BROKERS.add(self)
        try:
            self.wait_ready(self.start_timeout)
        except BaseException:
            self._terminate(grace=5)
            raise
        return self

    def _wait_ports_free(self, timeout: float = 30) -> None:
        def free() -> bool:
            return all(_port_is_free(p) for p in (self.port, self.controller_port))

        try:
            wait_for(free, timeout, f"ports {self.port} and {self.controller_port} on 127.0.0.1 to be free")
        except WaitTimeout as e:
            raise BrokerError(f"{e}; cannot (re)start the broker") from None

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the broker serves metadata and every partition has a leader."""
        from confluent_kafka.admin import AdminClient

        timeout = self.start_timeout if timeout is None else timeout
        admin = AdminClient(self._client_conf())

        def ready() -> bool:
            if not self.is_running:
                raise BrokerError(
                    f"the Kafka broker exited with code {self.process.returncode if self.process else None}; "
                    f"log {self.log_file}:\n{self.log_tail()}"
                )
            try:
                md = admin.list_topics(timeout=2)
            except Exception:  # noqa: BLE001 - KafkaException while the broker boots
                return False
            topics = md.topics.values()
            return (
                bool(md.brokers)
                and all(t.error is None for t in topics)
                and all(p.leader >= 0 and p.error is None for t in topics for p in t.partitions.values())
            )

        try:
            wait_for(ready, timeout, f"the Kafka broker at {self.bootstrap} to be ready, every partition with a leader",
                     interval=0.2)  # fmt: skip
        except WaitTimeout as e:
            raise BrokerError(f"{e}; log {self.log_file}:\n{self.log_tail()}") from None

    def _terminate(self, grace: float) -> None:
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            if grace > 0:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        self.process = None

    def kill(self, graceful: bool = False, grace: float = 20) -> None:
        """Make the broker go away but keep its data (for :meth:`restart`).

        Default is SIGKILL (a crash); ``graceful=True`` sends SIGTERM first.
        """
        self._terminate(grace=grace if graceful else 0)

    def restart(self, graceful: bool = False) -> KafkaBroker:
        """Kill (if running) and start again on the same ports with the same data."""
        self.kill(graceful=graceful)
        return self.start()

    def stop(self, grace: float = 20) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; removes the temp dir."""
        self._terminate(grace=grace)
        _LIVE_BROKERS.discard(self)
        if self._own_workdir and not self._removed:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self._removed = True

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # --------------------------------------------------------------- clients
    def _client_conf(self, **extra: object) -> dict[str, object]:
        conf: dict[str, object] = {
            "bootstrap.servers": self.bootstrap,
            "broker.address.family": "v4",
            "logger": _CLIENT_LOGGER,
        }
        conf.update(extra)
        return conf

    def admin(self, **conf: object):
        from confluent_kafka.admin import AdminClient

        return AdminClient(self._client_conf(**conf))

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        config: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> str:
        """Create ``name`` and wait until every partition has a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        fut = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
            operation_timeout=timeout,
            request_timeout=timeout,
        )[name]
        try:
            fut.result(timeout=timeout)
        except Exception as e:
            raise BrokerError(f"could not create topic {name!r}: {e}") from e

        def led() -> bool:
            md = admin.list_topics(topic=name, timeout=5).topics.get(name)
            return (md is not None and md.error is None and len(md.partitions) == partitions
                    and all(p.leader >= 0 for p in md.partitions.values()))  # fmt: skip

        try:
            wait_for(led, timeout, f"a leader for every partition of topic {name!r}", interval=0.1)
        except WaitTimeout as e:
            raise BrokerError(str(e)) from None
        return name

    def delete_topic(self, name: str, timeout: float = 30) -> None:
        admin = self.admin()  # held until the result: a client collected mid-call fails its futures (_DESTROY)
        admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout=timeout)

    def list_topics(self, timeout: float = 10) -> set[str]:
        return {t for t in self.admin().list_topics(timeout=timeout).topics if not t.startswith("__")}

    def produce(
        self,
        topic: str,
        records: Iterable[Record],
        *,
        partition: int | None = None,
        timeout: float = 30,
    ) -> list[tuple[int, int]]:
        """Produce ``(key, value)`` records (bytes, str or None), flush, and
        return their ``(partition, offset)`` in order. Raises if any failed."""
        from confluent_kafka import Producer

        producer = Producer(self._client_conf(**{"acks": "all", "enable.idempotence": True, "linger.ms": 0}))
        results: list[tuple[int, int] | None] = []
        errors: list[str] = []

        def on_delivery(index: int):
            def cb(err, msg) -> None:
                if err is not None:
                    errors.append(f"record {index}: {err}")
                else:
                    results[index] = (msg.partition(), msg.offset())

            return cb

        for i, (key, value) in enumerate(records):
            results.append(None)
            kwargs = {"key": _to_bytes(key), "value": _to_bytes(value), "on_delivery": on_delivery(i)}
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        remaining = producer.flush(timeout)
        if remaining:
            raise BrokerError(f"{remaining} record(s) to {topic!r} not delivered within {timeout}s")
        if errors:
            raise BrokerError(f"produce to {topic!r} failed: {'; '.join(errors[:5])}")
        if any(r is None for r in results):
            raise BrokerError(f"produce to {topic!r}: missing delivery reports")
        return [r for r in results if r is not None]

    def end_offsets(self, topic: str, timeout: float = 10) -> dict[int, int]:
        """High watermark of every partition of ``topic``."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._client_conf(**{"group.id": f"streamq-offsets-{uuid.uuid4().hex}"}))
        try:
            md = consumer.list_topics(topic, timeout=timeout).topics[topic]
            if md.error is not None:
                raise BrokerError(f"topic {topic!r}: {md.error}")
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1] for p in sorted(md.partitions)
            }
        finally:
            consumer.close()

    def wait_for_records(
        self, topic: str, expected: Iterable[tuple[object, object]], timeout: float
    ) -> list[tuple[object, object]]:
        """Every record of ``topic`` (decoded, duplicates included) once it holds all of ``expected``."""
        from confluent_kafka import KafkaException

        wanted, out = set(expected), []

        def holds_all() -> bool:
            out[:] = self.consume_all(topic, timeout=10, decode=True)
            return wanted <= set(out)

        wait_for(
            holds_all,
            timeout,
            lambda: f"{len(wanted - set(out))} of {len(wanted)} records missing from {topic}",
            interval=1,
            ignore=(KafkaException,),  # a metadata error while the topic is written: not yet
        )
        return out

    def consume_all(
        self,
        topic: str,
        timeout: float = 10,
        expected_count: int | None = None,
        *,
        decode: bool = False,
    ) -> list[tuple[object, object]]:
        """Read ``topic`` from the beginning with a fresh group.

        Returns ``(key, value)`` pairs (bytes, or str with ``decode=True``), in
        offset order within each partition. Stops once ``expected_count``
        records arrived; without it, once every partition's end offset (as of
        the call) is reached; in any case at ``timeout``.
        """
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        deadline = time.monotonic() + timeout
        targets = None if expected_count is not None else self.end_offsets(topic, timeout=timeout)
        consumer = Consumer(
            self._client_conf(
                **{
                    "group.id": f"streamq-test-{uuid.uuid4().hex}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_committed",
                }
            )
        )
        out: list[tuple[object, object]] = []
        try:
            md = consumer.list_topics(topic, timeout=max(1.0, deadline - time.monotonic())).topics[topic]
            if md.error is not None:
                raise BrokerError(f"topic {topic!r}: {md.error}")
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(md.partitions)])
            position: dict[int, int] = {}

            def done() -> bool:
                if expected_count is not None:
                    return len(out) >= expected_count
                return all(position.get(p, 0) >= end for p, end in (targets or {}).items())

            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                msg = consumer.poll(min(0.5, left))
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        position[msg.partition()] = max(position.get(msg.partition(), 0), msg.offset())
                        continue
                    raise BrokerError(f"consume from {topic!r}: {msg.error()}")
                key, value = msg.key(), msg.value()
                if decode:
                    key = key.decode("utf-8") if key is not None else None
                    value = value.decode("utf-8") if value is not None else None
                out.append((key, value))
                position[msg.partition()] = msg.offset() + 1
        finally:
            consumer.close()
        return out


def make_topic_name(hint: str = "t") -> str:
    """A valid, unique topic name built from ``hint`` (e.g. a test name)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", hint).strip("-.") or "t"
    return f"{base[:80]}-{uuid.uuid4().hex[:8]}"


__all__: Sequence[str] = [
    "BrokerError",
    "WaitTimeout",
    "JarsMissing",
    "KafkaBroker",
    "TlsListener",
    "cache_dir",
    "free_port",
    "jars_dir",
    "kafka_home",
    "kafka_libs_dir",
    "kafka_version",
    "make_topic_name",
    "spark_jars_conf",
    "spark_kafka_jars",
]
