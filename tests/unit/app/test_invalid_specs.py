"""Every way a user is known to get a spec wrong, each refused by `streamq validate`
with a message that names the field and says what to do."""

import json

import pytest
from typer.testing import CliRunner

from app.cli.commands import NO_QUERY_FOUND, cli
from contract import ExitCode
from contract.load import load_document
from contract.problems import SpecError
from testbed.specs import query_spec, resource, with_change

pytestmark = pytest.mark.unit

K = query_spec()
RATE = {**K, "source": {"rate": {"rowsPerSecond": 10, "numPartitions": 4}}}

INVALID = {
    "unknown top-level field": (with_change(K, "sourc", {}), "spec.sourc: unknown field"),
    "unknown nested field": (
        with_change(K, "source.kafka.topic", "payments"),
        "spec.source.kafka.topic: unknown field",
    ),
    "aggregation in continuous mode": (
        with_change(K, "transforms", [{"sql": "SELECT key, count(*) AS n FROM input GROUP BY key"}]),
        "continuous mode supports map-like steps only",
    ),
    "realTime with a rate source": (
        {**RATE, "trigger": {"realTime": {"batchDuration": "5s"}}},
        "realTime mode cannot read from a rate source",
    ),
    "too few task slots": (with_change(RATE, "runtime.parallelism", 4), "needs more task slots than source partitions"),
    "missing checkpoint": (with_change(K, "checkpoint", None), "spec.checkpoint: required field is missing"),
    "option without kafka. prefix": (
        with_change(K, "source.kafka.options", {"request.timeout.ms": "5000"}),
        "Kafka client settings need the kafka. prefix",
    ),
    "option the spec owns": (
        with_change(K, "source.kafka.options", {"kafka.bootstrap.servers": "other:9092"}),
        "set through the bootstrapServers field",
    ),
    "password in options": (
        with_change(K, "sink.kafka.options", {"kafka.ssl.key.password": "hunter2"}),
        "put it in a Secret",
    ),
    "JAAS config in options": (
        with_change(K, "source.kafka.options", {"kafka.sasl.jaas.config": "x"}),
        "credentials come from auth.secretRef",
    ),
    "option Spark refuses": (
        with_change(K, "source.kafka.options", {"kafka.auto.offset.reset": "earliest"}),
        "Spark manages this Kafka setting",
    ),
    "bootstrap servers without a port": (
        with_change(K, "source.kafka.bootstrapServers", "kafka"),
        "spec.source.kafka.bootstrapServers: expected host:port",
    ),
    "both topics and pattern": (with_change(K, "source.kafka.pattern", "pay.*"), "set exactly one of: topics, pattern"),
    "two triggers": (
        with_change(K, "trigger", {"continuous": {}, "microBatch": {}}),
        "spec.trigger: set exactly one of: continuous, realTime, microBatch, availableNow (got 2)",
    ),
    "no source": (with_change(K, "source", {}), "spec.source: set exactly one of: kafka, rate (got 0)"),
    "current_timestamp in continuous mode": (
        with_change(K, "transforms", [{"withColumn": {"name": "seen", "expr": "current_timestamp()"}}]),
        "continuous mode does not support current time operations",
    ),
    "unparseable duration": (
        with_change(K, "trigger", {"continuous": {"checkpointInterval": "1 second"}}),
        "expected a duration like 500ms",
    ),
    "bad startingOffsets": (
        with_change(K, "source.kafka.startingOffsets", "beginning"),
        'use "earliest", "latest" or JSON',
    ),
    "complete output in continuous mode": (
        with_change(K, "outputMode", "complete"),
        "continuous mode supports only append output",
    ),
    "sql step that ignores its input": (
        with_change(K, "transforms", [{"sql": "SELECT 1 AS value FROM payments"}]),
        "must read from the view named `input`",
    ),
    "backoff initial above max": (
        with_change(K, "restartPolicy", {"backoff": {"initial": "10m", "max": "1m"}}),
        "initial (10m) is longer than max (1m)",
    ),
    "transform with two operations": (
        with_change(K, "transforms", [{"where": "true", "drop": ["key"]}]),
        "spec.transforms[0]: set exactly one of",
    ),
    "join in continuous mode": (
        with_change(K, "transforms", [{"sql": "SELECT * FROM input a JOIN input b ON a.key = b.key"}]),
        "joins are not allowed",
    ),
    "zero parallelism": (
        with_change(K, "runtime.parallelism", 0),
        "spec.runtime.parallelism: Input should be greater than or equal to 1",
    ),
    "secret name that is not a Kubernetes name": (
        with_change(K, "sink.kafka.auth", {"secretRef": {"name": "Kafka_Creds"}}),
        "expected a Kubernetes name",
    ),
    "unknown trigger mode value type": (
        with_change(K, "trigger", "continuous"),
        "spec.trigger: Input should be a valid dictionary",
    ),
    "standby on a checkpoint only one pod can reach": (
        with_change(K, "runtime.standby", True),
        "spec.checkpoint: the standby driver must reach the same checkpoint",
    ),
    "standby on an emptyDir checkpoint": (
        with_change(with_change(K, "runtime.standby", True), "checkpoint.volume", {"emptyDir": {}}),
        "use an object store URI (s3a://, gs://, abfss://, hdfs://), a persistentVolumeClaim or a hostPath",
    ),
    "standby with the SparkApplication backend": (
        with_change(
            with_change(K, "runtime", {"standby": True, "backend": "sparkApplication"}), "checkpoint.location", "s3a://b/ck"
        ),
        "spec.runtime.standby: a standby driver needs backend pod",
    ),
}


