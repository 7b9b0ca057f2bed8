"""One settings object, read once from DEVICECONTROL_* environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

DEFAULT_DATABASE_URL = "sqlite:///./devicecontrol.db"
ENV_PREFIX = "DEVICECONTROL_"


class SettingsError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    access_token_ttl: int = 86400
    refresh_token_ttl: int = 2592000
    default_page_size: int = 100
    max_page_size: int = 500
    log_level: str = "info"

    def with_database_url(self, url: str | None) -> Settings:
        """The same settings on another database (the CLI's --database-url)."""
        return self if not url else replace(self, database_url=url)


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(ENV_PREFIX + name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{ENV_PREFIX}{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise SettingsError(f"{ENV_PREFIX}{name} must be at least 1, got {value}")
    return value


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and check every DEVICECONTROL_* variable; raise SettingsError on a bad one."""
    env = os.environ if environ is None else environ
    log_level = env.get(ENV_PREFIX + "LOG_LEVEL", "info").strip().lower() or "info"
    if log_level not in {"critical", "error", "warning", "info", "debug"}:
        raise SettingsError(f"{ENV_PREFIX}LOG_LEVEL must be a log level name, got {log_level!r}")
    settings = Settings(
        database_url=env.get(ENV_PREFIX + "DATABASE_URL", "").strip() or DEFAULT_DATABASE_URL,
        access_token_ttl=_positive_int(env, "ACCESS_TOKEN_TTL", 86400),
        refresh_token_ttl=_positive_int(env, "REFRESH_TOKEN_TTL", 2592000),
        default_page_size=_positive_int(env, "DEFAULT_PAGE_SIZE", 100),
        max_page_size=_positive_int(env, "MAX_PAGE_SIZE", 500),
        log_level=log_level,
    )
    if settings.default_page_size > settings.max_page_size:
        raise SettingsError(
            f"{ENV_PREFIX}DEFAULT_PAGE_SIZE ({settings.default_page_size}) must not exceed "
            f"{ENV_PREFIX}MAX_PAGE_SIZE ({settings.max_page_size})"
        )
    return settings
