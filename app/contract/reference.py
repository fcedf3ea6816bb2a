"""The StreamingQuery field reference, generated from the spec model.

`python -m app.contract.reference > docs/reference.md`; a unit test fails when the
committed page drifts from the model.
"""

from __future__ import annotations

import types
import typing
from enum import Enum

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from app.contract.spec import OneOf, QuerySpec

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


def _section(model: type[BaseModel]) -> list[str]:
    kind = " (*one of*)" if issubclass(model, OneOf) else ""
    lines = [f"## {model.__name__}{kind}", ""]
    doc = (model.__doc__ or "").strip()
    if doc and model.__doc__ is not BaseModel.__doc__:
        lines += [doc.splitlines()[0], ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        description = (field.description or "").replace("|", "\\|")
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


if __name__ == "__main__":
    print(render_reference(), end="")
