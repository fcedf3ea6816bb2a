"""The operator with running queries: drivers Running on kwok's fake nodes, progress through the real channel.

    .venv/bin/python -m bench.operator_running                                  # 200 queries, 5 minutes
    .venv/bin/python -m bench.operator_running --queries 200,1000,2000 --minutes 5

For each N: a fresh etcd + kube-apiserver (testbed/kube.py), kube-scheduler and kwok
(testbed/kwok.py: fake nodes whose pods get loopback addresses), the operator as its own process
(``python -m controller``, one watched namespace, its default settings), and one process that is
every driver's progress endpoint (bench/fake_drivers.py). N queries are applied at once; once every
driver runs, the window of ``--minutes`` is measured:

- status freshness: the age of ``status.progress`` (now minus the record's time; the fake drivers
  make a record every second, as a busy micro-batch job does) at reads of random queries, p50/p99;
- the operator's CPU (cores, over the window) and RSS; the API server's and etcd's CPU;
- the API server's requests by verb and resource over the window (its own apiserver_request_total),
  all clients (the operator's are the streamingqueries and the pods lists; kwok's and the
  scheduler's are the rest);
- apply to every driver Running.

``--channel log`` runs the operator with ``STREAMQ_PROGRESS_PORT=0`` (drivers declare no progress
port), so it reads each driver's log tail through the API server as before. kwok serves no logs here,
so those reads fail at the kubelet; the API server's share of the work is what is compared.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from bench import cli
from bench.common import LoadSampler, log, now_iso, print_table, results_header, table, tree_cpu_seconds, write_results
from bench.operator import NAMESPACE, PeakRss, install, kube_cpu
from devtools.payments import percentile

PODS_PER_NODE = 500
_REQUEST = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")


def api_requests(kube) -> Counter[str]:
    """apiserver_request_total by "VERB resource[/subresource]", since the API server started."""
    out: Counter[str] = Counter()
    for line in kube.kubectl("get", "--raw", "/metrics", timeout=60).stdout.splitlines():
        m = _REQUEST.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
            what = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            out[f"{labels.get('verb')} {what}"] += int(float(m["value"]))
    return out


class Freshness(threading.Thread):
    """Reads a random query's status every ``every_s`` and keeps the age of its progress record."""

    def __init__(self, custom, names: list[str], every_s: float = 0.2):
        super().__init__(daemon=True)
        self.custom, self.names, self.every_s = custom, names, every_s
        self.ages: list[float] = []
        self.missing = 0
        self._halt = threading.Event()

    def run(self) -> None:
        from contract import GROUP, PLURAL, VERSION

        while not self._halt.wait(self.every_s):
            body = self.custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, random.choice(self.names))
            updated = ((body.get("status") or {}).get("progress") or {}).get("updatedAt")
            if updated is None:
                self.missing += 1
                continue
            self.ages.append(time.time() - datetime.fromisoformat(updated.replace("Z", "+00:00")).timestamp())

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def passes(metrics_port: int) -> Counter[str]:
    """The operator's streamq_passes_total by kind (full, progress)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return Counter({kind: int(float(v)) for kind, v in re.findall(r'^streamq_passes_total\{kind="(\w+)"\} (\S+)$', text, re.M)})


def one_run(n: int, channel: str, minutes: float, port: int, keep: bool = False, resync_s: float = 60.0) -> dict[str, Any]:
    import psutil
    from kubernetes import client

    from bench.fake_drivers import FakeDrivers
    from contract import GROUP, PLURAL, VERSION
    from controller import names
    from testbed.kube import KubeApiServer, free_port
    from testbed.kwok import FakeNodes
    from testbed.operator import Operator
    from testbed.specs import RATE_TO_CONSOLE, query_spec, resource

    workdir = Path(tempfile.mkdtemp(prefix="streamq-bench-running-"))
    kube, nodes, operator, farm, fresh = KubeApiServer(), None, None, None, None
    out: dict[str, Any] = {"queries": n, "channel": channel}
    try:
        kube.start()
        operator_kubeconfig = install(kube)
        nodes = FakeNodes(kube, workdir).start()
        nodes.add(-(-n // PODS_PER_NODE), cores=PODS_PER_NODE, pods=PODS_PER_NODE)
        api = kube.api_client()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        farm = FakeDrivers(core, NAMESPACE, names.driver_pod_selector(), port).start()
        # the operator's defaults (the testbed's helper shortens the resync to 10 s for tests), but the port
        env = {
            "STREAMQ_PROGRESS_PORT": str(port if channel == "endpoint" else 0),
            "STREAMQ_RESYNC_INTERVAL_SECONDS": str(resync_s),
        }
        metrics_port = free_port()
        operator = Operator(operator_kubeconfig, NAMESPACE, workdir / "operator.log", env=env, metrics_port=metrics_port,
                            verbose=False).start()  # fmt: skip
        queries = [f"q{i:04d}" for i in range(n)]
        spec = query_spec(RATE_TO_CONSOLE, checkpoint={"location": "/tmp/streamq/checkpoint"})
        manifest = {"apiVersion": "v1", "kind": "List", "items": [resource(spec, q, NAMESPACE) for q in queries]}
        t_apply = time.time()
        kube.kubectl("apply", "-f", "-", input=json.dumps(manifest), timeout=600)
        deadline = time.monotonic() + 900
        running = 0
        while time.monotonic() < deadline:
            for what, why in (("operator", operator.exited), ("fake nodes", nodes.exited())):
                if why:
                    raise RuntimeError(f"{what} exited: {why}")
            items = custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]
            running = sum(1 for i in items if (i.get("status") or {}).get("phase") == "Running")
            if running >= n:
                break
            time.sleep(1)
        out["allRunningAfterS"] = round(time.time() - t_apply, 1) if running >= n else None
        out["running"] = running
        log(f"N={n} {channel}: {running}/{n} Running after {time.time() - t_apply:.0f}s")
        time.sleep(30)  # every query's first reads are done before the window: it measures the steady state
        op = psutil.Process(operator.proc.pid)
        peak = PeakRss(operator.proc.pid)
        peak.start()
        fresh = Freshness(custom, queries)
        fresh.start()
        requests0, cpu0, api0, served0 = api_requests(kube), tree_cpu_seconds(op.pid), kube_cpu(kube), farm.served
        passes0 = passes(metrics_port)
        t0 = time.time()
        time.sleep(minutes * 60)
        window = time.time() - t0
        cpu, api_cpu = tree_cpu_seconds(op.pid) - cpu0, kube_cpu(kube) - api0
        requests = api_requests(kube) - requests0
        made = passes(metrics_port) - passes0
        fresh.stop()
        ages = sorted(fresh.ages)
        out.update({
            "windowS": round(window, 1),
            "freshnessS": {"p50": _r(percentile(ages, 50)), "p99": _r(percentile(ages, 99)), "max": _r(ages[-1] if ages else None),
                           "samples": len(ages), "withoutProgress": fresh.missing},
            "operatorCores": round(cpu / window, 3),
            "operatorRss": {"endMiB": round(op.memory_info().rss / 2**20, 1), **peak.stop()},
            "apiserverEtcdCores": round(api_cpu / window, 3),
            "apiRequestsPerS": {k: round(v / window, 2) for k, v in sorted(requests.items(), key=lambda kv: -kv[1]) if v},
            "progressReadsServedPerS": round((farm.served - served0) / window, 2),
            "passesPerS": {kind: round(count / window, 2) for kind, count in sorted(made.items())},
            "resyncS": resync_s,
        })  # fmt: skip
        out["operatorLogTail"] = operator.log_tail(10)
    finally:
        for part in (fresh, farm, operator, nodes):
            if part is not None:
                part.stop()
        kube.stop()
        if "windowS" in out and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"kept {workdir} (the operator's, kwok's and the scheduler's logs)")
    return out


def _r(v: float | None) -> float | None:
    return round(v, 2) if v is not None else None


def main(
    queries: Annotated[str, typer.Option(help="comma-separated counts, one run each")] = "200",
    channels: Annotated[str, typer.Option(help="endpoint, log, or both (comma-separated)")] = "endpoint,log",
    minutes: Annotated[float, typer.Option(help="the measured window of each run")] = 5.0,
    port: Annotated[int, typer.Option(help="the drivers' progress port (the fake drivers listen on it)")] = 18090,
    keep: Annotated[bool, typer.Option(help="keep each run's logs (operator, kwok, scheduler)")] = False,
    resync: Annotated[float, typer.Option(help="the operator's STREAMQ_RESYNC_INTERVAL_SECONDS (its default: 60)")] = 60.0,
) -> None:
    args = SimpleNamespace(**locals())
    results: dict[str, Any] = results_header("operator-running", vars(args))
    sampler = LoadSampler()
    sampler.start()
    runs = []
    for n in (int(x) for x in queries.split(",")):
        for channel in channels.split(","):
            runs.append(one_run(n, channel, minutes, port, keep, resync))
            log(json.dumps({k: v for k, v in runs[-1].items() if k != "operatorLogTail"}))
    results["runs"] = runs
    results["loadWholeRun"] = sampler.stop()
    results["finished"] = now_iso()
    headers = ["queries", "channel", "all Running s", "freshness p50 s", "p99 s", "operator cores", "RSS MiB",
               "apiserver+etcd cores", "API requests/s", "of which pods/log", "passes/s full", "progress"]  # fmt: skip
    rows = [[r["queries"], r["channel"], r.get("allRunningAfterS"), r.get("freshnessS", {}).get("p50"),
             r.get("freshnessS", {}).get("p99"), r.get("operatorCores"), (r.get("operatorRss") or {}).get("vmHWMMiB"),
             r.get("apiserverEtcdCores"), round(sum((r.get("apiRequestsPerS") or {}).values()), 1),
             round(sum(v for k, v in (r.get("apiRequestsPerS") or {}).items() if k.endswith("pods/log")), 1),
             (r.get("passesPerS") or {}).get("full"), (r.get("passesPerS") or {}).get("progress")]
            for r in runs]  # fmt: skip
    print_table(headers, rows)
    results["table"] = table(headers, rows)
    log(f"wrote {write_results('operator-running', results)}")


if __name__ == "__main__":
    cli.run(main, "bench.operator_running", __doc__)
