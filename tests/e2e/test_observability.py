"""Issue #17, "See it running": the Spark UI of a query behind its Service, Spark's own
metrics and the operator's scraped by a real Prometheus, and an alert of the chart's
rules (files/alerts.yaml) going firing, then resolved, on a query of the test's own.

STREAMQ_E2E_DASHBOARD_PNG=<path> also renders the dashboard's panel queries from that
Prometheus to a PNG (hack/dashboard_png.py) at the end of the alert test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from testbed.cluster.base import kube_bin
from testbed.cluster.workload import figure, fraud_spec, payments
from testbed.wait import wait_for
from tests.e2e.prometheus import DRIVER_JOB, OPERATOR_JOB, Prometheus, TargetFiles, render_rules, scrape_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

UI = {"runtime.sparkUI": True}
REPO_ROOT = Path(__file__).resolve().parents[2]


class PortForward:
    """`kubectl port-forward svc/<name> :<port>`: the local port kubectl picked."""

    def __init__(self, cluster, namespace: str, target: str, port: int):
        argv = [str(kube_bin("kubectl")), f"--kubeconfig={cluster.kubeconfig}", "-n", namespace,
                "port-forward", target, f":{port}", "--address=127.0.0.1"]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()  # "Forwarding from 127.0.0.1:41234 -> 4040"
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not found:
            self.close()
            raise AssertionError(f"kubectl port-forward {target}: {line}")
        self.port = int(found.group(1))

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
            return r.read()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def test_the_spark_ui_of_a_running_query_answers_through_its_service(cluster, kafka, sq):
    name = sq.name("ui")
    source = kafka.create_topic(f"{name}-payments", partitions=1)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    sq.apply(name, fraud_spec(source, sink, None, **UI))
    status = sq.wait_running(name, timeout=300)
    service = f"{name}-ui"
    assert status.get("sparkUI") == f"http://{service}.{sq.namespace}.svc:4040", status
    svc = json.loads(sq.kubectl("get", "service", service, "-o", "json").stdout)
    assert svc["spec"]["selector"]["streamq.io/attempt"] == str(status["attempt"])
    owner = svc["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("StreamingQuery", name)

    # Running is the pod's phase: the JVM and the UI come up after it. The query reports
    # progress once Spark runs it, and the UI is up by then.
    wait_for(lambda: sq.status(name).get("progress"), 180, lambda: f"progress of {name}\n" + sq.describe(name),
             interval=1, ignore=(Exception,))  # fmt: skip
    t0 = time.monotonic()

    def through_the_service() -> tuple[list, str]:
        # kubectl port-forward ends when a connection to the pod fails: a new one each try
        forward = PortForward(cluster, sq.namespace, f"svc/{service}", 4040)
        try:
            return json.loads(forward.get("/api/v1/applications")), forward.get("/metrics/prometheus").decode()
        finally:
            forward.close()

    apps, metrics = wait_for(through_the_service, 90, f"the Spark UI through svc/{service}", interval=2,
                             ignore=(OSError, ValueError, AssertionError))  # fmt: skip
    assert any(app["name"] == f"streamq-{name}" for app in apps), apps
    # Spark's own metrics on the same port (the PodMonitor's path), under the fixed namespace
    assert "metrics_streamq_driver_" in metrics, metrics[:2000]
    streaming = f"metrics_streamq_driver_spark_streaming_{name.replace('-', '_')}_inputRate_total_Value" in metrics
    figure("spark ui", f"{service} answered /api/v1/applications through kubectl port-forward in "
                       f"{time.monotonic() - t0:.1f}s; app {apps[0]['name']}; /metrics/prometheus "
                       f"{len(metrics.splitlines())} lines, continuous query's streaming gauges there: {streaming}")  # fmt: skip


# The alert: the chart's StreamQueryLagGrowing, its window and thresholds lowered for a
# test of minutes (the defaults are 10m/15m/1000). The query is made to fall behind by a
# limit of its own (maxOffsetsPerTrigger 5 per 2 s batch against 40 records/s), then
# recovers when the limit is removed.
RULES = {"lagGrowing": {"window": "1m", "for": "10s", "minRecords": 100}}
RATE = 40


def test_a_real_prometheus_fires_then_resolves_the_lag_alert_of_a_query_that_falls_behind(cluster, kafka, sq, tmp_path):
    name = sq.name("lagging")
    source = kafka.create_topic(f"{name}-payments", partitions=1)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    work = tmp_path / "prometheus"  # kept by pytest after the run: its data can be drawn again
    work.mkdir()
    rules = render_rules(cluster, work, RULES)
    config = scrape_config(work, [rules])
    t_start = time.time()
    with TargetFiles(cluster, work, [sq.namespace]), Prometheus(work, config) as prom:
        sq.apply(name, fraud_spec(source, sink, None, trigger={"microBatch": {"interval": "2s"}},
                                  **UI, **{"source.kafka.options": {"maxOffsetsPerTrigger": "5"}}))  # fmt: skip
        status = sq.wait_running(name, timeout=300)
        wait_for(lambda: prom.healthy_targets(OPERATOR_JOB), 60, "the operator scraped", interval=2, ignore=(Exception,))
        producer = kafka.produce_paced(source, payments(RATE * 200), RATE)  # up to 200 s of input
        t0 = time.monotonic()

        # Spark's own metrics of the driver, with the query as a label (PodMonitor relabelling)
        series = wait_for(lambda: prom.query(f'spark_streaming_inputRate_total{{job="{DRIVER_JOB}",query="{name}"}}'),
                          90, "spark_streaming_inputRate_total of the driver", interval=2, ignore=(Exception,))  # fmt: skip
        assert series[0]["metric"]["attempt"] == str(status["attempt"])

        def state() -> str | None:
            return prom.alert_state("StreamQueryLagGrowing", query=name, namespace=sq.namespace)

        wait_for(lambda: state() == "firing", 180, lambda: f"StreamQueryLagGrowing firing for {name}: {prom.alerts()}\n"
                 + sq.describe(name), interval=2, ignore=(OSError,))  # fmt: skip
        fired_after = time.monotonic() - t0
        lag_at_fire = float(prom.query(f'streamq_query_lag_records{{query="{name}"}}')[0]["value"][1])

        # recovery: the limit goes (a new driver on the same checkpoint), the backlog is read
        sq.patch(name, {"spec": {"source": {"kafka": {"options": None}}}})
        t1 = time.monotonic()
        wait_for(lambda: state() is None, 180, lambda: f"StreamQueryLagGrowing resolved for {name}: {prom.alerts()}\n"
                 + sq.describe(name), interval=2, ignore=(OSError,))  # fmt: skip
        resolved_after = time.monotonic() - t1
        figure("prometheus alert", f"StreamQueryLagGrowing firing {fired_after:.0f}s after input started at {RATE}/s "
                                   f"(lag {lag_at_fire:.0f} records), resolved {resolved_after:.0f}s after the limit was removed")  # fmt: skip
        producer.join(1)

        png = os.environ.get("STREAMQ_E2E_DASHBOARD_PNG")
        if png:
            out = subprocess.run([str(REPO_ROOT / ".venv/bin/python"), str(REPO_ROOT / "hack/dashboard_png.py"),
                                  "--prometheus", prom.url, "--start", f"{t_start:.0f}", "--end", f"{time.time():.0f}",
                                  "--out", png, "--var", f"job={OPERATOR_JOB}", "--var", f"namespace={sq.namespace}",
                                  "--var", f"query={name}"], capture_output=True, text=True, timeout=120)  # fmt: skip
            assert out.returncode == 0, out.stderr
            figure("dashboard", out.stdout.strip())
