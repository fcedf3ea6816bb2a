"""A soak under random faults: one fraud-filter StreamingQuery on a real cluster, payments at a
steady rate for the whole run, and every few minutes one real fault from the e2e scenarios.

    .venv/bin/python -m bench.chaos                               # 30 min, 30 payments/s, a fault every ~180 s
    .venv/bin/python -m bench.chaos --minutes 10 --every 120 --seed 7 --faults driver-pod-deleted,broker-pod-deleted
    .venv/bin/python -m bench.chaos --standby                     # the query keeps a warm standby driver
    STREAMQ_E2E_PROVIDER=kind STREAMQ_KIND_CLUSTER=streamq-multinode .venv/bin/python -m bench.chaos --workers 2 --faults node-paused
                                                                  # kind with 2 workers: the driver's node frozen for NODE_DOWN_S

The cluster is the one --kubeconfig and --kafka-bootstrap name (left up; by default
STREAMQ_E2E_KUBECONFIG and STREAMQ_E2E_KAFKA_BOOTSTRAP, as hack/e2e-cluster.sh up prints them),
else one brought up as the e2e ``cluster`` fixture does and torn down at the end (also on ^C
or SIGTERM). The faults are the tests' own mechanics (tests/e2e/test_recovery.py,
test_faults_broker.py, test_faults_control_plane.py); the kubelet, containerd and apiserver
faults need a cluster this process brought up (the local node's daemons, or the kind node's
systemd and static pods), not one named by STREAMQ_E2E_KUBECONFIG. ``node-paused`` needs a kind
cluster with workers (--workers, or one left up by the multinode tier: STREAMQ_KIND_CLUSTER names
it); the query's checkpoint is then in SeaweedFS on this machine, which every node reaches.

Per fault: the seconds until the query is Running again (not Degraded; after a driver fault,
on a later attempt) and until the output topic holds a flagged record of a payment produced
after the fault. A recovery that times out is recorded as such and the run goes on. Faults
come at planned times (seeded, +-20% jitter), never before the previous one's measurements
end; the load lasts --minutes, longer when the last recovery runs past it. At the end every
flagged record of what the source topic holds must be in the sink: a payment the producer
could not deliver never entered the system (it is counted as undelivered; one reported
undelivered that the broker had in fact written is in the source, and counted as truth).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer
from confluent_kafka import Producer

from bench import cli, report
from bench.common import ROOT, LoadSampler, git_commit, log, machine, now_iso, write_results
from testbed.cluster import choose_provider, create_cluster
from testbed.cluster.addons import OPERATOR_NAMESPACE, setup
from testbed.cluster.workload import (
    NAMESPACE,
    Kafka,
    Output,
    Queries,
    condition,
    flagged,
    fraud_spec,
    fraud_spec_s3,
    kafka_pod,
    payments,
    reconnect_kafka,
    wait_output,
)
from testbed.wait import WaitTimeout, wait_for

ANY_CLUSTER = ("driver-pod-deleted", "driver-container-killed", "broker-pod-deleted", "operator-pod-killed")
OWN_NODE = ("kubelet-restarted", "containerd-restarted", "apiserver-stopped-60s")
SEVERAL_NODES = ("node-paused",)
NODE_DOWN_S = 90  # how long the paused node stays down: past a replacement without standby (64 s measured)
S3_SECRET, S3_BUCKET = "streamq-s3", "streamq-checkpoints"
JITTER = 0.2
APISERVER_DOWN_S = 60
TAIL = 60  # payments after the producer stops: the last epoch in flight gets committed behind them
OPERATOR_PODS = "app.kubernetes.io/component=operator"  # the chart's label on the operator's pods


# ---------------------------------------------------------------------- pure parts


def allowed_faults(own_node: bool, several_nodes: bool = False) -> list[str]:
    """The faults this cluster can take: the node's daemons only on a cluster this process brought up."""
    return [*ANY_CLUSTER, *(OWN_NODE if own_node else ()), *(SEVERAL_NODES if several_nodes else ())]


