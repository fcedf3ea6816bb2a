"""Questions the job asks Kafka itself, so that a missing broker or topic is a
clear error at start, and a broker that goes away is noticed instead of waited on.

Spark's Kafka clients retry quietly for minutes; these checks put a bound on it.
The job's watchdog (app.monitoring.watchdog) asks the same questions while the query runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.pipeline.credentials import librdkafka_auth_config, librdkafka_tls_config
from contract import ExitCode
from contract.checkpoint import KafkaOffsets
from contract.spec import QuerySpec


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
    for role, kafka in (("source", spec.source.kafka), ("sink", spec.sink.kafka)):
        if kafka is not None:
            config = {**librdkafka_auth_config(kafka.auth, f"spec.{role}.kafka.auth"),
                      **librdkafka_tls_config(kafka.tls, kafka.auth, f"spec.{role}.kafka.tls")}  # fmt: skip
            found.append(KafkaEndpoint(role, kafka.bootstrap_servers, config))
    return found


def admin_client(endpoint: KafkaEndpoint, errors: list | None = None):
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
        if "auth" in error.name().lower() or "SASL" in error.str() or "SSL" in error.str():
            return error.str()
    return str(errors[-1].str()) if errors else str(fallback)


# OpenSSL's words for the two ways a TLS handshake with a broker fails.
_PEER_REFUSED = re.compile(r"alert (bad certificate|certificate required|unknown ca|certificate unknown)", re.I)
_UNTRUSTED = re.compile(r"certificate verify failed|unable to get local issuer|self.signed", re.I)


def tls_hint(reason: str, role: str) -> str:
    """What to check, after librdkafka's reason, when the TLS handshake failed; "" otherwise."""
    if _PEER_REFUSED.search(reason):
        return (
            f" (the broker refused the TLS handshake: it requires a client certificate it trusts; "
            f"set spec.{role}.kafka.tls.clientCertificate to a Secret with one its CA signed)"
        )
    if _UNTRUSTED.search(reason):
        return (
            f" (the broker's certificate is not trusted: set spec.{role}.kafka.tls.caSecretRef to a Secret with "
            "the CA that signed it, and name the brokers as their certificate does)"
        )
    return ""


def describe_topics(endpoint: KafkaEndpoint, timeout_s: float, admin=None, errors: list | None = None) -> dict[str, int]:
    """{topic: partition count}; raises PreflightError when the broker does not answer."""
    if admin is None:
        errors = []
        admin = admin_client(endpoint, errors)
    errors = errors if errors is not None else []
    del errors[:-20]  # keep the error callback's list short on a long-lived client
    from confluent_kafka import KafkaException

    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:  # it carries librdkafka's reason
        admin.poll(0.5)  # error callbacks are served from poll()
        raise PreflightError(
            ExitCode.SOURCE_UNAVAILABLE,
            f"Kafka {endpoint.role} {endpoint.bootstrap_servers} did not answer within {timeout_s:g}s: "
            f"{(reason := _most_specific(errors, exc))}{tls_hint(reason, endpoint.role)}",
        ) from None
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def source_partitions(spec: QuerySpec, topics: dict[str, int]) -> dict[str, int]:
    """{topic: partitions} the source reads, from every topic the broker has."""
    kafka = spec.source.kafka
    if kafka is None:
        return {}
    if kafka.topics is not None:
        return {t: topics[t] for t in kafka.topics if t in topics}
    return {t: n for t, n in topics.items() if re.fullmatch(kafka.pattern, t) and not t.startswith("__")}


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
        if endpoint.role == "source":
            partitions = source_partitions(spec, topics)
    return partitions


def slot_shortage(spec: QuerySpec, partitions: dict[str, int], slots: int) -> str | None:
    """Why ``slots`` cannot run the source's ``partitions`` in this mode, or None (pure; the
    watchdog's health asks it again when partitions grow)."""
    count = sum(partitions.values())
    if not spec.mode.long_running or not count or slots > count:
        return None
    return (
        f"{spec.mode} mode holds one task slot per source partition: {count} partitions "
        f"need more than {count} slots, the query has {slots}"
    )


def check_slots(spec: QuerySpec, partitions: dict[str, int]) -> int:
    """The task slots the query gets (sized from the partitions when parallelism is unset);
    raises when they cannot hold the partitions: Spark would hang, not fail."""
    total = sum(partitions.values())
    if spec.source.rate is not None:
        total = spec.source.rate.num_partitions
    slots = spec.runtime.task_slots(spec.mode, total)
    shortage = slot_shortage(spec, partitions or ({"rate": total} if total else {}), slots)
    if shortage:
        raise PreflightError(
            ExitCode.INVALID_SPEC,
            f"{shortage} (set spec.runtime.parallelism to at least {total + 1}, or leave it unset to size it "
            "automatically); Spark would hang, not fail",
        )
    return slots


def list_offsets(endpoint: KafkaEndpoint, partitions: dict[str, int], which: str, timeout_s: float, admin=None) -> KafkaOffsets:
    """{topic: {partition: offset}}: the "latest" (next to be written) or "earliest" offsets."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    if not partitions:
        return {}
    admin = admin or admin_client(endpoint)
    spec = OffsetSpec.latest() if which == "latest" else OffsetSpec.earliest()
    request = {TopicPartition(t, p): spec for t, n in partitions.items() for p in range(n)}
    futures = admin.list_offsets(request, request_timeout=timeout_s)
    out: KafkaOffsets = {}
    for tp, future in futures.items():
        out.setdefault(tp.topic, {})[tp.partition] = future.result(timeout=timeout_s).offset
    return out
