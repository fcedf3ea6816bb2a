"""`python -m controller`: run the streamq operator.

Flags override the environment the Deployment sets:

    -n/--namespace NS (repeatable)  STREAMQ_NAMESPACES=a,b     watch these namespaces
    -A/--all-namespaces             (default when none given)  watch the whole cluster
    --peering NAME                  STREAMQ_PEERING=NAME       coordinate replicas (needs kopf's peering CRDs)
    --priority N                    STREAMQ_PEERING_PRIORITY=N this replica's peering priority
                                                               (default: random, so replicas differ)
    --standalone                    STREAMQ_STANDALONE=1       no peering at all
    --liveness URL                  STREAMQ_LIVENESS=URL       e.g. http://0.0.0.0:8080/healthz
    --metrics-port N                STREAMQ_METRICS_PORT=N     Prometheus metrics; 0 turns them off

The operator's other settings (job image, driver account, ...) are read by
``controller.config.Settings.from_env``.

    python -m controller release-finalizers ...   the chart's pre-delete hook (controller/uninstall.py)
"""

from __future__ import annotations

import argparse
import os
import random
import sys

import kopf


def parse_args(argv: list[str] | None = None, env: dict[str, str] | None = None) -> argparse.Namespace:
    env = dict(os.environ) if env is None else env
    parser = argparse.ArgumentParser(prog="python -m controller", description="The streamq operator.")
    parser.add_argument("-n", "--namespace", action="append", dest="namespaces", default=None)
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("--peering", default=env.get("STREAMQ_PEERING") or None)
    # kopf pauses every replica when two share a priority; distinct priorities give
    # one active replica and hot standbys that take over when it goes away.
    parser.add_argument(
        "--priority", type=int,
        default=int(env.get("STREAMQ_PEERING_PRIORITY") or random.randint(1, 1_000_000)),
    )
    parser.add_argument("--standalone", action="store_true", default=env.get("STREAMQ_STANDALONE") == "1")
    parser.add_argument("--liveness", default=env.get("STREAMQ_LIVENESS") or None)
    parser.add_argument("--metrics-port", type=int, default=int(env.get("STREAMQ_METRICS_PORT", "9090")))
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    if args.namespaces is None and not args.all_namespaces:
        from_env = [n.strip() for n in env.get("STREAMQ_NAMESPACES", "").split(",") if n.strip()]
        args.namespaces = from_env or None
    if args.namespaces and args.all_namespaces:
        parser.error("use either --namespace or --all-namespaces")
    if args.peering and args.standalone:
        parser.error("use either --peering or --standalone")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["release-finalizers"]:
        from controller import uninstall

        return uninstall.main(argv[1:])
    args = parse_args(argv)
    kopf.configure(verbose=args.verbose, debug=args.debug)
    import controller.handlers  # noqa: F401  (registers the handlers)

    kopf.run(
        clusterwide=not args.namespaces,
        namespaces=args.namespaces or (),
        standalone=True if args.standalone else None,
        peering_name=args.peering,
        priority=args.priority,
        liveness_endpoint=args.liveness,
        memo=kopf.Memo(metrics_port=args.metrics_port),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