def pick_faults(requested: str | None, allowed: list[str]) -> list[str]:
    """--faults a,b,c checked against what the cluster can take (None: all of those)."""
    if not requested:
        return list(allowed)
    names = [n.strip() for n in requested.split(",") if n.strip()]
    unknown = [n for n in names if n not in ANY_CLUSTER + OWN_NODE + SEVERAL_NODES]
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(ANY_CLUSTER + OWN_NODE + SEVERAL_NODES)}")
    refused = [n for n in names if n not in allowed]
    if refused:
        raise ValueError(f"only on a cluster this run brings up (not one named by STREAMQ_E2E_KUBECONFIG): {', '.join(refused)}")
    return names


def schedule(seed: int, every_s: float, minutes: float, faults: list[str], jitter: float = JITTER) -> list[tuple[float, str]]:
    """(seconds after the load starts, fault) for every fault planned within ``minutes``: the same seed, the same run."""
    rng = random.Random(seed)
    plan: list[tuple[float, str]] = []
    at = 0.0
    while True:
        at += every_s * rng.uniform(1 - jitter, 1 + jitter)
        if at >= minutes * 60 or not faults:
            return plan
        plan.append((round(at, 1), rng.choice(faults)))


def running_again(status: dict[str, Any], since_attempt: int | None = None) -> bool:
    """Running and not Degraded (after a driver fault: a later attempt than the one that died)."""
    return (status.get("phase") == "Running" and condition(status, "Degraded").get("status") != "True"
            and (since_attempt is None or status.get("attempt", 0) > since_attempt))  # fmt: skip


def one_line(text: str, limit: int = 300) -> str:
    """A note for a Markdown table cell: an error's lines joined, no column separator."""
    return " ".join(text.replace("|", "/").split())[:limit]


def summarize(produced: int, undelivered: int, source: list[tuple[str, str]], sink: list[tuple[str, str]]) -> dict[str, int]:
    """The run's totals; the truth is what the source holds, not what the producer attempted."""
    out = Output(sink, flagged(source))
    return {
        "recordsProduced": produced, "recordsInSource": len(source), "expectedFlagged": len(set(out.expected)),
        "recordsOut": len(sink), "uniqueReceived": len(out.unique), "lost": len(out.missing),
        "duplicates": out.duplicates, "unexpected": len(out.unexpected), "undelivered": undelivered,
    }  # fmt: skip


# ---------------------------------------------------------------------- the feed


class Feed(threading.Thread):
    """Payments p0, p1, ... at ``rate``/s until stopped. When reconnect_kafka has pointed the
    client at a replaced broker, the next record goes through a new Producer for it."""

    def __init__(self, kafka: Kafka, topic: str, rate: float):
        super().__init__(name="chaos-feed", daemon=True)
        self.kafka, self.topic, self.rate = kafka, topic, rate
        self.next_id = 0
        self.undelivered = 0
        self._producer: Producer | None = None
        self._address: str | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        due = time.monotonic()
        while not self._halt.is_set():
            self.send(1)
            # More than a second behind (a producer switch, a busy machine): carry on at the rate, no burst.
            due = max(due + 1 / self.rate, time.monotonic() - 1)
            self._halt.wait(max(0.0, due - time.monotonic()))

    def send(self, n: int) -> None:
        if self.kafka.bootstrap != self._address:
            self._switch()
        for key, value in payments(n, start=self.next_id):
            try:
                self._producer.produce(self.topic, key=key.encode(), value=value.encode(), on_delivery=self._delivered)
            except BufferError:
                self.undelivered += 1
            self.next_id += 1
        self._producer.poll(0)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.undelivered += 1

    def _switch(self) -> None:
        if self._producer is not None:
            # The old address is gone for good: fail what its producer holds now (counted through the
            # delivery reports, or here if they do not come) rather than let it retry against nothing.
            self._producer.purge()
            self.undelivered += self._producer.flush(10)
        self._address = self.kafka.bootstrap
        self._producer = Producer({"bootstrap.servers": self._address, "linger.ms": 5, "enable.idempotence": True})

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def finish(self, tail: int) -> None:
        """After stop(): ``tail`` more payments at once, then whatever is still unsent counts as undelivered."""
        self.send(tail)
        self.undelivered += self._producer.flush(120)


