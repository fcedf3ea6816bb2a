"""How every streamq command line shows its parameters in ``--help``: the job's ``streamq`` and the operator's.

Typer (0.27+) prints each parameter's Python annotation as its type: ``<list[Path]>``, ``<str>``, and
``<bool>`` beside every flag, ``--help`` included, as if a flag took a value. A command built with
``HelpCommand`` / ``HelpGroup`` (``@app.command(cls=HelpCommand)``, ``typer.Typer(cls=HelpGroup)``)
shows instead what to type: the declaration's ``metavar`` when it gives one, else a word for the type
(PATH, TEXT, INTEGER, NUMBER), the choices of an enum, and nothing for a flag.

Here, not in app.cli, because the operator's command lines (controller/) may import only the contract.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, get_args, get_origin

import typer.core

__all__ = ["HelpCommand", "HelpGroup", "type_label"]

_WORDS: dict[Any, str] = {str: "TEXT", int: "INTEGER", float: "NUMBER", Path: "PATH"}


def type_label(param: Any) -> str | None:
    """What the help's type column says about ``param``: None for a flag (it takes no value)."""
    if isinstance(param, typer.core.TyperOption) and param.is_flag:
        return None
    if param.metavar:  # an argument's name column shows it already
        return None if isinstance(param, typer.core.TyperArgument) else param.metavar
    descriptor = param.type_descriptor
    if descriptor.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in descriptor.choices or ())
    annotation = descriptor.annotation
    if get_origin(annotation) is list:  # a repeatable option or a variadic argument: the name says "..."
        (annotation,) = get_args(annotation)
    return _WORDS.get(annotation, getattr(annotation, "__name__", str(annotation)).upper())


def _plain(params: list[Any]) -> list[Any]:
    # Typer builds its parameters itself (no class to give it), so the label is set on each one; both the
    # Rich and the plain help ask display_type_rich. Parsing never does: this changes what help prints only.
    for param in params:
        if isinstance(param, typer.core.TyperArgument | typer.core.TyperOption):
            # typer declares it a method; overriding it on the instance is the point (see above)
            param.display_type_rich = functools.partial(_display, param)  # type: ignore[method-assign]
    return params


def _display(param: Any, ctx: Any = None) -> str | None:
    return type_label(param)


class HelpCommand(typer.core.TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain(super().get_params(ctx))


class HelpGroup(typer.core.TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain(super().get_params(ctx))
