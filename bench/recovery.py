"""Recovery after the driver dies: SIGKILL the job's process group mid-stream, restart it
on the same checkpoint, and count what that cost.

    .venv/bin/python -m bench.recovery                     # 5 kills, continuous mode, 1k records/s
    .venv/bin/python -m bench.recovery --mode microBatch --kills 5 --rate 1000
    .venv/bin/python -m bench.recovery --standby release   # a warm standby driver takes over
    .venv/bin/python -m bench.recovery --in-place          # the query fails, the same driver restarts it
    .venv/bin/python -m bench.recovery --mode microBatch --exactly-once   # transactional sink: duplicates must be 0

A producer process sends at a steady rate the whole time (records stamped with a
sequence number and their send time); a consumer process reads the sink topic. Each
cycle lets the query run ``--steady`` seconds, kills the job and everything it started
(``killpg(SIGKILL)``, as when a node or container dies) and starts it again at once,
as the operator would after its backoff (the operator's backoff is not included).
Reported per kill: restart -> first output record of the new run (the new run's
records are told apart by their Kafka timestamp, set when Spark's producer sent
them), kill -> first output, and the records written twice. At the end the producer
stops and every record that passes the filter must have arrived: lost must be 0.

``--standby`` runs the drivers as a standby query's pods run them: a kube-apiserver
(testbed/kube.py) holds the query's Lease, a second job waits for it with its
SparkSession up, and each kill is followed by nothing but the wait for the Lease.
``release`` frees the Lease once the killed process is reaped, as the operator does
when the kubelet reports the container terminated (the kubelet's own report delay is
not in this figure; the e2e standby scenario includes it); ``expire`` lets it expire
(a lost node). The next standby is started, and waits, before the next kill.
``--in-place`` fails the running query through the test failpoint ``fail-on-sigusr2``
instead of killing anything: the same driver restarts it from the checkpoint.

``--upgrade`` kills nothing: it stops the driver the way the operator stops it for a spec
change (SIGTERM: the query stops, the job exits). ``warm`` first starts the next driver
beside it, as a warm upgrade does (controller.decide.upgrade: Lease, warm-up, waiting), and
sends SIGTERM once it waits on the Lease; the stopped driver releases the Lease itself and
the next takes over. ``restart`` waits for the stopped driver to exit, then starts the next
cold (upgrade.strategy restart). Per cycle also the largest gap between output records
around the stop. The next driver runs the same spec: what is measured is the hand-over.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Literal

import typer

from bench import cli
from bench.common import (
    LoadSampler,
    kafka_broker,
    log,
    now_iso,
    print_table,
    results_header,
    table,
    write_results,
)
from bench.latency import ModeRun, TriggerOption, passes, read_received
from devtools.payments import percentile

QUERY_STARTED = " started in "  # the job's log line once query.start() returned
LEASE_TAKEN = "holding lease"  # app.driver.lease_holder: the next driver got the Lease


def first_output_after(received_path: Path, t_ns: int, timeout: float, job, marks: dict) -> int | None:
    """recvNs of the first record Spark's producer wrote at or after t_ns (Kafka timestamp, ms).
    Also notes in ``marks`` when the job's log first said the query started (50 ms resolution).
    ``marks["holdingLease"]``: the stopped driver may still write after t_ns, so only records
    sent once the next driver holds the Lease (it logs so; the stopped one has released it) count."""
    deadline = time.monotonic() + timeout
    t_ms = t_ns // 1_000_000
    in_place = "startsBefore" in marks
    starts = marks.pop("startsBefore", 0)  # a driver restarting in place logs one more start
    after_lease = marks.pop("holdingLease", False)
    while time.monotonic() < deadline:
        if after_lease and "leaseTakenNs" not in marks:
            if LEASE_TAKEN not in job.log():
                time.sleep(0.05)
                continue
            marks["leaseTakenNs"] = time.time_ns()
            t_ms = max(t_ms, marks["leaseTakenNs"] // 1_000_000 - 50)  # the log line is read up to 50 ms late
        if "queryStartedNs" not in marks and job.log().count(QUERY_STARTED) > starts:
            marks["queryStartedNs"] = time.time_ns()
        if in_place:  # the failed run keeps writing until it stops: only the new run's records count
            if "queryStartedNs" not in marks:
                time.sleep(0.05)
                continue
            t_ms = max(t_ms, marks["queryStartedNs"] // 1_000_000 - 1_000)  # the log line lags the start
        data = read_received(received_path)
        new = data[data[:, 3] >= t_ms]
        if len(new):
            return int(new[:, 2].min())
        if job.proc.poll() is not None:
            raise RuntimeError(f"the restarted job exited with {job.proc.returncode}:\n{job.log()[-3000:]}")
        time.sleep(0.05)
    return None


def wait_caught_up(received_path: Path, timeout: float, lag_s: float = 1.0) -> float | None:
    """Seconds until the newest output record is less than lag_s old (the backlog after a
    restart is worked off), so that every kill hits a query in its steady state."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        data = read_received(received_path)
        if len(data):
            newest = data[-256:]
            if (newest[:, 2] - newest[:, 1]).min() < lag_s * 1e9 and time.time_ns() - newest[-1, 2] < lag_s * 1e9:
                return round(time.monotonic() - t0, 2)
        time.sleep(0.2)
    return None