# ---------------------------------------------------------------------- faults


@dataclass
class Run:
    cluster: Any
    kafka: Kafka
    sq: Queries
    name: str
    sink: str
    feed: Feed


@dataclass
class Injected:
    note: str = ""
    since_attempt: int | None = None
    ready: Callable[[], bool] | None = None  # must also hold before the query counts as Running again
    restore: Callable[[], None] | None = None  # ends a fault that lasts restore_after_s
    restore_after_s: float = 0
    running_while_down: bool = False  # the status is read during the fault (not so while the apiserver is away)


def _driver(run: Run, kill: bool) -> Injected:
    attempt = run.sq.status(run.name).get("attempt", 0)
    pod = run.sq.driver_pod(run.name)
    if kill:
        container = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "driver")
        run.cluster.kill_container(container["containerID"])
    else:
        run.sq.kubectl("delete", "pod", pod["metadata"]["name"], "--wait=false")
    return Injected(f"driver {pod['metadata']['name']} (attempt {attempt})", since_attempt=attempt)


def _broker(run: Run) -> Injected:
    broker = kafka_pod(run.cluster)["metadata"]["name"]
    run.sq.kubectl("delete", "pod", broker, "--wait=false")
    return Injected(f"broker {broker}, new one at {reconnect_kafka(run.cluster, run.kafka, replaced=broker)}")


def _operator(run: Run) -> Injected:
    def live() -> list[dict]:
        pods = run.cluster.kubectl_json("-n", OPERATOR_NAMESPACE, "get", "pods", "-l", OPERATOR_PODS)["items"]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    pod = live()[0]
    killed = pod["metadata"]["name"]
    container = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "operator")
    run.cluster.kill_container(container["containerID"])
    run.cluster.kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", killed, "--grace-period=0", "--force", "--wait=false")
    # The query's status says Running all along (nobody updates it): what counts is an operator back to read it.
    return Injected(
        f"operator {killed}",
        ready=lambda: any(
            p["metadata"]["name"] != killed and condition(p["status"], "Ready").get("status") == "True" for p in live()
        ),
    )


def _apiserver(run: Run) -> Injected:
    run.cluster.stop_apiserver()
    return Injected(f"down {APISERVER_DOWN_S} s", restore=run.cluster.start_apiserver, restore_after_s=APISERVER_DOWN_S)


def _node(run: Run) -> Injected:
    """The driver's node frozen (docker pause of its kind node) for NODE_DOWN_S, then back."""
    attempt = run.sq.status(run.name).get("attempt", 0)
    pod = run.sq.driver_pod(run.name)
    node = pod["spec"]["nodeName"]
    run.cluster.pause_node(node)
    return Injected(
        f"node {node} of driver {pod['metadata']['name']} paused {NODE_DOWN_S} s",
        since_attempt=attempt,
        restore=lambda: run.cluster.unpause_node(node),
        restore_after_s=NODE_DOWN_S,
        running_while_down=True,
    )


def _restart(run: Run, component: str) -> Injected:
    run.cluster.restart_node_component(component)  # returns once it answers again
    return Injected()


FAULTS: dict[str, Callable[[Run], Injected]] = {
    "driver-pod-deleted": lambda run: _driver(run, kill=False),
    "driver-container-killed": lambda run: _driver(run, kill=True),
    "broker-pod-deleted": _broker,
    "operator-pod-killed": _operator,
    "kubelet-restarted": lambda run: _restart(run, "kubelet"),
    "containerd-restarted": lambda run: _restart(run, "containerd"),
    "apiserver-stopped-60s": _apiserver,
    "node-paused": _node,
}


