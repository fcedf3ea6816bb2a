"""docs/operations.md's command that releases every StreamingQuery by hand (the finalizer
the operator left, when no uninstall hook ran), run as the page prints it against a real
kube-apiserver: it must reach queries in every namespace (`-o name` alone drops the
namespace, and the patch then looks in the current one)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from testbed.kube import kube_bin_dir

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FINALIZER = "streamq.io/finalizer"


def documented_command() -> str:
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page.split("## Uninstalling the operator before its queries", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S)[1]


def test_the_documented_command_releases_queries_in_every_namespace(kube_apiserver, streamq_installed, tmp_path):
    namespaces = ["release-a", "release-b"]
    for ns in namespaces:
        kube_apiserver.kubectl("create", "namespace", ns)
        doc = yaml.safe_load((ROOT / "manifests" / "samples" / "rate-to-console.yaml").read_text())
        doc["metadata"] = {"name": "held", "namespace": ns, "finalizers": [FINALIZER]}
        kube_apiserver.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    env = {**os.environ, "KUBECONFIG": str(kube_apiserver.kubeconfig), "PATH": f"{kube_bin_dir()}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", documented_command()], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for ns in namespaces:
        held = kube_apiserver.kubectl("-n", ns, "get", "sq", "held", "-o", "jsonpath={.metadata.finalizers}").stdout
        assert FINALIZER not in held, (ns, held)
        kube_apiserver.kubectl("-n", ns, "delete", "sq", "held", "--timeout=30s")  # and nothing hangs now
