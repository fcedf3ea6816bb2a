"""Properties of the names the operator gives a query, for any valid names:

* outside Kubernetes (Kafka): two distinct (namespace, query) pairs never share a transactional id,
  a control topic or a readers' group; no namespace's ACL prefix, and no query's, starts another's
  names; and no topic a namespace may create under its own prefix collides with another's control
  topic even once Kafka reads '.' and '_' as one (contract.exactly_once);
* inside one namespace: two distinct (query, suffix) pairs of the same Kubernetes kind never share
  a name (controller.names, contract.lease).

Namespaces are DNS-1123 labels (Kubernetes' rule), queries DNS-1035 labels of at most 40
characters (contract.names.QUERY_NAME_PATTERN, MAX_QUERY_NAME).
"""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from contract import exactly_once as eos
from contract.lease import lease_name
from contract.names import MAX_QUERY_NAME
from controller import names

pytestmark = pytest.mark.unit

NAMESPACES = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
QUERIES = st.from_regex(rf"\A[a-z]([-a-z0-9]{{0,{MAX_QUERY_NAME - 2}}}[a-z0-9])?\Z")
PAIRS = st.tuples(NAMESPACES, QUERIES)
WRITERS = st.integers(0, 10_000)
# A topic name a namespace's principal may create under its prefix: anything Kafka takes after it.
TOPIC_TAILS = st.from_regex(r"\A[a-zA-Z0-9._-]{1,100}\Z")
DNS_1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"


def kafka_names(namespace: str, query: str, writers: tuple[int, ...]) -> list[str]:
    return [eos.control_topic(namespace, query), eos.reader_group(namespace, query),
            *(eos.transactional_id(namespace, query, w) for w in writers)]  # fmt: skip


@given(a=PAIRS, b=PAIRS, wa=WRITERS, wb=WRITERS)
@example(a=("team", "a-payments"), b=("team-a", "payments"), wa=0, wb=0)  # one name with a dash between them
def test_distinct_pairs_never_share_a_kafka_name(a, b, wa, wb):
    assume(a != b)
    assert eos.transactional_id(*a, wa) != eos.transactional_id(*b, wb)
    assert eos.control_topic(*a) != eos.control_topic(*b)
    assert eos.reader_group(*a) != eos.reader_group(*b)
    # Kafka refuses a topic beside another that differs only in '.' against '_'
    assert eos.control_topic(*a).replace("_", ".") != eos.control_topic(*b).replace("_", ".")


@given(a=PAIRS, b=PAIRS, writers=st.tuples(WRITERS, WRITERS))
@example(a=("team", "x"), b=("team-a", "payments"), writers=(0, 1))  # streamq-team- covered team-a's names
@example(a=("team", "pay"), b=("team", "pay-2"), writers=(0, 1))
def test_no_prefix_a_platform_grants_covers_another_querys_names(a, b, writers):
    assume(a != b)
    theirs = kafka_names(*b, writers)
    assert not any(name.startswith(eos.query_prefix(*a)) for name in theirs)
    if a[0] != b[0]:
        assert not any(name.startswith(eos.namespace_prefix(a[0])) for name in theirs)
    assert all(name.startswith(eos.namespace_prefix(b[0])) and name.startswith(eos.query_prefix(*b)) for name in theirs)


@given(a=PAIRS, b=PAIRS, tail=TOPIC_TAILS)
def test_a_topic_under_one_namespaces_prefix_never_blocks_anothers_control_topic(a, b, tail):
    assume(a[0] != b[0])
    mine = eos.namespace_prefix(a[0]) + tail
    assert mine.replace("_", ".") != eos.control_topic(*b).replace("_", ".")


@given(pair=PAIRS, writer=WRITERS)
def test_every_name_is_a_legal_kafka_name_that_reads_back(pair, writer):
    for name in kafka_names(*pair, (writer,)):
        assert len(name) <= eos.LONGEST_NAME <= eos.MAX_TOPIC
        prefix, namespace, query, what = name.split(".")
        assert (prefix, namespace, query) == ("streamq", *pair)
    assert eos.is_control_topic(eos.control_topic(*pair))


@settings(max_examples=50)
@given(namespace=NAMESPACES, query=st.from_regex(rf"\A{DNS_1123_LABEL}(\.{DNS_1123_LABEL})+\Z"))
def test_a_name_with_a_dot_names_nothing(namespace, query):
    """A DNS-1123 subdomain (what Kubernetes took as a name before the DNS-1035 rule) could split
    into another pair's namespace and query: refused, never mapped."""
    for args in ((namespace, query), (query, namespace)):
        with pytest.raises(ValueError):
            eos.query_prefix(*args)


# --- Kubernetes children: one namespace, names per kind -----------------------------------------

ATTEMPTS = st.integers(1, 10**9)
EXECUTORS = st.integers(1, 10**6)
# kind: {what: (query, attempt, executor) -> name}; `what` plus the numbers it uses identify a child.
KINDS = {
    "Pod": {"driver": lambda q, n, m: names.driver_name(q, n),
            "executor": lambda q, n, m: f"{names.driver_name(q, n)}-exec-{m}"},  # spark.kubernetes.executor.podNamePrefix
    "SparkApplication": {"driver": lambda q, n, m: names.driver_name(q, n)},
    "ConfigMap": {"query": lambda q, n, m: names.config_map_name(q)},
    "Service": {"driver-svc": lambda q, n, m: names.driver_service_name(q), "ui": lambda q, n, m: names.spark_ui_service_name(q)},
    "ServiceAccount/Role/RoleBinding": {"lease": lambda q, n, m: names.lease_access_name(q)},
    "Lease": {"lease": lambda q, n, m: lease_name(q)},
    "Secret": {"spark-auth": lambda q, n, m: names.auth_secret_name(q)},
    "PodDisruptionBudget": {"drivers": lambda q, n, m: names.disruption_budget_name(q)},
    "Ingress": {"ui": lambda q, n, m: names.spark_ui_service_name(q)},
}  # fmt: skip


def _child(kind: str):
    return st.tuples(QUERIES, st.sampled_from(sorted(KINDS[kind])), ATTEMPTS, EXECUTORS)


def _identity(child) -> tuple:
    """What tells two children of a kind apart: the query, which child, and the numbers it is named by."""
    query, what, attempt, executor = child
    numbers = {"driver": (attempt,), "executor": (attempt, executor)}.get(what, ())
    return (query, what, *numbers)


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=60)
@given(data=st.data())
def test_distinct_children_of_one_kind_never_share_a_name(kind, data):
    a, b = data.draw(_child(kind)), data.draw(_child(kind))
    assume(_identity(a) != _identity(b))
    name_a, name_b = (KINDS[kind][c[1]](c[0], c[2], c[3]) for c in (a, b))
    assert name_a != name_b, (a, b)
    for (query, what, *_), name in ((a, name_a), (b, name_b)):
        assert name.startswith(f"{query}-")  # the query and its suffix, nothing shortened or hashed
        assert what == "executor" or len(name) <= 63  # a pod's name may be a subdomain; the rest are labels
