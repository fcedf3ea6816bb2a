"""`python -m devtools [--mode M] [--rate R]`: what `make dev` runs, from the repository root."""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from typing import Annotated

import typer

from contract.cli_help import HelpCommand

cli = typer.Typer(add_completion=False)


class DevMode(StrEnum):
    CONTINUOUS = "continuous"
    REAL_TIME = "realTime"
    MICRO_BATCH = "microBatch"


@cli.command(cls=HelpCommand)
def dev(
    mode: Annotated[DevMode, typer.Option(help="The trigger the fraud filter runs with.")] = DevMode.CONTINUOUS,
    rate: Annotated[float, typer.Option(min=0.1, metavar="N", help="Payments fed per second.")] = 20.0,
) -> None:
    """The fraud filter on a local Kafka broker: payments in, flagged ones and their latency out.

    A broker on loopback (the cached jars), a steady feed of payments, the query, and each
    flagged payment with its end-to-end latency. Ctrl-C stops all of it."""
    from devtools.loop import run_dev

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    raise typer.Exit(run_dev(mode.value, rate))


if __name__ == "__main__":
    cli(prog_name="python -m devtools")
