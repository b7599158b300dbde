"""cairn.yaml: [tool.cairn]'s settings as a YAML file, pyworkflow's spellings mapped to cairn's.

It reads one file and returns its settings under [tool.cairn]'s names; `cairn.config`
decides where the file is and what wins (it alone reads the environment). Every key is
checked: one cairn does not know is refused, naming the file and the key.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from cairn.errors import ConfigError

if TYPE_CHECKING:
    import yaml

FILE_NAME = "cairn.yaml"

# The keys of [tool.cairn], taken as they are.
KEYS = (
    "url",
    "broker_url",
    "modules",
    "known_workers_window",
    "retention",
    "warn_value_size",
    "max_value_size",
    "inline_limit",
    "blobs",
    "warn_history",
    "max_history",
    "databases",
    "tags",
)
# pyworkflow.config.yaml's keys with no meaning here, and why.
REFUSED = {
    "runtime": "cairn picks how runs reach workers per worker: cairn worker --transport celery",
    "result_backend": "cairn keeps every run's result in its own database",
}
_STORAGE_KEYS = (
    *("type", "backend", "path", "base_path"),  # pyworkflow spells each both ways
    *("dsn", "host", "port", "user", "password", "database"),
)


def load(path: Path) -> dict[str, object]:
    """The settings of the YAML file `path`, by [tool.cairn]'s names.

    Raises:
        ConfigError: The file cannot be read or is not YAML, is not a mapping, or has a
            key cairn does not know (or one without meaning here); each names the file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    # Every setting reads the file: its text is parsed once (keyed by the text, so a
    # changed file is read anew; and by the working directory, which paths may follow).
    return _settings(path, text, os.getcwd())


@functools.lru_cache(maxsize=8)
def _settings(path: Path, text: str, cwd: str) -> dict[str, object]:
    # PyYAML costs about a tenth of `import cairn`: loaded only where a cairn.yaml is read.
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {_one_line(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path} must hold a mapping of settings (url: ..., modules: [...]), "
            f"got {type(data).__name__}"
        )
    found: dict[str, object] = {}
    mapped: dict[str, tuple[str, object]] = {}  # cairn's key -> (pyworkflow's, value)
    for key, value in data.items():
        if key in KEYS:
            found[key] = value
        elif key == "module":  # pyworkflow's one module, put before `modules`
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{path} module must be a module name, got {value!r}")
            modules = found.get("modules", data.get("modules", []))
            modules = [modules] if isinstance(modules, str) else modules
            if not isinstance(modules, list):
                raise ConfigError(f"{path} modules must be a list of module names")
            mapped["modules"] = ("module", [value, *modules])
        elif key == "storage":
            mapped["url"] = ("storage", _storage_url(path, value))
        elif key == "celery":
            broker = _celery_broker(path, value)
            if broker is not None:
                mapped["broker_url"] = ("celery.broker", broker)
        elif key in REFUSED:
            raise ConfigError(f"{path} key {key!r} has no meaning in cairn: {REFUSED[key]}")
        else:
            raise ConfigError(
                f"{path} has an unknown key {key!r} (cairn's keys: {', '.join(KEYS)}; "
                "pyworkflow's module, storage and celery are read too)"
            )
    for name, (spelling, value) in mapped.items():
        if name in found and spelling != "module":
            raise ConfigError(f"{path} sets both {name} and {spelling}: keep one")
        found[name] = value
    return found


def _storage_url(path: Path, value: object) -> str:
    """The database URL of pyworkflow's `storage:` (a string is one already)."""
    if isinstance(value, str) and value:
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"{path} storage must be a URL or a mapping with type, got {value!r}")
    for key in value:
        if key not in _STORAGE_KEYS:
            raise ConfigError(
                f"{path} storage has an unknown key {key!r} ({', '.join(_STORAGE_KEYS)})"
            )
    kind = value.get("type", value.get("backend"))
    if kind is None:
        raise ConfigError(f"{path} storage needs a type (memory, file, sqlite or postgres)")
    where = value.get("path", value.get("base_path"))
    if kind == "memory":
        return "memory://"
    if kind in ("file", "sqlite"):
        if not isinstance(where, str) or not where:
            raise ConfigError(f"{path} storage of type {kind} needs a path")
        # Relative to the file, so a worker started elsewhere finds the same store.
        absolute = quote(str((path.parent / where).resolve()))  # a '?' or '#' in a name
        return f"file://{absolute}" if kind == "file" else f"sqlite:///{absolute}"
    if kind in ("postgres", "postgresql"):
        return _postgres_url(path, value)
    raise ConfigError(
        f"{path} storage type {kind!r} is not one cairn has (memory, file, sqlite, postgres)"
    )


def _postgres_url(path: Path, value: dict[object, object]) -> str:
    dsn = value.get("dsn")
    if dsn is not None:
        if not isinstance(dsn, str) or not dsn:
            raise ConfigError(f"{path} storage dsn must be a URL, got {dsn!r}")
        return dsn
    user = quote(str(value.get("user", "")), safe="")
    password = value.get("password")
    login = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@" if user else ""
    host = value.get("host", "localhost")
    port = f":{value['port']}" if value.get("port") else ""
    return f"postgresql://{login}{host}{port}/{quote(str(value.get('database', '')), safe='')}"


def _celery_broker(path: Path, value: object) -> object:
    """The broker of pyworkflow's `celery:` mapping, cairn's broker_url (None: not given)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{path} celery must be a mapping (broker: ...), got {value!r}")
    for key in value:
        if key in REFUSED:
            raise ConfigError(f"{path} key 'celery.{key}' has no meaning in cairn: {REFUSED[key]}")
        if key != "broker":
            raise ConfigError(f"{path} celery has an unknown key {key!r} (cairn reads broker)")
    return value.get("broker")


def _one_line(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: the problem and where (PyYAML's text spans lines)."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())
