"""Upgrading the operator from an earlier chart with a CRD change (issue #30), the way
docs/operations.md ("Upgrading the operator") says: the chart's CRDs applied server-side,
then `helm upgrade --reset-then-reuse-values`. The commands are parsed from that page.

The earlier chart is the one of commit OLD_CHART (git history, extracted at test time):
its CRD lacks `restartPolicy.nodeLostAfter`. A query started under it must keep its driver
pod (the same one, Running) and lose no flagged payment across the upgrade, and the new
field must be served afterwards. The session's operator is the current chart again at the end.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from testbed.cluster.addons import OPERATOR_NAMESPACE, RELEASE, install_operator
from testbed.cluster.base import REPO_ROOT
from testbed.cluster.workload import figure, flagged, fraud_spec, payments, resource, wait_output
from testbed.kube import kube_bin_dir

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

# The chart just before restartPolicy.nodeLostAfter was added to the CRD (28c4598).
OLD_CHART = "28c4598^"
CRD = "charts/streamq/crds/streamingqueries.streamq.io.yaml"
N = 200


def old_chart(tmp_path: Path) -> Path:
    """charts/streamq as commit OLD_CHART had it."""
    archive = subprocess.run(["git", "archive", "--format=tar", OLD_CHART, "charts/streamq"], cwd=REPO_ROOT,
                             capture_output=True, check=True, timeout=60).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "charts" / "streamq"


def documented_commands() -> list[str]:
    page = (REPO_ROOT / "docs" / "operations.md").read_text()
    block = page.split("<!-- upgrade-commands -->", 1)[1].split("<!-- /upgrade-commands -->", 1)[0]
    return [line.strip() for line in re.search(r"```bash\n(.*?)```", block, re.S)[1].splitlines() if line.strip()]


def dry_run_with_node_lost_after(cluster, sq, source: str, sink: str) -> subprocess.CompletedProcess:
    """A query that sets the field only the new CRD has, offered to the API server (not stored)."""
    spec = fraud_spec(source, sink, None, **{"restartPolicy.nodeLostAfter": "45s"})
    doc = resource(spec, sq.name("probe"), sq.namespace)
    return cluster.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=yaml.safe_dump(doc), check=False)


def operator_pod_uids(cluster) -> set[str]:
    pods = cluster.kubectl_json("-n", OPERATOR_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/component=operator")["items"]
    return {p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def test_helm_upgrade_from_an_earlier_chart_with_a_crd_change_keeps_the_query_running(cluster, kafka, sq, tmp_path):
    test = "helm upgrade from an earlier chart"
    old = old_chart(tmp_path)
    old_crd, new_crd = (old / "crds" / Path(CRD).name).read_text(), (REPO_ROOT / CRD).read_text()
    assert "nodeLostAfter" not in old_crd and "nodeLostAfter" in new_crd, "the upgrade must carry a CRD change"
    commands = documented_commands()
    assert [c.split()[:2] for c in commands] == [["kubectl", "apply"], ["helm", "upgrade"]], commands
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PATH": f"{kube_bin_dir()}:{os.environ['PATH']}"}

    # The cluster as the earlier chart left it: its CRD, its operator (the session's values).
    cluster.helm("uninstall", RELEASE, "--namespace", OPERATOR_NAMESPACE, "--wait", "--timeout", "3m")
    try:
        cluster.kubectl("replace", "-f", str(old / "crds" / Path(CRD).name))
        install_operator(cluster, chart=old)
        name = sq.name("upgrade")
        source = kafka.create_topic(f"{name}-payments", partitions=2)
        sink = kafka.create_topic(f"{name}-flagged", partitions=1)
        refused = dry_run_with_node_lost_after(cluster, sq, source, sink)
        assert refused.returncode != 0 and "nodeLostAfter" in refused.stderr, refused.stderr  # the old CRD is served
        first, second = payments(N // 2), payments(N - N // 2, start=N // 2)
        kafka.produce(source, first)
        sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name)))
        before = sq.wait_running(name, timeout=420)
        pod = sq.driver_pod(name)
        wait_output(kafka, sink, flagged(first), 300, lambda: sq.describe(name))
        operator_pods = operator_pod_uids(cluster)

        # The upgrade, as docs/operations.md says (this session's release lives in its own namespace).
        t0 = time.monotonic()
        for command in commands:
            argv = shlex.split(command)
            if argv[0] == "helm":
                argv[argv.index("--namespace") + 1] = OPERATOR_NAMESPACE
                argv = [str(REPO_ROOT / a) if a.startswith("charts/") else a for a in argv]  # helm runs from anywhere
                # A new release brings a new operator pod (a new image tag does); here the image is the
                # same, so a pod annotation stands in for it: the new operator must take over the driver.
                cluster.helm(*argv[1:], "--set-string", "operator.podAnnotations.streamq-e2e/upgraded=1",
                             "--wait", "--timeout", "5m")  # fmt: skip
            else:
                done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
                assert done.returncode == 0, f"{command}: {done.stderr}"
        upgraded_in = time.monotonic() - t0
        assert not operator_pods & operator_pod_uids(cluster), "the upgrade rolled out a new operator pod"
        deployment = cluster.kubectl_json(
            "-n", OPERATOR_NAMESPACE, "get", "deployment", "-l", "app.kubernetes.io/component=operator"
        )
        chart_label = deployment["items"][0]["metadata"]["labels"].get("helm.sh/chart")
        revision = cluster.helm("history", RELEASE, "--namespace", OPERATOR_NAMESPACE, "-o", "json").stdout

        # The new CRD is served ...
        accepted = dry_run_with_node_lost_after(cluster, sq, source, sink)
        assert accepted.returncode == 0, accepted.stderr
        # ... the query never stopped: the same driver pod, Running, the operator writing its status again ...
        kafka.produce(source, second)
        out = wait_output(kafka, sink, flagged(first + second), 300, lambda: sq.describe(name))
        after = sq.wait_running(name, timeout=120)
        same = sq.driver_pod(name)
        assert same["metadata"]["uid"] == pod["metadata"]["uid"] and same["status"]["phase"] == "Running", (
            pod["metadata"]["name"],
            same["metadata"]["name"],
        )
        assert after.get("attempt") == before.get("attempt"), (before, after)
        status = sq.get(name)
        assert status["status"]["observedGeneration"] == status["metadata"]["generation"]
        # ... and nothing was lost
        assert out.complete and not out.unexpected, out.summary()
        figure(test, f"{OLD_CHART} -> this chart ({chart_label}; {revision.count('revision')} revisions) in {upgraded_in:.0f}s; "
                     f"driver {same['metadata']['name']} kept, attempt {after.get('attempt')}; {out.summary()}")  # fmt: skip
    finally:
        # the session's operator and CRD as the current chart has them, whatever happened above
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO_ROOT / CRD), check=False)
        install_operator(cluster)
