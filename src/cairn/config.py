"""Where settings come from: arguments, CAIRN_* environment, [tool.cairn] in pyproject.toml.

The only module that reads the environment. It reads; it opens nothing (the step library
turns `Resources` into connections).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from cairn import durations
from cairn.errors import ConfigError

DEFAULT_URL = "sqlite:///cairn.db"
DEFAULT_KNOWN_WORKERS_WINDOW = "7d"


def _pyproject() -> dict[str, object]:
    path = Path.cwd() / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    section = data.get("tool", {}).get("cairn", {})
    return section if isinstance(section, dict) else {}


def database_url(explicit: str | None = None) -> str:
    """The database URL: argument, else CAIRN_DATABASE_URL, else [tool.cairn] url, else default."""
    if explicit:
        return explicit
    env = os.environ.get("CAIRN_DATABASE_URL")
    if env:
        return env
    url = _pyproject().get("url")
    return url if isinstance(url, str) and url else DEFAULT_URL


def broker_url(explicit: str | None = None) -> str | None:
    """cairn.celery's broker: argument, else CAIRN_BROKER_URL, else [tool.cairn] broker_url."""
    if explicit:
        return explicit
    env = os.environ.get("CAIRN_BROKER_URL")
    if env:
        return env
    url = _pyproject().get("broker_url")
    return url if isinstance(url, str) and url else None


def modules(explicit: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """Workflow modules to import: argument, else CAIRN_MODULES (comma list), else pyproject."""
    if explicit:
        return tuple(explicit)
    env = os.environ.get("CAIRN_MODULES")
    if env:
        return tuple(m.strip() for m in env.split(",") if m.strip())
    found = _pyproject().get("modules", [])
    if isinstance(found, str):
        return (found,)
    if isinstance(found, list) and all(isinstance(m, str) for m in found):
        return tuple(found)
    raise ConfigError("[tool.cairn] modules must be a list of module names")


def dashboard_token(explicit: str | None = None) -> str | None:
    """The dashboard's bearer token: argument, else CAIRN_DASHBOARD_TOKEN, else None."""
    if explicit:
        return explicit
    return os.environ.get("CAIRN_DASHBOARD_TOKEN") or None


def known_workers_window(explicit: object = None) -> float:
    """Seconds a worker's workflows stay known after it was last seen, for starts by name.

    Argument, else CAIRN_KNOWN_WORKERS_WINDOW, else [tool.cairn] known_workers_window,
    else 7 days; a duration ("7d", "12h", seconds). ConfigError names a bad one.
    """
    value: object = explicit
    where = "known_workers_window"
    if value is None:
        value = os.environ.get("CAIRN_KNOWN_WORKERS_WINDOW") or None
        where = "CAIRN_KNOWN_WORKERS_WINDOW"
    if value is None:
        value = _pyproject().get("known_workers_window")
        where = "[tool.cairn] known_workers_window"
    if value is None:
        value = DEFAULT_KNOWN_WORKERS_WINDOW
    if isinstance(value, bool) or not isinstance(value, str | int | float | timedelta):
        raise ConfigError(f"{where} must be a duration such as '7d', got {value!r}")
    try:
        return durations.parse(value, what=where).total_seconds()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Resources:
    """What the ready steps of `cairn.steps` reach by name: databases, the tag provider.

    `databases` maps a name to a SQLAlchemy URL (or an SQLAlchemy Engine given in code);
    `tags` is a provider URL ("opcua://host:4840"), a "module:attribute" path to a
    provider object, a provider object, or None when none is set.
    """

    databases: Mapping[str, Any] = field(default_factory=dict)
    tags: Any = None


def resources(databases: Mapping[str, Any] | None = None, tags: Any = None) -> Resources:
    """The step library's resources: arguments over `[tool.cairn.databases]` and `.tags`.

    A database given as an argument replaces the one of the same name in pyproject.toml;
    `tags` replaces `[tool.cairn.tags] provider`. A string value "env:NAME" is read from
    the environment variable NAME (so no password need be written in pyproject.toml).

    Raises:
        ConfigError: A section of the wrong shape, a name that is not a non-empty string,
            or an "env:" variable that is not set; each named.
    """
    section = _pyproject()
    found: dict[str, Any] = {}
    listed = section.get("databases", {})
    if not isinstance(listed, dict):
        raise ConfigError("[tool.cairn.databases] must be a table of name = URL")
    for name, url in listed.items():
        if not isinstance(url, str) or not url:
            raise ConfigError(f"[tool.cairn.databases] {name} must be a URL string, got {url!r}")
        found[name] = url
    if databases is not None:
        if not isinstance(databases, Mapping):
            raise ConfigError(f"databases must be a dict of name -> URL, got {databases!r}")
        found.update(databases)
    for name, url in found.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a database name must be a non-empty string, got {name!r}")
        if url is None or url == "":
            raise ConfigError(f"database {name!r} has no URL")
        found[name] = _from_env(url, f"database {name!r}")
    if tags is None:
        table = section.get("tags", {})
        if not isinstance(table, dict):
            raise ConfigError('[tool.cairn.tags] must be a table: provider = "opcua://host:4840"')
        tags = table.get("provider")
        if tags is not None and (not isinstance(tags, str) or not tags):
            raise ConfigError(f"[tool.cairn.tags] provider must be a string, got {tags!r}")
    return Resources(databases=found, tags=_from_env(tags, "the tag provider"))


def _from_env(value: Any, what: str) -> Any:
    """`value`, or the environment variable it names as "env:NAME"."""
    if not isinstance(value, str) or not value.startswith("env:"):
        return value
    variable = value[len("env:") :]
    found = os.environ.get(variable)
    if not found:
        raise ConfigError(f"{what} is read from ${variable}, which is not set")
    return found
