import pytest

from app.pipeline import session
from contract.load import validate_spec
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit


def test_slots_and_user_conf(monkeypatch, tmp_path):
    (tmp_path / "spark-sql-kafka.jar").write_text("")
    monkeypatch.setenv("STREAMQ_JARS_DIR", str(tmp_path))
    monkeypatch.setenv("STREAMQ_S3A_JARS_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("STREAMQ_FENCE_JARS_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("STREAMQ_READER_JARS_DIR", str(tmp_path / "none"))
    spec = validate_spec(with_change(query_spec(), "runtime", {"parallelism": 6, "sparkConf": {"spark.ui.enabled": "true"}}))
    conf = session.spark_conf(spec)
    assert conf["spark.master"] == "local[6]"
    assert conf["spark.jars"] == str(tmp_path / "spark-sql-kafka.jar")
    assert conf["spark.ui.enabled"] == "true"  # the user's sparkConf wins


def test_user_can_point_at_a_cluster_master():
    spec = validate_spec(
        with_change(query_spec(), "runtime", {"sparkConf": {"spark.master": "k8s://https://kubernetes.default.svc:443"}})
    )
    assert session.spark_conf(spec)["spark.master"].startswith("k8s://")


@pytest.mark.parametrize(("master", "pod_ip", "host"), [
    ("k8s://https://kubernetes.default.svc:443", "10.1.2.3", "10.1.2.3"),  # executors dial this pod, never the standby
    ("k8s://https://kubernetes.default.svc:443", None, "q-driver-svc.ns.svc"),
    ("local[4]", "10.1.2.3", "q-driver-svc.ns.svc"),  # no executors: nothing dials it
])  # fmt: skip
def test_a_driver_with_executors_gives_them_its_own_pod_ip(monkeypatch, master, pod_ip, host):
    if pod_ip:
        monkeypatch.setenv("STREAMQ_POD_IP", pod_ip)
    else:
        monkeypatch.delenv("STREAMQ_POD_IP", raising=False)
    conf = {"spark.master": master, "spark.driver.host": "q-driver-svc.ns.svc"}
    spec = validate_spec(with_change(query_spec(), "runtime", {"sparkConf": conf}))
    assert session.spark_conf(spec)["spark.driver.host"] == host


@pytest.mark.parametrize(("location", "local"), [
    ("/checkpoints/q", True), ("file:///checkpoints/q", True), ("s3a://bucket/q", False),
])  # fmt: skip
def test_local_checkpoints_skip_hadoops_forking_file_manager(location, local):
    spec = validate_spec(with_change(query_spec(), "checkpoint", {"location": location}))
    conf = session.spark_conf(spec)
    assert ("spark.sql.streaming.checkpointFileManagerClass" in conf) is local


@pytest.mark.parametrize(("reader_jar", "manager"), [
    (True, "io.streamq.checkpoint.LocalCheckpointFileManager"),
    (False, "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"),
])  # fmt: skip
def test_a_local_checkpoint_is_written_by_streamqs_manager_when_its_jar_is_there(monkeypatch, tmp_path, reader_jar, manager):
    (tmp_path / "reader").mkdir()
    if reader_jar:
        (tmp_path / "reader" / "streamq-reader.jar").write_text("")
    monkeypatch.setenv("STREAMQ_READER_JARS_DIR", str(tmp_path / "reader"))
    conf = session.spark_conf(validate_spec(with_change(query_spec(), "checkpoint", {"location": "/checkpoints/q"})))
    assert conf["spark.sql.streaming.checkpointFileManagerClass"] == manager
    assert (str(tmp_path / "reader" / "streamq-reader.jar") in conf.get("spark.jars", "").split(",")) is reader_jar


def test_spark_ui_is_off_unless_the_spec_asks_then_serves_ui_and_metrics_on_4040():
    assert session.spark_conf(validate_spec(query_spec()))["spark.ui.enabled"] == "false"
    conf = session.spark_conf(validate_spec(with_change(query_spec(), "runtime", {"sparkUI": True})))
    assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.port"] == "4040"
    assert conf["spark.port.maxRetries"] == "0"  # the Service targets 4040 and nothing else
    assert conf["spark.sql.streaming.metricsEnabled"] == "true"
    assert conf["spark.metrics.conf.*.sink.prometheusServlet.class"] == "org.apache.spark.metrics.sink.PrometheusServlet"
    assert conf["spark.metrics.conf.*.sink.prometheusServlet.path"] == "/metrics/prometheus"
    # a stable prefix (not the application id of each start), which the chart's relabelling expects
    assert conf["spark.metrics.namespace"] == "streamq"
    relabel = (session.Path(__file__).resolve().parents[3] / "charts/streamq/files/driver-relabelings.yaml").read_text()
    assert f"metrics_{conf['spark.metrics.namespace']}_driver_spark_streaming_" in relabel


def test_the_s3a_fence_and_reader_jars_go_on_spark_jars_after_the_kafka_ones(monkeypatch, tmp_path):
    jars = {
        "kafka": "spark-sql-kafka.jar",
        "s3a": "hadoop-aws-3.5.0.jar",
        "fence": "streamq-fence.jar",
        "reader": "streamq-reader.jar",
    }
    for folder, jar in jars.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / jar).write_text("")
    monkeypatch.setenv("STREAMQ_JARS_DIR", str(tmp_path / "kafka"))
    monkeypatch.setenv("STREAMQ_S3A_JARS_DIR", str(tmp_path / "s3a"))
    monkeypatch.setenv("STREAMQ_FENCE_JARS_DIR", str(tmp_path / "fence"))
    monkeypatch.setenv("STREAMQ_READER_JARS_DIR", str(tmp_path / "reader"))
    assert session.connector_jars() == [str(tmp_path / folder / jar) for folder, jar in jars.items()]


