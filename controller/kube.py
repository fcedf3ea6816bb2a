"""The Kubernetes calls the operator makes, as plain dicts in and out (thin I/O)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.contract import GROUP, PLURAL, VERSION

SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"


def _json(response) -> Any:
    return json.loads(response.data or b"null")


class Kube:
    def __init__(self, api_client: client.ApiClient):
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    # -- StreamingQuery ------------------------------------------------------------

    def get_query(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _json(self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _preload_content=False))  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def patch_query_status(self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None) -> dict:
        """A merge patch of .status; with resource_version, a conflicting write fails (409)."""
        body: dict[str, Any] = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        return _json(self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, body, _preload_content=False,
            _content_type="application/merge-patch+json"))  # fmt: skip

    # -- drivers -------------------------------------------------------------------

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return _json(self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False))["items"]

    def list_spark_applications(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        try:
            return _json(self.custom.list_namespaced_custom_object(
                SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, label_selector=selector,
                _preload_content=False))["items"]  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:  # the SparkApplication API is not installed
                return []
            raise

    def read_pod_log(self, namespace: str, name: str, container: str, tail_lines: int) -> str:
        response = self.core.read_namespaced_pod_log(
            name, namespace, container=container, tail_lines=tail_lines, _preload_content=False
        )
        return response.data.decode(errors="replace")

    # -- children ------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> bool:
        """Create a child; False when it already exists (a retry of an earlier attempt)."""
        kind, ns = obj["kind"], obj["metadata"]["namespace"]
        try:
            if kind == "Pod":
                self.core.create_namespaced_pod(ns, obj, _preload_content=False)
            elif kind == "Service":
                self.core.create_namespaced_service(ns, obj, _preload_content=False)
            elif kind == "ConfigMap":
                self.core.create_namespaced_config_map(ns, obj, _preload_content=False)
            elif kind == "SparkApplication":
                self.custom.create_namespaced_custom_object(
                    SPARK_GROUP, SPARK_VERSION, ns, SPARK_PLURAL, obj, _preload_content=False)  # fmt: skip
            else:
                raise ValueError(f"cannot create a {kind}")
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def apply_config_map(self, obj: dict[str, Any]) -> None:
        """The query's ConfigMap holds the document of the next driver: create or overwrite."""
        if not self.create(obj):
            meta = obj["metadata"]
            self.core.replace_namespaced_config_map(meta["name"], meta["namespace"], obj, _preload_content=False)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete with the object's own grace period; gone already is fine."""
        try:
            if kind == "Pod":
                self.core.delete_namespaced_pod(name, namespace, _preload_content=False)
            elif kind == "SparkApplication":
                self.custom.delete_namespaced_custom_object(
                    SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name, _preload_content=False)  # fmt: skip
            else:
                raise ValueError(f"cannot delete a {kind}")
        except ApiException as exc:
            if exc.status != 404:
                raise


def api_message(exc: ApiException) -> str:
    """The API server's own message (what kubectl would print), else the HTTP reason."""
    try:
        body = json.loads(exc.body or "{}")
        return body.get("message") or f"{exc.status} {exc.reason}"
    except (ValueError, AttributeError):
        return f"{exc.status} {exc.reason}"
