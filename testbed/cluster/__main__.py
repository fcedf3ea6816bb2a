"""`python -m testbed.cluster up|down|provider` (what hack/e2e-cluster.sh runs).

up [--no-addons]   bring a cluster up (plus CoreDNS, Kafka and the operator), print
                   its KUBECONFIG, and stay in the foreground; ^C or SIGTERM tears it down
down               tear down what a crashed run left behind (local provider)
provider           print the provider that would be chosen
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from testbed.cluster import choose_provider, create_cluster
from testbed.cluster.base import log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/e2e-cluster.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down", "provider"])
    parser.add_argument("--no-addons", action="store_true", help="only the cluster: no CoreDNS, Kafka, operator")
    args = parser.parse_args(argv)
    provider = choose_provider()
    if args.command == "provider":
        print(provider)
        return 0
    if args.command == "down":
        if provider == "local":
            from testbed.cluster.local import MachineLock, cleanup_leftovers

            lock = MachineLock()
            lock.acquire(timeout=0)  # refuses while a cluster is up: its owner tears it down
            try:
                cleanup_leftovers()
            finally:
                lock.release()
        else:
            create_cluster(provider).down()
        return 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = create_cluster(provider)
    cluster.up()
    try:
        if not args.no_addons:
            from testbed.cluster.addons import setup

            bootstrap = setup(cluster)
            print(f"KAFKA_BOOTSTRAP={bootstrap}", flush=True)
        print(f"KUBECONFIG={cluster.kubeconfig}", flush=True)
        log("cluster ready; ^C (or SIGTERM) tears it down")
        while not stop.wait(1):
            pass
    finally:
        cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
