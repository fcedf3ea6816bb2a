"""End-to-end latency Kafka -> Spark -> Kafka, per trigger mode and offered rate.

    .venv/bin/python -m bench.latency                      # everything (about 15 minutes)
    .venv/bin/python -m bench.latency --quick              # a short smoke run
    .venv/bin/python -m bench.latency --modes continuous --rates 1000,10000 \\
        --conf spark.sql.streaming.continuous.executorPollIntervalMs=100   # try a setting

A producer process stamps every record with its send time (``sentNs`` in the JSON
value, wall clock in ns) at an offered rate; a consumer process stamps the time it
receives the record from the sink topic. Latency = receive - send. The query is the
job as it ships (``python -m app`` on a generated spec, the default trigger settings
of each mode): the fraud filter of the integration tests (a ``where`` on a field of
the JSON value, then a projection), which passes 9 records in 10 here.

Modes, in this order: ``baseline`` (producer -> consumer through the same broker, no
Spark: the floor) and ``continuous`` both step the rate up (--rates, then 20k, 30k, ...)
until a step is not sustained; ``microBatch`` (interval 0) and ``realTime`` run --rates
and the highest rate continuous mode sustained. Each step is a warm-up (excluded) then
a measurement window. Sustained = the producer reached 95 % of the offered rate, the
output 95 % of the expected rate, every record arrived within --drain-timeout, and the
median latency did not double from the first half of the window to the second (it
says the query keeps up, not that its latency is low). Everything runs on loopback:
the broker is started here and stopped at the end. Results: bench/results/latency-*.json
(bench/results/tuning/ with --label), plots in docs/img/ (``python -m bench.plots``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import tempfile
import time
import uuid
from array import array
from pathlib import Path
from typing import Any

from bench.common import (
    kafka_broker,
    RESULTS_DIR,
    LoadSampler,
    git_commit,
    log,
    machine,
    now_iso,
    other_cpu_hogs,
    percentile,
    table,
    set_autogroup_nice,
    tree_sched_seconds,
    write_results,
)

DROP_EVERY = 10  # seq % 10 == 0 has amount 20 and is filtered out; the rest pass (amount 1500)
PASS_FRACTION = 1 - 1 / DROP_EVERY
FIELDS = 4  # seq, sentNs, recvNs, Kafka timestamp (ms) of the received record

TRIGGERS = {
    # The spec model's defaults: continuous checkpointInterval 1s, realTime batchDuration 5m.
    "continuous": {"continuous": {}},
    "realTime": {"realTime": {}},
    "microBatch": {"microBatch": {"interval": "0s"}},
}
ALL_MODES = ["baseline", "continuous", "microBatch", "realTime"]
SEARCH_RATES = [20_000, 30_000, 40_000, 50_000, 60_000, 80_000, 100_000, 120_000, 160_000, 200_000]
CDF_QUANTILES = sorted({q / 2 for q in range(0, 198)} | {99 + q / 100 for q in range(0, 100)} | {99.99, 99.999, 100})


def value_of(seq: int, sent_ns: int) -> bytes:
    amount = 20 if seq % DROP_EVERY == 0 else 1500
    return b'{"id":%d,"amount":%d,"sentNs":%d}' % (seq, amount, sent_ns)


def passes(seq: int) -> bool:
    return seq % DROP_EVERY != 0


def passes_all(seq: int) -> bool:  # the baseline has no filter: every record comes out
    return True


# ------------------------------------------------------------------ client processes


def producer_main(bootstrap: str, topic: str, conn, conf: dict) -> None:
    """Sends at the offered rate on command; answers with where each step began and ended."""
    from confluent_kafka import Producer

    # linger 0 sends at once; at most 5 requests in flight makes librdkafka batch what queues up
    # behind them (its default, 1e6 in flight, sends one request per record and falls behind a busy broker).
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 0, "acks": "1",
                         "max.in.flight.requests.per.connection": 5, **conf})  # fmt: skip
    seq = 0
    while True:
        command = conn.recv()
        if command[0] == "stop":
            break
        if command[0] == "halt":  # the run it meant to end had already ended
            continue
        _, rate, duration_s, warmup_s = command
        total = int(rate * duration_s)
        first, measure_first = seq, None
        start = time.perf_counter()
        t0 = time.time_ns()
        t_measure = t0
        sent = 0
        give_up = start + duration_s * 1.25 + 1  # a producer that cannot keep up stops anyway
        loops = 0
        while sent < total:
            now = time.perf_counter()
            if now > give_up:
                break
            loops += 1
            if loops % 64 == 0 and conn.poll():  # ("halt",): end a long run early
                conn.recv()
                break
            if measure_first is None and now - start >= warmup_s:
                measure_first, t_measure = seq, time.time_ns()
            due = min(total, int((now - start) * rate) + 1)
            while sent < due:
                try:
                    producer.produce(topic, key=b"k%d" % seq, value=value_of(seq, time.time_ns()))
                except BufferError:
                    producer.poll(0.001)
                    continue
                sent += 1
                seq += 1
            producer.poll(0)
            delay = start + sent / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        t1 = time.time_ns()
        producer.flush(30)
        if measure_first is None:
            measure_first, t_measure = seq, t1
        conn.send({"first": first, "measureFirst": measure_first, "last": seq, "t0": t0, "tMeasure": t_measure, "t1": t1})
    producer.flush(30)


def consumer_main(bootstrap: str, topic: str, out_path: str, stop, conf: dict) -> None:
    """Appends (seq, sentNs, recvNs, kafkaTimestampMs) of every record it receives to out_path."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "broker.address.family": "v4",
        "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, **conf,
    })  # fmt: skip
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    with open(out_path, "ab", buffering=0) as out:
        while not stop.is_set():
            msgs = consumer.consume(100_000, timeout=0)  # whatever is there, without waiting
            if not msgs:
                msg = consumer.poll(0.05)
                if msg is None:
                    continue
                msgs = [msg]
            now = time.time_ns()
            rows = array("q")
            for msg in msgs:
                if msg.error() is not None:
                    continue
                v = msg.value()
                rows.extend((int(v[6 : v.index(b",")]), int(v[v.rindex(b":") + 1 : -1]), now, msg.timestamp()[1]))
            out.write(rows.tobytes())
    consumer.close()


