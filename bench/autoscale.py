"""Lag-driven autoscaling on a cluster: the input of a micro-batch query steps up, then down; its rate, lag
and executors over time (issue #40). The scenario is testbed/cluster/autoscale.py, as the e2e test runs it.

    .venv/bin/python -m bench.autoscale          # a local-provider cluster, brought up and torn down
    STREAMQ_E2E_KUBECONFIG=... STREAMQ_E2E_KAFKA_BOOTSTRAP=... .venv/bin/python -m bench.autoscale   # one that is up

Writes bench/results/autoscale-<UTC>.json (settings, the measured executor rate, when it scaled, every
second's sample) and docs/img/autoscale.png (bench.plots.autoscale_plot).
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path

from bench.common import log, results_header, write_results


def main() -> int:
    from bench.plots import autoscale_plot
    from testbed.cluster import autoscale as scenario
    from testbed.cluster import choose_provider, create_cluster
    from testbed.cluster.addons import E2E_NAMESPACE, setup
    from testbed.cluster.workload import Kafka, Queries

    settings = scenario.Settings()
    provider = choose_provider()
    cluster = create_cluster(provider)
    existing = os.environ.get("STREAMQ_E2E_KUBECONFIG")
    if existing:
        cluster.kubeconfig = Path(existing)
        cluster.kafka_bootstrap = os.environ["STREAMQ_E2E_KAFKA_BOOTSTRAP"]
    else:
        cluster.up()
    sq = Queries(cluster, "bench.autoscale", E2E_NAMESPACE)
    try:
        if not existing:
            cluster.kafka_bootstrap = setup(cluster)
        run = scenario.run(cluster, Kafka(cluster.kafka_bootstrap), sq, settings)
    finally:
        sq.cleanup()
        if not existing:
            cluster.down()
    shortfalls = scenario.shortfalls(run, settings)  # what the e2e test would have said of this run
    payload = {**results_header("autoscale", {**asdict(settings), "provider": provider}), "run": run.to_json(),
               "e2eShortfalls": shortfalls}  # fmt: skip
    path = write_results("autoscale", payload)
    log(f"one executor {run.per_executor:.0f} rows/s; up to {run.high_rate:.0f}/s: scaled up after "
        f"{run.scaled_up_after_s}s, lag back {run.lag_back_after_s}s later; down to {run.low_rate:.0f}/s: scaled "
        f"down after {run.scaled_down_after_s}s; resizes {run.resizes}; {run.output}")  # fmt: skip
    log("every assertion of the e2e test holds" if not shortfalls else f"the e2e test would fail: {shortfalls}")
    log(f"wrote {path}")
    autoscale_plot(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
