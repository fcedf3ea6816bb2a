"""The operator's settings (STREAMQ_* variables), as the last part of docs/reference.md.

    python -m controller.settings_doc            # print the whole page
    python -m controller.settings_doc --write    # rewrite docs/reference.md (the spec's part too)
    python -m controller.settings_doc --check    # exit 1 when the page drifts from the models

Generated from controller/config.py: each variable's default, description and chart value
are its field's in ``Settings`` (the fields a variable sets). The spec's part comes
from ``contract.reference``, which cannot import the operator and keeps this part as is.
A unit test fails when a variable has no description or the committed page drifts.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from contract import reference
from contract.cli_help import HelpCommand
from contract.commands import generated_page, invoke
from controller.config import Settings

INTRO = """## Operator settings

Environment variables of the operator's Deployment, read once at start-up
(`controller/config.py`; generated from it by `python -m controller.settings_doc`, do not
edit by hand). The chart sets those with a chart value below; set the others through
`operator.extraEnv`. A value that does not parse (`STREAMQ_RUN_AS_USER=abc`) fails the
operator's start-up, naming the variable. The command-line flags (`--peering`, `--liveness`,
`--metrics-port`, ...) and their variables are in `python -m controller --help`.
"""


def extra(field: FieldInfo) -> dict[str, Any]:
    """The field's json_schema_extra: `chart` (the values that set it), `default` (said in words)."""
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def default_of(field: FieldInfo) -> str:
    """The field's default; a factory's is said in words (json_schema_extra's `default`)."""
    if "default" in extra(field):
        return str(extra(field)["default"])
    value = field.get_default(call_default_factory=False)
    if value is None or value is PydanticUndefined:
        return "—"
    if value == "":
        return "empty"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def variables() -> dict[str, FieldInfo]:
    """The fields of ``Settings`` a variable sets, by variable, in the model's order."""
    return {variable: Settings.model_fields[name] for name, variable in Settings.variables().items()}


def rows() -> list[tuple[str, str, str, str]]:
    """(variable, default, chart value, description) of every variable, in the model's order."""
    return [
        (variable, default_of(field), str(extra(field).get("chart", "—")), " ".join((field.description or "").split()))
        for variable, field in variables().items()
    ]


def render_settings() -> str:
    """The page's tail: a blank line, the marker contract.reference splits on, the table."""
    cell = reference.markdown_cell
    lines = ["", reference.SETTINGS_MARKER, "", INTRO, "| variable | default | chart value | description |",
             "|---|---|---|---|"]  # fmt: skip
    lines += [f"| `{var}` | {default} | {chart} | {cell(text)} |" for var, default, chart, text in rows()]
    return "\n".join([*lines, ""])


def render_page() -> str:
    return reference.render_reference() + render_settings()


PROG = "python -m controller.settings_doc"
cli = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})


@cli.command(help=__doc__.split("\n\n")[0], cls=HelpCommand)
def generate(
    ctx: typer.Context,
    write: Annotated[bool, typer.Option("--write", help=f"rewrite {reference.PAGE.name}")] = False,
    check: Annotated[bool, typer.Option("--check", help=f"exit 1 when {reference.PAGE.name} differs")] = False,
) -> None:
    if write and check:
        raise typer.BadParameter("use either --write or --check", ctx)
    page = reference.PAGE
    current = page.read_text() if page.exists() else None
    ctx.obj.result = generated_page(page, render_page(), current, PROG, write=write, check=check)


def main(argv: list[str] | None = None) -> int:
    return int(invoke(cli, argv, PROG))


if __name__ == "__main__":
    sys.exit(main())
