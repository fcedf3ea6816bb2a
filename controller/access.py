"""What the operator asks of the API server: every RBAC verb it holds, with the call that needs it.

The operator's ClusterRole in manifests/base (and the chart's, which a test keeps
equal to it) grants exactly the keys of ``OPERATOR_ACCESS``; each value names the
code that makes the call, and a test checks that code is still there. A verb the
code stops using must leave both; a new call needs a row here first.
"""

from __future__ import annotations

from contract import GROUP, PLURAL
from controller.kube import SPARK_GROUP, SPARK_PLURAL

Call = tuple[str, str]  # (module of controller/, the text of the call there)

# Calls that serve many resources: kube.py's create and delete take any kind.
CREATE: Call = ("kube.py", "resource.create(body=obj")
DELETE: Call = ("kube.py", ".delete(name=name, namespace=namespace")
# Before writing over or deleting an object of a child's name: whose is it? (metadata only)
GET_META: Call = ("kube.py", 'header_params={"Accept": METADATA_ONLY}')
QUERY_EVENTS: Call = ("handlers.py", "@kopf.on.event(GROUP, VERSION, PLURAL)")
QUERY_DAEMONS: Call = ("handlers.py", "@kopf.daemon(GROUP, VERSION, PLURAL")


def _resource(group: str, resource: str, **verbs: Call) -> dict[tuple[str, str, str], Call]:
    return {(group, resource, verb): call for verb, call in verbs.items()}


# (apiGroup, resource, verb) -> the call that needs it
OPERATOR_ACCESS: dict[tuple[str, str, str], Call] = {
    # kopf finds the resources it serves and follows namespaces (kopf's documented minimum)
    **_resource("apiextensions.k8s.io", "customresourcedefinitions", list=QUERY_EVENTS, watch=QUERY_EVENTS),
    **_resource("", "namespaces", list=QUERY_EVENTS, watch=QUERY_EVENTS),
    # the StreamingQueries: read, watched, the finalizer and kopf's progress annotations, status
    **_resource(
        GROUP,
        PLURAL,
        get=("kube.py", "self.custom.get_namespaced_custom_object("),
        list=QUERY_DAEMONS,
        watch=QUERY_DAEMONS,
        patch=("handlers.py", "settings.persistence.finalizer = names.FINALIZER"),
    ),
    **_resource(GROUP, f"{PLURAL}/status", patch=("kube.py", "self.custom.patch_namespaced_custom_object_status(")),
    # driver pods: listed and watched (observe), created and deleted (reconcile), their log read (progress),
    # a running micro-batch driver's executors annotation written (autoscaling in place)
    **_resource(
        "",
        "pods",
        get=GET_META,
        list=("kube.py", "self.core.list_namespaced_pod("),
        watch=("handlers.py", '@kopf.on.event("pods", labels=DRIVER_LABELS)'),
        create=CREATE,
        delete=DELETE,
        patch=("kube.py", "self.core.patch_namespaced_pod("),
    ),
    **_resource("", "pods/log", get=("kube.py", "self.core.read_namespaced_pod_log(")),
    # a driver that waited on the Lease grows to its CPU request once it runs the query (in place)
    **_resource("", "pods/resize", patch=("kube.py", "self.core.patch_namespaced_pod_resize(")),
    # the query's ConfigMap (created, then overwritten for the next driver) and the driver's Service;
    # the Spark UI Service (spec.runtime.sparkUI): its selector moved to the current attempt, deleted when turned off
    **_resource("", "configmaps", get=GET_META, create=CREATE, update=("kube.py", "self.core.replace_namespaced_config_map(")),
    **_resource(
        "", "services", get=GET_META, create=CREATE, patch=("kube.py", "self.core.patch_namespaced_service("), delete=DELETE
    ),
    # the Spark UI Ingress, when the chart's sparkUI.ingress.host is set: created once, deleted with the UI
    **_resource("networking.k8s.io", "ingresses", get=GET_META, create=CREATE, delete=DELETE),
    # the query's Spark auth Secret (render.auth_secret): created once; only its metadata is ever read
    # get: whose is an object of the auth Secret's name (GET_META), and what a Secret a query names for
    # credentials is: its type and labels as the API server's table view (contract.credentials)
    **_resource("", "secrets", get=("kube.py", 'header_params={"Accept": self.SECRET_TABLE}'), create=CREATE),
    # the driver Lease of a standby query: created free before its first driver (render.lease_access.lease),
    # released for the standby when its holder's container has ended, read when a driver's node is lost
    # (observe.needs_lease: may it be force-deleted?). get and update also let the operator grant them
    # on that one Lease (RBAC's escalation check: it grants only what it holds)
    **_resource(
        "coordination.k8s.io",
        "leases",
        create=CREATE,
        get=("kube.py", "self.coordination.read_namespaced_lease("),
        update=("kube.py", "self.coordination.replace_namespaced_lease("),
    ),
    # a standby query's own Lease account, and the Role and RoleBinding that give its driver's account
    # get and update on the query's Lease only (render.lease_access): created once; the binding's subject
    # follows the spec (the driver account when executors run)
    **_resource("", "serviceaccounts", get=GET_META, create=CREATE),
    **_resource("rbac.authorization.k8s.io", "roles", get=GET_META, create=CREATE),
    **_resource(
        "rbac.authorization.k8s.io",
        "rolebindings",
        get=GET_META,
        create=CREATE,
        patch=("kube.py", "self.rbac.patch_namespaced_role_binding("),
    ),
    # a standby query's PodDisruptionBudget (render.disruption_budget): created once with its Lease,
    # deleted when a driver of the query without standby is created (render.absent_children)
    **_resource("policy", "poddisruptionbudgets", get=GET_META, create=CREATE, delete=DELETE),
    # the sparkApplication backend
    **_resource(
        SPARK_GROUP,
        SPARK_PLURAL,
        get=GET_META,
        list=("kube.py", "self.custom.list_namespaced_custom_object("),
        watch=("handlers.py", "@kopf.on.event(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL"),
        create=CREATE,
        delete=DELETE,
    ),
    # events of every transition (kopf.event posts core/v1 Events)
    **_resource("", "events", create=("handlers.py", "kopf.event(body, type=event.type")),
}

