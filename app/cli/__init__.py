"""`streamq`: the command line (typer)."""
