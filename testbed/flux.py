"""Flux's own source-controller and kustomize-controller (built from source by hack/install-flux.sh),
run on this machine against a cluster's API server, as the admin (the controllers' in-cluster install
would give them ServiceAccounts of their own; what they sync and how is the same).

    with FluxControllers(kubeconfig, work_dir) as flux:
        flux.apply_objects([...GitRepository, Kustomization...])
        flux.kustomization("queries")        # its object, status included
        flux.applies("queries")              # what each server-side apply did, in its own words

Used by the gitops tier: tests/integration/test_gitops_flux.py (a bare API server) and
tests/e2e/gitops/test_flux.py (a whole cluster)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from testbed.host_controllers import HostControllers, ToolMissing, built_dir
from testbed.kube import free_port, wait_established
from testbed.wait import wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "flux-system"
CRDS = ("gitrepositories.source.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io")


class FluxMissing(ToolMissing):
    pass


def flux_dir() -> Path:
    return built_dir(REPO_ROOT / "hack" / "install-flux.sh", "Flux's controllers are", FluxMissing)


def ready_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    for condition in obj.get("status", {}).get("conditions", []):
        if condition["type"] == "Ready":
            return condition
    return None


def applied_at(obj: dict[str, Any]) -> str | None:
    """When the kustomize-controller last wrote ``obj`` (its managed-fields entry)."""
    for entry in obj["metadata"].get("managedFields", []):
        if entry.get("manager") == "kustomize-controller":
            return entry.get("time")
    return None


class FluxControllers(HostControllers):
    def __enter__(self) -> FluxControllers:
        built = flux_dir()
        (self.work / "artifacts").mkdir(parents=True, exist_ok=True)
        self.kubectl("apply", "--server-side", "-f", str(built / "crds"))
        self.kubectl("create", "namespace", NAMESPACE, check=False)
        wait_established(self.kubectl, *CRDS)  # a controller started before its CRD is served exits ("no matches for kind")
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "RUNTIME_NAMESPACE": NAMESPACE}
        storage = free_port()
        argv = {
            "source-controller": [f"--storage-path={self.work}/artifacts", f"--storage-addr=127.0.0.1:{storage}",
                                  f"--storage-adv-addr=127.0.0.1:{storage}"],
            # a dependent Kustomization retries its dependencies as often as the tests' intervals are short
            "kustomize-controller": ["--no-remote-bases=true", "--requeue-dependency=5s"],
        }  # fmt: skip
        for name, args in argv.items():
            ports = [f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{free_port()}"]
            self.start(name, [str(built / "bin" / name), *args, *ports], env)
        return self

    def kustomization(self, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", "kustomization", "-n", NAMESPACE, name, "-o", "json").stdout)

    def applies(self, kustomization: str) -> list[dict[str, str]]:
        """What the kustomize-controller reported of each server-side apply of ``kustomization``: object ->
        created, configured or unchanged (its own words, in its log)."""
        found = []
        for line in (self.work / "kustomize-controller.log").read_text().splitlines():
            entry = json.loads(line) if line.startswith("{") else {}
            if entry.get("msg") == "server-side apply completed" and entry.get("name") == kustomization:
                found.append(entry.get("output") or {})
        return found

    def state(self, kustomization: str) -> str:
        """For a failure's message: the Kustomization's status, exited controllers and their logs' tails."""
        status = self.kubectl("get", "kustomization", "-n", NAMESPACE, kustomization, "-o", "jsonpath={.status}", check=False)
        return f"{status.stdout or status.stderr}\n{self.processes('source-controller', 'kustomize-controller')}"

    def wait_applied(self, kustomization: str, revision: str, timeout: float) -> dict[str, Any]:
        """Until the Kustomization is Ready with ``revision`` (a commit) applied, as Flux reports it."""

        def applied() -> dict[str, Any] | None:
            k = self.kustomization(kustomization)
            ready = ready_condition(k)
            done = ready and ready["status"] == "True" and k["status"].get("lastAppliedRevision", "").endswith(revision)
            return k if done else None

        return wait_for(applied, timeout, lambda: f"Flux applies {revision} ({kustomization}): {self.state(kustomization)}")
