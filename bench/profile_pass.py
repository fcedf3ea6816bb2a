"""Where a reconcile pass's CPU goes, for a running query whose progress is read (cProfile).

    .venv/bin/python -m bench.profile_pass --queries 40 --passes 400

A fresh etcd + kube-apiserver (testbed/kube.py) and N queries as bench.operator_running makes them,
with no kubelet: each driver pod the operator creates is marked Running by hand (status.podIP a
loopback address of testbed.kwok.POD_CIDR, served by bench/fake_drivers.py). Then the passes the
operator's reconciler makes for a running query are made in this process, in turn over the queries,
under cProfile: ``--pass full`` is reconcile_once (observe, read, decide, act, status), ``--pass
progress`` the progress-only pass (controller.reconcile.progress_pass). It prints the CPU per pass
and the functions that cost the most (CPU time, under cProfile; the per-pass figure is from as many passes
made before, unprofiled), and writes them to bench/results/. kopf's own work (the watch
events a status write causes) is not in it: bench.operator_running measures the whole process.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import time
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from bench import cli
from bench.common import RESULTS_DIR, log, results_header, write_results

NAMESPACE = "bench"


def _mark_running(core: Any, pod: str, address: str) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {"phase": "Running", "podIP": address, "podIPs": [{"ip": address}], "startTime": now,
                         "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                         "containerStatuses": [{"name": "driver", "ready": True, "restartCount": 0, "image": "x",
                                                "imageID": "", "started": True,
                                                "state": {"running": {"startedAt": now}}}]}}  # fmt: skip
    core.patch_namespaced_pod_status(pod, NAMESPACE, status)


def run(args: Any) -> dict[str, Any]:
    import logging

    from kubernetes import client

    from bench.fake_drivers import FakeDrivers
    from bench.operator import install
    from controller import names
    from controller.config import Settings
    from controller.kube import Kube
    from controller.reconcile import Seen, progress_pass, reconcile_once
    from testbed.kube import KubeApiServer
    from testbed.specs import RATE_TO_CONSOLE, query_spec, resource

    results: dict[str, Any] = results_header("profile-pass", vars(args))
    logger = logging.getLogger("bench.profile_pass")
    with KubeApiServer() as kube:
        install(kube)
        api = kube.api_client()
        core = client.CoreV1Api(api)
        names_ = [f"q{i:04d}" for i in range(args.queries)]
        manifest = {"apiVersion": "v1", "kind": "List",
                    "items": [resource(query_spec(RATE_TO_CONSOLE), n, NAMESPACE) for n in names_]}  # fmt: skip
        kube.kubectl("apply", "-f", "-", input=json.dumps(manifest), timeout=120)
        settings = Settings.from_env()
        ops = Kube(kube.api_client())
        for n in names_:  # the first pass creates the driver
            reconcile_once(ops, settings, NAMESPACE, n, logger=logger)
        drivers = FakeDrivers(core, NAMESPACE, names.driver_pod_selector(), args.port).start()
        for i, n in enumerate(names_):
            _mark_running(core, names.driver_name(n, 1), f"127.16.{i // 250}.{i % 250 + 2}")

        def full(n: str) -> Seen | None:
            outcome = reconcile_once(ops, settings, NAMESPACE, n, with_progress=True, logger=logger)
            return outcome.seen if outcome is not None else None

        for n in names_:  # Starting -> Running
            full(n)
        while len(drivers.by_ip) < len(names_):  # the fake drivers' watch has seen every address
            time.sleep(0.1)
        seen = {n: full(n) for n in names_}
        if getattr(args, "pass") == "progress":
            assert all(seen.values()), "a query's full pass left nothing for a progress pass to start from"

        def one(n: str) -> None:
            if getattr(args, "pass") == "full":
                full(n)
                return
            outcome = progress_pass(ops, seen[n], logger=logger)
            assert outcome is not None and outcome.seen is not None, "a progress pass handed over to a full one"
            seen[n] = outcome.seen

        for n in names_:  # unprofiled: the first read of each query (a connection to the fake drivers...)
            one(n)
        cpu0 = time.process_time()
        for p in range(args.passes):  # unprofiled: what a pass costs
            one(names_[p % len(names_)])
        cpu = time.process_time() - cpu0
        profiler = cProfile.Profile(time.process_time)  # CPU time, not wall: what the operator's core pays
        profiler.enable()
        for p in range(args.passes):
            one(names_[p % len(names_)])
        profiler.disable()
        drivers.stop()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("cumulative")
    stats.print_stats(args.top)
    per_pass_ms = cpu / args.passes * 1000
    log(f"{args.passes} {getattr(args, 'pass')} passes: {per_pass_ms:.2f} ms CPU per pass")
    print(out.getvalue())
    results.update({"passes": args.passes, "cpuMsPerPass": round(per_pass_ms, 2), "servedReads": drivers.served,
                    "profile": out.getvalue().splitlines()[:args.top + 12]})  # fmt: skip
    return results


def main(
    queries: Annotated[int, typer.Option(help="running queries")] = 40,
    passes: Annotated[int, typer.Option(help="passes timed, then as many profiled, in turn over the queries")] = 400,
    kind: Annotated[str, typer.Option("--pass", help="full (reconcile_once) or progress (progress_pass)")] = "full",
    port: Annotated[int, typer.Option(help="the fake drivers' progress port")] = 8090,
    top: Annotated[int, typer.Option(help="functions printed")] = 45,
    label: cli.Label = "",
) -> None:
    if kind not in ("full", "progress"):
        raise typer.BadParameter("full or progress", param_hint="--pass")
    settings = dict(locals())
    settings["pass"] = settings.pop("kind")
    results = run(SimpleNamespace(**settings))
    folder = RESULTS_DIR / "tuning" if label else None
    log(f"wrote {write_results('profile-pass' + (f'-{label}' if label else ''), results, folder)}")


if __name__ == "__main__":
    cli.run(main, "bench.profile_pass", __doc__)