class Drivers:
    """The jobs of one query: one at a time (a restart is a new process), a standby query's
    warm pair (the Lease decides), or one driver that restarts its query in place."""

    def __init__(self, args, workdir: Path):
        self.args, self.workdir = args, workdir
        self.apiserver = None
        self.env: dict[str, str] | None = None
        self.standby = None
        self.stopping = None  # --upgrade warm: the driver that was sent SIGTERM, until it has exited
        self.count = 1
        if args.standby != "none" or args.upgrade == "warm":
            from testbed.kube import KubeApiServer

            self.apiserver = KubeApiServer().start()
            self.apiserver.kubectl("create", "namespace", "bench")
            self.env = {"STREAMQ_LEASE": "bench-driver", "POD_NAMESPACE": "bench", "POD_NAME": "bench-driver-1",
                        "KUBECONFIG": str(self.apiserver.kubeconfig)}  # fmt: skip
        elif args.in_place:
            self.env = {"STREAMQ_FAILPOINT": "fail-on-sigusr2"}

    def start_standby(self, spec_path: Path) -> None:
        from testbed.jobs import JobProcess

        self.count += 1
        folder = self.workdir / f"driver-{self.count}"
        folder.mkdir(exist_ok=True)
        self.standby = JobProcess(spec_path, folder, env={**self.env, "POD_NAME": f"bench-driver-{self.count}"})
        deadline = time.monotonic() + 300
        while "standing by: lease" not in self.standby.log():
            if time.monotonic() > deadline or self.standby.proc.poll() is not None:
                raise RuntimeError(f"the standby never waited for the lease:\n{self.standby.log()[-3000:]}")
            time.sleep(0.2)

    def fail(self, mode_run, spec_path: Path) -> None:
        """Kill the running driver (or fail its query in place); leave the next one starting."""
        from testbed.jobs import JobProcess

        if self.args.in_place:
            mode_run.job.signal(signal.SIGUSR2)
            return
        if self.args.upgrade != "none":  # the operator's delete: SIGTERM, a clean stop
            mode_run.job.signal(signal.SIGTERM)
            if self.args.upgrade == "warm":  # it releases the Lease itself; the warm one takes over
                self.stopping, mode_run.job, self.standby = mode_run.job, self.standby, None
                return
            mode_run.job.wait(120)
            mode_run.job.stop()
            mode_run.job = JobProcess(spec_path, mode_run.workdir)
            return
        holder = f"bench-driver-{self.count - 1}" if self.standby is not None else None
        mode_run.job.kill_all()
        mode_run.job.wait(30)
        mode_run.job.stop()
        if self.standby is None:
            mode_run.job = JobProcess(spec_path, mode_run.workdir)
            return
        if self.args.standby == "release":  # what the operator does once the kubelet reports the end
            from controller.kube import Kube

            with self.apiserver.api_client() as api:
                Kube(api).release_lease("bench", "bench-driver", holder)
        mode_run.job, self.standby = self.standby, None

    def reap(self) -> None:
        """The driver stopped for a warm upgrade has exited (it stops Spark after the hand-over)."""
        if self.stopping is not None:
            code = self.stopping.wait(120)
            self.stopping.stop()
            self.stopping = None
            if code != 0:
                raise RuntimeError(f"the stopped driver exited with {code}")

    def close(self) -> None:
        if self.stopping is not None:
            self.stopping.stop()
        if self.standby is not None:
            self.standby.stop()
        if self.apiserver is not None:
            self.apiserver.stop()


