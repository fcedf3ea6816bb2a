"""The tests' Kafka broker: app/dev/broker.py (`streamq dev` starts the same one).

    broker = KafkaBroker(); broker.start(); broker.create_topic("t", partitions=2)

See app/dev/broker.py for the whole interface; tests import it from here.
"""

from __future__ import annotations

from app.dev.broker import (  # noqa: F401 - re-exported for tests, fixtures and benchmarks
    REPO_ROOT,
    BrokerError,
    JarsMissing,
    KafkaBroker,
    _port_is_free,
    cache_dir,
    free_port,
    jars_dir,
    kafka_home,
    kafka_libs_dir,
    kafka_version,
    make_topic_name,
    new_cluster_id,
    spark_jars_conf,
    spark_kafka_jars,
)
