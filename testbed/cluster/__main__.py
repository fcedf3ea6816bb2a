"""`python -m testbed.cluster up|down|provider` (what hack/e2e-cluster.sh runs).

up [--no-addons]   bring a cluster up (plus CoreDNS, Kafka and the operator), print
                   its KUBECONFIG, and stay in the foreground; ^C or SIGTERM tears it down
down               tear down what a crashed run left behind (local provider)
provider           print the provider that would be chosen
"""

from __future__ import annotations

import signal
import sys
import threading
from enum import StrEnum
from typing import Annotated

import typer

from contract.cli_help import HelpCommand
from contract.commands import invoke
from testbed.cluster import choose_provider, create_cluster
from testbed.cluster.base import log


class Command(StrEnum):
    UP = "up"
    DOWN = "down"
    PROVIDER = "provider"


cli = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})


@cli.command(help=__doc__.split("\n\n")[0], cls=HelpCommand)
def e2e_cluster(
    ctx: typer.Context,
    command: Annotated[Command, typer.Argument(metavar="COMMAND", help="up, down or provider")],
    no_addons: Annotated[bool, typer.Option("--no-addons", help="only the cluster: no CoreDNS, Kafka, operator")] = False,
) -> None:
    ctx.obj.result = _run(command, no_addons)


def _run(command: Command, no_addons: bool) -> int:
    provider = choose_provider()
    if command == Command.PROVIDER:
        print(provider)
        return 0
    if command == Command.DOWN:
        if provider == "local":
            from testbed.cluster.local import MachineLock, cleanup_leftovers

            lock = MachineLock()
            lock.acquire(timeout=0)  # refuses while a cluster is up: its owner tears it down
            try:
                cleanup_leftovers()
            finally:
                lock.release()
        else:
            create_cluster(provider).down()
        return 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = create_cluster(provider)
    cluster.up()
    try:
        if not no_addons:
            from testbed.cluster.addons import setup

            bootstrap = setup(cluster)
            print(f"KAFKA_BOOTSTRAP={bootstrap}", flush=True)
        print(f"KUBECONFIG={cluster.kubeconfig}", flush=True)
        log("cluster ready; ^C (or SIGTERM) tears it down")
        while not stop.wait(1):
            pass
    finally:
        cluster.down()
    return 0


def main(argv: list[str] | None = None) -> int:
    return int(invoke(cli, argv, "hack/e2e-cluster.sh"))


if __name__ == "__main__":
    sys.exit(main())
