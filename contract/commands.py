"""How the project's command lines run (the operator's, the generators', the testbed's): typer commands, run with ``invoke``.

``invoke(app, argv, prog_name, env)`` runs the one command of ``app`` on ``argv`` and returns what the
command put in ``ctx.obj.result``: the ``main(argv) -> int`` each module had with argparse. As with
argparse, ``--help`` exits 0 and a usage error (an unknown or missing flag, two that exclude each
other) exits 2, with the message on stderr. The command's environment fallbacks read ``ctx.obj.env``:
``os.environ``, or the mapping a test gives.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from contract.cli_help import HelpCommand

__all__ = ["Invocation", "file_generator", "generated_page", "invoke"]

_UNSET: Any = object()


@dataclass
class Invocation:
    """``ctx.obj`` of a command run by ``invoke``."""

    env: Mapping[str, str]
    result: Any = _UNSET


def invoke(app: typer.Typer, argv: Sequence[str] | None, prog_name: str, env: Mapping[str, str] | None = None) -> Any:
    call = Invocation(os.environ if env is None else env)
    try:
        # The click command itself, not app(): no shell-completion options, plain tracebacks (pod logs).
        typer.main.get_command(app).main(args=argv, prog_name=prog_name, obj=call, standalone_mode=True)
    except SystemExit:
        if call.result is _UNSET:  # --help, a usage error: the exit code click chose (0, 2)
            raise
    if call.result is _UNSET:  # pragma: no cover - standalone mode always exits
        raise SystemExit(0)
    return call.result


def generated_page(page: Path, fresh: str, current: str | None, prog: str, *, write: bool, check: bool,
                   written: str | None = None) -> int:  # fmt: skip
    """A generator's three uses of a page it owns: ``--check`` (exit 1 when ``current``, the part of the page
    it generates, is not ``fresh``), ``--write`` (``written``, else ``fresh``, into ``page``), or print it."""
    if check:
        if current != fresh:
            print(f"out of date (run `{prog} --write`): {page}", file=sys.stderr)
            return 1
        return 0
    text = fresh if written is None else written
    if write:
        page.write_text(text)
        print(f"wrote {page}")
    else:
        print(text, end="")
    return 0


def file_generator(
    prog: str, doc: str, render: Callable[[], str], outputs: Callable[[], Sequence[Path]], root: Path
) -> Callable[[Sequence[str] | None], int]:
    """The ``main(argv)`` of a generator that owns whole files (the CRD, the admission policy): it writes
    ``render()`` into each of ``outputs()`` that differs, or with ``--check`` names them and exits 1.
    ``outputs`` is a callable so that a test can point the module's constant elsewhere."""
    app = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})

    @app.command(help=doc.split("\n\n")[0], cls=HelpCommand)
    def generate(
        ctx: typer.Context,
        check: Annotated[bool, typer.Option("--check", help="fail when a generated file differs")] = False,
    ) -> None:
        text = render()
        stale = [path for path in outputs() if (path.read_text() if path.exists() else None) != text]
        shown = [str(path.relative_to(root)) if path.is_relative_to(root) else str(path) for path in stale]
        if check and stale:
            print(f"out of date (run `{prog}`): " + ", ".join(shown), file=sys.stderr)
        elif not check:
            for path, name in zip(stale, shown, strict=True):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                print(f"wrote {name}")
        ctx.obj.result = 1 if check and stale else 0

    def main(argv: Sequence[str] | None = None) -> int:
        return int(invoke(app, argv, prog))

    return main
