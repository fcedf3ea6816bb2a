"""`streamq`: run and validate StreamingQuery specs from the command line."""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from contract import ExitCode
from contract.cli_help import HelpCommand, HelpGroup
from contract.load import QueryDocument, load_document, load_file, parse_text
from contract.policy import DEFAULT_RELEASE, OperatorFacts, Policy, from_values
from contract.problems import Problem, SpecError, problems_from_validation_error

cli = typer.Typer(help="Spark Structured Streaming queries, described once, run anywhere.", no_args_is_help=True, cls=HelpGroup)
err = Console(stderr=True, soft_wrap=True)


def version() -> str:
    """The installed package's version; in a checkout that was never installed, pyproject.toml's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("streamq")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"] if pyproject.is_file() else "unknown"


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"streamq {version()}")
        raise typer.Exit()


@cli.callback()
def _options(
    _version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    pass


SpecPath = Annotated[Path, typer.Argument(metavar="SPEC", help="A StreamingQuery YAML/JSON file, or a bare spec.")]


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


STARTING_OFFSETS_HELP = (
    "Where to start when the checkpoint has nothing to resume from (a lost checkpoint): "
    'Spark\'s JSON offsets {"topic":{"0":42}}, earliest or latest. Ignored otherwise.'
)
LOG_FORMAT_HELP = (
    "Progress as JSON lines (what the operator reads) or one readable line per interval; "
    "auto: readable when stdout is a terminal."
)


class LogFormat(StrEnum):
    AUTO = "auto"
    JSON = "json"
    HUMAN = "human"


RELEASE_HELP = "The Helm release the operator was installed as: the chart names the operator's account after it."
POLICY_HELP = (
    "A Helm values file whose `policy:` block (and job image, accounts) the operator runs with. "
    "Default: the chart's default policy."
)


@cli.command(cls=HelpCommand)
def run(
    spec: SpecPath,
    progress_file: Annotated[
        str | None, typer.Option(metavar="FILE", help="Keep the latest progress record in this file.")
    ] = None,
    starting_offsets: Annotated[str | None, typer.Option(metavar="OFFSETS", help=STARTING_OFFSETS_HELP)] = None,
    log_format: Annotated[LogFormat, typer.Option(help=LOG_FORMAT_HELP)] = LogFormat.AUTO,
) -> None:
    """Run the query until it is stopped (SIGTERM/Ctrl-C) or fails."""
    from app.console.lines import wants_human
    from app.driver.run import RunOptions
    from app.driver.run import run as run_query

    _setup_logging()
    doc = _load(spec)
    human = wants_human(log_format.value, sys.stdout.isatty())
    options = RunOptions.from_env(progress_file=progress_file, starting_offsets=starting_offsets, human=human)
    raise typer.Exit(int(run_query(doc, options)))


def _load_policy(values_file: Path | None, release: str = DEFAULT_RELEASE) -> tuple[Policy, OperatorFacts]:
    """The chart's default policy, or the one a values file sets for ``release``."""
    if values_file is None:
        return from_values({}, release)
    try:
        values = parse_text(values_file.read_text(), str(values_file))
        if values is not None and not isinstance(values, dict):
            raise SpecError([Problem("", f"expected a values mapping, got {type(values).__name__}")])
        return from_values(values, release)
    except OSError as exc:
        err.print(f"[bold red]cannot read[/] {values_file}: {exc.strerror}", highlight=False)
    except ValidationError as exc:
        _report_problems(values_file, SpecError(problems_from_validation_error(exc, "policy")))
    except SpecError as exc:
        _report_problems(values_file, exc)
    raise typer.Exit(ExitCode.INVALID_SPEC)


VALIDATE_PATHS_HELP = (
    "StreamingQuery files (YAML or JSON, one or more documents each, or a bare spec) and directories, "
    "searched for *.yaml, *.yml and *.json."
)
# sysexits' EX_NOINPUT, as 64 and 65 are EX_USAGE and EX_DATAERR: nothing to check (no StreamingQuery in
# what validate was given, or a path that cannot be read). Not an ExitCode: the job never ends with it.
NO_QUERY_FOUND = 66


