"""Benchmarks (not tests): each module is one command that prints a table and writes JSON to bench/results/."""
