"""A real Prometheus for the e2e tier: Debian's binary (hack/install-prometheus.sh puts it
in the cache), run on this machine, scraping the cluster's pods by their IPs (the local
provider's pod network is routed from the host; the kind provider adds a route to its node's pod subnet).

It scrapes what the chart's monitors scrape: the operator's `metrics` port (job
``streamq-operator``, honor_labels as the ServiceMonitor) and the `spark-ui` port of
driver pods at /metrics/prometheus, labelled and relabelled as the PodMonitor does
(charts/streamq/files/driver-relabelings.yaml). Debian builds Prometheus without
Kubernetes service discovery, so ``TargetFiles`` lists the pods with kubectl and
writes file_sd files. Its rules are the chart's alerts, rendered by ``helm template``
with the thresholds a test chooses.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from testbed.cluster.addons import OPERATOR_NAMESPACE, RELEASE
from testbed.cluster.base import REPO_ROOT, log
from testbed.wait import wait_for

CHART = REPO_ROOT / "charts" / "streamq"
OPERATOR_JOB = "streamq-operator"
DRIVER_JOB = "streamq-drivers"
SCRAPE_INTERVAL = "5s"


def prometheus_bin() -> Path:
    """The cached server binary, installed (once, ~30 MiB from Debian) when missing."""
    subprocess.run([str(REPO_ROOT / "hack" / "install-prometheus.sh")], check=True, capture_output=True, timeout=600)
    out = subprocess.run([str(REPO_ROOT / "hack" / "install-prometheus.sh"), "--print-bin-dir"], check=True,
                         capture_output=True, text=True, timeout=30).stdout.strip()  # fmt: skip
    return Path(out) / "prometheus"


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


def driver_metric_relabelings() -> list[dict[str, Any]]:
    """The PodMonitor's metricRelabelings, as Prometheus' own metric_relabel_configs."""
    rules = yaml.safe_load((CHART / "files" / "driver-relabelings.yaml").read_text())
    return [{_snake(k): v for k, v in rule.items()} for rule in rules]


def scrape_config(directory: Path, rule_files: list[Path]) -> dict[str, Any]:
    """Debian's Prometheus is built without Kubernetes service discovery: the targets come
    from files (``TargetFiles`` keeps them in step with the cluster's pods)."""

    def files(job: str) -> list[dict[str, Any]]:
        return [{"files": [str(directory / f"{job}.json")], "refresh_interval": "5s"}]

    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL, "scrape_timeout": "4s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [
            # the ServiceMonitor's honorLabels: the series' own namespace label
            {"job_name": OPERATOR_JOB, "honor_labels": True, "file_sd_configs": files(OPERATOR_JOB)},
            {
                "job_name": DRIVER_JOB,
                "metrics_path": "/metrics/prometheus",
                "file_sd_configs": files(DRIVER_JOB),
                "metric_relabel_configs": driver_metric_relabelings(),
            },
        ],
    }


def _port(pod: dict[str, Any], name: str) -> int | None:
    for container in pod["spec"]["containers"]:
        for port in container.get("ports") or []:
            if port.get("name") == name:
                return port["containerPort"]
    return None


def pod_targets(pods: list[dict[str, Any]], port_name: str, driver: bool) -> list[dict[str, Any]]:
    """Running pods with a port of that name, as file_sd target groups; drivers labelled as the
    PodMonitor's relabelings label them (query, namespace, attempt)."""
    groups = []
    for pod in pods:
        port, ip = _port(pod, port_name), pod.get("status", {}).get("podIP")
        if port is None or not ip or pod.get("status", {}).get("phase") != "Running":
            continue
        labels = {"pod": pod["metadata"]["name"]}
        if driver:
            meta = pod["metadata"].get("labels") or {}
            labels.update(query=meta.get("streamq.io/query", ""), namespace=pod["metadata"]["namespace"],
                          attempt=meta.get("streamq.io/attempt", ""))  # fmt: skip
        groups.append({"targets": [f"{ip}:{port}"], "labels": labels})
    return groups


class TargetFiles:
    """Rewrites the file_sd files from the pods every ``interval`` s, in a thread."""

    def __init__(self, cluster, directory: Path, driver_namespaces: list[str], interval: float = 2.0):
        self.cluster, self.directory, self.namespaces, self.interval = cluster, directory, driver_namespaces, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prometheus-targets", daemon=True)

    def refresh(self) -> None:
        ops = self.cluster.kubectl_json("-n", OPERATOR_NAMESPACE, "get", "pods")["items"]
        drivers = []
        for ns in self.namespaces:
            drivers += self.cluster.kubectl_json("-n", ns, "get", "pods", "-l", "streamq.io/component=driver")["items"]
        for job, groups in (
            (OPERATOR_JOB, pod_targets(ops, "metrics", False)),
            (DRIVER_JOB, pod_targets(drivers, "spark-ui", True)),
        ):
            path = self.directory / f"{job}.json"
            text = json.dumps(groups, indent=1, sort_keys=True)
            if not path.exists() or path.read_text() != text:
                tmp = path.with_suffix(".tmp")
                tmp.write_text(text)
                tmp.replace(path)  # atomic: Prometheus never reads half a file

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - an API hiccup: the next round tries again
                log(f"prometheus targets: {exc}")

    def __enter__(self) -> TargetFiles:
        self.refresh()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def render_rules(cluster, directory: Path, rule_values: dict[str, Any]) -> Path:
    """The chart's alerts (files/alerts.yaml through templates/prometheusrule.yaml) as a rule file,
    with monitoring.prometheusRule values (thresholds) of the test's choosing."""
    values = {"monitoring": {"prometheusRule": {"enabled": True, "job": OPERATOR_JOB, **rule_values}}}
    values_file = directory / "rule-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    out = cluster.helm("template", RELEASE, str(CHART), "--namespace", OPERATOR_NAMESPACE, "--values", str(values_file)).stdout
    rule = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "PrometheusRule")
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, directory: Path, config: dict[str, Any]):
        self.directory = directory
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_path = directory / "prometheus.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Prometheus:
        argv = [str(prometheus_bin()), f"--config.file={self.directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.directory / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1d", "--log.level=warn"]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.log_path.open("w"))
        t0 = time.monotonic()

        def ready() -> bool:
            assert self.proc.poll() is None, f"prometheus exited: {self.log_path.read_text()[-2000:]}"
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200

        wait_for(ready, timeout, "prometheus ready", interval=0.5, ignore=(OSError,))
        log(f"prometheus up at {self.url} in {time.monotonic() - t0:.1f}s (data in {self.directory})")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the HTTP API ------------------------------------------------------------------

    def api(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{'?' + query if query else ''}", timeout=10) as r:
            body = json.loads(r.read())
        assert body.get("status") == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step:g}")["result"]

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]

    def alert_state(self, name: str, **labels: str) -> str | None:
        """firing, pending, or None (inactive) for the alert of that name whose labels include ``labels``."""
        states = [a["state"] for a in self.alerts()
                  if a["labels"].get("alertname") == name and all(a["labels"].get(k) == v for k, v in labels.items())]  # fmt: skip
        return "firing" if "firing" in states else (states[0] if states else None)

    def targets(self) -> list[dict[str, Any]]:
        return self.api("targets")["activeTargets"]

    def healthy_targets(self, job: str) -> list[dict[str, Any]]:
        return [t for t in self.targets() if t["labels"].get("job") == job and t["health"] == "up"]
