"""Credentials Secrets by what they are, on a real API server with the operator running
(contract.credentials): a Secret a query mounts must be Opaque and labelled
streamq.io/credentials: "true". A service-account token named like a tenant's Secret, or an
unlabelled Secret, makes the query Invalid (PolicyViolation) at the field naming it, before any
pod; marking the Secret lets the same query start, and a Secret that turns out to be a token
once it exists stops the driver that was waiting for it."""

from __future__ import annotations

import pytest
from kubernetes import client

from contract.names import LABEL_CREDENTIALS
from testbed.specs import query_spec

pytestmark = pytest.mark.integration

TOKEN_TYPE = "kubernetes.io/service-account-token"
S3 = {"location": "s3a://bucket/{namespace}/cp", "s3": {"credentials": {"secretRef": {"name": "streamq-borrowed"}}}}


def _secret(cluster, name: str, type_: str = "Opaque", labels: dict | None = None) -> None:
    annotations = {"kubernetes.io/service-account.name": "streamq-driver"} if type_ == TOKEN_TYPE else None
    cluster.core.create_namespaced_secret(cluster.namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, labels=labels, annotations=annotations), type=type_,
        string_data={"username": "app", "password": "not-a-real-one"}))  # fmt: skip


def _auth(name: str, at: str = "sink") -> dict:
    return {f"{at}.kafka.auth": {"secretRef": {"name": name}}}


def _refused(cluster, query: str, path: str, says: str) -> None:
    status = cluster.wait_phase(query, "Invalid")
    assert f"{path}: policy.credentialSecrets: " in status["message"] and says in status["message"], status["message"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "PolicyViolation", ready
    assert cluster.driver_pods(query) == []


def test_a_token_or_an_unmarked_secret_is_refused_whatever_its_name_and_a_marked_one_runs(cluster, start_operator):
    start_operator(STREAMQ_RESYNC_INTERVAL_SECONDS="2")  # a Secret changes without an event on the query
    _secret(cluster, "streamq-borrowed", TOKEN_TYPE)
    _secret(cluster, "streamq-creds")  # Opaque, allowed by name (streamq-*), but not marked
    _secret(cluster, "streamq-marked", labels={LABEL_CREDENTIALS: "true"})

    cluster.apply("token", query_spec(**_auth("streamq-borrowed")))
    cluster.apply("token-s3", query_spec(mode="microBatch", checkpoint={
        **S3, "location": S3["location"].format(namespace=cluster.namespace)}))  # fmt: skip
    cluster.apply("unmarked", query_spec(**_auth("streamq-creds", at="source")))
    cluster.apply("marked", query_spec(**_auth("streamq-marked"), **_auth("streamq-marked", at="source")))

    _refused(cluster, "token", "spec.sink.kafka.auth.secretRef.name", "is a service-account token")
    _refused(cluster, "token-s3", "spec.checkpoint.s3.credentials.secretRef.name", "is a service-account token")
    _refused(cluster, "unmarked", "spec.source.kafka.auth.secretRef.name", f"label a credentials Secret {LABEL_CREDENTIALS}")
    cluster.wait_driver("marked", 1)

    # the namespace's owners mark the Secret: the same query starts, its spec untouched
    cluster.core.patch_namespaced_secret(
        "streamq-creds", cluster.namespace, {"metadata": {"labels": {LABEL_CREDENTIALS: "true"}}}
    )
    cluster.wait_driver("unmarked", 1, timeout=30)


def test_a_missing_secret_waits_and_one_that_appears_as_a_token_stops_the_query(cluster, start_operator):
    start_operator(STREAMQ_RESYNC_INTERVAL_SECONDS="2")
    cluster.apply("later", query_spec(**_auth("streamq-later")))
    cluster.wait_driver("later", 1)  # as for any missing Secret: the pod waits for it, and says so
    assert cluster.status("later").get("phase") != "Invalid"

    _secret(cluster, "streamq-later", TOKEN_TYPE, labels={LABEL_CREDENTIALS: "true"})  # a label makes no token a credential
    status = cluster.wait_phase("later", "Invalid", timeout=30)
    assert "spec.sink.kafka.auth.secretRef.name: policy.credentialSecrets: " in status["message"]
    cluster.wait_status("later", lambda _: cluster.driver_pods("later") == [], what="the waiting driver deleted")
