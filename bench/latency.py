"""End-to-end latency Kafka -> query -> Kafka, per path (trigger mode, the floor, a Flink peer).

    .venv/bin/python -m bench.latency                      # every path, 3 repetitions, 1k then 10k/s (~30 min)
    .venv/bin/python -m bench.latency --quick              # one short repetition: checks the harness
    .venv/bin/python -m bench.latency --paths continuous,realTime --reps 3 --label poll10 \\
        --conf spark.sql.streaming.continuous.executorPollIntervalMs=10     # an A/B side (bench/results/tuning/)

Paths: ``baseline`` (producer -> broker -> consumer, no query: the floor), the job as
it ships (``python -m app run`` on the fraud filter) in ``continuous`` (and ``continuousStreamq``: the
same through streamq's own reader, ``source.kafka.reader: streamq``, jvm/reader), ``realTime``
(5 s batches, the shortest Spark accepts by default:
``spark.sql.streaming.realTimeMode.minBatchDuration`` is 5000 ms), ``realTime30s`` and
``microBatch`` (interval 0), ``microBatchExactlyOnce`` (the same with ``sink.kafka.delivery:
exactlyOnce``, read ``read_committed``: the cost of exactly-once against it; the default writer, the
driver), ``microBatchExactlyOnceTasks`` (the same written by 2 producers in Spark tasks,
``transactions: {writer: tasks, producers: 2}``; ``microBatchExactlyOnceDriver``, the name of the
driver writer when it was not the default, runs the default), and ``flink`` (the same filter and projection in Flink
SQL, bench/flink_peer.py). Every path runs on the same broker with the same producer
and consumer processes (bench/latency_clients.py: records stamped with their due
time, so producer stalls count).

Method: each repetition starts every path afresh, in an order rotated by one per
repetition. A path's job is started, probed until a record comes out, then fed at the
rate: the first ``--cold`` seconds are the cold figure (what a user meets after every
start or restart), then ``--warmup`` seconds not counted, then ``--measure`` seconds
measured; each later rate gets ``--rewarm`` seconds before its measured window (the JIT
compiles again when the rate goes up). A real-time path's measured window holds whole
batches, at least two. The broker gets ``--broker-warmup`` seconds of unrecorded traffic
first. Each cell (path, rate) reports the median and the range over the repetitions;
every window keeps an HDR histogram, so ``bench.plots`` and ``bench.report`` redraw
everything from the one results file.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from app.pipeline.exactly_once import SPANS_ENV
from bench import cli, eos_spans
from bench import latency_stats as stats
from bench.common import (
    RESULTS_DIR,
    LoadSampler,
    jvm_thread_seconds,
    kafka_broker,
    log,
    now_iso,
    print_table,
    results_header,
    set_autogroup_nice,
    tree_sched_seconds,
    write_results,
)
from bench.latency_clients import (
    PASS_FRACTION,
    SOURCE_TOPIC_CONFIG,
    TICK_MS,
    consumer_main,
    passes,
    passes_all,
    producer_main,
    read_received,
)
from bench.reader_trace import TRACE_SELECT
from contract.spec import duration_ms

# The triggers as a user writes them; bench.recovery kills each of these.
TRIGGERS = {
    "continuous": {"continuous": {"checkpointInterval": "1s"}},
    "realTime": {"realTime": {"batchDuration": "5s"}},
    "microBatch": {"microBatch": {"interval": "0s"}},
}
Trigger = Literal["continuous", "microBatch", "realTime"]  # TRIGGERS' names, as a --mode takes them
TriggerOption = Annotated[Trigger, typer.Option("--mode", help="the trigger")]
PATHS: dict[str, Any] = {
    "baseline": None,
    **TRIGGERS,
    "continuousStreamq": TRIGGERS["continuous"],  # source.kafka.reader: streamq (jvm/reader, issue #43)
    "realTime30s": {"realTime": {"batchDuration": "30s"}},
    "microBatchExactlyOnce": TRIGGERS["microBatch"],
    "microBatchExactlyOnceTasks": TRIGGERS["microBatch"],  # transactions: writer tasks, producers 2
    "microBatchExactlyOnceDriver": TRIGGERS["microBatch"],  # the default writer, by the name it had as an option
    "flink": "flink",
    # The peer with what the continuous paths pay for their recovery: a checkpoint every second
    # (at-least-once, no barrier alignment), whose barrier flushes Flink's producer as an epoch's
    # commit flushes Spark's (KafkaDataWriter.commit -> producer.flush). "flink" never checkpoints,
    # so never flushes, and recovers nothing.
    "flinkCheckpointed": "flink",
}
ALL_PATHS = list(PATHS)
# sink.kafka.delivery exactlyOnce, read read_committed
EXACTLY_ONCE_PATHS = {"microBatchExactlyOnce", "microBatchExactlyOnceTasks", "microBatchExactlyOnceDriver"}
TASK_WRITER_PATHS = {"microBatchExactlyOnceTasks"}
TASK_WRITER_PRODUCERS = 2  # the tasks' writer as it was the default until 2026-11-29
STREAMQ_READER_PATHS = {"continuousStreamq"}  # source.kafka.reader streamq
FLINK_CHECKPOINT_MS = {"flinkCheckpointed": 1000}  # the continuous paths' epoch (TRIGGERS["continuous"])

# The fraud filter of the tests, with the source record's broker append time copied into
# the output (``inTs``), so each latency splits at the broker on the way in.
BENCH_SELECT = [
    "CAST(key AS STRING) AS key",
    """CONCAT('{"inTs":', CAST(unix_millis(timestamp) AS STRING), ',', SUBSTRING(CAST(value AS STRING), 2)) AS value""",
]


def measured_seconds(trigger: Any, measure_s: float) -> float:
    """The measured window covers whole periods of the path's own rhythm, at least two of them.

    A real-time query stalls for a moment at every batch boundary, so a window that holds
    2.4 batches gives some repetitions two boundaries and others three, and a 12 s window
    over 30 s batches holds one boundary or none: the tail would follow where the window
    happened to fall. Continuous mode's epochs (1 s) and micro-batches fit any window."""
    period_s = 0.0
    if isinstance(trigger, dict) and "realTime" in trigger:
        period_s = duration_ms(trigger["realTime"]["batchDuration"]) / 1000
    if not period_s:
        return measure_s
    return max(2, math.ceil(measure_s / period_s)) * period_s


