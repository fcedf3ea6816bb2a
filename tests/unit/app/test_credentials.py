"""Credentials Secrets by what they are (contract.credentials): a Secret a query mounts is an
Opaque one labelled streamq.io/credentials: "true", whatever it is called; and the operator's
decision makes a query naming another kind Invalid (PolicyViolation), at the field naming it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contract.credentials import RULE, credential_secret_problems, refused_for_a_secret, secret_names
from contract.load import validate_spec
from contract.names import LABEL_CREDENTIALS
from contract.policy import Policy, is_policy_problem
from controller.decide import Inputs, decide
from controller.phases import Phase, Reason
from controller.status import QueryStatus
from testbed.specs import query_spec

pytestmark = pytest.mark.unit

MARKED = {LABEL_CREDENTIALS: "true"}
S3 = {"checkpoint": {"location": "s3a://bucket/team-a/q", "s3": {"credentials": {"secretRef": {"name": "streamq-s3"}}}}}
KAFKA_AUTH = {"sink.kafka.auth": {"secretRef": {"name": "streamq-creds"}},
              "source.kafka.auth": {"secretRef": {"name": "streamq-creds"}}}  # fmt: skip
SINK_PATH = "spec.sink.kafka.auth.secretRef.name"


def meta(type_: str = "Opaque", labels: dict | None = None) -> dict:
    return {"type": type_, "labels": MARKED if labels is None else labels}


def spec_with(**changes) -> dict:
    return query_spec(**changes)


@pytest.mark.parametrize(("secret", "says"), [
    (meta("kubernetes.io/service-account-token"), "is a service-account token"),
    (meta("kubernetes.io/service-account-token", {}), "is a service-account token"),
    (meta("kubernetes.io/dockerconfigjson"), "is of type kubernetes.io/dockerconfigjson"),
    (meta("kubernetes.io/tls"), "is of type kubernetes.io/tls"),
    (meta("bootstrap.kubernetes.io/token"), "is of type bootstrap.kubernetes.io/token"),
    (meta("opaque"), "is of type opaque"),  # types are compared exactly, as the API server does
    (meta("Opaque", {}), "is not marked for queries"),
    (meta("Opaque", {LABEL_CREDENTIALS: "false"}), "is not marked for queries"),
    (meta("Opaque", {LABEL_CREDENTIALS: "True"}), "is not marked for queries"),
    (meta("Opaque", {"streamq.io/credential": "true"}), "is not marked for queries"),
])  # fmt: skip
def test_a_secret_that_is_not_a_credentials_secret_is_refused_whatever_its_name(secret, says):
    spec = validate_spec(spec_with(**{"sink.kafka.auth": {"secretRef": {"name": "streamq-borrowed"}}}))
    (problem,) = credential_secret_problems(spec, {"streamq-borrowed": secret})
    assert problem.path == SINK_PATH and problem.message.startswith(f"{RULE}: Secret streamq-borrowed ")
    assert says in problem.message and is_policy_problem(problem)


@pytest.mark.parametrize("secrets", [
    {"streamq-creds": meta()},
    {"streamq-creds": meta(labels={**MARKED, "team": "a"})},
    {"streamq-creds": None},  # missing: the driver waits for it, as for any missing Secret
    {},  # not read: not judged
    None,
])  # fmt: skip
def test_a_marked_opaque_secret_a_missing_one_or_one_not_read_passes(secrets):
    spec = validate_spec(spec_with(**KAFKA_AUTH))
    assert credential_secret_problems(spec, secrets) == []


def test_each_field_naming_a_bad_secret_is_named():
    spec = validate_spec(spec_with(**KAFKA_AUTH, **S3, **{"trigger": {"microBatch": {"interval": "1s"}}}))
    found = credential_secret_problems(spec, {"streamq-creds": meta(labels={}), "streamq-s3": meta("kubernetes.io/tls")})
    assert [p.path for p in found] == ["spec.source.kafka.auth.secretRef.name", SINK_PATH,
                                       "spec.checkpoint.s3.credentials.secretRef.name"]  # fmt: skip


def test_the_operator_reads_each_named_secret_once_and_none_of_an_unreadable_spec():
    assert secret_names(spec_with(**KAFKA_AUTH, **S3, **{"trigger": {"microBatch": {"interval": "1s"}}})) == (
        "streamq-creds",
        "streamq-s3",
    )
    assert secret_names(spec_with()) == ()
    assert secret_names({"not": "a spec"}) == () and secret_names(None) == ()


def _decide(spec: dict, secrets: dict | None) -> object:
    return decide(Inputs(name="q", namespace="team-a", uid="u", generation=1, raw_spec=spec, status=QueryStatus(),
                         drivers=(), now=datetime(2026, 1, 1, tzinfo=UTC), policy=Policy(), secrets=secrets))  # fmt: skip


def test_the_decision_makes_a_query_naming_a_token_secret_invalid_with_a_policy_violation():
    spec = spec_with(**{"sink.kafka.auth": {"secretRef": {"name": "streamq-borrowed"}}})
    d = _decide(spec, {"streamq-borrowed": meta("kubernetes.io/service-account-token")})
    assert d.status.phase is Phase.INVALID and d.actions == ()
    assert SINK_PATH in d.status.message and "service-account token" in d.status.message
    assert [e.reason for e in d.events] == [Reason.POLICY_VIOLATION]


@pytest.mark.parametrize("secret", [meta(), None])
def test_the_decision_starts_a_query_whose_secret_is_marked_or_not_there_yet(secret):
    spec = spec_with(**{"sink.kafka.auth": {"secretRef": {"name": "streamq-creds"}}})
    d = _decide(spec, {"streamq-creds": secret})
    assert d.status.phase is Phase.STARTING and d.verb == "create"


def test_a_secret_marked_later_lets_an_invalid_query_start():
    spec = spec_with(**{"sink.kafka.auth": {"secretRef": {"name": "streamq-creds"}}})
    assert _decide(spec, {"streamq-creds": meta(labels={})}).status.phase is Phase.INVALID
    assert _decide(spec, {"streamq-creds": meta()}).verb == "create"


def test_a_query_refused_for_its_secret_starts_once_the_secret_is_marked_without_a_spec_change():
    spec = spec_with(**{"sink.kafka.auth": {"secretRef": {"name": "streamq-creds"}}})
    inputs = dict(name="q", namespace="team-a", uid="u", generation=1, raw_spec=spec, drivers=(),
                  now=datetime(2026, 1, 1, tzinfo=UTC), policy=Policy())  # fmt: skip
    invalid = decide(Inputs(**inputs, status=QueryStatus(), secrets={"streamq-creds": meta(labels={})}))
    assert invalid.status.phase is Phase.INVALID
    status = QueryStatus.parse(invalid.status.dump())
    again = decide(Inputs(**inputs, status=status, secrets={"streamq-creds": meta(labels={})}))
    assert again.status.phase is Phase.INVALID and again.events == ()  # said once
    fixed = decide(Inputs(**inputs, status=status, secrets={"streamq-creds": meta()}))
    assert fixed.verb == "create" and fixed.status.phase is Phase.STARTING


def test_an_invalid_spec_stays_invalid_until_it_changes():
    spec = spec_with(**{"runtime.image": "evil.io/miner:1"})
    first = decide(Inputs(name="q", namespace="team-a", uid="u", generation=1, raw_spec=spec, status=QueryStatus(),
                          drivers=(), now=datetime(2026, 1, 1, tzinfo=UTC), policy=Policy()))  # fmt: skip
    assert first.status.phase is Phase.INVALID and not refused_for_a_secret(first.status.message)
