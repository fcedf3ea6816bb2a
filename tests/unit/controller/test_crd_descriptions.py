"""Every field of the CRD explains itself: `kubectl explain sq.spec.<any field>` (and
sq.status.<any field>) prints what the generated openAPIV3Schema says of it, so a
property without a description prints nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller import crd

pytestmark = pytest.mark.unit


def properties(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, schema) of every named property below ``node``, through list items and map values."""
    for name, child in (node.get("properties") or {}).items():
        yield f"{path}.{name}", child
        yield from properties(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from properties(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from properties(node["additionalProperties"], f"{path}{{}}")


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return crd.render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("part", ["spec", "status"])
def test_every_property_has_a_description(schema, part):
    root = schema["properties"][part]
    assert root.get("description"), f"{part} has no description"
    found = list(properties(root, part))
    assert len(found) > 20, f"walked only {len(found)} properties of {part}: is the walk broken?"
    missing = [path for path, node in found if not str(node.get("description") or "").strip()]
    assert not missing, (
        f"{len(missing)} properties of {part} without a description (kubectl explain prints nothing for them): "
        + ", ".join(missing)
        + ". Give the field a Field(description=...) or its model a docstring (contract/spec.py, controller/status.py)."
    )


def test_descriptions_are_one_paragraph(schema):
    """Docstrings wrap in the source; kubectl explain wraps the text itself, a newline would show."""
    wrapped = [path for part in ("spec", "status") for path, node in properties(schema["properties"][part], part)
               if "\n" in node.get("description", "")]  # fmt: skip
    assert not wrapped, f"descriptions with line breaks: {', '.join(wrapped)}"


def test_the_walk_finds_a_property_without_a_description():
    """The check can fail: a bare property deep in a list of objects is named by its path."""
    node = {"properties": {"a": {"description": "x", "type": "array",
                                 "items": {"type": "object", "properties": {"b": {"type": "string"}}}}}}  # fmt: skip
    assert [p for p, n in properties(node, "spec") if not n.get("description")] == ["spec.a[].b"]
