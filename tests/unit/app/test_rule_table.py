"""One rule table feeds both the Python validator and the CRD's CEL."""

import pytest

from contract.load import validate_spec
from contract.modes import Mode
from contract.problems import SpecError
from contract.rules import RULES, check_rules
from contract.spec import QuerySpec, Trigger
from controller.crd import render_crd

pytestmark = pytest.mark.unit

# realTime reads Kafka only: a rate source breaks the rule named "realTime-sources".
RATE_IN_REAL_TIME = {
    "source": {"rate": {}},
    "sink": {"console": {}},
    "trigger": {"realTime": {"batchDuration": "1s"}},
    "checkpoint": {"location": "/tmp/cp"},
}


def _cel_messages(crd: dict) -> list[str]:
    found = []

    def walk(node):
        if isinstance(node, dict):
            found.extend(r.get("message") or r.get("messageExpression") for r in node.get("x-kubernetes-validations", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(crd)
    return found


def test_a_rule_deleted_from_the_table_leaves_both_the_validator_and_the_crd():
    rule = next(r for r in RULES if r.name == "realTime-sources")
    message = "realTime mode cannot read from a rate source (allowed: kafka)"
    spec = QuerySpec.model_validate(RATE_IN_REAL_TIME)

    assert [p.message for p in check_rules(spec)] == [message]
    assert message in _cel_messages(render_crd())
    with pytest.raises(SpecError, match="cannot read from a rate source"):
        validate_spec(RATE_IN_REAL_TIME)

    without = [r for r in RULES if r is not rule]
    assert check_rules(spec, rules=without) == []
    assert message not in _cel_messages(render_crd(rules=without))


def test_every_cel_rule_comes_from_the_table():
    """Beyond the table, the generator adds only the "exactly one of" rules of union objects, and
    the rule on the query's name (controller.crd.NAME_RULE: metadata is not the spec model's)."""
    from controller.crd import NAME_RULE

    from_table = {c.message or c.message_expression for r in RULES for c in r.cel}
    generated = set(_cel_messages(render_crd()))
    assert from_table <= generated and NAME_RULE["message"] in generated
    assert all(m.startswith("set exactly one of: ") for m in generated - from_table - {NAME_RULE["message"]})


def test_rule_names_are_unique():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))


def test_the_trigger_keys_are_the_modes():
    assert sorted(f.alias or n for n, f in Trigger.model_fields.items()) == sorted(m.value for m in Mode)
