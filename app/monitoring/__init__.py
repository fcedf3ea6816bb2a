"""A running query watched from outside Spark: the watchdog, its health verdicts, the progress it reports."""
