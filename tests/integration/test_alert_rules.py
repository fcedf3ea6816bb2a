"""The chart's alerts and dashboard, rendered: `promtool check rules` and `promtool test rules`
on the PrometheusRule's groups, the dashboard ConfigMap's JSON against the operator's metrics.

Integration tier because it renders the chart with helm (the ``helm`` fixture of
tests/integration/conftest.py, no cluster needed). promtool is Debian's, unpacked by
``hack/install-prometheus.sh``; without it these tests fail saying so, they never skip.
The cases of every alert, firing and not firing, are in alerts_test.yaml beside this file
(written for the default values); the source of the rules is charts/streamq/files/alerts.yaml.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import tests.unit.test_chart as chart_checks

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "streamq"
INSTALL_PROMETHEUS = REPO_ROOT / "hack" / "install-prometheus.sh"
CASES = Path(__file__).with_name("alerts_test.yaml")
ALERTS = {"StreamQueryStalled", "StreamQueryLagGrowing", "StreamQueryNoCommit", "StreamQueryCrashLooping",
          "StreamQueryInvalid", "StreamqOperatorDown"}  # fmt: skip
RULE_ON = {"monitoring": {"prometheusRule": {"enabled": True}}}
DASHBOARD_ON = {"monitoring": {"grafanaDashboard": {"enabled": True}}}


@pytest.fixture(scope="session")
def promtool() -> Path:
    """promtool from ``hack/install-prometheus.sh`` (the script says where it puts it)."""
    out = subprocess.run([str(INSTALL_PROMETHEUS), "--print-bin-dir"], capture_output=True, text=True, check=True)
    path = Path(out.stdout.strip()) / "promtool"
    if not path.is_file():
        pytest.fail(f"promtool not found at {path}: run hack/install-prometheus.sh "
                    "(Debian's prometheus package, unpacked into the cache)", pytrace=False)  # fmt: skip
    return path


def helm_template(helm: Path, tmp_path: Path, values: dict | None = None) -> subprocess.CompletedProcess:
    args = [str(helm), "template", "streamq", str(CHART), "--namespace", "streamq-system"]
    if values:
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        args += ["--values", str(path)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def render(helm: Path, tmp_path: Path, values: dict | None = None) -> list[dict]:
    result = helm_template(helm, tmp_path, values)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def only(docs: list[dict], kind: str, name_suffix: str = "") -> dict:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, got {len(found)}"
    return found[0]


def rendered_rules(helm: Path, tmp_path: Path, values: dict | None = None) -> tuple[dict, Path]:
    """The PrometheusRule and its groups written as a Prometheus rule file."""
    rule = only(render(helm, tmp_path, values), "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return rule, path


def rules_by_alert(rule: dict) -> dict[str, dict]:
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def run_promtool(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_neither_rule_nor_dashboard_by_default(helm, tmp_path):
    docs = render(helm, tmp_path)
    assert "PrometheusRule" not in [d["kind"] for d in docs]
    assert not [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]


def test_rendered_rules_pass_promtool_check(helm, promtool, tmp_path):
    rule, path = rendered_rules(helm, tmp_path, {"monitoring": {"prometheusRule": {
        "enabled": True, "labels": {"release": "kube-prometheus-stack"}}}})  # fmt: skip
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "streamq-system"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"  # for the ruleSelector
    result = run_promtool(promtool, "check", "rules", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_every_alert_names_exported_metrics_and_its_runbook(helm, tmp_path):
    rule, _ = rendered_rules(helm, tmp_path, RULE_ON)
    alerts = rules_by_alert(rule)
    assert set(alerts) == ALERTS
    exported = chart_checks.exported_metric_names() | chart_checks.PROMETHEUS_SERIES
    anchors = chart_checks.github_anchors((REPO_ROOT / "docs" / "operations.md").read_text())
    for name, alert in alerts.items():
        names = chart_checks.promql_metric_names(alert["expr"])
        assert names and names <= exported, f"{name}: {sorted(names - exported)} are not exported"
        assert 'job="streamq-operator-metrics"' in alert["expr"], name  # the metrics Service, as a ServiceMonitor names it
        assert alert["labels"]["severity"] in ("warning", "critical"), name
        assert alert["annotations"]["summary"] and alert["annotations"]["description"], name
        # no runbookURL: no runbook_url (a relative link goes nowhere), the section named in `runbook`
        assert "runbook_url" not in alert["annotations"], (name, alert["annotations"])
        section = alert["annotations"]["runbook"]
        assert section == f"docs/operations.md#{name.lower()} (streamq's docs)" and name.lower() in anchors, (name, section)


def test_every_alert_fires_and_stays_quiet_in_promtool_cases(helm, promtool, tmp_path):
    _, path = rendered_rules(helm, tmp_path, RULE_ON)
    cases = yaml.safe_load(CASES.read_text())
    assert cases["rule_files"] == [path.name]
    fires = {t["alertname"] for c in cases["tests"] for t in c["alert_rule_test"] if t["exp_alerts"]}
    quiet = {t["alertname"] for c in cases["tests"] for t in c["alert_rule_test"] if not t["exp_alerts"]}
    assert fires == ALERTS, f"no case where {sorted(ALERTS - fires)} fire"
    assert quiet == ALERTS, f"no case where {sorted(ALERTS - quiet)} stay quiet"
    shutil.copy(CASES, tmp_path / CASES.name)
    result = run_promtool(promtool, "test", "rules", CASES.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_thresholds_job_and_labels_come_from_values(helm, promtool, tmp_path):
    values = {"monitoring": {"prometheusRule": {
        "enabled": True,
        "job": "streamq",
        "runbookURL": "https://docs.example/streamq/operations.md",
        "additionalLabels": {"team": "data-platform"},
        "stalled": {"for": "10m", "severity": "page"},
        "lagGrowing": {"window": "20m", "for": "30m", "minRecords": 50000, "severity": "warning"},
        "noCommit": {"minutes": 30, "for": "5m", "severity": "critical"},
        "crashLooping": {"restarts": 5, "window": "1h", "severity": "warning"},
        "invalid": {"for": "1m", "severity": "info"},
        "operatorDown": {"for": "2m", "severity": "critical"},
    }}}  # fmt: skip
    rule, path = rendered_rules(helm, tmp_path, values)
    alerts = rules_by_alert(rule)
    for name, alert in alerts.items():
        assert 'job="streamq"' in alert["expr"] and "streamq-operator-metrics" not in alert["expr"], name
        assert alert["labels"]["team"] == "data-platform", name
        assert alert["annotations"]["runbook_url"] == f"https://docs.example/streamq/operations.md#{name.lower()}"
    assert alerts["StreamQueryStalled"]["for"] == "10m" and alerts["StreamQueryStalled"]["labels"]["severity"] == "page"
    assert "[20m]" in alerts["StreamQueryLagGrowing"]["expr"] and "> 50000" in alerts["StreamQueryLagGrowing"]["expr"]
    assert alerts["StreamQueryLagGrowing"]["for"] == "30m"
    assert "> 30 * 60" in alerts["StreamQueryNoCommit"]["expr"] and alerts["StreamQueryNoCommit"]["for"] == "5m"
    crash = alerts["StreamQueryCrashLooping"]["expr"]
    assert "[1h]) >= 5" in crash and "offset 1h" in crash and ") >= 5" in crash
    assert alerts["StreamQueryInvalid"]["for"] == "1m" and alerts["StreamqOperatorDown"]["for"] == "2m"
    result = run_promtool(promtool, "check", "rules", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_rule_without_metrics_is_refused(helm, tmp_path):
    result = helm_template(helm, tmp_path, {"metrics": {"enabled": False}, **RULE_ON})
    assert result.returncode != 0
    assert "monitoring.prometheusRule.enabled needs metrics.enabled" in result.stderr


@pytest.mark.parametrize(
    "values",
    [
        {"monitoring": {"prometheusRule": {"enable": True}}},
        {"monitoring": {"prometheusRule": {"enabled": True, "stalled": {"for": "5 minutes", "severity": "critical"}}}},
        {"monitoring": {"grafanaDashboard": {"enabled": True, "labels": {"grafana_dashboard": 1}}}},
    ],
    ids=["misspelt-key", "not-a-duration", "label-not-a-string"],
)
def test_the_schema_refuses_bad_monitoring_values(helm, tmp_path, values):
    result = helm_template(helm, tmp_path, values)
    assert result.returncode != 0 and "values don't meet the specifications of the schema" in result.stderr


def test_dashboard_configmap_holds_the_dashboard_for_the_sidecar(helm, tmp_path):
    configmap = only(render(helm, tmp_path, DASHBOARD_ON), "ConfigMap", "-dashboard")
    assert configmap["metadata"]["name"] == "streamq-dashboard"
    assert configmap["metadata"]["namespace"] == "streamq-system"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(configmap["data"]["streamq.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "streamq.json").read_text())
    chart_checks.check_dashboard(dashboard)


def test_dashboard_namespace_labels_and_annotations_come_from_values(helm, tmp_path):
    values = {"monitoring": {"grafanaDashboard": {
        "enabled": True, "namespace": "monitoring", "labels": {"grafana_dashboard": "streamq"},
        "annotations": {"grafana_folder": "Streaming"}}}}  # fmt: skip
    configmap = only(render(helm, tmp_path, values), "ConfigMap", "-dashboard")
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "streamq"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Streaming"}


def test_lint_strict_passes_with_rule_and_dashboard_on(helm, tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"monitoring": {"prometheusRule": {"enabled": True},
                                                   "grafanaDashboard": {"enabled": True}}}))  # fmt: skip
    result = subprocess.run([str(helm), "lint", "--strict", str(CHART), "--values", str(path)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
