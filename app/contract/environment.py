"""Settings read from environment variables (pydantic-settings), the operator's and the job's alike.

A subclass of ``EnvSettings`` has one field per variable, the variable's name as the field's
``validation_alias``, and ``None`` as its default: ``given()`` is then only what the environment
set, and the caller's own defaults (a dataclass's) stay the one place the defaults are written.

    class _Env(EnvSettings):
        image: str | None = Field(None, validation_alias="STREAMQ_JOB_IMAGE")
        namespace: EmptyIsUnset = Field(None, validation_alias="STREAMQ_OPERATOR_NAMESPACE")

    _Env.read()                 # os.environ
    _Env.read({"STREAMQ_...": "..."})  # a mapping instead (tests)

Names match exactly (case-sensitive), no .env or secrets file is read, other variables are
ignored. A value that does not parse (``STREAMQ_RUN_AS_USER=abc``) raises pydantic's
``ValidationError``, a ``ValueError`` that names the variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Annotated, Any, Self

from pydantic import BeforeValidator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

__all__ = ["EmptyIsUnset", "EnvSettings"]

# The mapping read() was given, while it builds the settings; None: os.environ.
_MAPPING: ContextVar[Mapping[str, str] | None] = ContextVar("streamq_env_mapping", default=None)

# A variable set to "" counts as not set (the caller's default applies), for str fields.
EmptyIsUnset = Annotated[str | None, BeforeValidator(lambda value: value or None)]


class _MappingSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of os.environ."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]):
        self._mapping = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self._mapping, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


class EnvSettings(BaseSettings):
    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env = _MAPPING.get()
        return init_settings, env_settings if env is None else _MappingSource(settings_cls, env)

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> Self:
        """The variables of ``env`` (os.environ when None)."""
        token = _MAPPING.set(env)
        try:
            return cls()
        finally:
            _MAPPING.reset(token)

    def given(self) -> dict[str, Any]:
        """The fields the environment set (an empty ``EmptyIsUnset`` variable is not set)."""
        return self.model_dump(exclude_unset=True, exclude_none=True)
