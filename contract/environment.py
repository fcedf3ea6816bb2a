"""Settings read from environment variables (pydantic-settings), the operator's and the job's alike.

A subclass of ``EnvSettings`` is the settings: each field is declared once, with its default,
its variable as ``validation_alias`` and its description. A field without an alias is not
meant to be set from the environment (a command-line flag's, say).

    class JobSettings(EnvSettings):
        image: str = Field("streamq:1", validation_alias="STREAMQ_JOB_IMAGE", description="...")

    JobSettings.from_env()                        # os.environ
    JobSettings.from_env({"STREAMQ_JOB_IMAGE": "x"})  # a mapping instead (tests), not os.environ
    JobSettings(image="x")                        # by field name: os.environ for the rest

Names match exactly (case-sensitive), no .env or secrets file is read, other variables are
ignored, and a variable set to "" counts as not set (the field's default applies). A value
that does not parse (``STREAMQ_RUN_AS_USER=abc``) raises pydantic's ``ValidationError``, a
``ValueError`` that names the variable. (pydantic-settings also reads a field from a variable
spelled as the field's name, ``job_image``, since fields may be given by name; nothing sets
such lowercase variables.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["EnvSettings"]


class EnvSettings(BaseSettings):
    model_config = SettingsConfigDict(
        case_sensitive=True, env_ignore_empty=True, extra="ignore", frozen=True, populate_by_name=True
    )

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Each field that a variable sets: field name -> variable."""
        return {name: f.validation_alias for name, f in cls.model_fields.items() if isinstance(f.validation_alias, str)}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """The variables of ``env`` (os.environ when None); a variable not set, or set to "", keeps its default.

        A given mapping is the whole environment: every variable's field is given outright, the
        mapping's value or the field's default, and init arguments come before os.environ in
        pydantic-settings (``model_validate`` would read os.environ too).
        """
        if env is None:
            return cls()
        values: dict[str, Any] = {}
        for name, variable in cls.variables().items():
            if env.get(variable):
                values[variable] = env[variable]  # by the variable's name: an error names it
            else:
                values[name] = cls.model_fields[name].get_default(call_default_factory=True, validated_data={})
        return cls(**values)
