"""The Helm chart (charts/streamq): `helm lint`, `helm template`, and its values schema.

Integration tier: uses the helm binary that ``hack/install-kube.sh helm`` builds (the
``helm`` fixture of tests/integration/conftest.py); without it the tests fail saying
so (skip with STREAMQ_ALLOW_SKIP=1). No cluster is needed.
The chart is also held to what the rest of the repository says: the operator's
RBAC and the drivers' RBAC are the rules of manifests/base, every STREAMQ_*
variable it sets is one the operator reads, and its default image is the
operator's default job image and the version in pyproject.toml.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "streamq"
MANIFESTS = REPO_ROOT / "manifests" / "base"
SCHEMA_ERROR = "values don't meet the specifications of the schema"


def _values_args(tmp_path: Path, values: dict | None) -> list[str]:
    if not values:
        return []
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return ["--values", str(path)]


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


def template(helm: Path, tmp_path: Path, values: dict | None = None, *extra: str) -> subprocess.CompletedProcess:
    return run_helm(
        helm, "template", "streamq", str(CHART), "--namespace", "streamq-system", *extra, *_values_args(tmp_path, values)
    )


def is_hook(doc: dict) -> bool:
    return "helm.sh/hook" in (doc["metadata"].get("annotations") or {})


def render(helm: Path, tmp_path: Path, values: dict | None = None, hooks: bool = False) -> list[dict]:
    """What `helm install` keeps in the cluster; ``hooks``: only the hook objects (the uninstall Job's)."""
    result = template(helm, tmp_path, values)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc and is_hook(doc) == hooks]


def lint_strict(helm: Path, tmp_path: Path, values: dict | None = None) -> subprocess.CompletedProcess:
    return run_helm(helm, "lint", "--strict", str(CHART), *_values_args(tmp_path, values))


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict], kind: str, name_suffix: str = "") -> dict:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def operator_container(docs: list[dict]) -> dict:
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def env_of(container: dict) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container["env"]}


