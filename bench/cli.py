"""The benchmarks' command lines: typer, as `streamq` (app/cli), and the options several harnesses share."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Annotated, Any

import typer


def key_values(texts: list[str]) -> list[tuple[str, str]]:
    """``--conf k=v`` given several times, as (key, value) pairs in their order (a value may hold ``=``)."""
    pairs = []
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected key=value, got {text!r}")
        pairs.append((key, value))
    return pairs


def known_names(text: str, known: Iterable[str], option: str) -> list[str]:
    """A comma-separated list of names, each one of ``known`` (else a usage error naming ``option``)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = set(names) - set(known)
    if unknown:
        raise typer.BadParameter(f"unknown path(s): {', '.join(sorted(unknown))}", param_hint=option)
    return names


# Options several harnesses take, with one meaning.
AutogroupNice = Annotated[
    int, typer.Option(help="e.g. -10: more CPU weight for the benchmark's session than other sessions' (root only)")
]
Rate = Annotated[int, typer.Option(help="records/s offered")]
Label = Annotated[str, typer.Option(help="a word for the results file (a setting tried: goes to tuning/)")]
BrokerWarmup = Annotated[float, typer.Option(help="seconds of unrecorded traffic before the first path")]
DrainTimeout = Annotated[float, typer.Option(help="seconds for the last records to arrive")]
NoPlots = Annotated[bool, typer.Option("--no-plots", help="no PNG plots of the results")]

Partitions = Annotated[int, typer.Option(help="the input topic's partitions")]
Conf = Annotated[list[str], typer.Option(metavar="K=V", callback=key_values, help="spark conf k=v for the job")]
SourceOption = Annotated[list[str], typer.Option(metavar="K=V", callback=key_values, help="Kafka source option k=v")]
SinkOption = Annotated[list[str], typer.Option(metavar="K=V", callback=key_values, help="Kafka sink option k=v")]
ExactlyOnce = Annotated[
    bool,
    typer.Option(
        "--exactly-once", help="the job's Kafka sink writes exactly once (sink.kafka.delivery exactlyOnce; microBatch only)"
    ),
]
Producers = Annotated[
    int,
    typer.Option(help="exactly-once writers per batch (sink.kafka.transactions.producers; 0: the spec's default)"),
]
CheckpointInterval = Annotated[
    str, typer.Option(help="a continuous path's epoch length (trigger.continuous.checkpointInterval, e.g. 5s; '': 1s)")
]

# The options of every harness that starts a job through bench.latency's ModeRun: the topics'
# partitions, Spark confs and the Kafka source's and sink's options (bench.report's A/B tables show them).
JOB_OPTIONS = tuple(
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
    for name, annotation, default in (
        ("partitions", Partitions, 2),
        ("conf", Conf, []),
        ("source_option", SourceOption, []),
        ("sink_option", SinkOption, []),
        ("exactly_once", ExactlyOnce, False),
        ("producers", Producers, 0),
        ("checkpoint_interval", CheckpointInterval, ""),
    )
)


def with_job_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with the job options on its command line: it takes them as ``**job_options``."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = signature.replace(parameters=[*own, *JOB_OPTIONS])
    return command


def options(given: dict[str, Any]) -> SimpleNamespace:
    """A command's ``locals()`` as one object, the job options among the others: ModeRun reads them by
    name, and the results record them all as "settings"."""
    given = dict(given)
    job_options = given.pop("job_options", {})
    return SimpleNamespace(**given, **job_options)


def run(command: Callable[..., Any], prog: str, doc: str | None) -> None:
    """Run ``command`` as the whole command line of ``python -m <prog>``; its exit code is what it raises
    (``typer.Exit``); a wrong option is a usage error, exit code 2."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(help=(doc or "").split("\n\n")[0])(command)
    app(prog_name=f"python -m {prog}")
