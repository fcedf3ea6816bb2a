"""Questions the job asks Kafka itself, so that a missing broker or topic is a
clear error at start, and a broker that goes away is noticed instead of waited on.

Spark's Kafka clients retry quietly for minutes; these checks put a bound on it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from app.contract import ExitCode
from app.pipeline.credentials import librdkafka_auth_config
from app.spec.model import QuerySpec


@dataclass(frozen=True)
class KafkaEndpoint:
    role: str  # "source" or "sink"
    bootstrap_servers: str
    config: dict[str, str]


class PreflightError(Exception):
    def __init__(self, code: ExitCode, message: str):
        self.code = code
        super().__init__(message)


def endpoints(spec: QuerySpec) -> list[KafkaEndpoint]:
    found = []
    if (src := spec.source.kafka) is not None:
        found.append(KafkaEndpoint("source", src.bootstrap_servers, librdkafka_auth_config(src.auth, "spec.source.kafka.auth")))
    if (dst := spec.sink.kafka) is not None:
        found.append(KafkaEndpoint("sink", dst.bootstrap_servers, librdkafka_auth_config(dst.auth, "spec.sink.kafka.auth")))
    return found


def _admin(endpoint: KafkaEndpoint, errors: list | None = None):
    from confluent_kafka.admin import AdminClient

    # librdkafka logs every failed connection attempt; the job reports one clear line instead.
    config = {"bootstrap.servers": endpoint.bootstrap_servers, "log_level": 0, **endpoint.config}
    if errors is not None:
        config["error_cb"] = errors.append
    return AdminClient(config)


def _most_specific(errors: list, fallback: Exception) -> str:
    """librdkafka reports "transport failure" to the caller and the real cause
    (e.g. SASL authentication failed) only to the error callback."""
    for error in reversed(errors):
        if "auth" in error.name().lower() or "SASL" in error.str():
            return error.str()
    return str(errors[-1].str()) if errors else str(fallback)


def describe_topics(endpoint: KafkaEndpoint, timeout_s: float) -> dict[str, int]:
    """{topic: partition count}; raises PreflightError when the broker does not answer."""
    errors: list = []
    admin = _admin(endpoint, errors)
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except Exception as exc:  # KafkaException carries librdkafka's reason
        admin.poll(0.5)  # error callbacks are served from poll()
        raise PreflightError(
            ExitCode.SOURCE_UNAVAILABLE,
            f"Kafka {endpoint.role} {endpoint.bootstrap_servers} did not answer within {timeout_s:g}s: "
            f"{_most_specific(errors, exc)}",
        ) from None
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def preflight(spec: QuerySpec, timeout_s: float = 15.0) -> dict[str, int]:
    """Check brokers and topics before Spark starts; returns the source's partition counts."""
    partitions: dict[str, int] = {}
    for endpoint in endpoints(spec):
        topics = describe_topics(endpoint, timeout_s)
        if endpoint.role == "source" and spec.source.kafka.topics:
            missing = [t for t in spec.source.kafka.topics if t not in topics]
            if missing:
                raise PreflightError(
                    ExitCode.SOURCE_UNAVAILABLE,
                    f"source topic(s) {', '.join(missing)} do not exist on {endpoint.bootstrap_servers}",
                )
            partitions = {t: topics[t] for t in spec.source.kafka.topics}
    check_slots(spec, partitions)
    return partitions


def check_slots(spec: QuerySpec, partitions: dict[str, int]) -> None:
    total = sum(partitions.values())
    slots = spec.runtime.task_slots
    if spec.mode in ("continuous", "realTime") and total and slots <= total:
        raise PreflightError(
            ExitCode.INVALID_SPEC,
            f"{spec.mode} mode holds one task slot per source partition: {total} partitions "
            f"need more than {total} slots, the query has {slots} "
            f"(set spec.runtime.parallelism to at least {total + 1}); Spark would hang, not fail",
        )


class BrokerWatch(threading.Thread):
    """Notices a broker that stopped answering for longer than ``timeout_s``."""

    def __init__(self, spec: QuerySpec, timeout_s: float, period_s: float = 2.0):
        super().__init__(name="streamq-broker-watch", daemon=True)
        self._endpoints = endpoints(spec)
        self.timeout_s, self.period_s = timeout_s, period_s
        self.failure: str | None = None
        self._stopped = threading.Event()

    def run(self) -> None:
        if not self._endpoints:
            return
        admins = [(e, _admin(e)) for e in self._endpoints]
        last_ok = {e.role: time.monotonic() for e in self._endpoints}
        while not self._stopped.wait(self.period_s):
            for endpoint, admin in admins:
                try:
                    admin.list_topics(timeout=self.period_s)
                    last_ok[endpoint.role] = time.monotonic()
                except Exception:
                    silent = time.monotonic() - last_ok[endpoint.role]
                    if silent > self.timeout_s:
                        self.failure = (
                            f"Kafka {endpoint.role} {endpoint.bootstrap_servers} unreachable "
                            f"for {silent:.0f}s (limit {self.timeout_s:g}s)"
                        )
                        return

    def stop(self) -> None:
        self._stopped.set()
