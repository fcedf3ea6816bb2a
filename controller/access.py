"""What the operator asks of the API server: every RBAC verb it holds, with the call that needs it.

The operator's ClusterRole in manifests/base (and the chart's, which a test keeps
equal to it) grants exactly the keys of ``OPERATOR_ACCESS``; each value names the
code that makes the call, and a test checks that code is still there. A verb the
code stops using must leave both; a new call needs a row here first.
"""

from __future__ import annotations

from app.contract import GROUP, PLURAL
from controller.kube import SPARK_GROUP, SPARK_PLURAL

# (apiGroup, resource, verb) -> (module of controller/, the text of the call there)
OPERATOR_ACCESS: dict[tuple[str, str, str], tuple[str, str]] = {
    # kopf finds the resources it serves and follows namespaces (kopf's documented minimum)
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"): ("handlers.py", "@kopf.on.event(GROUP, VERSION, PLURAL)"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): ("handlers.py", "@kopf.on.event(GROUP, VERSION, PLURAL)"),
    ("", "namespaces", "list"): ("handlers.py", "@kopf.on.event(GROUP, VERSION, PLURAL)"),
    ("", "namespaces", "watch"): ("handlers.py", "@kopf.on.event(GROUP, VERSION, PLURAL)"),
    # the StreamingQueries: read, watched, the finalizer and kopf's progress annotations, status
    (GROUP, PLURAL, "get"): ("kube.py", "self.custom.get_namespaced_custom_object("),
    (GROUP, PLURAL, "list"): ("handlers.py", "@kopf.daemon(GROUP, VERSION, PLURAL"),
    (GROUP, PLURAL, "watch"): ("handlers.py", "@kopf.daemon(GROUP, VERSION, PLURAL"),
    (GROUP, PLURAL, "patch"): ("handlers.py", "settings.persistence.finalizer = names.FINALIZER"),
    (GROUP, f"{PLURAL}/status", "patch"): ("kube.py", "self.custom.patch_namespaced_custom_object_status("),
    # driver pods: listed and watched (observe), created and deleted (reconcile), their log read (progress)
    ("", "pods", "list"): ("kube.py", "self.core.list_namespaced_pod("),
    ("", "pods", "watch"): ("handlers.py", '@kopf.on.event("pods", labels=DRIVER_LABELS)'),
    ("", "pods", "create"): ("kube.py", "resource.create(body=obj"),
    ("", "pods", "delete"): ("kube.py", ".delete(name=name, namespace=namespace"),
    ("", "pods/log", "get"): ("kube.py", "self.core.read_namespaced_pod_log("),
    # the query's ConfigMap (created, then overwritten for the next driver) and the driver's Service
    ("", "configmaps", "create"): ("kube.py", "resource.create(body=obj"),
    ("", "configmaps", "update"): ("kube.py", "self.core.replace_namespaced_config_map("),
    ("", "services", "create"): ("kube.py", "resource.create(body=obj"),
    # the Spark UI Service (spec.runtime.sparkUI): its selector moved to the current attempt, deleted when turned off
    ("", "services", "patch"): ("kube.py", "self.core.patch_namespaced_service("),
    ("", "services", "delete"): ("kube.py", ".delete(name=name, namespace=namespace"),
    # the Spark UI Ingress, when the chart's sparkUI.ingress.host is set: created once, deleted with the UI
    ("networking.k8s.io", "ingresses", "create"): ("kube.py", "resource.create(body=obj"),
    ("networking.k8s.io", "ingresses", "delete"): ("kube.py", ".delete(name=name, namespace=namespace"),
    # the query's Spark auth Secret (render.auth_secret): created once, never read back
    ("", "secrets", "create"): ("kube.py", "resource.create(body=obj"),
    # the driver Lease of a standby query: created free before its first driver (lease_access.lease),
    # released for the standby when its holder's container has ended, read when a driver's node is lost
    # (observe.needs_lease: may it be force-deleted?). get and update also let the operator grant them
    # on that one Lease (RBAC's escalation check: it grants only what it holds)
    ("coordination.k8s.io", "leases", "create"): ("kube.py", "resource.create(body=obj"),
    ("coordination.k8s.io", "leases", "get"): ("kube.py", "self.coordination.read_namespaced_lease("),
    ("coordination.k8s.io", "leases", "update"): ("kube.py", "self.coordination.replace_namespaced_lease("),
    # a standby query's own Lease account, and the Role and RoleBinding that give its driver's account
    # get and update on the query's Lease only (lease_access): created once; the binding's subject
    # follows the spec (the driver account when executors run)
    ("", "serviceaccounts", "create"): ("kube.py", "resource.create(body=obj"),
    ("rbac.authorization.k8s.io", "roles", "create"): ("kube.py", "resource.create(body=obj"),
    ("rbac.authorization.k8s.io", "rolebindings", "create"): ("kube.py", "resource.create(body=obj"),
    ("rbac.authorization.k8s.io", "rolebindings", "patch"): ("kube.py", "self.rbac.patch_namespaced_role_binding("),
    # a standby query's PodDisruptionBudget (render.disruption_budget): created once with its Lease,
    # deleted when a driver of the query without standby is created (render.absent_children)
    ("policy", "poddisruptionbudgets", "create"): ("kube.py", "resource.create(body=obj"),
    ("policy", "poddisruptionbudgets", "delete"): ("kube.py", ".delete(name=name, namespace=namespace"),
    # the sparkApplication backend
    (SPARK_GROUP, SPARK_PLURAL, "list"): ("kube.py", "self.custom.list_namespaced_custom_object("),
    (SPARK_GROUP, SPARK_PLURAL, "watch"): ("handlers.py", "@kopf.on.event(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL"),
    (SPARK_GROUP, SPARK_PLURAL, "create"): ("kube.py", "resource.create(body=obj"),
    (SPARK_GROUP, SPARK_PLURAL, "delete"): ("kube.py", ".delete(name=name, namespace=namespace"),
    # events of every transition (kopf.event posts core/v1 Events)
    ("", "events", "create"): ("handlers.py", "kopf.event(body, type=event.type"),
}

# A driver that starts executors (client mode) runs Spark's Kubernetes scheduler in its
# pod with the driver account: (apiGroup, resource, verb) -> the Spark code that needs it
# (Spark 4.3's spark-kubernetes and fabric8 7.x: a delete of a label-selected list is one
# DELETE of the collection, i.e. deletecollection; no list first). Nothing else: Spark
# also tries to delete the driver's Services and executors' claims by label and to list
# claims to reuse, and logs and goes on when refused (the operator owns the Service,
# executors mount an existing claim). No Leases either: a standby query's driver reaches
# its own Lease through the query's RoleBinding (lease_access), whatever its account.
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

# What a standby query's driver may do with its own Lease (lease_access.lease_role, on the
# query's Lease by name): (apiGroup, resource, verb) -> the code that needs it.
LEASE_ACCESS: dict[tuple[str, str, str], str] = {
    ("coordination.k8s.io", "leases", "get"): "app/driver/lease_holder.py DriverLease.read: who holds the query",
    ("coordination.k8s.io", "leases", "update"): "app/driver/lease_holder.py DriverLease._write: take over, renew, release",
}
