"""The StreamingQuery field reference, generated from the spec model.

    python -m app.contract.reference > docs/reference.md   # print it
    python -m app.contract.reference --write               # rewrite docs/reference.md
    python -m app.contract.reference --check               # exit 1 when docs/reference.md drifts

A field's description is the one `kubectl explain` prints (controller.crd carries the
same texts into the CRD): its Field(description=...), else its model's docstring.
A unit test fails when the committed page drifts from the model.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import types
import typing
from enum import Enum
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from app.contract.spec import OneOf, QuerySpec

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
HEADER = """# StreamingQuery field reference

Generated from `app/contract/spec.py` by `python -m app.contract.reference`; do not edit by hand.
Objects marked *one of* take exactly one of their fields.
"""


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " \\| ".join(names)
    if origin is list:
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        return "map of string"
    if annotation is str:
        return "string"
    if annotation is int:
        return "integer"
    if annotation is bool:
        return "boolean"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        return "{}" if isinstance(value, (dict, BaseModel)) else f"`{value}`"
    value = field.default
    if value is None:
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value.value if isinstance(value, Enum) else value}`"


def model_description(model: type[BaseModel]) -> str:
    """The model's docstring as one line (pydantic puts it in the JSON schema, hence in the CRD)."""
    doc = model.__dict__.get("__doc__")  # its own, not one inherited from pydantic
    return " ".join(inspect.cleandoc(doc).split()) if doc else ""


def field_description(field: FieldInfo) -> str:
    """What `kubectl explain` says of the field: its own description, else its model's docstring."""
    if field.description:
        return " ".join(field.description.split())
    return next((text for m in _models_in(field.annotation) if (text := model_description(m))), "")


def _markdown(text: str) -> str:
    """Plain text in a table cell: `|` would end the cell, and `<query>` outside a code span
    would be read as an HTML tag and vanish."""
    spans = text.replace("|", "\\|").split("`")
    return "`".join(s if i % 2 else s.replace("<", "\\<") for i, s in enumerate(spans))


def _section(model: type[BaseModel]) -> list[str]:
    kind = " (*one of*)" if issubclass(model, OneOf) else ""
    lines = [f"## {model.__name__}{kind}", ""]
    if doc := model_description(model):
        lines += [_markdown(doc), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        description = _markdown(field_description(field))
        lines.append(f"| `{field.alias or name}` | {_type_name(field.annotation)} | {_default(field)} | {description} |")
    return [*lines, ""]


def render_reference() -> str:
    seen: list[type[BaseModel]] = []
    queue = [QuerySpec]
    while queue:
        model = queue.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            queue.extend(_models_in(field.annotation))
    return "\n".join([HEADER, *[line for model in seen for line in _section(model)]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.contract.reference", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help=f"rewrite {PAGE.name}")
    action.add_argument("--check", action="store_true", help=f"exit 1 when {PAGE.name} differs")
    args = parser.parse_args(argv)
    text = render_reference()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"out of date (run `python -m app.contract.reference --write`): {PAGE}", file=sys.stderr)
            return 1
        return 0
    if args.write:
        PAGE.write_text(text)
        print(f"wrote {PAGE}")
        return 0
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