def count_output(received_path: Path, last_seq: int, drain_timeout: float):
    """(rows, summary): waits up to drain_timeout for every record below last_seq that passes
    the filter, then counts what arrived, what is lost and what arrived twice."""
    import numpy as np

    expected = {s for s in range(0, last_seq) if passes(s)}
    deadline = time.monotonic() + drain_timeout
    while True:
        data = read_received(received_path)
        got = set(np.unique(data[:, 0]).tolist())
        if expected <= got or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    seqs, counts = np.unique(data[:, 0], return_counts=True)
    lost = sorted(expected - got)
    return data, {
        "recordsSent": last_seq,
        "recordsExpected": len(expected),
        "recordsReceived": int(len(data)),
        "uniqueReceived": int(len(seqs)),
        "duplicates": int((counts - 1).sum()),
        "lost": len(lost),
        "lostSample": lost[:20],
        "filteredButArrived": len(sorted(s for s in got if not passes(s))),
    }


def largest_gap(data, row: dict, margin_s: float = 5.0) -> float | None:
    """The longest time without an output record arriving, from margin_s before the kill (or stop) to
    margin_s after the first output that followed it: what a reader of the sink saw of it."""
    if row.get("killToFirstOutputS") is None:
        return None
    start = row["tKillNs"] - margin_s * 1e9
    end = row["tKillNs"] + (row["killToFirstOutputS"] + margin_s) * 1e9
    recv = sorted(r for r in data[:, 2].tolist() if start <= r <= end)
    times = [start, *recv, end]
    return round(max(b - a for a, b in pairwise(times)) / 1e9, 2)


def _spread(values) -> dict[str, float]:
    ordered = sorted(values)
    return {"min": ordered[0], "p50": percentile(ordered, 50), "p99": percentile(ordered, 99), "max": ordered[-1]}


