"""The streamq operator: kopf handlers (I/O) over pure decisions and renderers.

observe.py   the world -> plain dataclasses (driver state)
progress_read.py  a running driver's newest progress record, from its pod's port `progress` (I/O)
run.py       what one driver attempt is, and which spec changes need a new one (pure)
decide/      (spec, status, observed, now) -> what to do (pure), one module a concern:
             gate (checkpoint), drivers, restart (policy), health, conditions, autoscale (recommended executors)
render/      run -> ConfigMap / Pod / SparkApplication / Service / Secret / RBAC and Lease (pure),
             one module per kind
kube.py      the API calls, each with a timeout                  (I/O)
act.py       carry out a decision; what came of it (a refusal) for the next one  (I/O)
reconcile.py one pass: observe, decide, act (a refusal: decide again), write status  (I/O)
handlers.py  kopf wiring: daemon per query, wake-ups, probes   (I/O)
"""
