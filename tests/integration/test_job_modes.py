"""Kafka -> Spark -> Kafka in every trigger mode, exact output, on a real broker.

These run the pipeline in-process on the shared SparkSession (the JVM starts once);
the lifecycle tests in test_job_lifecycle.py run the job as its own process.
"""

import pytest

from app.pipeline.plan import build_dataframe, build_writer
from contract.load import validate_spec
from testbed.specs import flagged, payments, query_spec

pytestmark = pytest.mark.integration

N = 90


def _run_until_output(spark, spec_dict, broker, sink_topic, expected_count, timeout=120):
    spec = validate_spec(spec_dict)
    query = build_writer(build_dataframe(spark, spec), f"q-{sink_topic}", spec).start()
    try:
        out = broker.consume_all(sink_topic, timeout=timeout, expected_count=expected_count, decode=True)
        assert query.exception() is None, query.exception()
        # A little longer: anything beyond the expected records would be a bug.
        extra = broker.consume_all(sink_topic, timeout=3, decode=True)
        return out, extra
    finally:
        query.stop()


@pytest.mark.parametrize(
    "trigger",
    [
        {"continuous": {"checkpointInterval": "500ms"}},
        {"microBatch": {"interval": "0s"}},
        {"realTime": {"batchDuration": "5s"}},
        {"availableNow": {}},
    ],
    ids=lambda t: next(iter(t)),
)
def test_fraud_filter_exact_output(spark, kafka_broker, kafka_topic, tmp_path, trigger):
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=1)
    records = payments(N)
    kafka_broker.produce(source, records)
    extra = {"outputMode": "update"} if "realTime" in trigger else {}
    spec = query_spec(
        bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=trigger, **extra
    )
    expected = sorted(flagged(records))
    out, after = _run_until_output(spark, spec, kafka_broker, sink, len(expected))
    assert sorted(out) == expected
    assert len(after) == len(expected), "records beyond the flagged ones were written"


def test_sql_transform(spark, kafka_broker, kafka_topic, tmp_path):
    source, sink = kafka_topic(), kafka_topic()
    records = payments(30)
    kafka_broker.produce(source, records)
    spec = query_spec(
        bootstrap=kafka_broker.bootstrap,
        topic=source,
        sink_topic=sink,
        location=tmp_path / "ck",
        trigger={"continuous": {"checkpointInterval": "500ms"}},
        transforms=[
            {
                "sql": "SELECT upper(CAST(key AS STRING)) AS key, CAST(value AS STRING) AS value FROM input "
                "WHERE CAST(get_json_object(CAST(value AS STRING), '$.amount') AS INT) > 1000"
            }
        ],
    )
    expected = sorted((k.upper(), v) for k, v in flagged(records))
    out, _ = _run_until_output(spark, spec, kafka_broker, sink, len(expected))
    assert sorted(out) == expected