def rule_set(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def manifest_docs(name: str) -> list[dict]:
    path = MANIFESTS / name
    assert path.is_file(), f"{path.relative_to(REPO_ROOT)} is missing"
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


# ---------------------------------------------------------------- lint + defaults


def test_lint_strict_passes_with_the_default_values(helm, tmp_path):
    result = lint_strict(helm, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_default_render_has_every_piece(helm, tmp_path):
    docs = render(helm, tmp_path)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("Deployment") == 1
    assert kinds.count("ServiceAccount") == 2  # operator + driver in the release namespace
    assert kinds.count("ClusterRole") == 3  # operator (cluster reads), operator (namespaced), driver
    assert kinds.count("ClusterRoleBinding") == 1  # the cluster-scoped reads only: namespaced by default
    assert kinds.count("RoleBinding") == 2  # operator and driver, release namespace
    assert kinds.count("Service") == 1 and kinds.count("PodDisruptionBudget") == 1
    assert "ServiceMonitor" not in kinds and "ClusterKopfPeering" not in kinds and "KopfPeering" not in kinds
    # the tenant policy at apply time (tests/integration/test_admission_policy.py)
    assert kinds.count("ValidatingAdmissionPolicy") == 1 and kinds.count("ValidatingAdmissionPolicyBinding") == 1
    cluster_scoped = ("ClusterRole", "ClusterRoleBinding", "ClusterKopfPeering", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding")  # fmt: skip
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "streamq" and labels["app.kubernetes.io/instance"] == "streamq"
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"]["namespace"] == "streamq-system", doc["metadata"]


def test_operator_deployment_is_restricted_probed_and_sized(helm, tmp_path):
    docs = render(helm, tmp_path)
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = operator_container(docs)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # never two standalone operators
    assert pod["serviceAccountName"] == "streamq-operator"
    assert container["args"] == ["controller", "--namespace=streamq-system"]  # the release's namespace only
    assert container["imagePullPolicy"] == "IfNotPresent"
    # the restricted Pod Security Standard
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}, probe
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = env_of(container)
    assert env["STREAMQ_LIVENESS"] == f"http://0.0.0.0:{ports['health']}/healthz"
    assert env["STREAMQ_METRICS_PORT"] == str(ports["metrics"])
    assert env["STREAMQ_STANDALONE"] == "1" and "STREAMQ_PEERING" not in env
    assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]
    service = one(docs, "Service", "-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_defaults_agree_with_the_image_the_operator_and_pyproject(helm, tmp_path):
    from controller.config import DEFAULT_JOB_IMAGE, Settings

    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
    docs = render(helm, tmp_path)
    container = operator_container(docs)
    assert container["image"] == f"streamq:{version}" == DEFAULT_JOB_IMAGE
    env = env_of(container)
    assert env["STREAMQ_JOB_IMAGE"] == DEFAULT_JOB_IMAGE
    settings = Settings()
    assert env["STREAMQ_DRIVER_SERVICE_ACCOUNT"] == settings.driver_service_account
    assert int(env["STREAMQ_RUN_AS_USER"]) == settings.run_as_user
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == settings.run_as_user  # the image's uid (Dockerfile STREAMQ_UID)
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert re.search(rf"^ARG STREAMQ_UID={settings.run_as_user}$", dockerfile, re.M), "Dockerfile uid != operator's run_as_user"
    driver_accounts = [d for d in by_kind(docs, "ServiceAccount") if d["metadata"]["name"] == settings.driver_service_account]
    assert len(driver_accounts) == 1


def test_every_streamq_variable_the_chart_sets_is_read_by_the_operator(helm, tmp_path):
    sources = "\n".join(p.read_text() for p in (REPO_ROOT / "controller").glob("*.py"))
    env = env_of(operator_container(render(helm, tmp_path, {"operator": {"replicas": 2, "peering": {"enabled": True}}})))
    env.update(env_of(operator_container(render(helm, tmp_path))))
    unknown = [name for name in env if name.startswith("STREAMQ_") and f'"{name}"' not in sources]
    assert not unknown, f"the chart sets variables the operator never reads: {unknown}"


# ---------------------------------------------------------------- RBAC = manifests/base


def test_operator_rbac_matches_manifests_base(helm, tmp_path):
    base = [d for d in manifest_docs("operator-rbac.yaml") if d["kind"] == "ClusterRole"]
    docs = render(helm, tmp_path)
    chart_rules = rule_set(one(docs, "ClusterRole", "-operator")["rules"]) | rule_set(
        one(docs, "ClusterRole", "-operator-cluster")["rules"]
    )
    assert chart_rules == rule_set(base[0]["rules"])


def test_operator_deployment_matches_manifests_base(helm, tmp_path):
    """kubectl apply -k and helm install run the same operator pod (labels aside: the chart
    adds its release's)."""

    def by_name(items: list[dict]) -> dict[str, dict]:
        return {item["name"]: item for item in items}

    def pod(deployment: dict) -> dict:
        spec = copy.deepcopy(deployment["spec"]["template"]["spec"])
        for container in spec["containers"]:
            container["env"], container["ports"] = by_name(container["env"]), by_name(container["ports"])
        return spec

    (base,) = [d for d in manifest_docs("operator.yaml") if d["kind"] == "Deployment"]
    # manifests/base is the cluster-wide quick start; the chart is so only when asked
    chart = one(render(helm, tmp_path, {"operator": {"watchNamespaces": ["*"]}}), "Deployment")
    assert pod(base) == pod(chart)
    assert (base["spec"]["replicas"], base["spec"]["strategy"]) == (chart["spec"]["replicas"], chart["spec"]["strategy"])


def test_driver_rbac_matches_manifests_base(helm, tmp_path):
    base = [d for d in manifest_docs("driver-rbac.yaml") if d["kind"] == "ClusterRole"]
    docs = render(helm, tmp_path)
    assert rule_set(one(docs, "ClusterRole", "-driver")["rules"]) == rule_set(base[0]["rules"])
    binding = one(docs, "RoleBinding", "-driver")
    assert binding["roleRef"]["name"].endswith("-driver")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "streamq-driver", "namespace": "streamq-system"}]


def test_nothing_lists_secrets_or_grants_wildcards(helm, tmp_path):
    """The operator creates each query's Spark auth Secret and reads Secrets' metadata by name only
    (whose is it, is it marked for credentials; never list or watch); drivers get none."""
    values = {"operator": {"replicas": 2, "peering": {"enabled": True}}, "driver": {"namespaces": ["team-a"]}}
    for doc in by_kind(render(helm, tmp_path, values), "ClusterRole"):
        for group, resource, verb in rule_set(doc["rules"]):
            assert "*" not in (group, resource, verb), doc["metadata"]["name"]
            if resource == "secrets":
                assert doc["metadata"]["name"] == "streamq-operator" and verb in ("get", "create")


def test_the_default_serves_the_release_namespace_only(helm, tmp_path):
    docs = render(helm, tmp_path)
    operator_bindings = [b for b in by_kind(docs, "RoleBinding") if b["roleRef"]["name"] == "streamq-operator"]
    assert [b["metadata"]["namespace"] for b in operator_bindings] == ["streamq-system"]
    assert [b["roleRef"]["name"] for b in by_kind(docs, "ClusterRoleBinding")] == ["streamq-operator-cluster"]
    cluster_reads = rule_set(one(docs, "ClusterRole", "-operator-cluster")["rules"])
    assert {resource for _, resource, _ in cluster_reads} == {"customresourcedefinitions", "namespaces"}
    assert all(verb in ("list", "watch") for _, _, verb in cluster_reads)


