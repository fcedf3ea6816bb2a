"""The Kubernetes calls the operator makes, as plain dicts in and out (thin I/O)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError, ResourceNotFoundError

from app.contract import GROUP, PLURAL, VERSION

SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
# The children the operator deletes by kind: drivers (DeleteDriver names the kind only), the UI Service and Ingress.
# A standby query's PodDisruptionBudget, when its standby is turned off.
CHILD_API_VERSIONS = {"Pod": "v1", "Service": "v1", "Ingress": "networking.k8s.io/v1",
                      "SparkApplication": f"{SPARK_GROUP}/{SPARK_VERSION}", "PodDisruptionBudget": "policy/v1"}
REQUEST_TIMEOUT_S = 30  # no API call waits forever on a server that went away


def _json(response) -> Any:
    return json.loads(response.data or b"null")


class Kube:
    def __init__(self, api_client: client.ApiClient):
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.rbac = client.RbacAuthorizationV1Api(api_client)
        self._dynamic: DynamicClient | None = None

    # -- StreamingQuery ------------------------------------------------------------

    def get_query(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _json(self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S))  # fmt: skip
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
            _content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT_S))  # fmt: skip

    # -- drivers -------------------------------------------------------------------

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return _json(self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False,
                                                   _request_timeout=REQUEST_TIMEOUT_S))["items"]  # fmt: skip

    def list_spark_applications(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        try:
            return _json(self.custom.list_namespaced_custom_object(
                SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, label_selector=selector,
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S))["items"]  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:  # the SparkApplication API is not installed
                return []
            raise

    def read_pod_log(self, namespace: str, name: str, container: str, tail_lines: int) -> str:
        response = self.core.read_namespaced_pod_log(
            name, namespace, container=container, tail_lines=tail_lines, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT_S,
        )
        return response.data.decode(errors="replace")

    # -- children ------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str):
        """The API resource of a kind, found by discovery (cached for the process's life)."""
        if self._dynamic is None:
            self._dynamic = DynamicClient(self.api_client)
        try:
            return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise ApiException(status=404, reason=f"the API server serves no {api_version} {kind}") from None

    def create(self, obj: dict[str, Any]) -> bool:
        """Create a child; False when it already exists (a retry of an earlier attempt)."""
        resource = self._resource(obj["apiVersion"], obj["kind"])
        try:
            resource.create(body=obj, namespace=obj["metadata"]["namespace"], _request_timeout=REQUEST_TIMEOUT_S)
        except ConflictError:
            return False
        return True

    def apply_config_map(self, obj: dict[str, Any]) -> None:
        """The query's ConfigMap holds the document of the next driver: create or overwrite."""
        if not self.create(obj):
            meta = obj["metadata"]
            self.core.replace_namespaced_config_map(meta["name"], meta["namespace"], obj, _preload_content=False,
                                                    _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip

    def apply_service(self, obj: dict[str, Any]) -> bool:
        """Create a Service, or point the existing one's selector where ``obj``'s points; True when created."""
        if self.create(obj):
            return True
        meta = obj["metadata"]
        self.core.patch_namespaced_service(meta["name"], meta["namespace"], {"spec": {"selector": obj["spec"]["selector"]}},
                                           _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip
        return False

    def apply_role_binding(self, obj: dict[str, Any]) -> bool:
        """Create the RoleBinding, or set the existing one's subjects to ``obj``'s (its roleRef
        cannot change, and is the same); True when created."""
        if self.create(obj):
            return True
        meta = obj["metadata"]
        self.rbac.patch_namespaced_role_binding(meta["name"], meta["namespace"], {"subjects": obj["subjects"]},
                                                _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip
        return False

    def delete(self, kind: str, namespace: str, name: str, force: bool = False) -> None:
        """Delete with the object's own grace period (``force``: none, for a pod whose kubelet is
        gone and will never confirm); gone already is fine."""
        extra = {"grace_period_seconds": 0} if force else {}
        try:
            self._resource(CHILD_API_VERSIONS[kind], kind).delete(name=name, namespace=namespace,
                                                                  _request_timeout=REQUEST_TIMEOUT_S, **extra)  # fmt: skip
        except NotFoundError:
            pass


    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A standby query's Lease as plain JSON; None when it does not exist."""
        try:
            return _json(self.coordination.read_namespaced_lease(name, namespace, _preload_content=False,
                                                                 _request_timeout=REQUEST_TIMEOUT_S))  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def release_lease(self, namespace: str, name: str, holder: str) -> bool:
        """Free the Lease if ``holder`` still holds it (a conditional write: it fails if the holder
        renewed meanwhile); True when freed. Only for a holder whose container has ended."""
        try:
            lease = self.coordination.read_namespaced_lease(name, namespace, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        if lease.spec.holder_identity != holder:
            return False
        lease.spec.holder_identity = None
        try:
            self.coordination.replace_namespaced_lease(name, namespace, lease, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True


def api_message(exc: ApiException) -> str:
    """The API server's own message (what kubectl would print), else the HTTP reason."""
    try:
        body = json.loads(exc.body or "{}")
        return body.get("message") or f"{exc.status} {exc.reason}"
    except (ValueError, AttributeError):
        return f"{exc.status} {exc.reason}"