def jvm_cores_between(samples: list[tuple[float, dict[str, float]]]) -> list[dict[str, float]]:
    """Cores per kind of JVM thread between consecutive samples of (monotonic s, seconds on CPU by kind)."""
    out = []
    for (t0, a), (t1, b) in pairwise(samples):
        span = (t1 - t0) or 1e-9
        out.append({k: round((b[k] - a[k]) / span, 3) for k in a})
    return out


class ModeRun:
    """One path: its topics, its job (none for the baseline), a producer and a consumer process."""

    def __init__(self, mode: str, broker, workdir: Path, args):
        from testbed.kafka_broker import make_topic_name

        self.mode, self.broker, self.args = mode, broker, args
        self.workdir = workdir / f"{mode}-{time.monotonic_ns()}"
        self.workdir.mkdir(parents=True)
        partitions = getattr(args, "partitions", 2)
        split = not getattr(args, "no_split", False)
        self.source = broker.create_topic(
            make_topic_name(f"lat-{mode}-in"), partitions, config=SOURCE_TOPIC_CONFIG if split else None
        )
        self.job = None
        self.spec: dict | None = None
        baseline = mode == "baseline"
        self.out_topic = self.source if baseline else broker.create_topic(make_topic_name(f"lat-{mode}-out"), partitions)
        self.passes = passes_all if baseline else passes
        self.pass_fraction = 1.0 if baseline else PASS_FRACTION
        self.received_path = self.workdir / "received.bin"
        self.spans_path = self.workdir / "eos-spans.jsonl"
        self.received_path.touch()
        ctx = mp.get_context("spawn")
        self._stop_consumer = ctx.Event()
        self._conn, child = ctx.Pipe()
        tick_ms = getattr(args, "tick_ms", TICK_MS)
        self.producer = ctx.Process(target=producer_main, args=(broker.bootstrap, self.source, child, {}, tick_ms), daemon=True)
        # What an exactly-once sink promises, it promises to read_committed readers (librdkafka's default too).
        self.exactly_once = mode in EXACTLY_ONCE_PATHS or getattr(args, "exactly_once", False)
        reader = {"isolation.level": "read_committed"} if self.exactly_once else {}
        self.consumer = ctx.Process(
            target=consumer_main, args=(broker.bootstrap, self.out_topic, str(self.received_path), self._stop_consumer, reader),
            daemon=True,
        )  # fmt: skip

    def start(self) -> None:
        self.consumer.start()
        self.producer.start()
        if PATHS[self.mode] == "flink":
            self._start_flink()
        elif self.mode != "baseline":
            self._start_job()
        if getattr(self.args, "autogroup_nice", 0):
            self.prioritise(self.args.autogroup_nice)
        self._wait_ready()

    def _start_job(self) -> None:
        from testbed.jobs import JobProcess
        from testbed.specs import FRAUD_TRANSFORMS, query_spec, write_resource

        select = TRACE_SELECT if getattr(self.args, "reader_trace", False) else BENCH_SELECT
        transforms = FRAUD_TRANSFORMS if getattr(self.args, "no_split", False) else [*FRAUD_TRANSFORMS[:-1], {"select": select}]
        spec = query_spec(bootstrap=self.broker.bootstrap, topic=self.source, sink_topic=self.out_topic,
                          location=self.workdir / "checkpoint", trigger=PATHS[self.mode], transforms=transforms)  # fmt: skip
        if self.args.conf:
            spec["runtime"]["sparkConf"] = dict(self.args.conf)
        if self.mode in STREAMQ_READER_PATHS:
            spec["source"]["kafka"]["reader"] = "streamq"
        if getattr(self.args, "checkpoint_interval", "") and "continuous" in spec["trigger"]:
            spec["trigger"] = {"continuous": {"checkpointInterval": self.args.checkpoint_interval}}
        if self.args.source_option:
            spec["source"]["kafka"]["options"] = dict(self.args.source_option)
        if self.args.sink_option:
            spec["sink"]["kafka"]["options"] = dict(self.args.sink_option)
        if self.exactly_once:
            spec["sink"]["kafka"]["delivery"] = "exactlyOnce"
            producers = getattr(self.args, "producers", 0)
            if self.mode in TASK_WRITER_PATHS or getattr(self.args, "eos_writer", "driver") == "tasks":
                spec["sink"]["kafka"]["transactions"] = {"writer": "tasks", "producers": producers or TASK_WRITER_PRODUCERS}
            elif producers:  # more than one: the tasks write (the driver has one producer)
                spec["sink"]["kafka"]["transactions"] = {"producers": producers}
        self.spec = spec
        path = write_resource(self.workdir / "query.yaml", f"bench-{self.mode.lower()}", spec)
        env = dict(getattr(self.args, "job_env", None) or {})
        if self.exactly_once:  # where its batches spend their time (bench.eos_spans reads it)
            env[SPANS_ENV] = str(self.spans_path)
        self.job = JobProcess(path, self.workdir, env=env)

    def _start_flink(self) -> None:
        from bench.flink_peer import FlinkPeer

        self.job = FlinkPeer(self.broker.bootstrap, self.source, self.out_topic, partitions=getattr(self.args, "partitions", 2),
                             workdir=self.workdir / "flink", checkpoint_interval_ms=FLINK_CHECKPOINT_MS.get(self.mode)).start()  # fmt: skip

    def _wait_ready(self, timeout: float = 240) -> None:
        """Probe records at a low rate until one comes out the other end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.job is not None and self.job.proc.poll() is not None:
                raise RuntimeError(f"the {self.mode} job exited with {self.job.proc.returncode}:\n{self.job.log()[-3000:]}")
            self.send(100, 0.5)
            if len(read_received(self.received_path)):
                return
        raise RuntimeError(f"no output from the {self.mode} pipeline within {timeout}s")

    def send(self, rate: float, duration_s: float, marks_s: tuple[float, ...] = ()) -> dict:
        self.send_async(rate, duration_s, marks_s)
        return self._conn.recv()

    def send_async(self, rate: float, duration_s: float, marks_s: tuple[float, ...] = ()) -> None:
        """Start a run and return at once; halt() ends it and returns its summary."""
        self._conn.send(("run", rate, duration_s, list(marks_s)))

    def halt(self) -> dict:
        self._conn.send(("halt",))
        return self._conn.recv()

    def sched(self) -> dict[str, tuple[float, float]]:
        pids = {"job": self.job.proc.pid if self.job is not None else None, "broker": self.broker.pid,
                "producer": self.producer.pid, "consumer": self.consumer.pid}  # fmt: skip
        return {k: tree_sched_seconds(p) if p else (0.0, 0.0) for k, p in pids.items()}

    def prioritise(self, nice: int) -> None:
        """Raise the CPU share of the job's, the broker's and our own session (see set_autogroup_nice)."""
        for pid in {os.getpid(), self.broker.pid, *([self.job.proc.pid] if self.job is not None else [])}:
            set_autogroup_nice(pid, nice)

    def step(self, rate: int, cold_s: float, sampler: LoadSampler, warmup_s: float | None = None) -> dict[str, Any]:
        """cold_s at the rate (the cold window), the warm-up, then the measured window."""
        args = self.args
        warmup_s = args.warmup if warmup_s is None else warmup_s
        marks = (cold_s, cold_s + warmup_s)
        measure_s = measured_seconds(PATHS[self.mode], args.measure)
        sched0 = self.sched()
        jvm = self.jvm_seconds_at([0.0, cold_s, cold_s + warmup_s]) if self.job is not None else None
        sent = self.send(rate, cold_s + warmup_s + measure_s, marks)
        sched1 = self.sched()
        jvm_cores = self._jvm_cores(jvm, sent, cold_s, args) if jvm is not None else None
        drained_after = self.drain(sent["first"], sent["last"])
        data = read_received(self.received_path)
        measured = stats.window(data, sent["marks"][1], sent["last"], self.passes, expected_rate=rate * self.pass_fraction)
        ok, why = stats.keeps_up(measured)
        run_s = (sent["t1"] - sent["t0"]) / 1e9
        behind_s = run_s - (cold_s + warmup_s + measure_s)
        if behind_s > 1:
            ok, why = False, "; ".join(filter(None, [why, f"the producer finished {behind_s:.1f} s late"]))
        t_measure = sent["t0"] + int((cold_s + warmup_s) * 1e9)
        return {
            "rate": rate,
            "warmupS": warmup_s,
            "measuredS": measure_s,
            "cold": stats.window(data, sent["first"], sent["marks"][0], self.passes, by_second=True) if cold_s else None,
            "measured": measured,
            "scheduleLagMs": sent["scheduleLagMs"],
            "drainedAfterS": drained_after,
            "sustained": ok,
            "why": why,
            # Cores used, and threads runnable but without a CPU, on average over the step.
            "cpuCores": {k: round((sched1[k][0] - sched0[k][0]) / run_s, 2) for k in sched0},
            "waitingForCpu": {k: round((sched1[k][1] - sched0[k][1]) / run_s, 2) for k in sched0},
            "load": sampler.summary(t_measure / 1e9, sent["t1"] / 1e9),
            # Cores the job's JVM spent compiling (JIT), collecting (GC) and on everything else,
            # in the cold window and in the measured one: what makes the first seconds slow.
            "jvmCores": jvm_cores,
        }

    def jvm_seconds_at(self, offsets_s: list[float]) -> list[tuple[float, dict[str, float]]]:
        """Starts a timer thread that reads the JVM's thread times at each offset from now; the list fills in."""
        import threading

        taken: list[tuple[float, dict[str, float]]] = []
        t0 = time.monotonic()

        def sample() -> None:
            for offset in offsets_s:
                time.sleep(max(0.0, t0 + offset - time.monotonic()))
                taken.append((time.monotonic(), jvm_thread_seconds(self.job.proc.pid)))

        threading.Thread(target=sample, name="bench-jvm-threads", daemon=True).start()
        return taken

    def _jvm_cores(self, taken, sent: dict, cold_s: float, args) -> dict[str, Any] | None:
        end = (time.monotonic(), jvm_thread_seconds(self.job.proc.pid))
        if len(taken) < 3:
            return None
        cold, _, measured = jvm_cores_between([*taken[:3], end])
        return {"cold": cold if cold_s else None, "measured": measured}

    def drain(self, first: int, last: int) -> float | None:
        """Wait until every passing record of the step came out, or give up after --drain-timeout."""
        import numpy as np

        expected = sum(1 for s in range(first, last) if self.passes(s))
        t_end = time.monotonic()
        while True:
            seqs = read_received(self.received_path)[:, 0]
            if len(np.unique(seqs[(seqs >= first) & (seqs < last)])) >= expected:
                return round(time.monotonic() - t_end, 2)
            if time.monotonic() - t_end > self.args.drain_timeout:
                return None
            time.sleep(0.2)

    def close(self) -> None:
        try:
            if self.producer.is_alive():
                self._conn.send(("stop",))
                self.producer.join(30)
        except (OSError, EOFError):
            pass
        self._stop_consumer.set()
        self.consumer.join(30)
        for proc in (self.producer, self.consumer):
            if proc.is_alive():
                proc.kill()
        if self.job is not None:
            self.job.stop()


