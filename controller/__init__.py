"""The streamq operator: kopf handlers (I/O) over pure decisions and renderers.

    observe.py   the world -> plain dataclasses (driver state)
    decide.py    (spec, status, observed, now) -> what to do    (pure)
    render.py    spec -> ConfigMap / Pod / Service / SparkApplication (pure)
    reconcile.py one pass: read, decide, act, write status        (I/O)
    handlers.py  kopf wiring: daemon per query, wake-ups, probes   (I/O)
"""
