"""The admission policy's generator (controller/admission.py) without a cluster; the chart's rendering
and the API server's verdicts are in tests/integration/test_admission_policy.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contract.policy import Policy, secret_refs
from contract.spec import QuerySpec
from controller import admission
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

VALUES = Path(admission.REPO_ROOT) / "charts" / "streamq" / "values.yaml"


def test_the_charts_template_is_what_the_generator_writes():
    assert admission.TEMPLATE.read_text() == admission.render_template(), "run `python -m controller.admission`"
    assert admission.main(["--check"]) == 0


def test_every_policy_value_it_reads_is_a_knob_of_the_policy_and_of_the_charts_values():
    aliases = {f.alias for f in Policy.model_fields.values()}
    values = yaml.safe_load(VALUES.read_text())
    read = {lit.helm.removeprefix(".Values.policy.") for lit in admission.LITERALS.values() if ".Values.policy." in lit.helm}
    assert read <= aliases and read <= set(values["policy"]), read - aliases - set(values["policy"])
    assert values["admissionPolicy"] == {"enabled": True}


def test_it_checks_every_secret_a_query_mounts():
    auth = {"secretRef": {"name": "streamq-kafka"}}
    tls = {"caSecretRef": {"name": "streamq-ca"}, "clientCertificate": {"name": "streamq-client"}}
    spec = QuerySpec.model_validate(changed(query_spec(), {
        "source.kafka.auth": auth, "sink.kafka.auth": auth, "source.kafka.tls": tls, "sink.kafka.tls": tls,
        "checkpoint": {"location": "s3a://cp/ns/q", "s3": {"credentials": {"secretRef": {"name": "streamq-s3"}}}},
    }))  # fmt: skip
    assert {path for path, _ in secret_refs(spec)} == {path for path, _ in admission.SECRET_PATHS}


def test_a_message_names_the_field_and_the_rule_as_check_policy_does():
    for check in admission.checks():
        validation = check.validation()
        assert validation["messageExpression"].startswith(f'"spec{check.path}: {check.rule}: " + (')
        assert check.rule.startswith("policy.") and validation["reason"] == "Forbidden"


def test_every_rule_it_names_is_a_rule_of_check_policy():
    from contract.policy import POLICY_RULES

    assert {c.rule for c in admission.checks()} <= {r.name for r in POLICY_RULES}