def _try(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:  # noqa: BLE001 - mid-fault a read fails (apiserver, broker away): that is "not yet"
        return None


def recover(run: Run, injected: Injected, t0: float, first_new_id: int, timeout: float) -> tuple[float | None, float | None]:
    """(Running again, output growing) in seconds after t0; None for what did not happen within timeout."""
    marks: dict[str, float] = {}

    def running() -> bool:
        return (injected.ready is None or injected.ready()) and running_again(run.sq.status(run.name), injected.since_attempt)

    def grew() -> bool:
        return any(int(key[1:]) >= first_new_id for key, _ in run.kafka.read_all(run.sink, timeout=20))

    def both() -> bool:
        if injected.restore is not None and time.monotonic() - t0 >= injected.restore_after_s:
            restore, injected.restore = injected.restore, None
            restore()
        if "running" not in marks and (injected.restore is None or injected.running_while_down) and _try(running):
            marks["running"] = round(time.monotonic() - t0, 1)
        if "output" not in marks and _try(grew):
            marks["output"] = round(time.monotonic() - t0, 1)
        return len(marks) == 2

    try:
        wait_for(both, max(0.0, t0 + timeout - time.monotonic()), "recovery", interval=1)
    except WaitTimeout:
        pass  # recorded as what is missing from marks
    finally:
        if injected.restore is not None:  # ^C mid-outage, or a timeout shorter than the outage
            injected.restore()
    return marks.get("running"), marks.get("output")


def one_fault(run: Run, number: int, fault: str, t_start: float, timeout: float) -> dict[str, Any]:
    t0 = time.monotonic()
    row: dict[str, Any] = {"n": number, "fault": fault, "at": now_iso(), "atS": round(t0 - t_start, 1)}
    try:
        injected = FAULTS[fault](run)
    except Exception as exc:  # noqa: BLE001 - a soak goes on: the failure is the record
        return {**row, "runningAgainS": None, "outputGrowingS": None, "note": one_line(f"injection failed: {exc}")}
    # Payments from here on were produced once the fault was in place: before it returned (a
    # kubectl get and delete take a second on a busy node) the old driver was still flagging them,
    # and "output growing" read its records (2026-11-25: 0.7-1.0 s after a killed driver).
    first_new_id = run.feed.next_id
    running, output = recover(run, injected, t0, first_new_id, timeout)
    notes = [injected.note] if injected.note else []
    if running is None or output is None:
        missing = " and ".join(what for what, s in (("Running", running), ("output", output)) if s is None)
        status = _try(lambda: run.sq.status(run.name)) or {}
        degraded = condition(status, "Degraded")
        why = f", Degraded: {degraded.get('reason')}" if degraded.get("status") == "True" else ""
        notes.insert(0, f"timed out: {missing} (phase {status.get('phase')}{why})")
    return {**row, "runningAgainS": running, "outputGrowingS": output, "note": one_line("; ".join(notes))}


# ---------------------------------------------------------------------- the run


@contextlib.contextmanager
def bench_cluster(
    provider: str, workers: int = 0, kubeconfig: str | None = None, kafka_bootstrap: str | None = None
) -> Iterator[Any]:
    """The e2e ``cluster`` fixture's cluster: the one ``kubeconfig`` names (left up), or a new one (torn down).
    ``workers``: a kind cluster with that many workers; one left up by the multinode tier
    (STREAMQ_KIND_CLUSTER names it) is used as it is."""
    c = create_cluster(provider)
    if workers:
        if c.workers and c.kubeconfig.exists():  # up from the multinode tier (STREAMQ_MULTINODE_KEEP=1)
            c.kafka_bootstrap = f"127.0.0.1:{c.kafka_port}"
            yield c
            return
        c.workers = workers
    if kubeconfig:
        c.kubeconfig = Path(kubeconfig)
        c.kafka_bootstrap = kafka_bootstrap
        yield c
        return
    check = subprocess.run([str(ROOT / "hack" / "install-node.sh"), "--check", "--provider", provider],
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    if check.returncode != 0:
        raise SystemExit(f"the cluster's prerequisites are missing ({check.stderr.strip()}); run hack/install-node.sh")
    if provider == "local" and os.geteuid() != 0:
        raise SystemExit("the local provider needs root (containerd, kubelet, iptables)")
    if provider == "local":  # last resort when even the teardown below cannot run
        import atexit

        atexit.register(c.cleanup_if_still_up)
    c.up()
    try:
        c.kafka_bootstrap = setup(c)
        yield c
    finally:
        c.down()


def run(args: SimpleNamespace, provider: str, faults: list[str]) -> dict[str, Any]:
    plan = schedule(args.seed, args.every, args.minutes, faults)
    results: dict[str, Any] = {"bench": "chaos", "started": now_iso(), "commit": git_commit(), "machine": machine(),
                               "settings": {**vars(args), "jitter": JITTER, "faults": faults}, "provider": provider,
                               "schedule": plan, "faults": []}  # fmt: skip
    log(f"{len(plan)} faults planned over {args.minutes} min (seed {args.seed}): {plan}")
    sampler = LoadSampler()
    sampler.start()
    load_since = None  # the load while payments flow, without the cluster's start
    try:
        with (
            bench_cluster(provider, args.workers, args.kubeconfig, args.kafka_bootstrap) as cluster,
            contextlib.ExitStack() as stack,
        ):
            kafka = Kafka(cluster.kafka_bootstrap)
            sq = Queries(cluster, "chaos")
            name = sq.name("chaos")
            source = kafka.create_topic(f"{name}-payments", partitions=2)
            sink = kafka.create_topic(f"{name}-flagged", partitions=1)
            # The policy's ceiling (policy.maxRestarts, 100): a budget meant for one fault (10, reset after
            # 10 min Running) would end a soak; unlimited is the platform's to allow, not a tenant's.
            extra: dict[str, Any] = {"restartPolicy.maxRestarts": 100}
            if args.standby:  # as tests/e2e/test_standby.py: two drivers on a 2-core node beside Kafka and the operator
                extra.update({"runtime.standby": True, "runtime.driver.coreRequest": "250m"})
            feed = Feed(kafka, source, args.rate)
            try:
                if getattr(cluster, "workers", 0):  # a node's own directory dies with it: the store on this machine
                    store = cluster.host_object_store(Path(tempfile.mkdtemp(prefix="chaos-s3-")), NAMESPACE, S3_SECRET, S3_BUCKET)
                    stack.callback(store.stop)
                    sq.apply(name, fraud_spec_s3(source, sink, name, store, S3_BUCKET, S3_SECRET, **extra))
                else:
                    sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name), **extra))
                sq.wait_running(name, timeout=420)
                feed.start()
                t_start, load_since = time.monotonic(), time.time()
                wait_for(lambda: kafka.read_all(sink, timeout=20), 420, f"the first flagged payment in {sink}", interval=2,
                         ignore=(Exception,))  # fmt: skip
                log(f"{name} Running, {args.rate} payments/s into {source}, flagged ones arriving in {sink}")
                r = Run(cluster, kafka, sq, name, sink, feed)
                for number, (at_s, fault) in enumerate(plan, 1):
                    time.sleep(max(0.0, t_start + at_s - time.monotonic()))  # the schedule, not a condition
                    row = one_fault(r, number, fault, t_start, args.recovery_timeout)
                    log(
                        f"fault {number} {fault}: Running again {row['runningAgainS']} s, output growing {row['outputGrowingS']} s; {row['note']}"
                    )
                    results["faults"].append(row)
                time.sleep(max(0.0, t_start + args.minutes * 60 - time.monotonic()))  # the rest of the load
                results["producerAliveAtEnd"] = feed.is_alive()  # False: it died mid-run (its exception is on stderr)
                feed.stop()
                feed.finish(TAIL)
                source_records = kafka.read_all(source, timeout=300)
                log(
                    f"producer stopped: {feed.next_id:,} produced, {feed.undelivered:,} undelivered, {len(source_records):,} in the source"
                )
                try:
                    wait_output(kafka, sink, flagged(source_records), args.drain_timeout, lambda: sq.describe(name))
                except WaitTimeout as exc:
                    log(f"the sink never held every flagged payment: {str(exc)[:500]}")
                results["summary"] = summarize(feed.next_id, feed.undelivered, source_records, kafka.read_all(sink, timeout=120))
            finally:
                if feed.is_alive():
                    feed.stop()
                with contextlib.suppress(Exception):  # diagnostics only: the results do not depend on them
                    sq.report()
                if args.kubeconfig:  # a cluster we leave up: leave it as we found it
                    sq.cleanup()
    finally:
        results["loadWholeRun"] = sampler.stop()
        results["load"] = sampler.summary(since=load_since)
        results["finished"] = now_iso()
    return results


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # the cluster's teardown runs in the finally blocks


