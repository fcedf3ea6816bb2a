"""`python -m controller`: run the streamq operator.

Flags override the environment the Deployment sets:

    -n/--namespace NS (repeatable)  STREAMQ_NAMESPACES=a,b     watch these namespaces
    -A/--all-namespaces             (default when none given)  watch the whole cluster
    --peering NAME                  STREAMQ_PEERING=NAME       coordinate replicas (needs kopf's peering CRDs)
    --priority N                    STREAMQ_PEERING_PRIORITY=N this replica's peering priority
                                                               (default: random, so replicas differ)
    --standalone                    STREAMQ_STANDALONE=1       no peering at all
    --liveness URL                  STREAMQ_LIVENESS=URL       e.g. http://0.0.0.0:8080/healthz
    --metrics-port N                STREAMQ_METRICS_PORT=N     Prometheus metrics; 0 turns them off

The operator's other settings (job image, driver account, ...) are read by
``controller.config.Settings.from_env``.

    python -m controller release-finalizers ...   the chart's pre-delete hook (controller/uninstall.py)
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import Annotated

import kopf
import typer

from contract.cli_help import HelpCommand
from contract.commands import invoke

PROG = "python -m controller"
cli = typer.Typer(add_completion=False)


@dataclass(frozen=True)
class OperatorArgs:
    namespaces: list[str] | None  # None: the whole cluster
    all_namespaces: bool
    peering: str | None
    priority: int
    standalone: bool
    liveness: str | None
    metrics_port: int
    verbose: bool
    debug: bool


@cli.command(help="The streamq operator.", cls=HelpCommand)
def operator(
    ctx: typer.Context,
    namespaces: Annotated[
        list[str] | None,
        typer.Option(
            "-n", "--namespace", metavar="NAMESPACE", help="Watch this namespace (repeatable). \\[env: STREAMQ_NAMESPACES=a,b]"
        ),
    ] = None,
    all_namespaces: Annotated[
        bool, typer.Option("-A", "--all-namespaces", help="Watch the whole cluster (the default when no namespace is given).")
    ] = False,
    peering: Annotated[
        str | None, typer.Option(metavar="NAME", help="Coordinate replicas (needs kopf's peering CRDs). \\[env: STREAMQ_PEERING]")
    ] = None,
    # kopf pauses every replica when two share a priority; distinct priorities give
    # one active replica and hot standbys that take over when it goes away.
    priority: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="This replica's peering priority (default: random, so replicas differ). \\[env: STREAMQ_PEERING_PRIORITY]",
        ),
    ] = None,
    standalone: Annotated[bool, typer.Option("--standalone", help="No peering at all. \\[env: STREAMQ_STANDALONE=1]")] = False,
    liveness: Annotated[
        str | None, typer.Option(metavar="URL", help="e.g. http://0.0.0.0:8080/healthz \\[env: STREAMQ_LIVENESS]")
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(metavar="PORT", help="Prometheus metrics; 0 turns them off (default 9090). \\[env: STREAMQ_METRICS_PORT]"),
    ] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
    debug: Annotated[bool, typer.Option("--debug")] = False,
) -> None:
    env = ctx.obj.env
    if not namespaces:  # none given (click hands an empty list)
        namespaces = None
    if namespaces is None and not all_namespaces:
        from_env = [n.strip() for n in env.get("STREAMQ_NAMESPACES", "").split(",") if n.strip()]
        namespaces = from_env or None
    peering = peering if peering is not None else env.get("STREAMQ_PEERING") or None
    standalone = standalone or env.get("STREAMQ_STANDALONE") == "1"
    if namespaces and all_namespaces:
        raise typer.BadParameter("use either --namespace or --all-namespaces", ctx)
    if peering and standalone:
        raise typer.BadParameter("use either --peering or --standalone", ctx)
    ctx.obj.result = OperatorArgs(
        namespaces=namespaces,
        all_namespaces=all_namespaces,
        peering=peering,
        priority=priority if priority is not None else int(env.get("STREAMQ_PEERING_PRIORITY") or random.randint(1, 1_000_000)),
        standalone=standalone,
        liveness=liveness if liveness is not None else env.get("STREAMQ_LIVENESS") or None,
        metrics_port=metrics_port if metrics_port is not None else int(env.get("STREAMQ_METRICS_PORT", "9090")),
        verbose=verbose,
        debug=debug,
    )


def parse_args(argv: list[str] | None = None, env: dict[str, str] | None = None) -> OperatorArgs:
    """The flags, each with its environment fallback (``env``: os.environ when None). Exits 2 on a usage error."""
    args: OperatorArgs = invoke(cli, argv, PROG, env)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["release-finalizers"]:
        from controller import uninstall

        return uninstall.main(argv[1:])
    args = parse_args(argv)
    kopf.configure(verbose=args.verbose, debug=args.debug)
    import controller.handlers  # noqa: F401  (registers the handlers)

    kopf.run(
        clusterwide=not args.namespaces,
        namespaces=args.namespaces or (),
        standalone=True if args.standalone else None,
        peering_name=args.peering,
        priority=args.priority,
        liveness_endpoint=args.liveness,
        memo=kopf.Memo(metrics_port=args.metrics_port),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
