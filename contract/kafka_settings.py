"""Which Kafka client settings a query may pass through ``options`` (``kafka.<setting>``).

An allow-list: the consumer, producer and admin settings of Kafka's clients that only
tune timing, batching, sizes and protocol choices. Everything else is refused with the
class it belongs to, unless the platform names it in ``policy.allowedKafkaOptions``:
settings that load classes, read files, run commands (Kerberos' kinit), fetch URLs, or
carry key material inline. Names come from the clients' ConsumerConfig, ProducerConfig
and CommonClientConfigs (kafka-clients 3.9, the version Spark's connector uses).
"""

from __future__ import annotations

import re

SAFE_CLIENT_SETTINGS = frozenset(
    """
    acks allow.auto.create.topics auto.include.jmx.reporter batch.size buffer.memory check.crcs
    client.dns.lookup client.id client.rack compression.gzip.level compression.lz4.level compression.type
    compression.zstd.level connections.max.idle.ms default.api.timeout.ms delivery.timeout.ms
    enable.idempotence enable.metrics.push exclude.internal.topics fetch.max.bytes fetch.max.wait.ms
    fetch.min.bytes group.instance.id group.protocol heartbeat.interval.ms isolation.level linger.ms
    max.block.ms max.in.flight.requests.per.connection max.partition.fetch.bytes max.poll.interval.ms
    max.poll.records max.request.size metadata.max.age.ms metadata.max.idle.ms metadata.recovery.strategy
    metadata.recovery.rebootstrap.trigger.ms metrics.num.samples metrics.recording.level
    metrics.sample.window.ms partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
    partitioner.ignore.keys receive.buffer.bytes reconnect.backoff.max.ms reconnect.backoff.ms
    request.timeout.ms retries retry.backoff.max.ms retry.backoff.ms send.buffer.bytes session.timeout.ms
    socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms transaction.timeout.ms
    ssl.cipher.suites ssl.enabled.protocols ssl.endpoint.identification.algorithm ssl.keymanager.algorithm
    ssl.keystore.type ssl.protocol ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.type
    """.split()
)

# (pattern, why): the first that matches names the class of a refused setting.
REFUSED_CLASSES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), why)
    for pattern, why in (
        (r"^config\.providers", "config providers read files and the environment into settings"),
        # ssl.key.password included: keys are read unencrypted from a Secret, so none is needed
        (
            r"^ssl\.(truststore|keystore|key)\.(?!type$)",
            "TLS certificates and keys come from Secrets: tls.caSecretRef and tls.clientCertificate",
        ),
        (r"(\.class|\.classes|^metric\.reporters|^security\.providers|\.factory\.class)$", "it names a class to load"),
        (r"^sasl\.kerberos\.|keytab|^sasl\.kerberos", "Kerberos settings run kinit and read keytabs"),
        (r"\.url$|\.urls$|endpoint\.url", "it fetches a URL (file:// included) from the pod"),
        (r"(\.key|\.certificate\.chain|\.certificates|password)$", "it carries key material inline: use a Secret"),
        (r"(\.location|\.file|\.path)$", "it reads a file in the pod"),
        (r"^sasl\.|^security\.protocol$", "authentication comes from auth.secretRef"),
    )
)


def refusal(setting: str) -> str | None:
    """Why ``setting`` (the Kafka client setting, without Spark's ``kafka.`` prefix) is
    refused by default; None when it is on the allow-list."""
    name = setting.lower()
    if name in SAFE_CLIENT_SETTINGS:
        return None
    for pattern, why in REFUSED_CLASSES:
        if pattern.search(name):
            return why
    return "not a Kafka client setting a query may tune (docs/security.md lists them)"
