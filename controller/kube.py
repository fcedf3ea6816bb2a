"""The Kubernetes calls the operator makes, as plain dicts in and out (thin I/O)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError, ResourceNotFoundError

from contract import GROUP, PLURAL, VERSION

SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
# The children the operator deletes by kind: drivers (DeleteDriver names the kind only), the UI Service and Ingress.
# A standby query's PodDisruptionBudget, when its standby is turned off.
CHILD_API_VERSIONS = {
    "Pod": "v1",
    "Service": "v1",
    "Ingress": "networking.k8s.io/v1",
    "SparkApplication": f"{SPARK_GROUP}/{SPARK_VERSION}",
    "PodDisruptionBudget": "policy/v1",
}
REQUEST_TIMEOUT_S = 30  # no API call waits forever on a server that went away
# What an ownership check reads: metadata only, so a Secret's data never reaches the operator.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def _json(response: Any) -> Any:
    # the raw urllib3 response of a call made with _preload_content=False: untyped JSON, typed by each caller
    return json.loads(response.data or b"null")


class Kube:
    def __init__(self, api_client: client.ApiClient):
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.rbac = client.RbacAuthorizationV1Api(api_client)
        self._dynamic: DynamicClient | None = None
        # Each query as this operator's last status write leaves it (generation, annotations, labels,
        # status), recorded before the write: the watch event of that write brings nothing new, and need
        # not wake the query's daemon (handlers.query_changed). Recorded before, since the event may
        # come before the write's answer.
        self.status_expected: dict[tuple[str, str], tuple[Any, ...]] = {}

    # -- StreamingQuery ------------------------------------------------------------

    def get_query(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            query: dict[str, Any] | None = _json(self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S))  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return query

    def patch_query_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        """A merge patch of .status; with resource_version, a conflicting write fails (409)."""
        body: dict[str, Any] = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        written: dict[str, Any] = _json(self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, body, _preload_content=False,
            _content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT_S))  # fmt: skip
        return written

    # -- drivers -------------------------------------------------------------------

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        listed = self.core.list_namespaced_pod(
            namespace, label_selector=selector, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
        )
        pods: list[dict[str, Any]] = _json(listed)["items"]
        return pods

    def list_spark_applications(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        try:
            apps: list[dict[str, Any]] = _json(self.custom.list_namespaced_custom_object(
                SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, label_selector=selector,
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S))["items"]  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:  # the SparkApplication API is not installed
                return []
            raise
        return apps

    def read_pod_log(self, namespace: str, name: str, container: str, tail_lines: int) -> str:
        # with _preload_content=False the client returns the raw urllib3 response, not the str it declares
        response: Any = self.core.read_namespaced_pod_log(
            name,
            namespace,
            container=container,
            tail_lines=tail_lines,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT_S,
        )
        text: str = response.data.decode(errors="replace")
        return text

    # -- children ------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> Any:  # the dynamic client's Resource: untyped
        """The API resource of a kind, found by discovery (cached for the process's life)."""
        if self._dynamic is None:
            self._dynamic = DynamicClient(self.api_client)
        try:
            return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise ApiException(status=404, reason=f"the API server serves no {api_version} {kind}") from None

    def _read_meta(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """An object's metadata alone (a Secret's data never reaches the operator); None when absent."""
        try:
            found = self._resource(api_version, kind).get(
                name=name, namespace=namespace, header_params={"Accept": METADATA_ONLY}, _request_timeout=REQUEST_TIMEOUT_S
            )
        except NotFoundError:
            return None
        return dict(found.to_dict().get("metadata") or {})

    def _ours(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The metadata of the object named like ``obj`` when the query ``obj`` is adopted by controls
        it; None when absent; NameConflict when anything else holds the name."""
        meta = obj["metadata"]
        found = self._read_meta(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
        if found is not None and not controlled_by(found, controller_uid(meta)):
            raise NameConflict(obj["kind"], meta["name"], found)
        return found

    def create(self, obj: dict[str, Any]) -> bool:
        """Create a child (adopted: its controller reference names the query); False when the query's
        own exists already (a retry of an earlier attempt). An object of that name that the query does
        not control is never adopted: NameConflict."""
        resource = self._resource(obj["apiVersion"], obj["kind"])
        try:
            resource.create(body=obj, namespace=obj["metadata"]["namespace"], _request_timeout=REQUEST_TIMEOUT_S)
        except ConflictError:
            if self._ours(obj) is None:  # deleted meanwhile: the next pass creates it
                raise ApiException(status=409, reason=f"{obj['kind']} {obj['metadata']['name']} was just deleted") from None
            return False
        return True

    def _update_ours(self, obj: dict[str, Any], write: Callable[[str, str, str], None]) -> bool:
        """Create ``obj``, or ``write(name, namespace, resourceVersion)`` over the query's own: the version
        read with the ownership check is a precondition, so what is written over is what was checked."""
        if self.create(obj):
            return True
        meta = obj["metadata"]
        found = self._ours(obj)
        if found is None:
            raise ApiException(status=409, reason=f"{obj['kind']} {meta['name']} was just deleted")
        write(meta["name"], meta["namespace"], found["resourceVersion"])
        return False

    def apply_config_map(self, obj: dict[str, Any]) -> None:
        """The query's ConfigMap holds the document of the next driver: create or overwrite its own."""

        def replace(name: str, namespace: str, version: str) -> None:
            body = {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}
            # the client serializes a dict body as it is; its annotation names only its V1ConfigMap model
            self.core.replace_namespaced_config_map(name, namespace, body, _preload_content=False,  # type: ignore[arg-type]
                                                    _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip

        self._update_ours(obj, replace)

    def apply_service(self, obj: dict[str, Any]) -> bool:
        """Create a Service, or point the query's own one's selector where ``obj``'s points; True when created."""

        def point(name: str, namespace: str, version: str) -> None:
            body = {"metadata": {"resourceVersion": version}, "spec": {"selector": obj["spec"]["selector"]}}
            self.core.patch_namespaced_service(name, namespace, body, _preload_content=False,
                                               _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip

        return self._update_ours(obj, point)

    def apply_role_binding(self, obj: dict[str, Any]) -> bool:
        """Create the RoleBinding, or set the query's own one's subjects to ``obj``'s (its roleRef
        cannot change, and is the same); True when created."""

        def bind(name: str, namespace: str, version: str) -> None:
            body = {"metadata": {"resourceVersion": version}, "subjects": obj["subjects"]}
            self.rbac.patch_namespaced_role_binding(name, namespace, body, _preload_content=False,
                                                    _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip

        return self._update_ours(obj, bind)

    def delete(self, kind: str, namespace: str, name: str, owner_uid: str, force: bool = False) -> bool:
        """Delete the object if the query ``owner_uid`` controls it (the uid read is a precondition, so a
        same-named object made meanwhile is not hit); with ``force``, no grace period (a pod whose
        kubelet is gone and will never confirm). False when absent or not the query's: left alone."""
        api_version = CHILD_API_VERSIONS[kind]
        found = self._read_meta(api_version, kind, namespace, name)
        if found is None or not controlled_by(found, owner_uid):
            return False
        body = {"preconditions": {"uid": found["uid"]}, **({"gracePeriodSeconds": 0} if force else {})}
        try:
            self._resource(api_version, kind).delete(name=name, namespace=namespace, body=body,
                                                     _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip
        except (NotFoundError, ConflictError):  # gone, or replaced by another object of that name
            return False
        return True

    def resize_pod_cpu(self, namespace: str, name: str, container: str, cpu: str, owner_uid: str) -> bool:
        """Set a container's CPU request through the pod's resize subresource (in place, Kubernetes
        1.33+), if the query ``owner_uid`` controls the pod; the resourceVersion read with that check is
        a precondition. False when absent or not the query's. An API server without resize raises."""
        found = self._read_meta("v1", "Pod", namespace, name)
        if found is None or not controlled_by(found, owner_uid):
            return False
        body = {
            "metadata": {"resourceVersion": found["resourceVersion"]},
            "spec": {"containers": [{"name": container, "resources": {"requests": {"cpu": cpu}}}]},
        }
        try:
            self.core.patch_namespaced_pod_resize(name, namespace, body, _preload_content=False,
                                                  _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip
        except ApiException as exc:
            if exc.status in (404, 409) and self._read_meta("v1", "Pod", namespace, name) is None:
                return False  # gone meanwhile
            raise
        return True

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str], owner_uid: str) -> bool:
        """Set annotations on a pod the query ``owner_uid`` controls, with the resourceVersion read with that
        check as a precondition. False when absent or not the query's."""
        found = self._read_meta("v1", "Pod", namespace, name)
        if found is None or not controlled_by(found, owner_uid):
            return False
        body = {"metadata": {"resourceVersion": found["resourceVersion"], "annotations": annotations}}
        try:
            self.core.patch_namespaced_pod(name, namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status in (404, 409) and self._read_meta("v1", "Pod", namespace, name) is None:
                return False  # gone meanwhile
            raise
        return True

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A standby query's Lease as plain JSON; None when it does not exist."""
        try:
            read = self.coordination.read_namespaced_lease(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
            )
            lease: dict[str, Any] | None = _json(read)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return lease

    def release_lease(self, namespace: str, name: str, holder: str, owner_uid: str) -> bool:
        """Free the query's own Lease if ``holder`` still holds it (a conditional write: it fails if the
        holder renewed meanwhile); True when freed. Only for a holder whose container has ended."""
        try:
            lease = self.coordination.read_namespaced_lease(name, namespace, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        if lease.metadata is None or lease.spec is None:  # (the API always sends both: a Lease without them holds nothing)
            return False
        owners = [ref.uid for ref in lease.metadata.owner_references or [] if ref.controller]
        if owners != [owner_uid] or lease.spec.holder_identity != holder:
            return False
        lease.spec.holder_identity = None
        try:
            self.coordination.replace_namespaced_lease(name, namespace, lease, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    # -- tenant credentials --------------------------------------------------------

    # The API server's table of a Secret (what kubectl get prints: Name, Type, Data, Age) with its
    # metadata: the type without the data, which never reaches the operator.
    SECRET_TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"

    def read_secret_meta(self, namespace: str, name: str) -> dict[str, Any] | None:
        """What a Secret a query names is (contract.credentials): {"type", "labels"}, read as a
        table row, never the data; None when it does not exist. type None: the row had no Type."""
        try:
            table = self._resource("v1", "Secret").get(
                name=name, namespace=namespace, header_params={"Accept": self.SECRET_TABLE},
                _request_timeout=REQUEST_TIMEOUT_S).to_dict()  # fmt: skip
        except NotFoundError:
            return None
        columns = [c.get("name") for c in table.get("columnDefinitions") or []]
        row: dict[str, Any] = next(iter(table.get("rows") or []), {})
        cells = row.get("cells") or []
        kind = cells[columns.index("Type")] if "Type" in columns and columns.index("Type") < len(cells) else None
        labels = ((row.get("object") or {}).get("metadata") or {}).get("labels") or {}
        return {"type": kind, "labels": dict(labels)}


def controller_uid(meta: dict[str, Any]) -> str | None:
    """The uid of the object's controller (ownerReferences with controller: true), if any."""
    refs = meta.get("ownerReferences") or meta.get("owner_references") or []
    return next((ref.get("uid") for ref in refs if ref.get("controller")), None)


def controlled_by(meta: dict[str, Any], owner_uid: str | None) -> bool:
    """Kubernetes' metav1.IsControlledBy: the object names ``owner_uid`` as its controller."""
    return owner_uid is not None and controller_uid(meta) == owner_uid


class NameConflict(Exception):
    """A name the query's child needs is taken by an object the query does not control: the
    operator neither adopts, changes nor deletes it (the query waits until the name is free)."""

    def __init__(self, kind: str, name: str, found: dict[str, Any]):
        refs = found.get("ownerReferences") or found.get("owner_references") or []
        holder = next((f"controlled by {r.get('kind')} {r.get('name')}" for r in refs if r.get("controller")),
                      "controlled by nothing")  # fmt: skip
        self.kind, self.name = kind, name
        super().__init__(
            f"{kind} {name} already exists and is not this query's ({holder}): the operator will not "
            "adopt, change or delete it; remove or rename that object, or rename the query"
        )


def api_message(exc: ApiException) -> str:
    """The API server's own message (what kubectl would print), else the HTTP reason."""
    try:
        body = json.loads(exc.body or "{}")
        return body.get("message") or f"{exc.status} {exc.reason}"
    except (ValueError, AttributeError):
        return f"{exc.status} {exc.reason}"
