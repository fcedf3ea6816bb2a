"""`python -m controller release-finalizers`: what the chart's pre-delete hook runs on `helm uninstall`.

kopf puts the finalizer ``streamq.io/finalizer`` on every StreamingQuery, because the
reconciler is a kopf daemon and kopf wants to stop a daemon before its object goes.
Nothing else needs it: a query's children are owned by it and garbage-collected. With
the operator uninstalled nobody would remove it, and deleting a query (or its namespace)
would hang in Terminating forever. So, before helm deletes anything:

1. stop the operator (its Deployment scaled to 0, then wait until its pods are gone):
   a running kopf puts the finalizer back on the next event of the query;
2. remove our finalizer, and only ours, from every StreamingQuery in the namespaces the
   operator served. The queries and their drivers keep running, unmanaged; deleting them
   later just works.

A re-install adds the finalizer back on the operator's first pass.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Annotated, Any, cast

import typer
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from contract import GROUP, PLURAL, VERSION
from contract.cli_help import HelpCommand
from contract.commands import invoke
from controller.names import FINALIZER

REQUEST_TIMEOUT_S = 30
log = logging.getLogger("streamq.uninstall")


def finalizers_without_ours(metadata: dict[str, Any]) -> list[str] | None:
    """The finalizer list to write back, or None when ours is not there (nothing to do).
    Other controllers' finalizers stay: they are theirs to remove."""
    finalizers = list(metadata.get("finalizers") or [])
    if FINALIZER not in finalizers:
        return None
    return [f for f in finalizers if f != FINALIZER]


def release_patch(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """A merge patch that removes our finalizer, guarded by the resourceVersion it was read at:
    a finalizer another controller adds meanwhile makes it fail (409) instead of vanishing."""
    remaining = finalizers_without_ours(metadata)
    if remaining is None:
        return None
    return {"metadata": {"finalizers": remaining, "resourceVersion": metadata["resourceVersion"]}}


def label_selector(match_labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


@dataclass
class Released:
    released: list[str]
    untouched: int


class Uninstall:
    def __init__(self, api_client: client.ApiClient):
        self.apps = client.AppsV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def stop_operator(self, namespace: str, deployment: str, timeout_s: float) -> int:
        """Scale the operator to 0 and wait for its pods to be gone; returns how many there were."""
        try:
            current = self.apps.read_namespaced_deployment(deployment, namespace, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                log.info("deployment %s/%s is gone already", namespace, deployment)
                return 0
            raise
        selector = label_selector(current.spec.selector.match_labels or {})
        self.apps.patch_namespaced_deployment(deployment, namespace, {"spec": {"replicas": 0}},
                                              _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip
        seen = len(self.core.list_namespaced_pod(namespace, label_selector=selector).items)
        deadline = time.monotonic() + timeout_s
        while self.core.list_namespaced_pod(namespace, label_selector=selector).items:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the operator's pods ({selector}) still there after {timeout_s:.0f}s")
            time.sleep(1)
        log.info("operator %s/%s stopped (%d pods)", namespace, deployment, seen)
        return seen

    def _queries(self, namespace: str | None) -> list[dict[str, Any]]:
        if namespace is None:
            listed = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        else:
            listed = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        queries: list[dict[str, Any]] = _json_object(listed)["items"]
        return queries

    def release_queries(self, namespaces: list[str] | None) -> Released:
        released: list[str] = []
        untouched = 0
        every_namespace: list[str | None] = [None]
        for namespace in namespaces or every_namespace:
            for query in self._queries(namespace):
                meta = query["metadata"]
                for _attempt in range(5):  # a 409: read it again and decide again
                    patch = release_patch(meta)
                    if patch is None:
                        untouched += 1
                        break
                    try:
                        self.custom.patch_namespaced_custom_object(
                            GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], patch)  # fmt: skip
                        released.append(f"{meta['namespace']}/{meta['name']}")
                        break
                    except ApiException as exc:
                        if exc.status == 404:
                            break
                        if exc.status != 409:
                            raise
                        meta = _json_object(self.custom.get_namespaced_custom_object(
                            GROUP, VERSION, meta["namespace"], PLURAL, meta["name"]))["metadata"]  # fmt: skip
        return Released(released, untouched)


def _json_object(answer: object) -> dict[str, Any]:
    # The custom-objects client declares its answers `object`; they are the object's JSON, a dict.
    return cast(dict[str, Any], answer)


cli = typer.Typer(add_completion=False)


@cli.command(help=__doc__.split("\n")[0], cls=HelpCommand)
def release_finalizers(
    ctx: typer.Context,
    operator_namespace: Annotated[str, typer.Option(metavar="NAMESPACE", help="The operator's namespace.")],
    deployment: Annotated[str, typer.Option(metavar="NAME", help="the operator's Deployment, stopped first")],
    namespaces: Annotated[
        list[str] | None, typer.Option("-n", "--namespace", metavar="NAMESPACE", help="served namespaces; none: all")
    ] = None,
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help="seconds to wait for the operator's pods to go")] = 120.0,
) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    uninstall = Uninstall(client.ApiClient())
    uninstall.stop_operator(operator_namespace, deployment, timeout)
    result = uninstall.release_queries(namespaces or None)
    log.info("released %d StreamingQueries from %s (%d had none): %s", len(result.released), FINALIZER,
             result.untouched, ", ".join(result.released) or "-")  # fmt: skip
    ctx.obj.result = 0


def main(argv: list[str] | None = None) -> int:
    return int(invoke(cli, argv, "python -m controller release-finalizers"))