def run_path(path: str, rep: int, broker, workdir: Path, rates: list[int], sampler: LoadSampler, args) -> dict:
    log(f"{path} (repetition {rep + 1}): starting")
    run = ModeRun(path, broker, workdir, args)
    result: dict[str, Any] = {"path": path, "repetition": rep, "trigger": PATHS[path], "steps": []}
    with kept_going(path, run, result):
        t = time.monotonic()
        run.start()
        result["readyAfterS"] = round(time.monotonic() - t, 1)
        result["spec"] = run.spec
        if PATHS[path] == "flink":
            from bench.flink_peer import installed_versions

            result["versions"] = installed_versions()
        for i, rate in enumerate(rates):
            step = run.step(rate, args.cold if i == 0 else 0.0, sampler, args.warmup if i == 0 else args.rewarm)
            result["steps"].append(step)
            lat, cold = step["measured"]["latencyMs"], (step["cold"] or {}).get("latencyMs", {})
            log(f"{path} #{rep + 1} {rate:>7,}/s: p50 {lat['p50']} p99 {lat['p99']} max {lat['max']} ms; "
                f"cold p99 {cold.get('p99')} ms; cpu {step['cpuCores']}; "
                f"{'sustained' if step['sustained'] else 'NOT sustained: ' + step['why']}")  # fmt: skip
            time.sleep(1)
        if path in FLINK_CHECKPOINT_MS:
            result["flinkCheckpointsCompleted"] = run.job.completed_checkpoints()
        if run.exactly_once and run.spans_path.exists():
            result["exactlyOnceSpans"] = eos_spans.summarize(eos_spans.read(run.spans_path))
    return result


