"""charts/streamq/values.schema.json explains every value: each property has a description
(what values.yaml's comments say of it; the policy block's are the Policy model's own), so an
editor or `helm show values` reader need not go looking. That helm accepts the schema is
tests/integration/test_chart.py's (helm lint --strict)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract.policy import Policy

pytestmark = pytest.mark.unit

CHART = Path(__file__).resolve().parents[2] / "charts" / "streamq"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def properties(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, schema) of every named property below ``node``, through array items."""
    for name, child in (node.get("properties") or {}).items():
        yield f"{path}.{name}".lstrip("."), child
        yield from properties(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from properties(node["items"], f"{path}[]")


def every_property() -> list[tuple[str, dict[str, Any]]]:
    found = list(properties(SCHEMA, ""))
    for name, definition in SCHEMA.get("definitions", {}).items():
        found += properties(definition, f"definitions.{name}")
    return found


def test_every_property_has_a_description():
    found = every_property()
    assert len(found) > 140, f"walked only {len(found)} properties: is the walk broken?"
    missing = [path for path, node in found if not str(node.get("description") or "").strip()]
    assert not missing, f"values.schema.json properties without a description: {', '.join(missing)}"


def test_policy_descriptions_are_the_models():
    """The operator reads `policy:` into contract.policy.Policy: one text for both."""
    schema = SCHEMA["properties"]["policy"]["properties"]
    for name, field in Policy.model_fields.items():
        key = field.alias or name
        assert schema[key].get("description") == field.description, (
            f"policy.{key}: values.schema.json's description differs from Policy.{name}'s (contract/policy.py)"
        )


def test_every_key_of_values_yaml_is_a_described_property():
    """What values.yaml sets is what the schema describes, down to where the schema stops
    naming keys (label maps, securityContext, ...)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    undescribed = []

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        if not isinstance(value, dict) or "properties" not in node:
            return
        for key, child in value.items():
            prop = node["properties"].get(key)
            if prop is None or not prop.get("description"):
                undescribed.append(f"{path}{key}")
                continue
            ref = prop.get("$ref", "").removeprefix("#/definitions/")
            walk(child, SCHEMA["definitions"][ref] if ref else prop, f"{path}{key}.")

    walk(values, SCHEMA, "")
    assert not undescribed, f"values.yaml keys the schema does not describe: {', '.join(undescribed)}"