S3_CHECKPOINT = {
    "location": "s3a://bucket/q",
    "s3": {"endpoint": "http://seaweedfs.storage:8333", "region": "us-east-1", "pathStyleAccess": True,
           "credentials": {"secretRef": {"name": "store", "accessKeyIdKey": "id", "secretAccessKeyKey": "key"}}},
}  # fmt: skip


def test_the_store_settings_are_spark_conf_and_the_keys_are_not(monkeypatch, tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "id").write_text("AKIDEXAMPLE\n")
    (tmp_path / "store" / "key").write_text("wJalrXUtnFEMI\n")
    monkeypatch.setenv("STREAMQ_SECRETS_DIR", str(tmp_path))
    spec = validate_spec(with_change(query_spec(), "checkpoint", S3_CHECKPOINT))
    conf = session.spark_conf(spec)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://seaweedfs.storage:8333"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    # spark_conf becomes spark-submit's command line (PySpark's launch_gateway): no keys in it
    assert not any("AKIDEXAMPLE" in v or "wJalrXUtnFEMI" in v for v in conf.values())
    assert not any(k.endswith((".access.key", ".secret.key")) for k in conf)
    from app.pipeline.credentials import s3a_hadoop_secrets

    assert s3a_hadoop_secrets(spec.checkpoint.s3) == {
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": "AKIDEXAMPLE", "fs.s3a.secret.key": "wJalrXUtnFEMI",
    }  # fmt: skip


def test_a_missing_key_file_is_a_spec_error_naming_the_field(monkeypatch, tmp_path):
    from app.pipeline.credentials import s3a_hadoop_secrets
    from contract.problems import SpecError

    monkeypatch.setenv("STREAMQ_SECRETS_DIR", str(tmp_path))
    spec = validate_spec(with_change(query_spec(), "checkpoint", S3_CHECKPOINT))
    with pytest.raises(SpecError, match="accessKeyIdKey"):
        s3a_hadoop_secrets(spec.checkpoint.s3)


def test_without_an_s3_block_nothing_of_s3a_is_set():
    conf = session.spark_conf(validate_spec(with_change(query_spec(), "checkpoint", {"location": "s3a://bucket/q"})))
    assert not any(k.startswith("spark.hadoop.fs.s3a.") for k in conf)
