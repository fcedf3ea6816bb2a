"""Spec -> streaming DataFrame -> configured writer. Nothing here starts a query."""

from __future__ import annotations

import os
import socket

from app.pipeline.credentials import kafka_auth_options, kafka_tls_options
from app.pipeline.exactly_once import ExactlyOnceSink, namespace_of
from contract import QUERY_ENV, WRITER_HEADER
from contract.exactly_once import source_group
from contract.modes import Mode
from contract.spec import KafkaReader, QuerySpec, Transform, spark_interval


def query_name(name: str, spec: QuerySpec) -> str:
    # The memory sink names its table after the query.
    return spec.sink.memory.table if spec.sink.memory is not None else name


# Continuous mode's reader seeks and lists offsets around every poll, and now and then its
# consumer waits out a fetch the broker holds for fetch.max.wait.ms (Kafka's default 500 ms):
# every continuous run showed a ~510-540 ms maximum, gone at 10 ms in an A/B of 3 alternated
# runs each way (docs/benchmarks.md section 4). The cost: an idle partition is fetched every 10 ms.
CONTINUOUS_SOURCE = {"kafka.fetch.max.wait.ms": "10"}


def kafka_source_options(spec: QuerySpec) -> dict[str, str]:
    """The Kafka source's options; the spec's own options override the defaults."""
    kafka = spec.source.kafka
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "startingOffsets": kafka.starting_offsets}
    if kafka.topics is not None:
        options["subscribe"] = ",".join(kafka.topics)
    else:
        options["subscribePattern"] = kafka.pattern
    if spec.mode is Mode.CONTINUOUS:
        options.update(CONTINUOUS_SOURCE)
    options.update(kafka.options)
    options.update(kafka_auth_options(kafka.auth, "spec.source.kafka.auth"))
    options.update(kafka_tls_options(kafka.tls, kafka.auth, "spec.source.kafka.tls"))
    query = os.environ.get(QUERY_ENV)  # in a driver pod: its group under the namespace's ACL prefix
    if query and not any(key.lower() in GROUP_OPTIONS for key in options):
        # One group id per query, not Spark's one per start: Spark pools its source's consumers by
        # (group, partition), so the real query after a standby's warm-up (app.driver.warmup) gets
        # the warm-up's connected consumers instead of opening new ones at the takeover. Safe to
        # share: the source assigns its partitions and never commits, so the group is only a name.
        options["kafka.group.id"] = source_group(namespace_of(None), query)
    return options


GROUP_OPTIONS = ("groupidprefix", "kafka.group.id")

# spec.source.kafka.reader -> the DataSource name: Spark's Kafka source, or streamq's continuous-mode
# one (jvm/reader, io.streamq.reader.StreamqKafkaProvider; its jar is on spark.jars: app.pipeline.session).
SOURCE_FORMATS = {KafkaReader.SPARK: "kafka", KafkaReader.STREAMQ: "streamq-kafka"}


def kafka_source_format(spec: QuerySpec) -> str:
    return SOURCE_FORMATS[spec.source.kafka.effective_reader]


def read_source(spark, spec: QuerySpec, starting_offsets: str | None = None):
    reader = spark.readStream
    if spec.source.rate is not None:
        rate = spec.source.rate
        return (
            reader.format("rate")
            .option("rowsPerSecond", rate.rows_per_second)
            .option("numPartitions", rate.num_partitions)
            .load()
        )
    options = kafka_source_options(spec)
    if starting_offsets is not None:
        options["startingOffsets"] = starting_offsets
    return reader.format(kafka_source_format(spec)).options(**options).load()


def apply_transform(df, step: Transform):
    if step.where is not None:
        return df.where(step.where)
    if step.select is not None:
        return df.selectExpr(*step.select)
    if step.with_column is not None:
        from pyspark.sql.functions import expr

        return df.withColumn(step.with_column.name, expr(step.with_column.expr))
    if step.drop is not None:
        return df.drop(*step.drop)
    # sql: the previous step is the view `input`; spark.sql analyses eagerly, so
    # a later step replacing the view does not change this one.
    df.createOrReplaceTempView("input")
    return df.sparkSession.sql(step.sql)


def build_dataframe(spark, spec: QuerySpec, starting_offsets: str | None = None):
    df = read_source(spark, spec, starting_offsets)
    for step in spec.transforms:
        df = apply_transform(df, step)
    return df


# Kafka 4 producers wait 5 ms to fill a batch; a query that exists for latency should not.
LOW_LATENCY_PRODUCER = {"kafka.linger.ms": "0"}


def kafka_sink_options(spec: QuerySpec) -> dict[str, str]:
    """The Kafka sink's options; the spec's own options override the defaults."""
    kafka = spec.sink.kafka
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": kafka.topic}
    if spec.mode.long_running:
        options.update(LOW_LATENCY_PRODUCER)
    options.update(kafka.options)
    options.update(kafka_auth_options(kafka.auth, "spec.sink.kafka.auth"))
    options.update(kafka_tls_options(kafka.tls, kafka.auth, "spec.sink.kafka.tls"))
    return options


def writer_name() -> str:
    """This driver: its pod's name (the operator sets POD_NAME), else host and process."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def with_writer_header(df):
    """Every record the Kafka sink writes says which driver wrote it (header ``streamq.writer``):
    after a takeover, the output shows that the old driver wrote nothing more (app.driver.write_fence)."""
    from pyspark.sql import functions as F

    if "headers" in df.columns:  # the query writes headers of its own
        return df
    header = F.struct(F.lit(WRITER_HEADER).alias("key"), F.lit(writer_name()).cast("binary").alias("value"))
    return df.withColumn("headers", F.array(header))


def sink_frame(df, spec: QuerySpec):
    """The rows as the sink gets them. A standby's warm-up plans this same frame, so the code Spark
    generates for it is compiled once, before the takeover (app.driver.warmup)."""
    if spec.sink.kafka is not None and not spec.sink.kafka.exactly_once:
        # Not on the exactly-once sink: it places each row by a hash of the row, which must not
        # depend on the driver that replays it.
        return with_writer_header(df)
    return df


def build_writer(df, name: str, spec: QuerySpec, checkpoint_location: str | None = None, namespace: str | None = None):
    df = sink_frame(df, spec)
    writer = (
        df.writeStream.queryName(query_name(name, spec))
        .outputMode(spec.effective_output_mode.value)
        .option("checkpointLocation", checkpoint_location or spec.checkpoint.location)
    )
    sink = spec.sink
    if sink.kafka is not None and sink.kafka.exactly_once:
        writer = writer.foreachBatch(ExactlyOnceSink(spec, query_name(name, spec), namespace, checkpoint_location))
    elif sink.kafka is not None:
        writer = writer.format("kafka").options(**kafka_sink_options(spec))
    elif sink.console is not None:
        writer = writer.format("console").option("numRows", sink.console.num_rows)
        writer = writer.option("truncate", str(sink.console.truncate).lower())
    else:
        writer = writer.format("memory")
    return apply_trigger(writer, spec)


def apply_trigger(writer, spec: QuerySpec):
    trigger = spec.trigger
    if trigger.continuous is not None:
        return writer.trigger(continuous=spark_interval(trigger.continuous.checkpoint_interval))
    if trigger.real_time is not None:
        return writer.trigger(realTime=spark_interval(trigger.real_time.batch_duration))
    if trigger.micro_batch is not None:
        return writer.trigger(processingTime=spark_interval(trigger.micro_batch.interval))
    return writer.trigger(availableNow=True)
