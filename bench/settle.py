"""How a query's latency settles in the minutes after its start, at a steady rate.

    .venv/bin/python -m bench.settle                                   # continuous, realTime, baseline: 4 min each at 10k/s
    .venv/bin/python -m bench.settle --paths continuous --minutes 6 --conf spark.driver.extraJavaOptions=-XX:+UseSerialGC

``bench.latency`` measures one 12 s window about a minute after a start, when the job's JIT
compilers still use a third of a core (its results' ``jvmCores``). This one asks what that
window does not: does the tail come down once the JVM has compiled what it runs, and when?
Each path is started as ``bench.latency`` starts it (same ``ModeRun``: broker, job, producer,
consumer), fed ``--ramp`` seconds at 1k/s (a cold JVM straight into 10k/s falls behind for
good on these 2 cores), then ``--rate`` for ``--minutes``, cut into ``--every`` second
windows. Per window: p50/p99/p99.9 and the cores the job's JVM spent in its JIT compilers,
its GC and everything else. Every window keeps its HDR histogram in the results file.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import typer

from bench import cli
from bench import latency_stats as stats
from bench.common import RESULTS_DIR, LoadSampler, git_commit, kafka_broker, log, machine, now_iso, print_table, write_results
from bench.latency import PATHS, ModeRun, jvm_cores_between, kept_going, warm_broker
from bench.latency_clients import read_received


def settle(path: str, broker, workdir: Path, args, sampler: LoadSampler) -> dict[str, Any]:
    run = ModeRun(path, broker, workdir, args)
    result: dict[str, Any] = {"path": path, "trigger": PATHS[path], "windows": []}
    with kept_going(path, run, result):
        started = time.monotonic()
        run.start()
        result["readyAfterS"] = round(time.monotonic() - started, 1)
        run.send(1000, args.ramp)
        edges = [i * args.every for i in range(int(args.minutes * 60 / args.every) + 1)]
        jvm = run.jvm_seconds_at(edges) if run.job is not None else None
        sent = run.send(args.rate, edges[-1], tuple(edges[1:-1]))
        run.drain(sent["first"], sent["last"])
        data = read_received(run.received_path)
        bounds = [sent["first"], *sent["marks"], sent["last"]]
        cores = jvm_cores_between(jvm) if jvm else []
        for i, (lo, hi) in enumerate(pairwise(bounds)):
            w = stats.window(data, lo, hi, run.passes, expected_rate=args.rate * run.pass_fraction)
            w["fromS"], w["toS"] = edges[i], edges[i + 1]
            w["jvmCores"] = cores[i] if i < len(cores) else None
            result["windows"].append(w)
            lat = w["latencyMs"]
            log(f"{path} {edges[i]:>4.0f}-{edges[i + 1]:<4.0f}s: p50 {lat['p50']} p99 {lat['p99']} p99.9 {lat['p99.9']} ms; "
                f"jvm {w['jvmCores']}")  # fmt: skip
        result["scheduleLagMs"] = sent["scheduleLagMs"]
        result["load"] = sampler.summary(sent["t0"] / 1e9, sent["t1"] / 1e9)
    return result


def summary_table(results: dict) -> tuple[list[str], list[list]]:
    """The headers and rows printed at the end of a run."""
    rows = []
    for r in results["runs"]:
        for w in r["windows"]:
            lat, jvm = w["latencyMs"], w.get("jvmCores") or {}
            rows.append([r["path"], f"{w['fromS']:.0f}-{w['toS']:.0f}", lat["p50"], lat["p99"], lat["p99.9"],
                         w["expected"] - w["received"], jvm.get("jit", "-"), jvm.get("gc", "-"), jvm.get("other", "-")])  # fmt: skip
    return ["path", "s after ramp", "p50 ms", "p99 ms", "p99.9 ms", "lost", "JIT cores", "GC cores", "other cores"], rows


@cli.with_job_options
def main(
    paths: Annotated[str, typer.Option(help="comma separated, from " + ",".join(PATHS))] = "continuous,realTime,baseline",
    rate: cli.Rate = 10_000,
    minutes: Annotated[float, typer.Option(help="how long each path runs at the rate")] = 4.0,
    every: Annotated[float, typer.Option(help="seconds per window")] = 20.0,
    ramp: Annotated[float, typer.Option(help="seconds at 1k/s before the rate")] = 15.0,
    broker_warmup: cli.BrokerWarmup = 20.0,
    drain_timeout: cli.DrainTimeout = 15.0,
    label: cli.Label = "",
    **job_options: Any,
) -> None:
    args = cli.options(locals())
    path_names = cli.known_names(args.paths, PATHS, "--paths")

    sampler = LoadSampler()
    results: dict[str, Any] = {"bench": "settle", "label": args.label, "started": now_iso(), "commit": git_commit(),
                               "machine": machine(), "settings": dict(vars(args)), "runs": []}  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="streamq-bench-settle-"))
    broker = kafka_broker(workdir / "kafka")
    sampler.start()
    try:
        broker.start()
        warm_broker(broker, workdir, [args.rate], args)
        for path in path_names:
            results["runs"].append(settle(path, broker, workdir, args, sampler))
    finally:
        results["load"] = sampler.stop()
        results["finished"] = now_iso()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(*summary_table(results))
    out = write_results(f"settle-{args.label}" if args.label else "settle", results,
                        RESULTS_DIR / "tuning" if args.label else None)  # fmt: skip
    log(f"wrote {out}")


if __name__ == "__main__":
    cli.run(main, "bench.settle", __doc__)
