"""The quick start's payments, run in the streamq image (hack/quickstart.sh mounts this file
from the ConfigMap quickstart-payments):

    python payments.py topics            create "payments" (2 partitions) and "payments-flagged"
    python payments.py feed [--rate N]   payments into "payments" until stopped
    python payments.py watch             each flagged payment as it arrives, with its latency

The feed and the reader are `make dev`'s (devtools.payments_io, mounted beside this file from
the same ConfigMap as the package devtools: the image carries no devtools): the same payments,
the same lines. Two partitions: the sample's 4 task slots must exceed them (continuous mode).
"""

from __future__ import annotations

import signal
import sys
import threading
from enum import StrEnum
from typing import Annotated

import typer

from contract.cli_help import HelpCommand  # the streamq image's own package: as `streamq --help` shows them
from contract.commands import invoke
from devtools.payments_io import Screen, feed, read_flagged

SOURCE, SINK = "payments", "payments-flagged"
PARTITIONS = {SOURCE: 2, SINK: 1}


def topics(bootstrap: str, timeout: float = 120) -> int:
    """Create the topics that are missing; wait until the broker has both."""
    import time

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            have = set(admin.list_topics(timeout=5).topics)
            missing = [NewTopic(t, num_partitions=n, replication_factor=1) for t, n in PARTITIONS.items() if t not in have]
            for topic, done in admin.create_topics(missing).items() if missing else ():
                try:
                    done.result(10)
                except Exception as e:  # noqa: BLE001 - created meanwhile by another run: fine
                    if "TOPIC_ALREADY_EXISTS" not in str(e):
                        raise
            if set(PARTITIONS) <= set(admin.list_topics(timeout=5).topics):
                print(f"topics: {', '.join(f'{t} ({n} partitions)' for t, n in PARTITIONS.items())}", flush=True)
                return 0
        except Exception as e:  # noqa: BLE001 - the broker may still be starting: retry until the deadline
            if time.monotonic() > deadline:
                print(f"topics: the broker at {bootstrap} did not answer: {e}", file=sys.stderr)
                return 1
        time.sleep(1)


class Command(StrEnum):
    TOPICS = "topics"
    FEED = "feed"
    WATCH = "watch"


cli = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})


@cli.command(help="The quick start's payments: their topics, a feed, the flagged ones.", cls=HelpCommand)
def payments(
    ctx: typer.Context,
    command: Annotated[Command, typer.Argument(metavar="COMMAND", help="topics, feed or watch")],
    rate: Annotated[float, typer.Option(metavar="RATE", help="payments per second (feed)")] = 20.0,
    bootstrap: Annotated[str, typer.Option(metavar="BOOTSTRAP", envvar="KAFKA_BOOTSTRAP")] = "kafka:9092",
) -> None:
    ctx.obj.result = run(command, rate, bootstrap)


def run(command: Command, rate: float, bootstrap: str) -> int:
    if command == Command.TOPICS:
        return topics(bootstrap)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if command == Command.FEED:
        if topics(bootstrap):
            return 1
        print(f"feeding {rate:g} payments/s into {SOURCE} at {bootstrap}", flush=True)
        feed(bootstrap, SOURCE, rate, stop)
    else:
        read_flagged(bootstrap, SINK, "continuous", Screen(), stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    return int(invoke(cli, argv, "payments.py"))


if __name__ == "__main__":
    sys.exit(main())
