"""Spark: the session, the plan (sources, transforms, sinks, triggers), credentials, Kafka checks, the analyser, failure classes."""