def test_cluster_wide_is_an_explicit_choice(helm, tmp_path):
    docs = render(helm, tmp_path, {"operator": {"watchNamespaces": ["*"]}})
    assert operator_container(docs)["args"] == ["controller", "--all-namespaces"]
    assert sorted(b["roleRef"]["name"] for b in by_kind(docs, "ClusterRoleBinding")) == [
        "streamq-operator",
        "streamq-operator-cluster",
    ]
    assert not [b for b in by_kind(docs, "RoleBinding") if b["roleRef"]["name"] == "streamq-operator"]


def test_watch_namespaces_binds_per_namespace_only(helm, tmp_path):
    docs = render(helm, tmp_path, {"operator": {"watchNamespaces": ["team-a", "team-b"]}})
    container = operator_container(docs)
    assert container["args"] == ["controller", "--namespace=team-a", "--namespace=team-b"]
    bindings = [b for b in by_kind(docs, "RoleBinding") if b["roleRef"]["name"] == "streamq-operator"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    cluster_bindings = [b["roleRef"]["name"] for b in by_kind(docs, "ClusterRoleBinding")]
    assert cluster_bindings == ["streamq-operator-cluster"]  # only the cluster-scoped reads
    # drivers that start executors find their account in every watched namespace
    accounts = sorted(
        d["metadata"]["namespace"] for d in by_kind(docs, "ServiceAccount") if d["metadata"]["name"] == "streamq-driver"
    )
    assert accounts == ["streamq-system", "team-a", "team-b"]


def test_peering_renders_the_peering_object_its_rbac_and_rolling_updates(helm, tmp_path):
    docs = render(helm, tmp_path, {"operator": {"replicas": 2, "peering": {"enabled": True}, "watchNamespaces": ["*"]}})
    assert one(docs, "ClusterKopfPeering")["metadata"]["name"] == "streamq"
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    env = env_of(operator_container(docs))
    assert env["STREAMQ_PEERING"] == "streamq" and "STREAMQ_STANDALONE" not in env
    assert ("kopf.dev", "clusterkopfpeerings", "patch") in rule_set(one(docs, "ClusterRole", "-cluster")["rules"])
    crds = [d for d in yaml.safe_load_all((CHART / "crds" / "kopf-peerings.yaml").read_text()) if d]
    assert {d["metadata"]["name"] for d in crds} == {"clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"}

    namespaced = render(helm, tmp_path, {"operator": {"peering": {"enabled": True, "name": "sq"}, "watchNamespaces": ["a", "b"]}})
    assert sorted(p["metadata"]["namespace"] for p in by_kind(namespaced, "KopfPeering")) == ["a", "b"]
    assert ("kopf.dev", "kopfpeerings", "patch") in rule_set(one(namespaced, "ClusterRole", "-operator")["rules"])
    default = render(helm, tmp_path, {"operator": {"peering": {"enabled": True}}})
    assert [p["metadata"]["namespace"] for p in by_kind(default, "KopfPeering")] == ["streamq-system"]
    assert not by_kind(default, "ClusterKopfPeering")


def test_driver_accounts_in_every_listed_namespace(helm, tmp_path):
    docs = render(helm, tmp_path, {"driver": {"namespaces": ["team-a", "streamq-system", "team-b"]}})
    accounts = sorted(
        d["metadata"]["namespace"] for d in by_kind(docs, "ServiceAccount") if d["metadata"]["name"] == "streamq-driver"
    )
    assert accounts == ["streamq-system", "team-a", "team-b"]  # the release namespace once
    bindings = sorted(
        b["metadata"]["namespace"] for b in by_kind(docs, "RoleBinding") if b["metadata"]["name"] == "streamq-driver"
    )
    assert bindings == ["streamq-system", "team-a", "team-b"]


def test_the_full_network_policy_is_off_by_default_and_limits_queries_when_on(helm, tmp_path):
    default = by_kind(render(helm, tmp_path), "NetworkPolicy")
    assert [p["metadata"]["name"] for p in default] == ["streamq-queries-no-metadata"]  # below
    values = {
        "operator": {"watchNamespaces": ["team-a", "team-b"]},
        "networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["10.0.0.1/32"], "ports": [6443]},
                          "kafka": {"cidrs": ["10.20.0.0/16"], "namespaceSelector": {"matchLabels": {"kafka": "yes"}}, "ports": [9092, 9093]}},
    }  # fmt: skip
    policies = by_kind(render(helm, tmp_path, values), "NetworkPolicy")
    # where queries run: the watched namespaces, and the release's (it has a driver account)
    assert sorted(p["metadata"]["namespace"] for p in policies) == ["streamq-system", "team-a", "team-b"]
    spec = policies[0]["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    selects = spec["podSelector"]
    assert selects["matchLabels"] == {"app.kubernetes.io/managed-by": "streamq"}
    assert selects["matchExpressions"] == [{"key": "streamq.io/component", "operator": "In", "values": ["driver", "executor"]}]
    operator_pods = {"app.kubernetes.io/name": "streamq", "app.kubernetes.io/instance": "streamq",
                     "app.kubernetes.io/component": "operator"}  # fmt: skip
    assert spec["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "streamq"}}}]},
        # the operator reads each driver's progress on its port `progress`, and only that (controller/progress_read.py)
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "streamq-system"}},
                   "podSelector": {"matchLabels": operator_pods}}],
         "ports": [{"protocol": "TCP", "port": "progress"}]},
    ]  # fmt: skip
    egress = spec["egress"]
    assert egress[0] == {"to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "streamq"}}}]}
    assert {p["port"] for p in egress[1]["ports"]} == {53}
    assert egress[2] == {"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 6443}]}
    assert egress[3]["to"] == [{"ipBlock": {"cidr": "10.20.0.0/16"}}, {"namespaceSelector": {"matchLabels": {"kafka": "yes"}}}]
    assert [p["port"] for p in egress[3]["ports"]] == [9092, 9093]
    assert len(egress) == 4  # nothing else leaves
    # the labels it selects are the ones the operator puts on drivers and executors
    from contract.names import LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY
    from controller import names

    for component in (names.COMPONENT_DRIVER, names.COMPONENT_EXECUTOR):
        labels = names.labels("q", component, 1)
        assert labels[LABEL_MANAGED_BY] == MANAGED_BY == selects["matchLabels"][LABEL_MANAGED_BY]
        assert labels[LABEL_COMPONENT] in selects["matchExpressions"][0]["values"]


def test_metrics_off_and_service_monitor_on(helm, tmp_path):
    off = render(helm, tmp_path, {"metrics": {"enabled": False, "port": 9090}})
    assert not by_kind(off, "Service") and not by_kind(off, "ServiceMonitor")
    container = operator_container(off)
    assert env_of(container)["STREAMQ_METRICS_PORT"] == "0"
    assert [p["name"] for p in container["ports"]] == ["health"]

    on = render(
        helm,
        tmp_path,
        {"metrics": {"enabled": True, "port": 9090, "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}},
    )
    monitor = one(on, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["selector"]["matchLabels"] == one(on, "Service")["spec"]["selector"]


def render_notes(helm: Path, tmp_path: Path, values: dict | None = None) -> str:
    """NOTES.txt as `helm install` would print it. Only install renders NOTES, and it
    wants a cluster even with --dry-run=client: render a copy of the chart in which
    a ConfigMap carries `tpl` of NOTES.txt instead."""
    chart = Path(tempfile.mkdtemp(dir=tmp_path)) / "streamq"
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes.txt")
    (chart / "templates" / "zz-notes.yaml").write_text(
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n'
    )
    result = run_helm(helm, "template", "streamq", str(chart), "--namespace", "streamq-system", *_values_args(tmp_path, values))
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "notes")["data"]["notes"]


def test_notes_tell_how_to_load_the_image_and_apply_a_first_query(helm, tmp_path):
    notes = render_notes(helm, tmp_path)
    assert "ctr -n k8s.io images import ~/.cache/streamq/images/streamq-0.1.0.tar" in notes
    assert "imagePullPolicy is IfNotPresent" in notes
    first_query = notes[notes.index("cat <<'YAML'") : notes.index("  YAML\n")]
    doc = yaml.safe_load("\n".join(line[2:] for line in first_query.splitlines()[1:]))
    assert doc["kind"] == "StreamingQuery" and doc["metadata"]["name"] == "rate-to-console"
    sample = REPO_ROOT / "examples" / "rate-to-console.yaml"
    assert doc["spec"] == yaml.safe_load(sample.read_text())["spec"], (
        "NOTES' first query drifted from examples/rate-to-console.yaml"
    )
    assert "kubectl wait sq/rate-to-console --for=condition=Ready" in notes
    assert "kubectl apply -n streamq-system" in notes and "the namespaces streamq-system" in notes
    assert "StreamingQueries go in streamq-system; one in any other namespace is not reconciled." in notes

    namespaced = render_notes(helm, tmp_path, {"operator": {"watchNamespaces": ["team-a", "team-b"]}})
    assert "kubectl apply -n team-a" in namespaced and "the namespaces team-a, team-b" in namespaced
    assert "StreamingQueries go in team-a or team-b;" in namespaced
    everywhere = render_notes(helm, tmp_path, {"operator": {"watchNamespaces": ["*"]}})
    assert "kubectl apply -n default" in everywhere and "every namespace" in everywhere
    assert "not reconciled" not in everywhere


# ---------------------------------------------------------------- values.schema.json

GOOD_VALUES = {
    "defaults": {},
    "two peered replicas": {"operator": {"replicas": 2, "peering": {"enabled": True}}},
    "namespaced operator": {"operator": {"watchNamespaces": ["team-a", "team-b"]}, "driver": {"namespaces": ["team-a"]}},
    "cluster-wide operator": {"operator": {"watchNamespaces": ["*"]}},
    "network policy": {
        "networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["10.0.0.1/32"]}, "kafka": {"cidrs": ["fd00::/64"]}}
    },
    "no network policy at all": {"networkPolicy": {"enabled": False, "denyMetadata": False}},
    "metrics off": {"metrics": {"enabled": False, "port": 9090}},
    "service monitor": {"metrics": {"enabled": True, "port": 9100, "serviceMonitor": {"enabled": True, "interval": "15s"}}},
    "private registry image": {
        "image": {"repository": "registry.local:5000/data/streamq", "tag": "0.1.1", "pullPolicy": "Never"}
    },
    "pdb by percentage": {"podDisruptionBudget": {"enabled": True, "minAvailable": "50%"}},
    "sized and extended": {
        "operator": {
            "replicas": 1,
            "peering": {"enabled": False},
            "healthPort": 8080,
            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": 1, "memory": "1Gi"}},
            "extraEnv": [{"name": "STREAMQ_PROGRESS_INTERVAL_SECONDS", "value": "5"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
        }
    },
}

BAD_VALUES = {
    "no replicas": {"operator": {"replicas": 0}},
    "two replicas without peering": {"operator": {"replicas": 2}},
    "latest tag": {"image": {"tag": "latest"}},
    "unknown pull policy": {"image": {"pullPolicy": "Sometimes"}},
    "misspelt top-level key": {"replicaCount": 2},
    "misplaced key": {"operator": {"image": "streamq:0.1.0"}},
    "namespace not a DNS label": {"operator": {"watchNamespaces": ["Team_A"]}},
    "everything and a namespace": {"operator": {"watchNamespaces": ["*", "team-a"]}},
    "kafka address not a CIDR": {"networkPolicy": {"enabled": True, "kafka": {"cidrs": ["kafka:9092"]}}},
    # every query would exit 69 (no broker) and restart in a loop
    "network policy with no way to the brokers": {"networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["10.0.0.1/32"]}}},
    "network policy with an empty broker selector": {"networkPolicy": {"enabled": True, "kafka": {"namespaceSelector": {}}}},
    "port out of range": {"metrics": {"port": 70000}},
    "relative runbook URL": {"monitoring": {"prometheusRule": {"enabled": True, "runbookURL": "docs/operations.md"}}},
    "not a quantity": {"operator": {"resources": {"requests": {"cpu": "lots"}}}},
    "env var without a name": {"operator": {"extraEnv": [{"value": "x"}]}},
    "not a duration": {"metrics": {"serviceMonitor": {"enabled": True, "interval": "30 seconds"}}},
}


@pytest.mark.parametrize("values", GOOD_VALUES.values(), ids=GOOD_VALUES.keys())
def test_schema_accepts(helm, tmp_path, values):
    rendered = template(helm, tmp_path, values)
    assert rendered.returncode == 0, rendered.stderr
    linted = lint_strict(helm, tmp_path, values)
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.mark.parametrize("values", BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_schema_rejects(helm, tmp_path, values):
    rendered = template(helm, tmp_path, values)
    assert rendered.returncode != 0, f"helm template accepted {values}"
    assert SCHEMA_ERROR in rendered.stderr, rendered.stderr
    linted = lint_strict(helm, tmp_path, values)
    assert linted.returncode != 0, f"helm lint --strict accepted {values}"
    assert SCHEMA_ERROR in linted.stdout + linted.stderr


def test_driver_pod_monitor_scrapes_the_spark_ui_port_with_the_query_label(helm, tmp_path):
    """spec.runtime.sparkUI drivers serve Spark's metrics on the port render.driver_pod names spark-ui."""
    from contract.names import SPARK_UI_PORT

    assert not by_kind(render(helm, tmp_path), "PodMonitor")
    values = {"metrics": {"enabled": True, "port": 9090, "driverPodMonitor": {"enabled": True, "labels": {"release": "prom"}}}}
    on = render(helm, tmp_path, values)
    monitor = one(on, "PodMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "streamq.io/component": "driver",
        "app.kubernetes.io/managed-by": "streamq",
    }
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["streamq-system"]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("spark-ui", "/metrics/prometheus") and SPARK_UI_PORT == 4040
    assert {"sourceLabels": ["__meta_kubernetes_pod_label_streamq_io_query"], "targetLabel": "query"} in endpoint["relabelings"]
    assert endpoint["metricRelabelings"] == yaml.safe_load((CHART / "files" / "driver-relabelings.yaml").read_text())
    everywhere = render(helm, tmp_path, {**values, "operator": {"watchNamespaces": ["*"]}})
    assert one(everywhere, "PodMonitor")["spec"]["namespaceSelector"] == {"any": True}
    assert not by_kind(render(helm, tmp_path, {"metrics": {**values["metrics"], "enabled": False}}), "PodMonitor")


def test_spark_ui_ingress_is_off_by_default_and_configures_the_operator_when_a_host_is_set(helm, tmp_path):
    from controller.config import Settings

    assert "STREAMQ_SPARK_UI_INGRESS_HOST" not in env_of(operator_container(render(helm, tmp_path)))
    on = env_of(
        operator_container(
            render(
                helm, tmp_path, {"sparkUI": {"ingress": {"host": "{query}.{namespace}.spark.example.com", "className": "nginx"}}}
            )
        )
    )
    settings = Settings.from_env({k: v for k, v in on.items() if k.startswith("STREAMQ_SPARK_UI_")})
    assert (settings.spark_ui_ingress_host, settings.spark_ui_ingress_class) == ("{query}.{namespace}.spark.example.com", "nginx")
    assert template(helm, tmp_path, {"sparkUI": {"ingress": {"host": "Not A Host!"}}}).returncode != 0


def test_network_policy_lets_the_listed_peers_reach_the_spark_ui_port(helm, tmp_path):
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    docs = render(
        helm, tmp_path, {"networkPolicy": {"enabled": True, "sparkUIFrom": [prometheus], "kafka": {"cidrs": ["10.20.0.0/16"]}}}
    )
    policy = one(docs, "NetworkPolicy")
    assert {"from": [prometheus], "ports": [{"protocol": "TCP", "port": 4040}]} in policy["spec"]["ingress"]
    default = one(
        render(helm, tmp_path, {"networkPolicy": {"enabled": True, "kafka": {"cidrs": ["10.20.0.0/16"]}}}), "NetworkPolicy"
    )
    assert len(default["spec"]["ingress"]) == 2  # the queries' own pods, the operator on the progress port
    assert all(4040 not in [port["port"] for port in rule.get("ports", [])] for rule in default["spec"]["ingress"])


# the cloud metadata endpoints (instance credentials): AWS, GCP, Azure; ECS and EKS Pod Identity agents; Alibaba
METADATA = ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "169.254.170.23", "fd00:ec2::23", "fe80::1",
            "100.100.100.200")  # fmt: skip


def _reaches(policy: dict, address: str) -> bool:
    """Whether some egress rule of ``policy`` lets a selected pod connect to ``address`` (a rule
    without `to` allows every destination; an ipBlock allows its cidr minus its `except`)."""
    import ipaddress

    ip = ipaddress.ip_address(address)
    for rule in policy["spec"]["egress"]:
        if not rule.get("to"):
            return True
        for peer in rule["to"]:
            block = peer.get("ipBlock")
            if block is None:
                continue
            net = ipaddress.ip_network(block["cidr"])
            if (
                ip.version == net.version
                and ip in net
                and not any(
                    ip in ipaddress.ip_network(e)
                    for e in block.get("except", [])
                    if ipaddress.ip_network(e).version == ip.version
                )
            ):
                return True
    return False


def _excepts_are_valid(policy: dict) -> None:
    """The API server's rule: every `except` is a strict subset of its ipBlock's cidr."""
    import ipaddress

    for rule in policy["spec"]["egress"]:
        for peer in rule.get("to") or []:
            block = peer.get("ipBlock") or {}
            net = ipaddress.ip_network(block["cidr"]) if block else None
            for e in block.get("except", []):
                inner = ipaddress.ip_network(e)
                assert inner.version == net.version and inner.subnet_of(net) and inner != net, block


COVERING = {
    "kafka everywhere": {"kafka": {"cidrs": ["0.0.0.0/0", "::/0"]}},
    "api server link-local": {"apiServer": {"cidrs": ["169.254.0.0/16", "fd00::/8"]}, "kafka": {"cidrs": ["10.20.0.0/16"]}},
    "kafka the endpoint itself": {"kafka": {"cidrs": ["169.254.169.254/32", "fd00:ec2::254/128", "10.20.0.0/16"]}},
    "extra rule without to": {"extraEgress": [{"ports": [{"protocol": "TCP", "port": 80}]}]},
    "extra rule with empty to": {"extraEgress": [{"to": []}]},
    "extra ipBlock with its own except": {"extraEgress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}},
                                                                 {"ipBlock": {"cidr": "::/0"}}]}]},
    "extra ipBlock already excepting a wider block": {"extraEgress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16"]}}]}]},
    "extra ipBlock of the endpoint only": {"extraEgress": [{"to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}], "ports": [{"port": 80}]}]},
    "uppercase and zero-padded IPv6": {"extraEgress": [{"to": [{"ipBlock": {"cidr": "FD00:0EC2:0000::/32"}}]}]},
}  # fmt: skip


@pytest.mark.parametrize("values", COVERING.values(), ids=COVERING.keys())
def test_network_policy_never_lets_queries_reach_the_cloud_metadata_endpoint(helm, tmp_path, values):
    policy = one(render(helm, tmp_path, {"networkPolicy": {"enabled": True, **values}}), "NetworkPolicy")
    for address in METADATA:
        assert not _reaches(policy, address), (address, policy["spec"]["egress"])
    _excepts_are_valid(policy)
    for rule in policy["spec"]["egress"]:
        assert rule.get("to"), rule  # no rule is left meaning "anywhere"


def test_network_policy_keeps_what_the_values_allow_besides_the_metadata_endpoint(helm, tmp_path):
    values = {"networkPolicy": {"enabled": True, "kafka": {"cidrs": ["0.0.0.0/0"]},
                                "extraEgress": [{"ports": [{"protocol": "TCP", "port": 443}]}]}}  # fmt: skip
    egress = one(render(helm, tmp_path, values), "NetworkPolicy")["spec"]["egress"]
    kafka, extra = egress[2], egress[3]
    assert kafka["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16", "100.100.100.200/32"]}}]
    assert [p["port"] for p in kafka["ports"]] == [9092]
    # "any destination" stays: every pod, every address but the metadata endpoints, on its ports
    assert extra["ports"] == [{"protocol": "TCP", "port": 443}]
    assert extra["to"] == [{"namespaceSelector": {}},
                           {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16", "100.100.100.200/32"]}},
                           {"ipBlock": {"cidr": "::/0", "except": ["fd00:ec2::/32", "fe80::/10"]}}]  # fmt: skip
    for address in ("8.8.8.8", "10.1.2.3", "2001:db8::1"):
        policy = {"spec": {"egress": egress}}
        assert _reaches(policy, address)


def test_by_default_query_pods_reach_everything_but_the_metadata_ranges(helm, tmp_path):
    """Rendered without any value set: what the operator's host checks cannot see (a DNS name
    whose record points at 169.254.169.254) stops here. Off with the full policy (their union
    would allow everything) or with networkPolicy.denyMetadata false."""
    values = {"operator": {"watchNamespaces": ["team-a", "team-b"]}}
    policies = by_kind(render(helm, tmp_path, values), "NetworkPolicy")
    assert sorted(p["metadata"]["namespace"] for p in policies) == ["streamq-system", "team-a", "team-b"]
    policy = policies[0]
    spec = policy["spec"]
    assert policy["metadata"]["name"] == "streamq-queries-no-metadata" and spec["policyTypes"] == ["Egress"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/managed-by": "streamq"}, "matchExpressions": [
        {"key": "streamq.io/component", "operator": "In", "values": ["driver", "executor"]}]}  # fmt: skip
    assert {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16", "100.100.100.200/32"]}} in spec["egress"][1]["to"]
    assert {"ipBlock": {"cidr": "::/0", "except": ["fd00:ec2::/32", "fe80::/10"]}} in spec["egress"][1]["to"]
    assert spec["egress"][2] == {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    without_dns = {"spec": {"egress": spec["egress"][:2]}}
    for address in METADATA:
        assert not _reaches(without_dns, address), address
    for address in ("8.8.8.8", "10.96.0.1", "172.18.0.2", "2001:db8::1", "fd00::5"):
        assert _reaches(policy, address), address
    _excepts_are_valid(policy)
    # the same ranges the operator's default policy denies
    from contract.policy import METADATA_HOSTS

    excepted = {e for peer in spec["egress"][1]["to"] for e in peer["ipBlock"]["except"]}
    assert excepted == {h for h in METADATA_HOSTS if "/" in h}
    assert not [p for p in by_kind(render(helm, tmp_path, {"networkPolicy": {"enabled": True, "kafka": {"cidrs": ["10.20.0.0/16"]}}}), "NetworkPolicy")
                if p["metadata"]["name"].endswith("-no-metadata")]  # fmt: skip
    assert not by_kind(render(helm, tmp_path, {"networkPolicy": {"enabled": False, "denyMetadata": False}}), "NetworkPolicy")


# ---------------------------------------------------------------- helm uninstall


def test_uninstall_hook_stops_the_operator_and_releases_the_served_queries(helm, tmp_path):
    """controller/uninstall.py runs before helm deletes anything, with its own account: the operator's
    account never gets to scale its own Deployment."""
    from controller.names import FINALIZER

    hooks = render(helm, tmp_path, {"operator": {"watchNamespaces": ["team-a", "team-b"]}}, hooks=True)
    assert all(d["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete" for d in hooks)
    job = one(hooks, "Job")
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "streamq-operator-uninstall"
    assert pod["containers"][0]["args"] == [
        "controller", "release-finalizers", "--operator-namespace=streamq-system", "--deployment=streamq-operator",
        "--timeout=90", "--namespace=team-a", "--namespace=team-b"]  # fmt: skip
    assert pod["securityContext"]["runAsNonRoot"] is True
    # objects first, then the Job
    weights = {d["kind"]: int(d["metadata"]["annotations"]["helm.sh/hook-weight"]) for d in hooks}
    assert weights.pop("Job") > max(weights.values())
    role = one(hooks, "Role", "-uninstall")
    assert rule_set(role["rules"]) == {("apps", "deployments", "get"), ("apps", "deployments", "patch"), ("", "pods", "list")}
    assert role["rules"][0]["resourceNames"] == ["streamq-operator"]
    # the queries' rules: a Role in each served namespace, nothing cluster-scoped (Argo CD's PreDelete hooks)
    assert not by_kind(hooks, "ClusterRole") and not by_kind(hooks, "ClusterRoleBinding")
    queries = {r["metadata"]["namespace"]: r for r in by_kind(hooks, "Role") if r["metadata"]["name"].endswith("-queries")}
    assert sorted(queries) == ["team-a", "team-b"]
    assert all(rule_set(r["rules"]) == {("streamq.io", "streamingqueries", v) for v in ("get", "list", "patch")}
               for r in queries.values())  # fmt: skip
    served = {b["metadata"]["namespace"]: b["roleRef"]["name"] for b in by_kind(hooks, "RoleBinding")
              if b["metadata"]["name"].endswith("-queries")}  # fmt: skip
    assert served == {"team-a": "streamq-operator-uninstall-queries", "team-b": "streamq-operator-uninstall-queries"}
    assert FINALIZER == "streamq.io/finalizer"
    # the operator's own rules hold nothing of this
    for role in by_kind(render(helm, tmp_path), "ClusterRole"):
        assert not {r for _, r, _ in rule_set(role["rules"])} & {"deployments"}


def test_uninstall_hook_is_cluster_wide_with_the_operator_and_can_be_turned_off(helm, tmp_path):
    hooks = render(helm, tmp_path, {"operator": {"watchNamespaces": ["*"]}}, hooks=True)
    assert "--namespace" not in " ".join(one(hooks, "Job")["spec"]["template"]["spec"]["containers"][0]["args"])
    assert one(hooks, "ClusterRoleBinding")["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                           "name": "streamq-operator-uninstall-queries"}  # fmt: skip
    assert rule_set(one(hooks, "ClusterRole")["rules"]) == {
        ("streamq.io", "streamingqueries", v) for v in ("get", "list", "patch")
    }
    assert not render(helm, tmp_path, {"uninstallHook": {"enabled": False}}, hooks=True)


def test_uninstall_hook_objects_have_distinct_names_when_the_release_namespace_is_served(helm, tmp_path):
    """The default watches the release namespace, where the Job's own Role is bound: the binding to the
    queries' ClusterRole there must not take the same name (the API server refuses to change a roleRef)."""
    hooks = render(helm, tmp_path, hooks=True)
    keys = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in hooks]
    assert len(keys) == len(set(keys)), sorted(keys)
    bindings = {b["roleRef"]["name"]: b for b in by_kind(hooks, "RoleBinding")}
    assert set(bindings) == {"streamq-operator-uninstall", "streamq-operator-uninstall-queries"}
    assert {b["metadata"]["namespace"] for b in bindings.values()} == {"streamq-system"}


def test_shards_are_one_deployment_each_over_disjoint_namespaces_with_their_own_peering(helm, tmp_path):
    """operator.shards (docs/operations.md, "Sharding"): each shard's operator watches only its namespaces
    and peers only with its own replicas; a namespace in two shards, or one the release does not serve, fails."""
    values = {"operator": {"watchNamespaces": ["team-a", "team-b", "team-c"], "peering": {"enabled": True},
                           "shards": [{"name": "one", "namespaces": ["team-a", "team-b"]},
                                      {"name": "two", "namespaces": ["team-c"]}]}}  # fmt: skip
    docs = render(helm, tmp_path, values)
    deployments = {d["metadata"]["name"]: d for d in by_kind(docs, "Deployment")}
    assert set(deployments) == {"streamq-operator-one", "streamq-operator-two"}
    for shard, namespaces in (("one", ["team-a", "team-b"]), ("two", ["team-c"])):
        d = deployments[f"streamq-operator-{shard}"]
        assert d["spec"]["selector"]["matchLabels"]["streamq.io/shard"] == shard
        assert d["spec"]["template"]["metadata"]["labels"]["streamq.io/shard"] == shard
        container = d["spec"]["template"]["spec"]["containers"][0]
        assert [a for a in container["args"] if a.startswith("--")] == [f"--namespace={n}" for n in namespaces]
        assert env_of(container)["STREAMQ_PEERING"] == f"streamq-{shard}"
    peerings = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in by_kind(docs, "KopfPeering")}
    assert peerings == {("team-a", "streamq-one"), ("team-b", "streamq-one"), ("team-c", "streamq-two")}
    overlapping = {"operator": {**values["operator"], "shards": [{"name": "one", "namespaces": ["team-a"]},
                                                                 {"name": "two", "namespaces": ["team-a"]}]}}  # fmt: skip
    refused = template(helm, tmp_path, overlapping)
    assert refused.returncode != 0 and "namespace team-a is in shards one and two" in refused.stderr
    foreign = {"operator": {**values["operator"], "shards": [{"name": "one", "namespaces": ["elsewhere"]}]}}
    refused = template(helm, tmp_path, foreign)
    assert refused.returncode != 0 and "namespace elsewhere is not one the release serves" in refused.stderr
