"""What can be checked of the Helm chart (charts/streamq) without the helm binary;
`helm lint` and `helm template` are in tests/integration/test_chart.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

CHART = Path(__file__).resolve().parents[2] / "charts" / "streamq"


def test_crds_folder_holds_the_generated_crd():
    crd = CHART / "crds" / "streamingqueries.streamq.io.yaml"
    assert crd.is_file(), f"{crd} is missing: `python -m controller.crd` writes it"
    doc = yaml.safe_load(crd.read_text())
    assert doc["kind"] == "CustomResourceDefinition" and doc["spec"]["group"] == "streamq.io"


# ---------------------------------------------------------------- monitoring: alerts and dashboard
# The rendered PrometheusRule and dashboard ConfigMap, and promtool on the rules, are in
# tests/integration/test_alert_rules.py (they need helm); it reuses the helpers below.

import json  # noqa: E402
import re  # noqa: E402

DASHBOARD = CHART / "dashboards" / "streamq.json"
ALERTS = CHART / "files" / "alerts.yaml"
OPERATIONS = CHART.parents[1] / "docs" / "operations.md"
# Series Prometheus makes itself for every target, besides what the operator exports.
PROMETHEUS_SERIES = frozenset({"up"})
_PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
             "summary": ("", "_sum", "_count", "_created")}  # fmt: skip


def exported_metric_names() -> set[str]:
    """The series names the operator serves, read from its registry (a counter
    `streamq_reconciles` is scraped as `streamq_reconciles_total`)."""
    from controller.metrics import Metrics

    names = set()
    for family in Metrics().registry.collect():
        names |= {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
    return names


def promql_metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects: identifiers that are not functions,
    keywords, label names (in matchers, by/without/on/ignoring lists), durations or
    Grafana variables."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery windows
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+-?\w+", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w$.:])[A-Za-z_:][\w:]*", text):
        if text[match.end() :].lstrip().startswith("(") or match.group().lower() in _PROMQL_WORDS:
            continue
        names.add(match.group())
    return names


def dashboard_panels(dashboard: dict) -> list[dict]:
    """Every panel, those inside (collapsed) rows included."""
    found = []
    for panel in dashboard.get("panels", []):
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def dashboard_exprs(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable's metric."""
    exprs = [(f"panel {p.get('title')!r}", t["expr"]) for p in dashboard_panels(dashboard) for t in p.get("targets", [])]
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            exprs.append((f"variable {var['name']!r}", inner.group(1) if inner else query))
    return exprs


def check_dashboard(dashboard: dict) -> None:
    """A dashboard whose every query names only series Prometheus has from the operator."""
    exported = exported_metric_names() | PROMETHEUS_SERIES
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    panels = dashboard_panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    for panel in panels:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel.get("targets"), f"panel {panel['title']!r} has no query"
    exprs = dashboard_exprs(dashboard)
    assert exprs
    for where, expr in exprs:
        names = promql_metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        assert names <= exported, f"{where}: {sorted(names - exported)} are not exported by controller/metrics.py"


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('up{job="a"} == 0 or absent(up{job="a"})', {"up"}),
        ("sum by (verb) (rate(streamq_reconciles_total[$__rate_interval]))", {"streamq_reconciles_total"}),
        (
            "time() - streamq_query_last_commit_timestamp_seconds > 15 * 60 and streamq_query_lag_records > 0",
            {"streamq_query_last_commit_timestamp_seconds", "streamq_query_lag_records"},
        ),
        ("sum without () (a_total unless on(x, y) a_total offset 15m) >= 3", {"a_total"}),
        ('deriv(lag{query=~"$query",x="a b"}[10m]) > 1e3', {"lag"}),
    ],
)
def test_promql_metric_names_reads_only_metric_names(expr, names):
    assert promql_metric_names(expr) == names


def test_dashboard_is_grafana_json_that_queries_only_exported_metrics():
    dashboard = json.loads(DASHBOARD.read_text())
    check_dashboard(dashboard)
    titles = " ".join(p["title"].lower() for p in dashboard_panels(dashboard))
    for subject in ("lag per partition", "last commit", "restarts", "phase", "reconciles", "errors"):
        assert subject in titles, f"no panel about {subject!r}"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "job", "namespace", "query"} <= variables


def test_check_dashboard_catches_a_metric_the_operator_does_not_export():
    dashboard = json.loads(DASHBOARD.read_text())
    dashboard["panels"][1]["targets"][0]["expr"] = "rate(streamq_query_input_rows_total[5m])"
    with pytest.raises(AssertionError, match="streamq_query_input_rows_total"):
        check_dashboard(dashboard)


def test_every_alert_has_a_runbook_section_in_operations_md():
    source = ALERTS.read_text()
    alerts = re.findall(r"^\s*- alert: (\w+)\s*$", source, re.M)
    assert len(alerts) == 6, alerts
    anchors = re.findall(r"runbook_url: \{\{ \$r\.runbookURL \}\}#(\S+)\s*$", source, re.M)
    assert anchors == [a.lower() for a in alerts], "each alert's runbook_url ends in #<its name in lower case>"
    sections = re.findall(r"runbook: docs/operations\.md#(\S+) ", source)
    assert sections == anchors, "each alert's runbook annotation names the same section"
    missing = set(anchors) - github_anchors(OPERATIONS.read_text())
    assert not missing, f"docs/operations.md has no section for {sorted(missing)}"


def test_alerts_and_dashboard_are_off_by_default():
    monitoring = yaml.safe_load((CHART / "values.yaml").read_text())["monitoring"]
    assert monitoring["prometheusRule"]["enabled"] is False
    assert monitoring["grafanaDashboard"]["enabled"] is False
    assert monitoring["grafanaDashboard"]["labels"] == {"grafana_dashboard": "1"}


# ---------------------------------------------------------------- the metadata ranges
# Rendered (by default, with the excepts) in tests/integration/test_chart.py.


def test_the_chart_keeps_query_pods_from_the_networks_the_policy_denies_by_default():
    from contract.policy import METADATA_HOSTS

    netpol = (CHART / "templates" / "_netpol.tpl").read_text()
    cidrs = re.search(r'define "streamq.metadataCIDRs" -}}\n(.*?)\n', netpol)[1].split(",")
    assert set(cidrs) == {h for h in METADATA_HOSTS if "/" in h}
    values = yaml.safe_load((CHART / "values.yaml").read_text())["networkPolicy"]
    assert values["denyMetadata"] is True and values["enabled"] is False
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["networkPolicy"]["properties"]["denyMetadata"]["type"] == "boolean"
    template = (CHART / "templates" / "networkpolicy-metadata.yaml").read_text()
    assert "(not $np.enabled) $np.denyMetadata" in template and "streamq.metadataCIDRs" in template