def run(args) -> dict[str, Any]:
    import numpy as np

    from app.checkpoints.reader import read_checkpoint

    sampler = LoadSampler()
    results: dict[str, Any] = {**results_header("recovery", vars(args)), "kills": []}
    log(f"machine {results['machine']}")
    workdir = Path(tempfile.mkdtemp(prefix="streamq-bench-recovery-"))
    broker = kafka_broker(workdir / "kafka")
    sampler.start()
    ok = False
    mode_run = None
    drivers = Drivers(args, workdir)
    try:
        broker.start()
        # ModeRun gives the producer/consumer processes and the job exactly as bench.latency runs them.
        mode_run = ModeRun(args.mode, broker, workdir, SimpleNamespace(conf=args.conf, source_option=[], sink_option=[], autogroup_nice=0,
                                                                             partitions=args.partitions, job_env=drivers.env,
                                                                             exactly_once=args.exactly_once,
                                                                             eos_writer=args.eos_writer))  # fmt: skip
        t = time.monotonic()
        mode_run.start()
        results["readyAfterS"] = round(time.monotonic() - t, 1)
        results["spec"] = mode_run.spec
        spec_path = mode_run.workdir / "query.yaml"
        checkpoint = mode_run.workdir / "checkpoint"
        mode_run.send_async(args.rate, 24 * 3600)  # steady until halted
        log(f"{args.mode} query running, producing {args.rate:,}/s")
        for kill in range(1, args.kills + 1):
            caught_up = wait_caught_up(mode_run.received_path, args.catch_up_timeout, args.caught_up_lag)
            if args.standby != "none" or args.upgrade == "warm":
                drivers.start_standby(spec_path)
            time.sleep(args.steady)
            state = read_checkpoint(str(checkpoint))
            marks: dict = {"startsBefore": mode_run.job.log().count(QUERY_STARTED) if args.in_place else 0,
                           "holdingLease": args.upgrade == "warm"}  # fmt: skip
            t_kill = time.time_ns()
            drivers.fail(mode_run, spec_path)
            t_restart = time.time_ns()
            first = first_output_after(mode_run.received_path, t_restart, args.restart_timeout, mode_run.job, marks)
            started = marks.get("queryStartedNs")
            row = {
                "kill": kill,
                "lastCommittedAtKill": state.last_committed,
                "caughtUpAfterS": caught_up,
                "restartToQueryStartedS": round((started - t_restart) / 1e9, 2) if started else None,
                "restartToFirstOutputS": round((first - t_restart) / 1e9, 2) if first else None,
                "killToFirstOutputS": round((first - t_kill) / 1e9, 2) if first else None,
                "tKillNs": t_kill, "tRestartNs": t_restart,
            }  # fmt: skip
            drivers.reap()
            results["kills"].append(row)
            log(f"kill {kill}: restart -> first output {row['restartToFirstOutputS']} s "
                f"(kill -> first output {row['killToFirstOutputS']} s), last committed epoch/batch at kill {state.last_committed}")  # fmt: skip
            if first is None:
                raise RuntimeError(
                    f"no output within {args.restart_timeout}s after restart {kill}:\n{mode_run.job.log()[-3000:]}"
                )
        time.sleep(args.steady)
        sent = mode_run.halt()
        data, counted = count_output(mode_run.received_path, sent["last"], args.drain_timeout)
        # Which kill each duplicate belongs to: the restart its second copy came after.
        order = np.argsort(data[:, 2], kind="stable")
        seen: set[int] = set()
        restarts = [k["tRestartNs"] for k in results["kills"]]
        per_kill = [0] * len(restarts)
        for seq, recv in zip(data[order, 0].tolist(), data[order, 2].tolist(), strict=True):
            if seq in seen:
                i = max((j for j, r in enumerate(restarts) if r <= recv), default=None)
                if i is not None:
                    per_kill[i] += 1
            seen.add(seq)
        for row, dups in zip(results["kills"], per_kill, strict=True):
            row["duplicates"] = dups
            row["largestGapS"] = largest_gap(data, row)
        recovery = sorted(k["restartToFirstOutputS"] for k in results["kills"])
        results["summary"] = {
            **counted,
            "restartToFirstOutputS": {"min": recovery[0], "p50": percentile(recovery, 50), "max": recovery[-1]},
            "killToFirstOutputS": _spread(k["killToFirstOutputS"] for k in results["kills"]),
            "largestGapS": _spread(k["largestGapS"] for k in results["kills"]),
        }
        ok = True
    finally:
        results["load"] = sampler.stop()
        results["loadAverageAtEnd"] = [round(x, 2) for x in os.getloadavg()]
        results["finished"] = now_iso()
        if mode_run is not None:
            if mode_run.job is not None:
                results["jobLogTail"] = mode_run.job.log()[-2000:]
            mode_run.close()
        drivers.close()
        broker.stop()
        if ok and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"kept {workdir} for its logs")
    return results


