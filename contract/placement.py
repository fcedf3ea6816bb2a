"""Where a query's pods run and what metadata they carry: the policy's rules (pure).

A tenant names node labels, taints, a priority class, labels and annotations for its driver
(``spec.runtime.driver``) and its executors (``spec.runtime.executors``). Each is something the
platform hands out: a taint keeps tenants off nodes (the control plane, another team's pool), a
priority class decides whose pods are preempted, a label can make a pod look like another one to
whoever selects by it (a Service, a NetworkPolicy, the operator, Spark), an annotation is read by
controllers (a service mesh's sidecar, a metrics scraper). So each is allow-listed by the policy
(``policy.allowed*``), and the keys the operator and Spark select pods by are refused whatever it
says (``policy.reservedMetadata``). docs/security.md, "Pod placement and metadata", is the
reader's version.
"""

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from contract.patterns import listed, matches
from contract.spec import QuerySpec

# Quoted where used, not `from __future__ import annotations`: the rule `annotations` below would shadow it.
if TYPE_CHECKING:  # the policy imports this module's rules
    from contract.policy import OperatorFacts, Policy

Found = Iterator[tuple[str, str]]

# The NoExecute taints of a node that stopped reporting or cannot be reached: the operator
# tolerates them for restartPolicy.nodeLostAfter (controller.render.driver.driver_tolerations). A second
# toleration of the same taint would decide how long a driver stays on a lost node instead.
NODE_LOST_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
# Node labels a query may select on by default: what a node is (OS, CPU, instance type) and where
# (zone, region). Labels that set nodes apart for someone (a team's pool, GPUs, the control plane)
# are the platform's to hand out (allowedNodeLabels).
WELL_KNOWN_NODE_LABELS = (
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
# Key prefixes (domains, with their subdomains) whose labels and annotations the operator, kopf
# and kubeflow's Spark operator write and read on pods: the driver's spec hash and checkpoint, the
# query and component labels the operator finds its pods by.
RESERVED_DOMAINS = ("streamq.io", "kopf.zalando.org", "sparkoperator.k8s.io")
# The labels the chart and the operator select pods by (the operator's own pods, its drivers).
RESERVED_LABELS = (
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
)
# Spark's own labels (spark-app-selector, spark-role, spark-exec-id, ...): a driver lists its
# executors by them, so another pod with them would be taken for one of its executors.
SPARK_LABEL_PREFIX = "spark-"
# Kubernetes' own domains: what its components read (kubernetes.io/..., *.k8s.io/...).
KUBERNETES_DOMAINS = ("kubernetes.io", "k8s.io")


def pods(spec: QuerySpec) -> Iterator[tuple[str, Any]]:
    """(path below spec, the spec's fields) of the driver pod and of the executor pods."""
    yield ".runtime.driver", spec.runtime.driver
    yield ".runtime.executors", spec.runtime.executors


def _domain(key: str) -> str:
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


def _in_domain(key: str, domains: tuple[str, ...]) -> bool:
    domain = _domain(key)
    return any(domain == d or domain.endswith(f".{d}") for d in domains)


def reserved(key: str, kind: str) -> str | None:
    """Why no policy lets a query set label (or annotation) ``key``; None if none does."""
    if _in_domain(key, RESERVED_DOMAINS):
        return f"{key} is in {_domain(key)}, which the operator (or kopf, or kubeflow's Spark operator) sets and reads"
    if kind == "labels" and key in RESERVED_LABELS:
        return f"{key} is a label the chart and the operator select their pods by"
    if kind == "labels" and not _domain(key) and key.startswith(SPARK_LABEL_PREFIX):
        return f"{key} is Spark's: a driver takes pods with its spark-* labels for its executors"
    return None


def _opens_kubernetes_key(key: str, patterns: tuple[str, ...]) -> bool:
    """A key of Kubernetes' domains passes only by a pattern that names its domain (before the '/')
    without a '*': '*' or 'team-*' never opens what Kubernetes' components read."""
    return any(matches(key, [p]) and "/" in p and "*" not in p.partition("/")[0] for p in patterns)


def _metadata(spec: QuerySpec, kind: str, patterns: tuple[str, ...]) -> Found:
    what = kind[:-1]
    for at, pod in pods(spec):
        for key in getattr(pod, kind) or {}:
            path = f"{at}.{kind}.{key}"
            if reserved(key, kind) is not None:
                continue  # policy.reservedMetadata says why
            if _in_domain(key, KUBERNETES_DOMAINS):
                if not _opens_kubernetes_key(key, patterns):
                    yield path, (f"{what} {key} is in Kubernetes' own domain {_domain(key)}: allowed only by a prefix "
                                 f"naming that domain (e.g. {_domain(key)}/*), never by '*' (allowed: {listed(patterns)})")  # fmt: skip
            elif not matches(key, patterns):
                yield path, f"{what} {key} is not allowed (allowed: {listed(patterns)})"


# --- the rules (contract.policy.POLICY_RULES) ---------------------------------------------


def reserved_metadata(spec: QuerySpec, policy: "Policy", facts: "OperatorFacts", namespace: str | None) -> Found:
    for at, pod in pods(spec):
        for kind in ("labels", "annotations"):
            for key in getattr(pod, kind) or {}:
                why = reserved(key, kind)
                if why is not None:
                    yield f"{at}.{kind}.{key}", why


def labels(spec: QuerySpec, policy: "Policy", facts: "OperatorFacts", namespace: str | None) -> Found:
    yield from _metadata(spec, "labels", policy.allowed_label_prefixes)


def annotations(spec: QuerySpec, policy: "Policy", facts: "OperatorFacts", namespace: str | None) -> Found:
    yield from _metadata(spec, "annotations", policy.allowed_annotation_prefixes)


def priority_classes(spec: QuerySpec, policy: "Policy", facts: "OperatorFacts", namespace: str | None) -> Found:
    allowed = policy.allowed_priority_classes
    for at, pod in pods(spec):
        name = pod.priority_class_name
        if name is None:
            continue
        if name.startswith("system-") and name not in allowed:  # above every tenant's, even with '*'
            yield f"{at}.priorityClassName", (f"{name} is a system priority class (it preempts the cluster's own "
                                              f"pods): allowed only by its full name (allowed: {listed(allowed)})")  # fmt: skip
        elif not matches(name, allowed):
            yield f"{at}.priorityClassName", f"priority class {name} is not allowed (allowed: {listed(allowed)})"


def operator_tolerations(spec: QuerySpec, policy: "Policy", facts: "OperatorFacts", namespace: str | None) -> Found:
    for at, pod in pods(spec):
        for i, toleration in enumerate(pod.tolerations or ()):
            if toleration.key in NODE_LOST_TAINTS:
                yield f"{at}.tolerations[{i}].key", (f"{toleration.key} is tolerated by the operator for "
                                                     "restartPolicy.nodeLostAfter: set that instead")  # fmt: skip


def toleration_keys(spec: QuerySpec, policy: "Policy", facts: "OperatorFacts", namespace: str | None) -> Found:
    allowed = policy.allowed_toleration_keys
    for at, pod in pods(spec):
        for i, toleration in enumerate(pod.tolerations or ()):
            path = f"{at}.tolerations[{i}].key"
            if toleration.key is None:
                if "*" not in allowed:
                    yield (
                        path,
                        (
                            "a toleration without a key tolerates every taint (the control plane's, other "
                            f"teams' pools): allowed only where the policy lists '*' (allowed: {listed(allowed)})"
                        ),
                    )
            elif toleration.key not in NODE_LOST_TAINTS and not matches(toleration.key, allowed):
                yield path, f"toleration of taint {toleration.key} is not allowed (allowed: {listed(allowed)})"


def node_label_keys(pod: Any) -> Iterator[tuple[str, str]]:
    """(path below the pod's fields, key) of every node label the pod selects on."""
    for key in pod.node_selector or {}:
        yield f".nodeSelector.{key}", key
    node = pod.affinity.node_affinity if pod.affinity is not None else None
    if node is None:
        return
    terms: list[tuple[str, Any]] = []
    required = node.required_during_scheduling_ignored_during_execution
    if required is not None:
        at = ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms += [(f"{at}[{i}]", term) for i, term in enumerate(required.node_selector_terms)]
    for i, preferred in enumerate(node.preferred_during_scheduling_ignored_during_execution or ()):
        terms.append((f".affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference",
                      preferred.preference))  # fmt: skip
    for at, term in terms:
        for j, expression in enumerate(term.match_expressions):
            yield f"{at}.matchExpressions[{j}].key", expression.key


def node_labels(spec: QuerySpec, policy: "Policy", facts: "OperatorFacts", namespace: str | None) -> Found:
    allowed = policy.allowed_node_labels
    for at, pod in pods(spec):
        for path, key in node_label_keys(pod):
            if not matches(key, allowed):
                yield f"{at}{path}", f"node label {key} is not allowed (allowed: {listed(allowed)})"
