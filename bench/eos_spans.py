"""Where an exactly-once batch spends its time: the spans the sink writes (app.pipeline.exactly_once,
``STREAMQ_EXACTLY_ONCE_SPANS``), summed up per step and per kind of producer.

Each writer of each batch writes one line: the seconds to its first row (the shuffle read and the
Python hand-off), to begin (a kept producer: the transaction and the marker's round trip), init (a
new producer's start and ``init_transactions``), marker (the read of its control partition),
produce (its rows) and commit; ``producer`` says whether it was kept from an earlier batch, made
new, or made because another had fenced the kept one. The driver writes one line per batch: the
seconds ``foreachBatch`` took. What the writers do not account for of that is Spark's: the source
stage, the shuffle, scheduling the writer tasks.

    .venv/bin/python -m bench.eos_spans /tmp/spans.jsonl      # a table, and the figures as JSON

``bench.latency`` sets the variable for its exactly-once paths and puts this summary in its results.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.cli import run
from bench.common import print_table
from devtools.payments import percentile

STEPS = ("firstRow", "begin", "init", "marker", "produce", "commit")


def _ms(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    return {q: (None if not ordered else round(1000 * float(percentile(ordered, n, presorted=True)), 1))
            for q, n in (("p50", 50), ("p99", 99))}  # fmt: skip


def read(path: Path | str) -> list[dict[str, Any]]:
    """The lines of a spans file; a line cut short by a killed writer is left out."""
    lines = []
    for text in Path(path).read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            continue
    return lines


def summarize(lines: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per kind of producer: how many writers, and each step's p50/p99 in ms; the driver's
    ``foreachBatch`` p50/p99, and the part of each batch no writer accounts for (``spark``:
    ``foreachBatch`` minus its slowest writer's steps)."""
    writers: dict[str, list[dict[str, Any]]] = defaultdict(list)
    slowest: dict[int, float] = defaultdict(float)
    batches: dict[int, float] = {}
    for line in lines:
        if line.get("side") == "driver":
            batches[line["batch"]] = line["foreachBatch"]
            continue
        kind = "skipped" if line.get("skipped") else line.get("producer", "?")
        writers[kind].append(line)
        slowest[line["batch"]] = max(slowest[line["batch"]], sum(line.get(step, 0.0) for step in STEPS))
    kinds = {
        kind: {"writers": len(found), **{step: _ms([w[step] for w in found if step in w]) for step in STEPS}}
        for kind, found in sorted(writers.items())
    }
    return {
        "batches": len(batches),
        "foreachBatchMs": _ms(list(batches.values())),
        "sparkMs": _ms([total - slowest.get(batch, 0.0) for batch, total in batches.items()]),
        "writers": kinds,
    }


def show(summary: dict[str, Any]) -> None:
    rows = [[kind, found["writers"], *(f"{found[s]['p50']} / {found[s]['p99']}" for s in STEPS)]
            for kind, found in summary["writers"].items()]  # fmt: skip
    print_table(["producer", "writers", *(f"{s} p50/p99 ms" for s in STEPS)], rows, title="exactly-once writers")
    fb, spark = summary["foreachBatchMs"], summary["sparkMs"]
    print(f"{summary['batches']} batches: foreachBatch p50 {fb['p50']} / p99 {fb['p99']} ms, "
          f"of which no writer's (Spark's) p50 {spark['p50']} / p99 {spark['p99']} ms")  # fmt: skip


def main(path: Annotated[Path, typer.Argument(help="the spans file (STREAMQ_EXACTLY_ONCE_SPANS)")]) -> None:
    summary = summarize(read(path))
    show(summary)
    print(json.dumps(summary))


if __name__ == "__main__":
    run(main, "bench.eos_spans", __doc__)
