"""Settings from environment variables (contract.environment): one pydantic-settings class per
consumer, read from os.environ or, in tests, from a mapping that is then the whole environment."""

import pytest

from app.driver.lease_holder import LeaseSettings
from app.driver.run import RunOptions
from controller.config import Settings

pytestmark = pytest.mark.unit


def test_a_mapping_is_the_whole_environment(monkeypatch):
    monkeypatch.setenv("STREAMQ_JOB_IMAGE", "from-os-environ:1")
    monkeypatch.setenv("STREAMQ_WATCH_PERIOD_SECONDS", "99")
    assert Settings.from_env({}).job_image == Settings.model_fields["job_image"].default
    assert Settings.from_env().job_image == "from-os-environ:1"
    assert RunOptions.from_env({}).watch_period_s == 2.0
    assert RunOptions.from_env().watch_period_s == 99.0


def test_an_empty_variable_is_not_set(monkeypatch):
    env = {"STREAMQ_OPERATOR_NAMESPACE": "", "STREAMQ_RUN_AS_USER": "", "STREAMQ_LEASE": "", "POD_NAME": ""}
    assert (Settings.from_env(env).operator_namespace, Settings.from_env(env).run_as_user) == (None, 1000)
    assert LeaseSettings.from_env(env).lease is None
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    assert (Settings.from_env().operator_namespace, Settings.from_env().run_as_user) == (None, 1000)
    assert LeaseSettings.from_env().pod_name is None


def test_names_are_exact_and_other_variables_are_ignored():
    settings = Settings.from_env({"streamq_job_image": "lower:1", "STREAMQ_UNKNOWN": "x"})
    assert settings.job_image == Settings.model_fields["job_image"].default


def test_a_value_that_does_not_parse_names_its_variable():
    with pytest.raises(ValueError, match="STREAMQ_RUN_AS_USER"):
        Settings.from_env({"STREAMQ_RUN_AS_USER": "abc"})


def test_fields_by_name_and_frozen():
    settings = Settings(job_image="streamq:9.9.9", run_as_user=7)
    assert (settings.job_image, settings.run_as_user) == ("streamq:9.9.9", 7)
    with pytest.raises(ValueError):
        settings.job_image = "other"  # type: ignore[misc]


def test_the_cli_flags_win_over_the_environment():
    env = {"STREAMQ_PROGRESS_FILE": "/tmp/progress", "STREAMQ_BROKER_TIMEOUT_SECONDS": "5"}
    options = RunOptions.from_env(env, progress_file=None, starting_offsets="earliest", human=True)
    assert (options.progress_file, options.broker_timeout_s) == ("/tmp/progress", 5.0)
    assert (options.starting_offsets, options.human) == ("earliest", True)
    assert RunOptions.from_env(env, progress_file="/elsewhere").progress_file == "/elsewhere"
