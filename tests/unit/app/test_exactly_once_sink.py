"""The exactly-once sink's wiring, without Spark or Kafka (app.pipeline.exactly_once)."""

import pytest

from app.pipeline import exactly_once as sink
from app.pipeline.plan import build_writer
from contract.load import validate_spec
from contract.spec import Delivery
from testbed.specs import query_spec

pytestmark = pytest.mark.unit

SPEC = query_spec(mode="microBatch", bootstrap="kafka:9092", **{
    "sink.kafka.delivery": "exactlyOnce",
    "sink.kafka.transactions": {"producers": 3, "timeout": "30s"},
    "sink.kafka.options": {"kafka.linger.ms": "20", "kafka.compression.type": "zstd"},
})  # fmt: skip


def test_the_producers_take_the_sinks_own_settings_and_the_connection_no_more():
    spec = validate_spec(SPEC)
    assert sink.connection_config(spec) == {"bootstrap.servers": "kafka:9092"}
    assert sink.producer_settings(spec) == {"linger.ms": "20", "compression.type": "zstd"}


def test_credentials_reach_the_writers_from_the_mounted_secret(tmp_path, monkeypatch):
    (tmp_path / "streamq-kafka").mkdir()
    (tmp_path / "streamq-kafka" / "username").write_text("writer\n")
    (tmp_path / "streamq-kafka" / "password").write_text("s3cret\n")
    monkeypatch.setenv("STREAMQ_SECRETS_DIR", str(tmp_path))
    spec = validate_spec(query_spec(SPEC, **{"sink.kafka.auth": {"secretRef": {"name": "streamq-kafka"}}}))
    made = sink.ExactlyOnceSink(spec, "fraud", "team-a")
    assert made.config["sasl.username"] == "writer" and made.config["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(vars(made)).replace(repr(made.config), "")  # only in the client settings


def test_names_come_from_the_namespace_and_the_query(monkeypatch):
    spec = validate_spec(SPEC)
    made = sink.ExactlyOnceSink(spec, "fraud", "team-a")
    assert (made.control, made.prefix, made.group, made.writers, made.timeout_ms) == (
        "streamq.team-a.fraud.eos-markers",
        "streamq.team-a.fraud.",
        "streamq.team-a.fraud.eos-reader",
        3,
        30_000,
    )
    monkeypatch.setenv("POD_NAMESPACE", "from-the-pod")
    assert sink.ExactlyOnceSink(spec, "fraud", None).prefix == "streamq.from-the-pod.fraud."
    monkeypatch.delenv("POD_NAMESPACE")
    assert sink.ExactlyOnceSink(spec, "fraud", None).prefix == "streamq.default.fraud."


def test_validation_starts_sparks_own_writer_never_a_transactional_one():
    spec = validate_spec(SPEC)
    plain = sink.at_least_once(spec)
    assert plain.sink.kafka.delivery is Delivery.AT_LEAST_ONCE and plain.sink.kafka.transactions is None
    assert sink.at_least_once(plain) is plain


class _Writer:
    """What build_writer calls on DataStreamWriter, recorded."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append((name, args))
            return self

        return call


class _Frame:
    # Headers of its own: build_writer leaves them be instead of adding the writer header (which
    # needs Spark; tests/integration/test_standby_job.py reads it back).
    columns = ["key", "value", "headers"]

    def __init__(self):
        self.writeStream = _Writer()


def test_an_exactly_once_sink_writes_through_foreach_batch_and_the_plain_one_through_sparks_kafka_writer():
    df = _Frame()
    build_writer(df, "fraud", validate_spec(SPEC), namespace="team-a")
    names = [name for name, _ in df.writeStream.calls]
    assert "foreachBatch" in names and "format" not in names
    (batch_function,) = [args[0] for name, args in df.writeStream.calls if name == "foreachBatch"]
    assert isinstance(batch_function, sink.ExactlyOnceSink) and batch_function.prefix == "streamq.team-a.fraud."
    plain = _Frame()
    build_writer(plain, "fraud", validate_spec(query_spec(mode="microBatch")))
    assert ("format", ("kafka",)) in plain.writeStream.calls
