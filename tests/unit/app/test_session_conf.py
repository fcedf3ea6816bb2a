import pytest

from app.pipeline import session
from app.contract.load import validate_spec
from tests.support.specs import query_spec, with_change

pytestmark = pytest.mark.unit


def test_slots_and_user_conf(monkeypatch, tmp_path):
    (tmp_path / "spark-sql-kafka.jar").write_text("")
    monkeypatch.setenv("STREAMQ_JARS_DIR", str(tmp_path))
    spec = validate_spec(with_change(query_spec(), "runtime", {"parallelism": 6, "sparkConf": {"spark.ui.enabled": "true"}}))
    conf = session.spark_conf(spec)
    assert conf["spark.master"] == "local[6]"
    assert conf["spark.jars"] == str(tmp_path / "spark-sql-kafka.jar")
    assert conf["spark.ui.enabled"] == "true"  # the user's sparkConf wins


def test_user_can_point_at_a_cluster_master():
    spec = validate_spec(with_change(query_spec(), "runtime", {"sparkConf": {"spark.master": "k8s://https://kubernetes.default.svc:443"}}))
    assert session.spark_conf(spec)["spark.master"].startswith("k8s://")


@pytest.mark.parametrize(("location", "local"), [
    ("/checkpoints/q", True), ("file:///checkpoints/q", True), ("s3a://bucket/q", False),
])  # fmt: skip
def test_local_checkpoints_skip_hadoops_forking_file_manager(location, local):
    spec = validate_spec(with_change(query_spec(), "checkpoint", {"location": location}))
    conf = session.spark_conf(spec)
    assert ("spark.sql.streaming.checkpointFileManagerClass" in conf) is local


def test_spark_ui_is_off_unless_the_spec_asks_then_serves_ui_and_metrics_on_4040():
    from controller.decide.spark_ui import SPARK_UI_PORT

    assert session.spark_conf(validate_spec(query_spec()))["spark.ui.enabled"] == "false"
    conf = session.spark_conf(validate_spec(with_change(query_spec(), "runtime", {"sparkUI": True})))
    assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.port"] == str(SPARK_UI_PORT) == "4040"
    assert conf["spark.port.maxRetries"] == "0"  # the Service targets 4040 and nothing else
    assert conf["spark.sql.streaming.metricsEnabled"] == "true"
    assert conf["spark.metrics.conf.*.sink.prometheusServlet.class"] == "org.apache.spark.metrics.sink.PrometheusServlet"
    assert conf["spark.metrics.conf.*.sink.prometheusServlet.path"] == "/metrics/prometheus"
    # a stable prefix (not the application id of each start), which the chart's relabelling expects
    assert conf["spark.metrics.namespace"] == "streamq"
    relabel = (session.Path(__file__).resolve().parents[3] / "charts/streamq/files/driver-relabelings.yaml").read_text()
    assert f"metrics_{conf['spark.metrics.namespace']}_driver_spark_streaming_" in relabel
