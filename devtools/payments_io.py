"""The payment feed and the flagged-payment reader, with nothing but confluent-kafka and
devtools.payments: `make dev` runs them beside a local broker (devtools.loop), and the cluster
quick start runs them in the streamq image, mounted from a ConfigMap with this package's two
modules (hack/quickstart.sh), where neither the testbed nor the rest of devtools is installed."""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
import uuid

from devtools.payments import flagged_line, latency_line, latency_ms, payment

CLIENT_LOGGER = "streamq.kafka.client"  # as testbed.kafka_broker's clients: not printed (it is not mounted here)
LATENCY_EVERY_S = 5.0


class Screen:
    """Lines from several threads, one at a time."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            print(line, file=self.stream, flush=True)


def _client_conf(bootstrap: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
            "logger": logging.getLogger(CLIENT_LOGGER), **extra}  # fmt: skip


def feed(bootstrap: str, topic: str, per_second: float, stop: threading.Event) -> None:
    """A steady stream of payments until ``stop``; ``ts`` is stamped as each one is sent."""
    from confluent_kafka import Producer

    producer = Producer(_client_conf(bootstrap, **{"linger.ms": 0, "acks": 1}))
    rng, n, period = random.Random(), 0, 1.0 / per_second
    next_at = time.monotonic()
    try:
        while not stop.is_set():
            key, value = payment(n, rng, int(time.time() * 1000))
            try:
                producer.produce(topic, key=key, value=value)
            except BufferError:
                pass  # the broker is behind; this payment is dropped, the feed stays steady
            producer.poll(0)
            n += 1
            next_at += period
            stop.wait(max(0.0, next_at - time.monotonic()))
    finally:
        producer.flush(5)


def read_flagged(bootstrap: str, topic: str, mode: str, screen: Screen, stop: threading.Event) -> None:
    """Each flagged payment as it arrives, and the latency over the last interval."""
    from confluent_kafka import Consumer

    consumer = Consumer(_client_conf(bootstrap, **{"group.id": f"streamq-dev-{uuid.uuid4().hex[:8]}",
                                                   "auto.offset.reset": "earliest", "enable.auto.commit": False}))  # fmt: skip
    consumer.subscribe([topic])
    window: list[int] = []
    next_summary = time.monotonic() + LATENCY_EVERY_S
    try:
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                latency = latency_ms(msg.value(), int(time.time() * 1000))
                if latency is not None:
                    window.append(latency)
                screen.say(flagged_line(msg.value(), latency))
            if time.monotonic() >= next_summary:
                if window:
                    screen.say(latency_line(mode, window))
                window, next_summary = [], time.monotonic() + LATENCY_EVERY_S
    finally:
        consumer.close()
