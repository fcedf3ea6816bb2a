"""`streamq`: run and validate StreamingQuery specs from the command line."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from app.contract import ExitCode
from app.contract.load import QueryDocument, load_file
from app.contract.problems import SpecError

cli = typer.Typer(help="Spark Structured Streaming queries, described once, run anywhere.", no_args_is_help=True)
err = Console(stderr=True, soft_wrap=True)

SpecPath = Annotated[Path, typer.Argument(help="A StreamingQuery YAML/JSON file, or a bare spec.")]


def _load(path: Path) -> QueryDocument:
    try:
        return load_file(path)
    except SpecError as exc:
        _report_problems(path, exc)
        raise typer.Exit(ExitCode.INVALID_SPEC) from None


def _report_problems(path, exc: SpecError) -> None:
    err.print(f"[bold red]invalid[/] {path}: {len(exc.problems)} problem(s)")
    for problem in exc.problems:
        err.print(f"  - {problem}", markup=False, highlight=False)


@cli.command()
def run(
    spec: SpecPath,
    progress_file: Annotated[str | None, typer.Option(help="Keep the latest progress record in this file.")] = None,
    starting_offsets: Annotated[
        str | None,
        typer.Option(help="Where to start when the checkpoint has nothing to resume from (a lost checkpoint): "
                          'Spark\'s JSON offsets {"topic":{"0":42}}, earliest or latest. Ignored otherwise.'),
    ] = None,
) -> None:
    """Run the query until it is stopped (SIGTERM/Ctrl-C) or fails."""
    from app.run import RunOptions, run as run_query

    _setup_logging()
    doc = _load(spec)
    defaults = RunOptions()
    options = RunOptions(
        progress_file=progress_file or defaults.progress_file,
        termination_log=defaults.termination_log,
        broker_timeout_s=defaults.broker_timeout_s,
        starting_offsets=starting_offsets,
    )
    raise typer.Exit(int(run_query(doc, options)))


@cli.command()
def validate(
    specs: Annotated[list[Path], typer.Argument(help="One or more spec files.")],
    spark: Annotated[bool, typer.Option("--spark", help="Also ask Spark's analyser (starts a JVM, no broker needed).")] = False,
) -> None:
    """Check specs: the static rules always, Spark's analyser with --spark."""
    worst = ExitCode.OK
    docs = []
    for path in specs:
        try:
            docs.append((path, load_file(path)))
        except SpecError as exc:
            _report_problems(path, exc)
            worst = ExitCode.INVALID_SPEC
    if spark and docs:
        from app.pipeline.session import get_session
        from app.validation.analyser import analyse

        session = get_session(docs[0][1].spec, "validate")
        for path, doc in list(docs):
            problems = analyse(session, doc)
            if problems:
                _report_problems(path, SpecError(problems))
                docs.remove((path, doc))
                worst = max(worst, ExitCode.QUERY_REFUSED)
    for path, doc in docs:
        err.print(f"[green]valid[/] {path} ({doc.spec.mode} mode)")
    raise typer.Exit(int(worst))


checkpoint_cli = typer.Typer(help="Look inside Structured Streaming checkpoints (no Spark needed).", no_args_is_help=True)
cli.add_typer(checkpoint_cli, name="checkpoint")


@checkpoint_cli.command("inspect")
def inspect_checkpoint(
    location: Annotated[str, typer.Argument(help="A checkpoint directory or URI (s3a://, gs://... need fsspec).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    spec: Annotated[
        Path | None, typer.Option(help="The query's spec: its source broker and credentials give the lag per partition.")
    ] = None,
    bootstrap_servers: Annotated[
        str | None, typer.Option(help="A Kafka broker (no credentials) to measure the lag against.")
    ] = None,
) -> None:
    """The last committed epoch/batch, its offsets, the batch in flight and their ages."""
    from app.checkpoint import CheckpointError, read_checkpoint
    from app.inspector import describe, lag_against, render_tables

    try:
        state = read_checkpoint(location)
    except CheckpointError as exc:
        err.print(f"[bold red]cannot read[/] {location}: {exc}", highlight=False)
        raise typer.Exit(ExitCode.INVALID_SPEC) from None
    report = describe(state)
    if spec is not None or bootstrap_servers is not None:
        report["lag"] = lag_against(state, _load(spec).spec if spec else None, bootstrap_servers)
    if as_json:
        Console(soft_wrap=True).print_json(data=report)
    else:
        render_tables(report, Console())
    if not state.exists:
        raise typer.Exit(ExitCode.SOURCE_UNAVAILABLE)


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def main() -> None:
    cli()
