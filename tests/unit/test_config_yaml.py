"""cairn.yaml: read by the CLI and workers, its precedence, pyworkflow's spellings, its errors.

Precedence, key by key: argument > CAIRN_* environment > cairn.yaml > [tool.cairn] > default.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn import config
from cairn.errors import ConfigError
from cairn.store import locations

PYPROJECT = """
[tool.cairn]
url = "sqlite:///from-pyproject.db"
modules = ["pyproject_flows"]
retention = "30d"
"""


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("CAIRN_DATABASE_URL", "CAIRN_MODULES", "CAIRN_RETENTION", "CAIRN_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CAIRN_BROKER_URL", raising=False)
    return tmp_path


def write(here: Path, text: str, name: str = "cairn.yaml") -> Path:
    path = here / name
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence__argument_env_yaml_pyproject_default(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert config.database_url() == "sqlite:///cairn.db"  # the default
    write(here, PYPROJECT, "pyproject.toml")
    assert config.database_url() == "sqlite:///from-pyproject.db"
    write(here, "url: memory://\n")
    assert config.database_url() == "memory://"  # cairn.yaml over [tool.cairn]
    monkeypatch.setenv("CAIRN_DATABASE_URL", "sqlite:///from-env.db")
    assert config.database_url() == "sqlite:///from-env.db"
    assert config.database_url("sqlite:///given.db") == "sqlite:///given.db"


def test_precedence__key_by_key_between_the_files(here: Path) -> None:
    write(here, PYPROJECT, "pyproject.toml")
    write(here, "modules: [yaml_flows]\nmax_history: 900\n")
    assert config.modules() == ("yaml_flows",)
    assert config.database_url() == "sqlite:///from-pyproject.db"  # not in cairn.yaml
    assert config.retention() == 30 * 86400
    assert config.limits().max_history == 900


def test_pyworkflow_spellings__module_storage_and_celery(here: Path) -> None:
    write(
        here,
        "module: app.flows\n"
        "modules: [app.more]\n"
        "storage:\n  type: file\n  base_path: ./workflow_data\n"
        "celery:\n  broker: redis://localhost:6379/0\n",
    )
    assert config.modules() == ("app.flows", "app.more")
    assert config.database_url() == f"file://{here / 'workflow_data'}"
    assert config.broker_url() == "redis://localhost:6379/0"


@pytest.mark.parametrize(
    ("storage", "url"),
    [
        ("{type: memory}", "memory://"),
        ("{backend: sqlite, path: data/app.db}", "sqlite:///{here}/data/app.db"),
        ("{type: postgres, dsn: 'postgresql://app@db/cairn'}", "postgresql://app@db/cairn"),
        (
            "{type: postgres, host: db, port: 5433, user: app, password: 'p@ss', database: c}",
            "postgresql://app:p%40ss@db:5433/c",
        ),
        ("'sqlite:///x.db'", "sqlite:///x.db"),
    ],
)
def test_storage__each_type_as_a_database_url(here: Path, storage: str, url: str) -> None:
    write(here, f"storage: {storage}\n")
    assert config.database_url() == url.format(here=here)


def test_cairn_config__names_another_file_and_paths_follow_it(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (here / "etc").mkdir()
    path = write(here, "storage: {type: file, path: store}\nmodules: [a]\n", "etc/prod.yaml")
    monkeypatch.setenv("CAIRN_CONFIG", str(path))
    assert config.database_url() == f"file://{here / 'etc' / 'store'}"
    assert config.modules() == ("a",)


def test_a_bad_value_names_the_file_and_key(here: Path) -> None:
    write(here, "retention: soon\n")
    with pytest.raises(ConfigError, match=r"invalid duration for cairn\.yaml retention"):
        config.retention()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("url: [unclosed\n", "cairn.yaml is not valid YAML: .* \\(line 2, column 1\\)"),
        ("- url\n", "must hold a mapping of settings"),
        ("urls: memory://\n", "has an unknown key 'urls'"),
        ("runtime: celery\n", "key 'runtime' has no meaning in cairn: .*--transport celery"),
        ("celery: {result_backend: 'redis://'}\n", "'celery.result_backend' has no meaning"),
        ("celery: {brokers: x}\n", "celery has an unknown key 'brokers'"),
        ("url: memory://\nstorage: {type: memory}\n", "sets both url and storage"),
        ("storage: {type: dynamodb}\n", "storage type 'dynamodb' is not one cairn has"),
        ("storage: {type: file}\n", "storage of type file needs a path"),
        ("storage: {path: x}\n", "storage needs a type"),
        ("storage: {type: file, path: x, dir: y}\n", "storage has an unknown key 'dir'"),
        ("module: 3\n", "module must be a module name"),
        ("modules: 3\n", "cairn.yaml modules must be a list of module names"),
        ("url: 3\n", "cairn.yaml url must be a database URL"),
    ],
)
def test_bad_yaml__one_line_error_naming_the_file_and_key(
    here: Path, text: str, message: str
) -> None:
    write(here, text)
    with pytest.raises(ConfigError, match=message) as caught:
        config.database_url()
        config.modules()
    assert "\n" not in str(caught.value)
    assert "cairn.yaml" in str(caught.value)


def test_cairn_config__a_missing_file_is_named(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_CONFIG", str(here / "nope.yaml"))
    with pytest.raises(ConfigError, match=r"CAIRN_CONFIG names .*nope\.yaml.*not a file"):
        config.database_url()


def test_an_empty_file_sets_nothing(here: Path) -> None:
    write(here, "# nothing yet\n")
    assert config.database_url() == "sqlite:///cairn.db"
    assert config.modules() == ()


def test_storage__a_path_with_url_characters_stays_one_path(here: Path) -> None:
    write(here, "storage: {type: file, path: 'runs #1'}\n")
    assert locations.file_directory(config.database_url()) == str(here / "runs #1")


def test_the_files_are_parsed_once_until_they_change(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each setting reads the files; an Engine reads a dozen settings (35 ms of a
    PostgreSQL Engine's 80 ms open went to parsing one pyproject.toml ten times)."""
    import tomllib

    import yaml

    parsed: list[str] = []
    toml_loads, yaml_load = tomllib.loads, yaml.safe_load
    monkeypatch.setattr(tomllib, "loads", lambda text: parsed.append("toml") or toml_loads(text))
    monkeypatch.setattr(yaml, "safe_load", lambda text: parsed.append("yaml") or yaml_load(text))
    write(here, PYPROJECT, "pyproject.toml")
    write(here, "modules: [yaml_flows]\n")
    for _ in range(3):
        assert config.database_url() == "sqlite:///from-pyproject.db"
        assert config.modules() == ("yaml_flows",)
        assert config.retention() == 30 * 86400
    assert sorted(parsed) == ["toml", "yaml"]
    write(here, "modules: [changed_flows]\n")  # a change is read at the next setting
    assert config.modules() == ("changed_flows",)
    write(here, PYPROJECT.replace("from-pyproject", "changed"), "pyproject.toml")
    assert config.database_url() == "sqlite:///changed.db"
    assert sorted(parsed) == ["toml", "toml", "yaml", "yaml"]
