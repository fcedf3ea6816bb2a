"""README's "On your cluster: the fraud filter in four commands", run as written (issue #30): the commands between the
README's `cluster-quickstart` markers, parsed from README.md, so that the test keeps the
README true. It ends with flagged payments read from the sink topic (`hack/quickstart.sh
watch`) and `kubectl get sq` showing the sample Running.

The session's operator (release streamq in streamq-system) is uninstalled first, since the
quick start installs its own release streamq in namespace streamq (one per cluster: the
chart's cluster-scoped objects are named for the release), and installed again afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testbed.cluster.addons import OPERATOR_NAMESPACE, RELEASE, install_operator
from testbed.cluster.base import REPO_ROOT, streamq_image_archive
from testbed.cluster.workload import figure
from testbed.kube import kube_bin_dir

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

NAMESPACE = "streamq"  # the README's
FLAGGED_WANTED = 3


def readme_commands() -> list[str]:
    from tests.unit.test_first_day import readme_cluster_quickstart

    return readme_cluster_quickstart()


def venv_env(tmp: Path) -> dict[str, str]:
    """`make` runs hack/bootstrap.sh, which installs into ./.venv unless one is there. A
    worktree without its own .venv gets a stand-in for this interpreter's, marked as
    installed for this pyproject.toml, so that the run installs nothing (and never into a
    venv another checkout uses)."""
    own = REPO_ROOT / ".venv"
    if own.is_dir() and Path(sys.prefix).resolve() == own.resolve():
        return {}
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    import hashlib

    (venv / ".streamq-installed").write_text(hashlib.sha256((REPO_ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16] + "\n")
    # Only bootstrap's venv: hack/install-jars.sh finds pyspark as it would in this checkout, so that
    # the shared jar cache's fingerprint (which records it) does not change under other runs.
    return {"STREAMQ_VENV": str(venv)}


def sh(command: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "-c", command], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"$ {command}  ({time.monotonic() - t0:.0f} s, exit {proc.returncode})\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    assert proc.returncode == 0, f"{command} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def watch_flagged(command: str, env: dict[str, str], want: int, timeout: float) -> list[str]:
    """Run the README's watch command until it has shown ``want`` flagged payments, then stop it (^C)."""
    proc = subprocess.Popen(["bash", "-c", command], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    lines: list[str] = []
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if sum(1 for x in lines if x.startswith("flagged ")) >= want:
                break
    finally:
        timer.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, 2)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
    return lines


def test_the_readmes_cluster_quick_start_ends_with_flagged_payments(cluster, tmp_path):
    test = "README cluster quick start"
    commands = readme_commands()
    assert commands[0] == "make image", commands
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PATH": f"{kube_bin_dir()}:{os.environ['PATH']}",
           # the hostpath mode's directory (no provisioner here): under the node's directory for tests
           "STREAMQ_QUICKSTART_HOSTPATH": f"{cluster.node_dir_root}/quickstart-checkpoints",
           **venv_env(tmp_path)}  # fmt: skip
    cluster.helm("uninstall", RELEASE, "--namespace", OPERATOR_NAMESPACE, "--wait", "--timeout", "3m")
    t0 = time.monotonic()
    try:
        # 1. the image; on a node of our own the README says: import the archive into containerd
        sh(commands[0], env, timeout=1800)
        cluster.load_image(streamq_image_archive())
        t1 = time.monotonic()
        flagged: list[str] = []
        for command in commands[1:]:
            if command.startswith("hack/quickstart.sh watch"):
                lines = watch_flagged(command, env, FLAGGED_WANTED, timeout=240)
                flagged = [x for x in lines if x.startswith("flagged ")]
                assert len(flagged) >= FLAGGED_WANTED, "\n".join(lines[-40:])
            else:
                out = sh(command, env, timeout=1200).stdout
                if re.fullmatch(r"kubectl -n \S+ get sq", command):
                    row = next(line.split() for line in out.splitlines() if line.startswith("payments-flagged "))
                    assert row[1] == "Running", out
        figure(test, f"make image {t1 - t0:.0f}s; quick start to {len(flagged)} flagged payments {time.monotonic() - t1:.0f}s")
        # every flagged payment is above the sample's threshold (amount > 1000)
        amounts = [float(re.search(r"amount +([\d,.]+)", x)[1].replace(",", "")) for x in flagged]
        assert all(a > 1000 for a in amounts), flagged
        # and the query is still Running after the watch, read the README's way
        sq = cluster.kubectl_json("-n", NAMESPACE, "get", "sq", "payments-flagged")
        assert sq["status"]["phase"] == "Running", sq["status"]
    finally:
        subprocess.run(["hack/quickstart.sh", "down"], cwd=REPO_ROOT, env=env, capture_output=True, timeout=600)
        install_operator(cluster)
