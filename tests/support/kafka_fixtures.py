"""Pytest fixtures for a real Kafka broker (see testbed/kafka_broker.py).

* ``kafka_broker`` (session): one KRaft broker on 127.0.0.1 for the whole run;
  ``kafka_broker.bootstrap`` is ``"127.0.0.1:PORT"``.
* ``kafka_topic`` (function): factory ``kafka_topic(partitions=1, *, create=True,
  prefix=None) -> str`` giving a unique topic name per call, created on the
  session broker unless ``create=False``.
* ``kafka_broker_factory`` (function): ``kafka_broker_factory(**KafkaBroker kwargs)``
  starts a private broker, stopped at the end of the test. Use it for tests
  that kill/restart the broker, so the session broker is left alone.
* ``spark_kafka_jars`` (session): the connector jar paths for ``spark.jars``.

Missing jars make these fixtures FAIL with a hint to run hack/install-jars.sh;
with STREAMQ_ALLOW_SKIP=1 they skip instead.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from testbed import kafka_broker as _kafka
from testbed.kafka_broker import JarsMissing, KafkaBroker, kafka_libs_dir, make_topic_name

T = TypeVar("T")


def _required(find: Callable[[], T]) -> T:
    """``find()``, or fail the test (skip with STREAMQ_ALLOW_SKIP=1) when jars are missing."""
    try:
        return find()
    except JarsMissing as err:
        message = str(err)  # leave the except block: no chained traceback in the report
    if os.environ.get("STREAMQ_ALLOW_SKIP") == "1":
        pytest.skip(f"{message} (skipped because STREAMQ_ALLOW_SKIP=1)")
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def spark_kafka_jars() -> list[str]:
    return [str(p) for p in _required(_kafka.spark_kafka_jars)]


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    libs = _required(kafka_libs_dir)
    broker = KafkaBroker(libs)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_broker_factory() -> Iterator[Callable[..., KafkaBroker]]:
    libs = _required(kafka_libs_dir)
    made: list[KafkaBroker] = []

    def make(**kwargs) -> KafkaBroker:
        kwargs.setdefault("libs_dir", libs)
        broker = KafkaBroker(**kwargs)
        made.append(broker)
        return broker.start()

    try:
        yield make
    finally:
        for broker in made:
            broker.stop()


@pytest.fixture
def kafka_topic(kafka_broker: KafkaBroker, request: pytest.FixtureRequest) -> Callable[..., str]:
    counter = itertools.count()

    def make(partitions: int = 1, *, create: bool = True, prefix: str | None = None) -> str:
        name = make_topic_name(f"{prefix or request.node.name}-{next(counter)}")
        if create:
            kafka_broker.create_topic(name, partitions)
        return name

    return make
