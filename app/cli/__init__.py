"""`streamq`: the command line (typer); the commands are in app.cli.commands."""

from app.cli.commands import main  # noqa: F401  (the console script's entry point: app.cli:main)