def main(
    minutes: Annotated[float, typer.Option(help="how long the payments flow and faults come")] = 30.0,
    rate: Annotated[float, typer.Option(help="payments/s (a third are flagged)")] = 30.0,
    every: Annotated[float, typer.Option(help=f"seconds between faults, +-{JITTER * 100:.0f}% jitter")] = 180.0,
    seed: Annotated[int | None, typer.Option(help="the schedule's seed (default: a random one, recorded)")] = None,
    faults: Annotated[
        str | None,
        typer.Option(
            help=f"comma-separated subset of: {', '.join(ANY_CLUSTER + OWN_NODE + SEVERAL_NODES)} "
            "(default: every one the cluster can take)"
        ),
    ] = None,
    standby: Annotated[bool, typer.Option("--standby", help="spec.runtime.standby: a warm standby driver")] = False,
    workers: Annotated[int, typer.Option(help="kind only: worker nodes (node-paused needs them)")] = 0,
    recovery_timeout: Annotated[float, typer.Option(help="seconds each fault's recovery may take")] = 600.0,
    drain_timeout: Annotated[float, typer.Option(help="seconds for the sink to hold every flagged payment")] = 900.0,
    kubeconfig: Annotated[
        str | None,
        typer.Option(envvar="STREAMQ_E2E_KUBECONFIG", help="a cluster left up (hack/e2e-cluster.sh up): soak it, start none"),
    ] = None,
    kafka_bootstrap: Annotated[
        str | None, typer.Option(envvar="STREAMQ_E2E_KAFKA_BOOTSTRAP", help="that cluster's Kafka, as the host reaches it")
    ] = None,
) -> None:
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    if kubeconfig and not kafka_bootstrap:
        raise typer.BadParameter(
            "STREAMQ_E2E_KUBECONFIG needs STREAMQ_E2E_KAFKA_BOOTSTRAP (hack/e2e-cluster.sh up prints both)",
            param_hint="--kafka-bootstrap",
        )
    args = SimpleNamespace(**locals())  # run() reads the options by name, and the results record them as "settings"
    provider = choose_provider()
    try:  # checked before a cluster start of several minutes
        fault_names = pick_faults(faults, allowed_faults(own_node=not kubeconfig, several_nodes=workers > 0))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--faults") from None
    signal.signal(signal.SIGTERM, _interrupt)
    results = run(args, provider, fault_names)
    print(report.chaos(results), flush=True)
    log(f"wrote {write_results('chaos', results)}")


if __name__ == "__main__":
    cli.run(main, "bench.chaos", __doc__)