# A driver that starts executors (client mode) runs Spark's Kubernetes scheduler in its
# pod with the driver account: (apiGroup, resource, verb) -> the Spark code that needs it
# (Spark 4.3's spark-kubernetes and fabric8 7.x: a delete of a label-selected list is one
# DELETE of the collection, i.e. deletecollection; no list first). Nothing else: Spark
# also tries to delete the driver's Services and executors' claims by label and to list
# claims to reuse, and logs and goes on when refused (the operator owns the Service,
# executors mount an existing claim). No Leases either: a standby query's driver reaches
# its own Lease through the query's RoleBinding (render.lease_access), whatever its account.
DRIVER_ACCESS: dict[tuple[str, str, str], str] = {
    ("", "pods", "get"): "ExecutorPodsAllocator: the driver looks up its own pod (spark.kubernetes.driver.pod.name); "
    "ExecutorPodsLifecycleManager: an executor pod before it is patched",
    ("", "pods", "list"): "ExecutorPodsPollingSnapshotSource: resyncs the executor pods; doKillExecutors: running ones",
    ("", "pods", "watch"): "ExecutorPodsWatchSnapshotSource: follows the executor pods",
    ("", "pods", "create"): "ExecutorPodsAllocator: starts executor pods",
    ("", "pods", "patch"): "KubernetesDriverEndpoint.generateExecID (the executor id label), ExecutorPodsLifecycleManager",
    ("", "pods", "delete"): "ExecutorPodsLifecycleManager: removes one ended executor pod by name",
    ("", "pods", "deletecollection"): "ExecutorPodsAllocator.stop / doKillExecutors / excess pods: executors by label",
    ("", "configmaps", "create"): "KubernetesClusterSchedulerBackend.setUpExecutorConfigMap: the executors' Spark conf",
    ("", "configmaps", "deletecollection"): "KubernetesClusterSchedulerBackend.stop: that ConfigMap, by label",
}

# What a standby query's driver may do with its own Lease (render.lease_access.lease_role, on the
# query's Lease by name): (apiGroup, resource, verb) -> the code that needs it.
LEASE_ACCESS: dict[tuple[str, str, str], str] = {
    ("coordination.k8s.io", "leases", "get"): "app/driver/lease_holder.py DriverLease.read: who holds the query",
    ("coordination.k8s.io", "leases", "update"): "app/driver/lease_holder.py DriverLease._write: take over, renew, release",
}