def _validate(tmp_path, document) -> tuple[int, str]:
    path = tmp_path / "query.yaml"
    path.write_text(json.dumps(document))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    return result.exit_code, result.output


def test_there_are_at_least_fifteen_cases():
    assert len(INVALID) >= 15


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_spec_is_refused_with_a_specific_message(case, tmp_path):
    spec, expected = INVALID[case]
    code, output = _validate(tmp_path, resource(spec))
    assert code == ExitCode.INVALID_SPEC, output
    assert expected in " ".join(output.split()), output


def test_valid_spec_passes_with_exit_zero(tmp_path):
    code, output = _validate(tmp_path, resource(K))
    assert code == 0, output
    assert "valid" in output and "continuous mode" in output


def test_another_kind_is_skipped_and_nothing_found_is_an_error(tmp_path):
    """Not a StreamingQuery: skipped, not invalid (issue 38); with nothing else to check, exit 66."""
    document = {**resource(K), "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication"}
    code, output = _validate(tmp_path, document)
    assert code == NO_QUERY_FOUND, output
    assert "skipped" in output and "kind SparkApplication" in output and "no StreamingQuery" in output


@pytest.mark.parametrize(("change", "expected"), [
    ({"apiVersion": "streamq.io/v1"}, "expected 'streamq.io/v1alpha1'"),  # ours, a version that does not exist
    ({"kind": "StreamingQueries"}, "expected 'StreamingQuery'"),  # ours, a misspelt kind: not skipped
])  # fmt: skip
def test_a_wrong_kind_or_version_of_ours_is_refused(tmp_path, change, expected):
    code, output = _validate(tmp_path, {**resource(K), **change})
    assert code == ExitCode.INVALID_SPEC
    assert expected in output


def test_not_yaml_is_refused(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("spec: [unclosed")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == ExitCode.INVALID_SPEC
    assert "not valid YAML/JSON" in result.output


@pytest.mark.parametrize("name", ["fraud.filter", "Fraud", "a" * 41, "fraud_filter"])
def test_a_resource_whose_name_would_make_ambiguous_children_is_refused_with_its_spec_problems(name):
    resource = {
        "apiVersion": "streamq.io/v1alpha1",
        "kind": "StreamingQuery",
        "metadata": {"name": name},
        "spec": {**query_spec(), "trigger": {"bogus": {}}},
    }
    with pytest.raises(SpecError) as refused:
        load_document(resource)
    paths = [p.path for p in refused.value.problems]
    assert paths[0] == "metadata.name" and len(paths) > 1, paths  # both, in one answer
