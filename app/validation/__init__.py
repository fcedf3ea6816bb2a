"""Validation beyond the static rules: Spark's own analyser."""
