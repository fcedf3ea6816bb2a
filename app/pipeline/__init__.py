"""From a spec to a running Spark query: session, plan, progress."""