@cli.command(cls=HelpCommand)
def validate(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH", help=VALIDATE_PATHS_HELP)],
    spark: Annotated[bool, typer.Option("--spark", help="Also ask Spark's analyser (starts a JVM, no broker needed).")] = False,
    policy: Annotated[Path | None, typer.Option(metavar="VALUES_FILE", help=POLICY_HELP)] = None,
    release: Annotated[str, typer.Option(metavar="NAME", help=RELEASE_HELP)] = DEFAULT_RELEASE,
) -> None:
    """Check every StreamingQuery in the files and directories before applying them.

    The static rules and the platform's policy always, Spark's analyser with --spark (only for specs
    that pass both: Spark never analyses what the policy refuses). Documents of other kinds (a
    Namespace, a Kustomization, a Helm template found in a folder) are skipped. Exit 64: a query is
    invalid (or a file named is not YAML); 65: Spark refused one; 66: no StreamingQuery found, or a
    path cannot be read."""
    from app.cli.documents import Skipped, Unreadable, walk

    rules, facts = _load_policy(policy, release)
    worst = ExitCode.OK
    docs: list[tuple[str, QueryDocument]] = []
    found = 0
    for item in walk(paths):
        if isinstance(item, Skipped):
            err.print(f"skipped {item.label}: {item.reason}", markup=False, highlight=False)
        elif isinstance(item, Unreadable):
            if item.broken:  # it may be a StreamingQuery: as wrong as an invalid one
                found += 1
                _report_problems(item.path, SpecError([Problem("", item.message)]))
                worst = max(worst, ExitCode.INVALID_SPEC)
            else:
                err.print(item.message, style="bold red", markup=False, highlight=False)
                worst = max(worst, NO_QUERY_FOUND)
        else:
            found += 1
            try:
                docs.append((item.label, load_document(item.data, item.path.stem, policy=rules, facts=facts)))
            except SpecError as exc:
                _report_problems(item.label, exc)
                worst = max(worst, ExitCode.INVALID_SPEC)
    if spark and docs:
        from app.pipeline.analyser import analyse
        from app.pipeline.session import get_session, jvm_output_discarded

        with jvm_output_discarded():
            session = get_session(docs[0][1].spec, "validate", with_secrets=False)
        for label, doc in list(docs):
            problems = analyse(session, doc)
            if problems:
                _report_problems(label, SpecError(problems))
                docs.remove((label, doc))
                worst = max(worst, ExitCode.QUERY_REFUSED)
    for label, doc in docs:
        err.print(f"[green]valid[/] {label} ({doc.spec.mode} mode)", highlight=False)
    if not found:
        err.print(f"[bold red]no StreamingQuery[/] in {', '.join(map(str, paths))}", highlight=False)
        worst = max(worst, NO_QUERY_FOUND)
    raise typer.Exit(int(worst))


checkpoint_cli = typer.Typer(
    help="Look inside Structured Streaming checkpoints (no Spark needed).", no_args_is_help=True, cls=HelpGroup
)
cli.add_typer(checkpoint_cli, name="checkpoint")


# The object store's overrides for s3a:// locations; each falls back to the spec's, then the environment's.
_ENDPOINT_HELP = "s3a://: the store's endpoint, e.g. http://127.0.0.1:8333 (else the spec's, else AWS_ENDPOINT_URL)."
_S3Endpoint = Annotated[str | None, typer.Option(metavar="URL", help=_ENDPOINT_HELP)]
_S3Region = Annotated[
    str | None, typer.Option(metavar="REGION", help="s3a://: the signing region (else the spec's, else AWS_REGION).")
]
_S3PathStyle = Annotated[
    bool | None, typer.Option("--s3-path-style/--s3-virtual-hosted", help="s3a://: path-style requests (most non-AWS stores).")
]


@checkpoint_cli.command("inspect", cls=HelpCommand)
def inspect_checkpoint(
    location: Annotated[
        str, typer.Argument(metavar="LOCATION", help="A checkpoint directory or URI (s3a://, gs://... need fsspec).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    spec: Annotated[
        Path | None,
        typer.Option(metavar="SPEC", help="The query's spec: its source broker and credentials give the lag per partition."),
    ] = None,
    bootstrap_servers: Annotated[
        str | None, typer.Option(metavar="HOST:PORT", help="A Kafka broker (no credentials) to measure the lag against.")
    ] = None,
    s3_endpoint: _S3Endpoint = None,
    s3_region: _S3Region = None,
    s3_path_style: _S3PathStyle = None,
) -> None:
    """The last committed epoch/batch, its offsets, the batch in flight and their ages.

    s3a:// keys come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or with --spec from the
    Secret its checkpoint.s3 names when it is mounted (as in the driver pod); never from flags."""
    from app.checkpoints.reader import CheckpointError, S3Options, configure_s3, read_checkpoint
    from app.cli.checkpoint_report import describe, lag_against, render_tables

    options = S3Options()
    if spec is not None and location.startswith(("s3a://", "s3://")):
        from app.pipeline.credentials import s3_credentials

        s3 = _load(spec).spec.checkpoint.s3
        try:
            pair = s3_credentials(s3)
        except SpecError:
            pair = None  # not mounted here: the environment's keys
        options = S3Options.of(s3, pair)
    configure_s3(S3Options(
        s3_endpoint or options.endpoint, s3_region or options.region,
        s3_path_style if s3_path_style is not None else options.path_style,
        options.access_key_id, options.secret_access_key,
    ))  # fmt: skip
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
    if not report["checkpoint"]:  # as for a missing one: there is no checkpoint to read here
        err.print(f"[bold red]not a checkpoint[/] {location}: no metadata, offsets/ or commits/ of a Structured "
                  "Streaming query there (no query has run on it yet, or it is another folder)", highlight=False)  # fmt: skip
        raise typer.Exit(ExitCode.SOURCE_UNAVAILABLE)


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # "Closing down clientserver connection" says nothing


def main() -> None:
    cli()