def read_received(path: Path):
    import numpy as np

    data = np.fromfile(path, dtype=np.int64)
    return data[: len(data) // FIELDS * FIELDS].reshape(-1, FIELDS)


# ------------------------------------------------------------------ one mode


class ModeRun:
    """One mode: topics, the job (unless baseline), a producer and a consumer process."""

    def __init__(self, mode: str, broker, workdir: Path, args):
        from confluent_kafka.admin import AdminClient  # noqa: F401  (fail early without the client)

        from tests.support.kafka import make_topic_name

        self.mode, self.broker, self.args = mode, broker, args
        self.workdir = workdir / mode
        self.workdir.mkdir(parents=True)
        self.source = broker.create_topic(make_topic_name(f"lat-{mode}-in"), args.partitions)
        self.job = None
        self.spec: dict | None = None
        if mode == "baseline":
            self.out_topic = self.source
        else:
            self.out_topic = broker.create_topic(make_topic_name(f"lat-{mode}-out"), args.partitions)
        self.passes = passes_all if mode == "baseline" else passes
        self.pass_fraction = 1.0 if mode == "baseline" else PASS_FRACTION
        self.received_path = self.workdir / "received.bin"
        self.received_path.touch()
        ctx = mp.get_context("spawn")
        self._stop_consumer = ctx.Event()
        self._conn, child = ctx.Pipe()
        self.producer = ctx.Process(target=producer_main, args=(broker.bootstrap, self.source, child, {}), daemon=True)
        self.consumer = ctx.Process(
            target=consumer_main, args=(broker.bootstrap, self.out_topic, str(self.received_path), self._stop_consumer, {}),
            daemon=True,
        )  # fmt: skip

    def start(self) -> None:
        self.consumer.start()
        self.producer.start()
        if self.mode != "baseline":
            self._start_job()
        if self.args.autogroup_nice:
            self.prioritise(self.args.autogroup_nice)
        self._wait_ready()

    def _start_job(self) -> None:
        from tests.support.jobs import JobProcess
        from tests.support.specs import query_spec, write_resource

        spec = query_spec(bootstrap=self.broker.bootstrap, topic=self.source, sink_topic=self.out_topic, location=self.workdir / "checkpoint", trigger=TRIGGERS[self.mode])
        if self.args.conf:
            spec["runtime"]["sparkConf"] = dict(self.args.conf)
        if self.args.source_option:
            spec["source"]["kafka"]["options"] = dict(self.args.source_option)
        if self.args.sink_option:
            spec["sink"]["kafka"]["options"] = dict(self.args.sink_option)
        self.spec = spec
        path = write_resource(self.workdir / "query.yaml", f"bench-{self.mode.lower()}", spec)
        self.job = JobProcess(path, self.workdir)

    def _wait_ready(self, timeout: float = 240) -> None:
        """Probe records at a low rate until one comes out the other end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.job is not None and self.job.proc.poll() is not None:
                raise RuntimeError(f"the {self.mode} job exited with {self.job.proc.returncode}:\n{self.job.log()[-3000:]}")
            self.send(100, 0.5, 0)
            if len(read_received(self.received_path)):
                return
        raise RuntimeError(f"no output from the {self.mode} pipeline within {timeout}s")

    def send(self, rate: int, duration_s: float, warmup_s: float) -> dict:
        self.send_async(rate, duration_s, warmup_s)
        return self._conn.recv()

    def send_async(self, rate: int, duration_s: float, warmup_s: float) -> None:
        """Start a run and return at once; halt() ends it and returns its summary."""
        self._conn.send(("run", rate, duration_s, warmup_s))

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

    def step(self, rate: int, sampler: LoadSampler) -> dict[str, Any]:
        args = self.args
        sched0 = self.sched()
        sent = self.send(rate, args.warmup + args.measure, args.warmup)
        sched1 = self.sched()
        expected = sum(1 for s in range(sent["measureFirst"], sent["last"]) if self.passes(s))
        drained_after = self._drain(sent, expected)
        stats = self._stats(rate, sent, expected)
        window_s = (sent["t1"] - sent["tMeasure"]) / 1e9 or 1e-9
        stats["drainedAfterS"] = drained_after
        step_s = (sent["t1"] - sent["t0"]) / 1e9
        # Cores used, and threads that were runnable but had no CPU (on average over the step):
        # the second number is how starved each part of the pipeline was.
        stats["cpuCores"] = {k: round((sched1[k][0] - sched0[k][0]) / step_s, 2) for k in sched0}
        stats["waitingForCpu"] = {k: round((sched1[k][1] - sched0[k][1]) / step_s, 2) for k in sched0}
        stats["load"] = sampler.summary(sent["tMeasure"] / 1e9, sent["t1"] / 1e9)
        stats["windowS"] = round(window_s, 2)
        return stats

    def _drain(self, sent: dict, expected: int) -> float | None:
        """Wait until every passing record of the step came out, or give up after drainTimeout."""
        import numpy as np

        t_end = time.monotonic()
        while True:
            data = read_received(self.received_path)
            seqs = data[:, 0]
            mask = (seqs >= sent["measureFirst"]) & (seqs < sent["last"])
            if len(np.unique(seqs[mask])) >= expected:
                return round(time.monotonic() - t_end, 2)
            if time.monotonic() - t_end > self.args.drain_timeout:
                return None
            time.sleep(0.2)

    def _stats(self, rate: int, sent: dict, expected: int) -> dict[str, Any]:
        import numpy as np

        data = read_received(self.received_path)
        window = data[(data[:, 0] >= sent["measureFirst"]) & (data[:, 0] < sent["last"])]
        _, first_index, counts = np.unique(window[:, 0], return_index=True, return_counts=True)
        first = window[np.sort(first_index)]
        latency_ms = np.sort((first[:, 2] - first[:, 1]) / 1e6)
        window_s = (sent["t1"] - sent["tMeasure"]) / 1e9 or 1e-9
        in_window = data[(data[:, 2] >= sent["tMeasure"]) & (data[:, 2] < sent["t1"])]
        out_rate = len(in_window) / window_s
        # Where the time goes: the sink record's Kafka timestamp is when the producer that
        # wrote it (Spark's, or ours for the baseline) called send(), in ms.
        to_sink_ms = np.sort(first[:, 3] - first[:, 1] / 1e6)
        sink_to_recv_ms = np.sort(first[:, 2] / 1e6 - first[:, 3])
        by_send = first[np.argsort(first[:, 1])]
        half = len(by_send) // 2
        p50_first = float(np.median((by_send[:half, 2] - by_send[:half, 1]) / 1e6)) if half else None
        p50_second = float(np.median((by_send[half:, 2] - by_send[half:, 1]) / 1e6)) if half else None
        sent_rate = (sent["last"] - sent["measureFirst"]) / window_s
        expected_out = expected / window_s
        delivered = len(first) / expected if expected else 0.0
        growing = p50_first is not None and p50_second > 2 * p50_first + 50
        reasons = []
        if sent_rate < 0.95 * rate:
            reasons.append(f"producer reached {sent_rate:,.0f}/s only")
        if out_rate < 0.95 * expected_out:
            reasons.append(f"output {out_rate:,.0f}/s < 95% of {expected_out:,.0f}/s")
        if delivered < 0.999:
            reasons.append(f"{delivered:.2%} delivered within the drain timeout")
        if growing:
            reasons.append(f"latency growing (p50 {p50_first:.0f} -> {p50_second:.0f} ms)")
        pct = lambda q: round(percentile(latency_ms, q), 2) if len(latency_ms) else None  # noqa: E731
        return {
            "offeredRate": rate,
            "sentRate": round(sent_rate),
            "outRate": round(out_rate),
            "achievedInputRate": round(out_rate / self.pass_fraction),
            "expected": expected,
            "received": int(len(first)),
            "duplicates": int((counts - 1).sum()),
            "deliveredFraction": round(delivered, 5),
            "latencyMs": {"p50": pct(50), "p95": pct(95), "p99": pct(99), "p99.9": pct(99.9), "max": pct(100),
                          "mean": round(float(latency_ms.mean()), 2) if len(latency_ms) else None},
            "halvesP50Ms": [p50_first, p50_second],
            "sendToSinkWriteMs": {q: (float(percentile(to_sink_ms, v)) if len(to_sink_ms) else None)
                                  for q, v in (("p50", 50), ("p99", 99))},
            "sinkWriteToReceiveMs": {q: (float(percentile(sink_to_recv_ms, v)) if len(sink_to_recv_ms) else None)
                                     for q, v in (("p50", 50), ("p99", 99))},
            "sustained": not reasons,
            "why": "; ".join(reasons),
            "cdf": [[q, round(float(percentile(latency_ms, q)), 3)] for q in CDF_QUANTILES if q > 0] if len(latency_ms) else [],
        }  # fmt: skip

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


def run_mode(mode: str, broker, workdir: Path, rates: list[int], search: bool, sampler: LoadSampler, args) -> dict:
    log(f"{mode}: starting")
    run = ModeRun(mode, broker, workdir, args)
    result: dict[str, Any] = {"mode": mode, "trigger": TRIGGERS.get(mode), "steps": []}
    try:
        t = time.monotonic()
        run.start()
        result["readyAfterS"] = round(time.monotonic() - t, 1)
        result["spec"] = run.spec
        plan = list(rates) + ([r for r in SEARCH_RATES if r > max(rates)] if search else [])
        for rate in plan:
            if run.job is not None and run.job.proc.poll() is not None:
                raise RuntimeError(f"the {mode} job exited with {run.job.proc.returncode}:\n{run.job.log()[-3000:]}")
            step = run.step(rate, sampler)
            result["steps"].append(step)
            lat = step["latencyMs"]
            log(f"{mode} {rate:>7,}/s: sent {step['sentRate']:,}/s out {step['outRate']:,}/s "
                f"p50 {lat['p50']} p99 {lat['p99']} max {lat['max']} ms; cpu {step['cpuCores']}; "
                f"{'sustained' if step['sustained'] else 'NOT sustained: ' + step['why']}")  # fmt: skip
            if search and rate >= max(rates) and not step["sustained"]:
                break
            time.sleep(1)
    except Exception as exc:  # one broken mode must not lose the others' figures
        import traceback

        result["error"] = str(exc)[-3000:]
        log(f"{mode}: FAILED: {traceback.format_exc()[-3000:]}")
    finally:
        if run.job is not None:
            result["jobLogTail"] = run.job.log()[-2000:]
        run.close()
    return result


def max_sustained(mode_result: dict) -> int | None:
    ok = [s["offeredRate"] for s in mode_result.get("steps", []) if s["sustained"]]
    return max(ok) if ok else None


def print_table(results: dict) -> str:
    rows = []
    for mode, res in results["modes"].items():
        for s in res.get("steps", []):
            lat = s["latencyMs"]
            rows.append([mode, s["offeredRate"], s["sentRate"], s["achievedInputRate"], lat["p50"], lat["p95"], lat["p99"],
                         lat["p99.9"], lat["max"], f"{s['deliveredFraction']:.2%}", s["duplicates"],
                         "yes" if s["sustained"] else "no", s["cpuCores"]["job"], s["waitingForCpu"]["job"],
                         s["load"].get("load1Mean")])  # fmt: skip
        if "error" in res:
            rows.append([mode, "error", *["-"] * 13])
    text = table(["mode", "offered/s", "sent/s", "achieved in/s", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms",
                  "delivered", "dups", "sustained", "job cores", "job threads waiting", "load1"], rows)  # fmt: skip
    print(text, flush=True)
    return text


def parse_kv(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default=",".join(ALL_MODES), help="comma separated, from " + ",".join(ALL_MODES))
    parser.add_argument("--rates", default="1000,10000", help="fixed rates (records/s) for every mode")
    parser.add_argument("--no-search", action="store_true", help="do not step up continuous mode beyond --rates")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds at each rate before measuring")
    parser.add_argument("--measure", type=float, default=20.0, help="seconds measured at each rate")
    parser.add_argument("--drain-timeout", type=float, default=15.0)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--conf", type=parse_kv, action="append", default=[], help="spark conf k=v for the job")
    parser.add_argument("--source-option", type=parse_kv, action="append", default=[], help="Kafka source option k=v")
    parser.add_argument("--sink-option", type=parse_kv, action="append", default=[], help="Kafka sink option k=v")
    parser.add_argument("--quick", action="store_true", help="short steps, no search: checks the harness")
    parser.add_argument("--label", default="", help="a word for the results file and the table (e.g. a setting tried)")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--autogroup-nice", type=int, default=0,
                        help="e.g. -10: give the job's, the broker's and this session's CPU group more weight than "
                             "other sessions' (kernel.sched_autogroup_enabled shares the CPU per session); 0 leaves it")  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup, args.measure, args.no_search = 2.0, 4.0, True
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(ALL_MODES)
    if unknown:
        parser.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
    rates = [int(r) for r in args.rates.split(",")]

    sampler = LoadSampler()
    results: dict[str, Any] = {
        "bench": "latency", "label": args.label, "started": now_iso(), "commit": git_commit(), "machine": machine(),
        "settings": {k: v for k, v in vars(args).items()}, "otherBusyProcessesAtStart": other_cpu_hogs({os.getpid()}),
        "passFraction": PASS_FRACTION, "modes": {},
    }  # fmt: skip
    log(f"machine {results['machine']}")
    log(f"busy processes that are not ours: {results['otherBusyProcessesAtStart']}")
    workdir = Path(tempfile.mkdtemp(prefix="streamq-bench-latency-"))
    broker = kafka_broker(workdir / "kafka")
    sampler.start()
    ok = False
    try:
        broker.start()
        log(f"broker {broker.bootstrap} up")
        found_max = None
        # The baseline goes first and steps up too: it warms the broker's JIT up and finds
        # what the harness itself (one Python producer, one consumer) can do here.
        for mode in sorted(modes, key=ALL_MODES.index):
            if mode in ("baseline", "continuous"):
                res = run_mode(mode, broker, workdir, rates, not args.no_search, sampler, args)
                if mode == "continuous":
                    found_max = max_sustained(res)
                    results["continuousMaxSustained"] = found_max
                else:
                    results["baselineMaxSustained"] = max_sustained(res)
            else:
                extra = [r for r in ([found_max] if found_max else []) if r not in rates]
                res = run_mode(mode, broker, workdir, rates + extra, False, sampler, args)
            results["modes"][mode] = res
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
    results["table"] = print_table(results)
    # Labelled runs try a setting; they go next to, not over, the default-settings results.
    path = write_results(f"latency-{args.label}" if args.label else "latency", results,
                         RESULTS_DIR / "tuning" if args.label else None)
    log(f"wrote {path}")
    if not args.no_plots and not args.label:
        from bench import plots

        plots.latency_plots(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