def main(
    mode: TriggerOption = "continuous",
    kills: Annotated[int, typer.Option(help="how many times the driver is stopped")] = 5,
    rate: cli.Rate = 1000,
    steady: Annotated[float, typer.Option(help="seconds of normal running before each kill")] = 15.0,
    restart_timeout: Annotated[float, typer.Option(help="seconds for the first output after a restart")] = 240.0,
    drain_timeout: cli.DrainTimeout = 120.0,
    partitions: cli.Partitions = 2,
    caught_up_lag: Annotated[
        float | None,
        typer.Option(
            help="output counts as caught up when its newest record is this many seconds old "
            "(default 1 for continuous/realTime, 5 for microBatch)"
        ),
    ] = None,
    catch_up_timeout: Annotated[float, typer.Option(help="seconds for the output to catch up before a kill")] = 120.0,
    conf: cli.Conf = [],  # noqa: B006 - typer copies a list default: nothing mutates it
    standby: Annotated[
        Literal["none", "release", "expire"],
        typer.Option(help="a warm standby driver and the query's Lease: freed when the killed one is reaped, or left to expire"),
    ] = "none",
    in_place: Annotated[
        bool, typer.Option("--in-place", help="fail the query (failpoint) instead of killing the driver")
    ] = False,
    upgrade: Annotated[
        Literal["none", "warm", "restart"],
        typer.Option(
            help="stop the driver as a spec change does (SIGTERM): after a warm next driver waits on the Lease, "
            "or then start it cold"
        ),
    ] = "none",
    exactly_once: Annotated[
        bool,
        typer.Option(
            "--exactly-once", help="sink.kafka.delivery exactlyOnce (microBatch, availableNow); the reader is read_committed"
        ),
    ] = False,
    eos_writer: Annotated[
        Literal["tasks", "driver"],
        typer.Option(help="with --exactly-once: sink.kafka.transactions.writer (driver, the default: 1 producer; tasks: 2)"),
    ] = "driver",
    no_plots: cli.NoPlots = False,
    keep_workdir: Annotated[bool, typer.Option("--keep-workdir", help="keep the jobs' logs and checkpoints")] = False,
) -> None:
    if eos_writer == "tasks" and not exactly_once:
        raise typer.BadParameter("--eos-writer applies to --exactly-once", param_hint="--eos-writer")
    if exactly_once and mode != "microBatch":
        raise typer.BadParameter(
            "--exactly-once needs --mode microBatch: the other modes have no batch to commit atomically", param_hint="--mode"
        )
    if caught_up_lag is None:
        caught_up_lag = 5.0 if mode == "microBatch" else 1.0
    args = SimpleNamespace(**locals())  # run() reads the options by name, and the results record them as "settings"
    results = run(args)
    rows = [[k["kill"], k["lastCommittedAtKill"], k["restartToQueryStartedS"], k["restartToFirstOutputS"],
             k["killToFirstOutputS"], k["largestGapS"], k["duplicates"]] for k in results["kills"]]  # fmt: skip
    s = results["summary"]
    headers = ["kill", "committed at kill", "restart -> query started s", "restart -> first output s",
               "kill -> first output s", "largest gap s", "duplicates"]  # fmt: skip
    line = (f"{args.mode} at {args.rate:,} records/s: {s['recordsSent']:,} sent, {s['recordsExpected']:,} pass the filter, "
            f"{s['uniqueReceived']:,} arrived, duplicates {s['duplicates']:,}, LOST {s['lost']}")  # fmt: skip
    print_table(headers, rows)
    print(f"\n{line}", flush=True)
    results["table"] = f"{table(headers, rows)}\n\n{line}"
    how = ("-standby-" + args.standby if args.standby != "none" else "-in-place" if args.in_place
           else "-upgrade-" + args.upgrade if args.upgrade != "none" else "")  # fmt: skip
    how += "-exactly-once" if args.exactly_once else ""
    how += "-tasks-writer" if args.exactly_once and args.eos_writer == "tasks" else ""
    path = write_results(f"recovery-{args.mode}{how}", results)
    log(f"wrote {path}")
    if not args.no_plots:
        from bench import plots

        plots.recovery_plot(path)
    if s["lost"] or (args.exactly_once and s["duplicates"]):
        raise typer.Exit(1)


if __name__ == "__main__":
    cli.run(main, "bench.recovery", __doc__)
