"""The operator at scale: 200 StreamingQueries applied at once against a real kube-apiserver.

    .venv/bin/python -m bench.operator                 # 200 queries
    .venv/bin/python -m bench.operator --queries 50    # a quicker look

etcd + kube-apiserver start on loopback (testbed/kube.py), the CRDs and RBAC
from manifests/base are applied, and the operator runs as its own process
(``python -m controller``, as in the integration tests: its ServiceAccount's token,
one watched namespace, default settings). One ``kubectl apply`` creates every query.
Watches started before the apply record when each StreamingQuery and each driver pod
first appeared (the benchmark's clock, ms resolution). There is no kubelet: the pods
stay Pending, which is all the operator's first reconcile needs.

Reported: time until every driver pod exists and until every query has a status,
apply-to-driver-created per query (p50/p99/max), the operator's CPU seconds
(psutil, user+system) for the burst and for a quiet minute after it, and its peak RSS.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from bench import cli
from bench.common import (
    LoadSampler,
    log,
    now_iso,
    print_table,
    results_header,
    table,
    tree_cpu_seconds,
    write_results,
)
from devtools.payments import percentile

NAMESPACE = "bench"


class FirstSeen(threading.Thread):
    """Watches one kind of object and records when each name was first seen (time.time())."""

    def __init__(self, list_fn, *args, **kwargs):
        super().__init__(daemon=True)
        self.list_fn, self.args, self.kwargs = list_fn, args, kwargs
        self.seen: dict[str, float] = {}
        self.ready = threading.Event()
        self._halt = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        from kubernetes import watch

        try:
            initial = self.list_fn(*self.args, **self.kwargs)
            items = initial["items"] if isinstance(initial, dict) else initial.items
            version = initial["metadata"]["resourceVersion"] if isinstance(initial, dict) else initial.metadata.resource_version
            for item in items:
                self.seen.setdefault(_name(item), time.time())
            w = watch.Watch()
            self.ready.set()
            while not self._halt.is_set():
                for event in w.stream(self.list_fn, *self.args, resource_version=version, timeout_seconds=30,
                                      allow_watch_bookmarks=False, **self.kwargs):  # fmt: skip
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"] if isinstance(obj, dict) else obj.metadata.resource_version
                    if event["type"] == "ADDED":
                        self.seen.setdefault(_name(obj), time.time())
                    if self._halt.is_set():
                        w.stop()
                        break
        except Exception as exc:  # noqa: BLE001 - whatever it is, the main thread raises it (run: `raise w.error`)
            self.error = exc
            self.ready.set()

    def stop(self) -> None:
        self._halt.set()


def _name(obj) -> str:
    return obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name


class PeakRss(threading.Thread):
    """Samples a process's RSS every 50 ms; VmHWM (the kernel's own peak) is read at the end too."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self._halt = threading.Event()

    def run(self) -> None:
        import psutil

        proc = psutil.Process(self.pid)
        while not self._halt.wait(0.05):
            try:
                self.peak = max(self.peak, proc.memory_info().rss)
            except psutil.Error:
                return

    def stop(self) -> dict[str, float]:
        self._halt.set()
        self.join(5)
        hwm = None
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
        except OSError:
            pass
        return {"sampledPeakMiB": round(self.peak / 2**20, 1), "vmHWMMiB": round(hwm / 2**20, 1) if hwm else None}


def install(kube) -> Path:
    """CRDs, namespaces and RBAC as the integration tests install them; a kubeconfig of the operator's account."""
    from testbed.operator import install_streamq

    kubeconfig = install_streamq(kube)
    kube.kubectl("create", "namespace", NAMESPACE)
    return kubeconfig