@contextmanager
def kept_going(path: str, run: ModeRun, result: dict[str, Any]) -> Iterator[None]:
    """One path's measurements: a failure goes into its result, not up (one broken path must not
    lose the others' figures); the job's log tail is kept and everything it started is stopped."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001
        import traceback

        result["error"] = str(exc)[-3000:]
        log(f"{path}: FAILED: {traceback.format_exc()[-3000:]}")
    finally:
        if run.job is not None:
            result["jobLogTail"] = run.job.log()[-2000:]
        run.close()


def warm_broker(broker, workdir: Path, rates: list[int], args) -> None:
    """A fresh broker's JIT is cold: whichever path came first would pay for it. Not recorded."""
    if args.broker_warmup <= 0:
        return
    run = ModeRun("baseline", broker, workdir, args)
    try:
        run.start()
        run.send(max(rates), args.broker_warmup)
        log(f"broker warmed up for {args.broker_warmup:.0f} s at {max(rates):,}/s")
    finally:
        run.close()


def cells(runs: list[dict]) -> dict[str, dict[str, Any]]:
    """Per path and rate: the measured and the cold windows over the repetitions."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        for step in run["steps"]:
            cell = out.setdefault(run["path"], {}).setdefault(str(step["rate"]), {"measured": [], "cold": [], "sustained": []})
            cell["measured"].append(step["measured"])
            cell["sustained"].append(step["sustained"])
            if step["cold"]:
                cell["cold"].append(step["cold"])
    return {
        path: {rate: {"measured": stats.over_repetitions(c["measured"]),
                      "cold": stats.over_repetitions(c["cold"]) if c["cold"] else None,
                      "sustainedIn": f"{sum(c['sustained'])}/{len(c['sustained'])}"}
               for rate, c in by_rate.items()}
        for path, by_rate in out.items()
    }  # fmt: skip


def summary_table(results: dict) -> tuple[list[str], list[list]]:
    """The headers and rows printed at the end of a run."""

    def span(figure: dict | None, key: str) -> str:
        f = (figure or {}).get(key)
        return f"{f['median']:.1f} ({f['min']:.1f}-{f['max']:.1f})" if f else "-"

    rows = []
    for path, by_rate in results["cells"].items():
        for rate, cell in by_rate.items():
            m, c = cell["measured"], cell["cold"]
            rows.append([path, int(rate), m["repetitions"], span(m, "p50"), span(m, "p99"), span(m, "p99.9"),
                         span(c, "p99"), m.get("splitP50Ms", {}).get("sourceAppendToSinkSend"), m["lost"],
                         cell["sustainedIn"]])  # fmt: skip
    return ["path", "rate/s", "reps", "p50 ms", "p99 ms", "p99.9 ms", "cold p99 ms",
            "broker -> sink send p50 ms", "lost", "kept up"], rows  # fmt: skip


@cli.with_job_options
def main(
    paths: Annotated[str, typer.Option("--paths", "--modes", help="comma separated, from " + ",".join(ALL_PATHS))] = ",".join(
        ALL_PATHS
    ),
    # 1k/s first: a job started straight into 10k/s on these 2 cores falls seconds behind in its
    # cold JIT and has no CPU left to catch up (bench/results/tuning/latency-dbg-nosplit-*.json).
    rates: Annotated[str, typer.Option(help="records/s, each measured on the same job in this order")] = "1000,10000",
    reps: Annotated[int, typer.Option(help="repetitions; each starts every path afresh, order rotated")] = 3,
    cold: Annotated[float, typer.Option(help="seconds after the first output counted as the cold figure")] = 10.0,
    warmup: Annotated[float, typer.Option(help="seconds before each measured window (after the cold one), not counted")] = 15.0,
    # A faster rate makes the JIT compile again: at 10k/s the job's compilers used 0.3 core for
    # ~40 s after the step up, and the p99 fell 3-5x once they were done (bench/results/settle-*.json).
    rewarm: Annotated[float, typer.Option(help="seconds at each later rate before its measured window, not counted")] = 60.0,
    measure: Annotated[float, typer.Option(help="seconds measured per rate")] = 12.0,
    drain_timeout: cli.DrainTimeout = 15.0,
    broker_warmup: cli.BrokerWarmup = 20.0,
    quick: Annotated[bool, typer.Option("--quick", help="one short repetition: checks the harness")] = False,
    label: cli.Label = "",
    no_plots: cli.NoPlots = False,
    tick_ms: Annotated[
        float, typer.Option(help="the producer wakes at most once per tick (0: for every record, the first harness)")
    ] = TICK_MS,
    no_split: Annotated[bool, typer.Option("--no-split", help="no broker append times, the tests' projection as it is")] = False,
    autogroup_nice: cli.AutogroupNice = 0,
    **job_options: Any,
) -> None:
    args = cli.options(locals())
    if args.quick:
        args.reps, args.cold, args.warmup, args.rewarm, args.measure, args.broker_warmup = 1, 3.0, 2.0, 2.0, 4.0, 2.0
    path_names = cli.known_names(args.paths, ALL_PATHS, "--paths")
    rate_list = [int(r) for r in args.rates.split(",")]

    sampler = LoadSampler()
    results: dict[str, Any] = {
        **results_header("latency", vars(args)),
        "label": args.label,
        "passFraction": PASS_FRACTION,
        "runs": [],
    }
    log(f"machine {results['machine']}")
    log(f"busy processes that are not ours: {results['otherBusyProcessesAtStart']}")
    workdir = Path(tempfile.mkdtemp(prefix="streamq-bench-latency-"))
    broker = kafka_broker(workdir / "kafka")
    sampler.start()
    ok = False
    try:
        broker.start()
        log(f"broker {broker.bootstrap} up")
        warm_broker(broker, workdir, rate_list, args)
        for rep in range(args.reps):
            order = path_names[rep % len(path_names) :] + path_names[: rep % len(path_names)]
            for path in order:
                results["runs"].append(run_path(path, rep, broker, workdir, rate_list, sampler, args))
        ok = True
    finally:
        if args.autogroup_nice:
            set_autogroup_nice(os.getpid(), 0)  # our session outlives this run: give the weight back
        results["load"] = sampler.stop()
        results["loadAverageAtEnd"] = [round(x, 2) for x in os.getloadavg()]
        results["finished"] = now_iso()
        broker.stop()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"kept {workdir} for its logs")
    results["cells"] = cells(results["runs"])
    print_table(*summary_table(results))
    path = write_results(f"latency-{args.label}" if args.label else "latency", results,
                         RESULTS_DIR / "tuning" if args.label else None)  # fmt: skip
    log(f"wrote {path}")
    if not args.no_plots and not args.label:
        from bench import plots

        plots.latency_plots(path)


if __name__ == "__main__":
    cli.run(main, "bench.latency", __doc__)
