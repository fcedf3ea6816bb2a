"""The streamq operator: kopf handlers (I/O) over pure decisions and renderers.

    observe.py   the world -> plain dataclasses (driver state)
    run.py       what one driver attempt is, and which spec changes need a new one (pure)
    decide/      (spec, status, observed, now) -> what to do (pure), one module a concern:
                 gate (checkpoint), drivers, restart (policy), health, conditions
    render.py    spec -> ConfigMap / Pod / Service / SparkApplication (pure)
    kube.py      the API calls, each with a timeout                  (I/O)
    reconcile.py one pass: read, decide, act, write status        (I/O)
    handlers.py  kopf wiring: daemon per query, wake-ups, probes   (I/O)
"""
