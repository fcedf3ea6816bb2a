"""The benchmarks' command lines (bench.cli, typer): what every script parses the same way."""

import typing
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bench import cli

pytestmark = pytest.mark.unit


def test_key_values_keep_their_order_and_an_equals_sign_in_the_value():
    assert cli.key_values(["a=1", "b=x=y", "c="]) == [("a", "1"), ("b", "x=y"), ("c", "")]
    with pytest.raises(typer.BadParameter, match="expected key=value"):
        cli.key_values(["no-equals"])


SEEN: dict[str, Any] = {}  # a global: a name the command closed over would be one of its locals()


def test_a_command_with_the_job_options_sees_them_beside_its_own():
    @cli.with_job_options
    def command(rate: cli.Rate = 10, **job_options: Any) -> None:
        SEEN["args"] = cli.options(locals())

    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, ["--rate", "5", "--conf", "spark.x=1", "--sink-option", "acks=all", "--partitions", "3"])
    assert result.exit_code == 0, result.output
    assert vars(SEEN["args"]) == {
        "rate": 5,
        "partitions": 3,
        "conf": [("spark.x", "1")],
        "source_option": [],
        "sink_option": [("acks", "all")],
        "exactly_once": False,
        "producers": 0,
        "checkpoint_interval": "",
    }
    wrong = CliRunner().invoke(app, ["--conf", "spark.x"])
    assert wrong.exit_code == 2 and "expected key=value" in wrong.output


def test_an_unknown_path_is_a_usage_error():
    assert cli.known_names("a, b,", ["a", "b"], "--paths") == ["a", "b"]
    with pytest.raises(typer.BadParameter, match="unknown path"):
        cli.known_names("a,c", ["a", "b"], "--paths")


def test_a_modes_choices_are_the_triggers_the_harness_knows():
    from bench.latency import TRIGGERS, Trigger

    assert sorted(typing.get_args(Trigger)) == sorted(TRIGGERS)


@pytest.mark.parametrize("module", ["latency", "settle", "recovery", "operator", "chaos", "profile_continuous"])
def test_every_benchmark_builds_its_command_line(module):
    import importlib

    app = typer.Typer()
    app.command()(importlib.import_module(f"bench.{module}").main)
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0, result.output


def test_the_flink_peer_has_a_command_line_and_runs_its_job_without_typer():
    # Run as `python -m` (typer is imported below its __main__ guard); --run-job is dispatched before
    # it, for the Flink venv, which has no typer: with typer unimportable the job still starts (and fails
    # later, on the missing job file or PyFlink).
    import subprocess
    import sys

    from bench.flink_peer import _RUN_AS_MAIN, ROOT

    help_ = subprocess.run([sys.executable, "-m", "bench.flink_peer", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert help_.returncode == 0 and "--bootstrap" in help_.stdout, help_.stderr
    job = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['typer'] = None; " + _RUN_AS_MAIN, str(ROOT / "bench/flink_peer.py"),
         "--run-job", "job.json"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert job.returncode != 0 and "in run_job" in job.stderr and "typer" not in job.stderr, job.stderr
