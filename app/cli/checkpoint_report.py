"""`streamq checkpoint inspect`: what a checkpoint holds, as JSON or tables.

The reading is app.checkpoints.reader's; this module shapes it for people and, when
given a broker, adds the lag of the committed offsets behind the latest ones.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table

from app.checkpoints.reader import CheckpointState
from app.monitoring.health import compute_lag
from app.monitoring.reporting import iso
from contract.compat import Holds

NOT_A_CHECKPOINT = "not a checkpoint: no metadata, offsets/ or commits/ of a Structured Streaming query"


def holds_checkpoint(state: CheckpointState) -> bool:
    """Something a query wrote is there. An empty folder (or docs/) reads as an existing checkpoint that
    Spark could start from, which is right for the job (a fresh location) but not an answer to "what is in
    this checkpoint": inspect says it is none."""
    return state.exists and bool(
        state.query_id or state.last_committed is not None or state.in_flight is not None
        or state.stateful_operators or state.problems
    )  # fmt: skip


def describe(state: CheckpointState, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    out = state.to_json(now)
    out["checkpoint"] = holds_checkpoint(state)
    if state.exists and not out["checkpoint"]:
        out["resumable"] = False
        out["problems"] = [*out["problems"], NOT_A_CHECKPOINT]
    out["committedAt"] = iso(state.committed_at)
    out["plannedAt"] = iso(state.planned_at)
    out["holds"] = Holds.of(state).to_wire().model_dump(by_alias=True)
    return out


def lag_against(state: CheckpointState, spec, bootstrap_servers: str | None) -> dict[str, Any]:
    """{"perPartition": {topic: {partition: n}}, "total": n} of the committed offsets behind the broker's latest."""
    from app.pipeline.kafka_checks import KafkaEndpoint, PreflightError, describe_topics, endpoints, list_offsets

    if bootstrap_servers:
        endpoint = KafkaEndpoint("source", bootstrap_servers, {})
    else:
        endpoint = next((e for e in endpoints(spec) if e.role == "source"), None)
        if endpoint is None:
            return {"error": "the spec's source is not Kafka"}
    committed = state.kafka_offsets()
    try:
        topics = describe_topics(endpoint, 15.0)
        partitions = {t: topics[t] for t in committed if t in topics}
        latest = list_offsets(endpoint, partitions, "latest", 15.0)
    except PreflightError as exc:
        return {"error": str(exc)}
    lag = compute_lag(latest, committed, {})
    return {
        "perPartition": {t: {str(p): n for p, n in sorted(parts.items())} for t, parts in sorted(lag.items())},
        "total": sum(sum(parts.values()) for parts in lag.values()),
        "latestOffsets": {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(latest.items())},
    }


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def render_tables(report: dict[str, Any], console: Console) -> None:
    summary = Table(title=f"checkpoint {report['location']}", show_header=False)
    summary.add_column("what", style="bold")
    summary.add_column("value")
    if not report["exists"]:
        summary.add_row("exists", "[red]no[/]")
        console.print(summary)
        return
    summary.add_row("query id", str(report["queryId"] or "-"))
    summary.add_row("resumable", "yes" if report["resumable"] else "[red]no[/]")
    committed = report["lastCommitted"]
    summary.add_row("last committed", "-" if committed is None else f"{committed} ({_age(report['lastCommitAgeSeconds'])})")
    in_flight = report["inFlight"]
    summary.add_row("in flight", "-" if in_flight is None else f"{in_flight} (planned {_age(report['inFlightAgeSeconds'])})")
    summary.add_row("sources", ", ".join(report["sourceKinds"]) or "-")
    operators = report["statefulOperators"]
    summary.add_row("stateful operators", ", ".join(f"{o['id']}:{o['name']}" for o in operators) or "none")
    for problem in report["problems"]:
        summary.add_row("[yellow]problem[/]", problem)
    console.print(summary)
    if not report.get("checkpoint", True):
        return  # no offsets to show

    lag = (report.get("lag") or {}).get("perPartition") or {}
    offsets = Table(title="offsets per source and partition")
    for column in ("source", "topic", "partition", "committed", "in flight", *(["lag"] if lag else [])):
        offsets.add_column(column, justify="right" if column not in ("topic",) else "left")
    flight = report["inFlightOffsets"]
    for index, source in enumerate(report["committedOffsets"] or flight):
        planned = flight[index] if index < len(flight) else None
        if isinstance(source, dict) and all(isinstance(v, dict) for v in source.values()):
            for topic, parts in sorted(source.items()):
                for partition, offset in sorted(parts.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else 0):
                    ahead = (planned or {}).get(topic, {}).get(partition) if isinstance(planned, dict) else None
                    row = [str(index), topic, str(partition), str(offset), "-" if ahead is None else str(ahead)]
                    if lag:
                        row.append(str(lag.get(topic, {}).get(str(partition), "-")))
                    offsets.add_row(*row)
        else:
            offsets.add_row(str(index), "-", "-", str(source), "-" if planned is None else str(planned), *(["-"] if lag else []))
    console.print(offsets)
    if report.get("lag"):
        if "error" in report["lag"]:
            console.print(f"[yellow]lag unknown:[/] {report['lag']['error']}", highlight=False)
        else:
            console.print(f"total lag: {report['lag']['total']} record(s)")