def run(args) -> dict[str, Any]:
    import psutil
    from kubernetes import client

    from contract import GROUP, PLURAL, VERSION
    from controller import names
    from testbed.kube import KubeApiServer
    from testbed.operator import Operator
    from testbed.specs import RATE_TO_CONSOLE, query_spec, resource

    results: dict[str, Any] = results_header("operator", vars(args))
    log(f"machine {results['machine']}")
    sampler = LoadSampler()
    sampler.start()
    workdir = Path(tempfile.mkdtemp(prefix="streamq-bench-operator-"))
    kube = KubeApiServer()
    operator = None
    watchers: list[FirstSeen] = []
    try:
        kube.start()
        log(f"kube-apiserver {kube.server} up")
        operator_kubeconfig = install(kube)
        # The Operator helper of the integration tests, with the operator's default resync (60 s).
        operator = Operator(operator_kubeconfig, NAMESPACE, workdir / "operator.log",
                            env={"STREAMQ_RESYNC_INTERVAL_SECONDS": "60"}).start()  # fmt: skip
        op_proc = psutil.Process(operator.proc.pid)
        log(f"operator pid {operator.proc.pid} live; RSS {op_proc.memory_info().rss / 2**20:.0f} MiB")
        api = kube.api_client()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        pods = FirstSeen(core.list_namespaced_pod, NAMESPACE, label_selector=names.driver_pod_selector())
        queries = FirstSeen(custom.list_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL)
        watchers = [pods, queries]
        for w in watchers:
            w.start()
            w.ready.wait(30)
            if w.error:
                raise w.error
        time.sleep(args.settle)  # the operator idle before the burst
        rss_before = op_proc.memory_info().rss
        peak = PeakRss(operator.proc.pid)
        peak.start()
        names_ = [f"q{i:04d}" for i in range(args.queries)]
        manifest = {"apiVersion": "v1", "kind": "List",
                    "items": [resource(query_spec(RATE_TO_CONSOLE), n, NAMESPACE) for n in names_]}  # fmt: skip
        cpu0, api_cpu0 = tree_cpu_seconds(operator.proc.pid), kube_cpu(kube)
        t_apply = time.time()
        kube.kubectl("apply", "-f", "-", input=json.dumps(manifest), timeout=300)
        t_applied = time.time()
        log(f"applied {args.queries} StreamingQueries in {t_applied - t_apply:.2f}s")
        expected = {names.driver_name(n, 1): n for n in names_}
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and not all(p in pods.seen for p in expected):
            if operator.exited:
                raise RuntimeError(f"the operator exited:\n{operator.log_tail()}")
            time.sleep(0.1)
        t_all_pods = max((pods.seen[p] for p in expected if p in pods.seen), default=None)
        created = sum(1 for p in expected if p in pods.seen)
        log(f"{created}/{args.queries} driver pods exist")
        # Every query has a status (phase Starting) written by the operator.
        t_all_status = None
        while time.monotonic() < deadline:
            items = custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]
            with_status = sum(1 for i in items if (i.get("status") or {}).get("phase"))
            if with_status >= args.queries:
                t_all_status = time.time()
                break
            time.sleep(0.2)
        cpu_burst = tree_cpu_seconds(operator.proc.pid) - cpu0
        api_cpu_burst = kube_cpu(kube) - api_cpu0
        t_burst_end = time.time()
        # A quiet period with every query reconciled: what 200 idle queries cost.
        cpu1 = tree_cpu_seconds(operator.proc.pid)
        time.sleep(args.quiet)
        cpu_quiet = tree_cpu_seconds(operator.proc.pid) - cpu1
        rss = peak.stop()
        per_query = sorted(pods.seen[p] - queries.seen.get(q, t_apply) for p, q in expected.items() if p in pods.seen)
        from_apply = sorted(pods.seen[p] - t_apply for p in expected if p in pods.seen)
        results.update({
            "queries": args.queries,
            "driversCreated": created,
            "applySeconds": round(t_applied - t_apply, 2),
            "allDriversAfterS": round(t_all_pods - t_apply, 2) if t_all_pods and created == args.queries else None,
            "allStatusesAfterS": round(t_all_status - t_apply, 2) if t_all_status else None,
            "queryCreatedToDriverCreatedS": _dist(per_query),
            "applyStartToDriverCreatedS": _dist(from_apply),
            "operatorCpuSeconds": {"burst": round(cpu_burst, 2), "burstWindowS": round(t_burst_end - t_apply, 2),
                                   "quiet": round(cpu_quiet, 2), "quietWindowS": args.quiet},
            "apiserverEtcdCpuSecondsBurst": round(api_cpu_burst, 2),
            "operatorRss": {"beforeMiB": round(rss_before / 2**20, 1), **rss},
            "load": sampler.summary(t_apply, t_burst_end),
        })  # fmt: skip
        results["operatorLogTail"] = operator.log_tail(20)
    finally:
        for w in watchers:
            w.stop()
        if operator is not None:
            operator.stop()
        kube.stop()
        if "operatorRss" in results:  # the run got to the end
            shutil.rmtree(workdir, ignore_errors=True)  # kept (with operator.log) when the run failed
        else:
            log(f"kept {workdir} for the operator's log")
        results["loadWholeRun"] = sampler.stop()
        results["loadAverageAtEnd"] = [round(x, 2) for x in os.getloadavg()]
        results["finished"] = now_iso()
    return results


def kube_cpu(kube) -> float:
    return sum(tree_cpu_seconds(p.pid) for p in (kube._apiserver, kube._etcd) if p is not None)


def _dist(values: list[float]) -> dict[str, float | None]:
    return {"p50": _r(percentile(values, 50)), "p99": _r(percentile(values, 99)), "max": _r(values[-1] if values else None),
            "min": _r(values[0] if values else None)}  # fmt: skip


def _r(v: float | None) -> float | None:
    return round(v, 3) if v is not None else None


def main(
    queries: Annotated[int, typer.Option(help="StreamingQueries applied at once")] = 200,
    timeout: Annotated[float, typer.Option(help="for every driver pod to exist")] = 600.0,
    settle: Annotated[float, typer.Option(help="idle seconds before the apply")] = 5.0,
    quiet: Annotated[float, typer.Option(help="seconds measured after the burst")] = 60.0,
) -> None:
    args = SimpleNamespace(**locals())  # run() reads the options by name
    r = run(args)
    cpu, rss = r["operatorCpuSeconds"], r["operatorRss"]
    q, a = r["queryCreatedToDriverCreatedS"], r["applyStartToDriverCreatedS"]
    headers, rows = (
        ["queries", "kubectl apply s", "all drivers s", "all statuses s", "apply->driver p50 s", "p99 s", "max s",
         "query->driver p50 s", "p99 s", "CPU s burst", f"CPU s quiet {cpu['quietWindowS']:.0f}s", "peak RSS MiB", "load1"],
        [[r["queries"], r["applySeconds"], r["allDriversAfterS"], r["allStatusesAfterS"], a["p50"], a["p99"], a["max"],
          q["p50"], q["p99"], cpu["burst"], cpu["quiet"], rss["vmHWMMiB"] or rss["sampledPeakMiB"], r["load"].get("load1Mean")]],
    )  # fmt: skip
    print_table(headers, rows)
    r["table"] = table(headers, rows)
    path = write_results("operator", r)
    log(f"wrote {path}")


if __name__ == "__main__":
    cli.run(main, "bench.operator", __doc__)
