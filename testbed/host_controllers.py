"""A tool's controllers run as processes of this machine against one cluster's API server (the gitops
tier's Flux and Argo CD, testbed/flux.py and testbed/argocd.py): kubectl with that kubeconfig, each
process's output in <work>/<name>.log, all stopped (last started first) when the block ends."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from testbed.kube import kube_bin


class ToolMissing(RuntimeError):
    """The tool is not built (or a part it needs is not installed): the message says which script does it."""


def built_dir(script: Path, what: str, missing: type[ToolMissing]) -> Path:
    """Where ``script --print-dir`` builds a tool; ``missing`` if that build has not completed."""
    done = subprocess.run([str(script), "--print-dir"], check=True, capture_output=True, text=True)
    found = Path(done.stdout.strip())
    if not (found / ".complete").exists():
        raise missing(f"{what} not built in {found}: run hack/{script.name} (hack/test.sh -m gitops does)")
    return found


class HostControllers:
    def __init__(self, kubeconfig: Path, work: Path) -> None:
        self.kubeconfig = kubeconfig
        self.work = work
        self.procs: list[tuple[subprocess.Popen, Any]] = []

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([str(kube_bin("kubectl")), f"--kubeconfig={self.kubeconfig}", *args], input=input,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        log = open(self.work / f"{name}.log", "wb")
        self.procs.append((subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True), log))  # fmt: skip

    def processes(self, *logs: str) -> str:
        """For a failure's message: the processes that exited, and the tails of these logs."""
        exited = [f"{p.args[0]} exited {p.returncode}" for p, _ in self.procs if p.poll() is not None]
        tails = "\n".join((self.work / f"{n}.log").read_text(errors="replace")[-1500:] for n in logs)
        return f"{exited}\n{tails}"

    def __enter__(self) -> HostControllers:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc, log in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
