"""Commands that only read or steer never create a database, nor migrate one.

A typo in `--db` (`sqlite:///tpyo.db`, `postgresql://.../postgres`) used to leave an
empty cairn database behind: a new SQLite file, or cairn's tables in someone else's
PostgreSQL database. Such commands now refuse with one line naming the URL; `cairn
worker`, `cairn run` and `cairn db upgrade` still create the schema.
"""

from __future__ import annotations

import socket
import sqlite3
import uuid
from pathlib import Path

import pytest
from tests.conftest import _admin_url, require_postgres

from cairn.store import migrate

from .test_cli import Worker, _env, cairn_cmd, one_error_line, workers  # noqa: F401
from .test_cli_bad_inputs import FLOWS

pytestmark = pytest.mark.process


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


# Commands that only read or steer, each of which used to create the database.
READERS = [
    ("runs", "list"),
    ("runs", "show", "r-1"),
    ("runs", "cancel", "r-1"),
    ("runs", "pause", "r-1"),
    ("runs", "resume", "r-1"),
    ("runs", "retry", "r-1"),
    ("send", "r-1", "go"),
    ("tasks", "list"),
    ("hooks", "list"),
    ("queues", "list"),
    ("schedules", "list"),
    ("schedules", "pause", "nightly"),
    ("workflows", "list"),
    ("runs", "prune", "--older-than", "1d"),
]


def _untouched(url: str) -> bool:
    """True if nothing of cairn's is at `url`: no SQLite file, no PostgreSQL table."""
    if url.startswith("sqlite:///"):
        return not Path(url.removeprefix("sqlite:///")).exists()
    return _pg_tables(url) == []


def _pg_tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return sorted(row[0] for row in rows)


def _refused(proc: object, url: str) -> str:
    line = one_error_line(proc)  # type: ignore[arg-type]
    assert proc.returncode == 1, line  # type: ignore[attr-defined]
    assert f"no cairn database at {url} " in line, line
    assert "cairn db upgrade" in line, line
    return line


@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_reader__sqlite_typo_refuses_and_creates_no_file(
    project: Path, command: tuple[str, ...]
) -> None:
    url = "sqlite:///tpyo.db"
    proc = cairn_cmd(project, *command, "-m", "flows", "--db", url)
    line = _refused(proc, url)
    assert "(the file does not exist)" in line
    assert sorted(p.name for p in project.iterdir() if p.name != "__pycache__") == ["flows.py"]


def test_reader__file_url_typo_creates_no_directory(project: Path) -> None:
    url = f"file://{project / 'stroe'}"
    line = _refused(cairn_cmd(project, "runs", "list", "--db", url), url)
    assert f"(the SQLite file {project / 'stroe' / 'cairn.db'} does not exist)" in line
    assert not (project / "stroe").exists()


def test_reader__sqlite_file_of_another_application_is_left_alone(project: Path) -> None:
    path = project / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.close()
    url = f"sqlite:///{path}"
    line = _refused(cairn_cmd(project, "runs", "list", "--db", url), url)
    assert "(the file has no cairn schema)" in line
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert tables == ["orders"]
    assert mode == "delete"  # not switched to WAL either


@pytest.mark.parametrize("command", [*READERS[:4], ("schedules", "list")], ids=" ".join)
def test_reader__database_without_cairn_refuses_and_creates_nothing(
    project: Path,
    empty_url: str,
    command: tuple[str, ...],
) -> None:
    line = _refused(cairn_cmd(project, *command, "--db", empty_url), empty_url)
    if empty_url.startswith("postgresql"):
        assert "(that database has no cairn schema)" in line
    assert _untouched(empty_url)


def test_reader__postgres_database_that_does_not_exist_is_one_line(project: Path) -> None:
    require_postgres()
    url = _admin_url(f"cairn_test_missing_{uuid.uuid4().hex[:12]}")
    proc = cairn_cmd(project, "runs", "list", "--db", url)
    line = one_error_line(proc)
    assert proc.returncode == 1
    assert line.startswith(f"error: cannot open database {url}: "), line
    assert "does not exist" in line


def test_reader__error_is_one_line_at_80_columns(project: Path) -> None:
    url = f"sqlite:///{project / 'a-rather-long-directory-name' / 'and-a-long-file-name.db'}"
    proc = cairn_cmd(project, "runs", "list", "--db", url, env={**_env(), "COLUMNS": "80"})
    _refused(proc, url)  # the folder is missing too: the same refusal, one line
    assert not (project / "a-rather-long-directory-name").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_dashboard__typo_refuses_on_both_stores(project: Path, empty_url: str) -> None:
    proc = cairn_cmd(project, "dashboard", "--port", str(_free_port()), "--db", empty_url)
    _refused(proc, empty_url)
    assert _untouched(empty_url)


def _migrated_to(url: str, version: int) -> None:
    """Apply cairn's migrations up to `version` only, as an older cairn left them."""
    dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    older = [m for m in migrate.available(dialect) if m.version <= version]
    if dialect == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute(migrate.TABLE_SQL)
        for m in older:
            for statement in migrate.statements(m.sql):
                conn.execute(statement)
            conn.execute("INSERT INTO cairn_migrations VALUES (?, ?, 0)", (m.version, m.name))
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(migrate.TABLE_SQL)
        for m in older:
            for statement in migrate.statements(m.sql):
                pg.execute(statement)
            pg.execute("INSERT INTO cairn_migrations VALUES (%s, %s, 0)", (m.version, m.name))


def _versions(url: str) -> list[int]:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return sorted(r[0] for r in conn.execute("SELECT version FROM cairn_migrations"))
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as pg:
        return sorted(r[0] for r in pg.execute("SELECT version FROM cairn_migrations"))


def test_reader__older_schema_is_named_not_migrated(project: Path, empty_url: str) -> None:
    _migrated_to(empty_url, 3)
    proc = cairn_cmd(project, "runs", "list", "--db", empty_url)
    line = one_error_line(proc)
    assert proc.returncode == 1
    newest = migrate.available("sqlite" if empty_url.startswith("sqlite") else "postgres")[-1]
    assert f"database {empty_url} has cairn schema version 3, older than this cairn's " in line
    assert f"({newest.version})" in line and "cairn db upgrade" in line, line
    assert _versions(empty_url) == [1, 2, 3]
    upgraded = cairn_cmd(project, "db", "upgrade", "--db", empty_url)
    assert upgraded.returncode == 0, upgraded.stderr
    listed = cairn_cmd(project, "runs", "list", "--json", "--db", empty_url)
    assert listed.returncode == 0, listed.stderr


def test_worker__creates_a_new_database_on_both_stores(
    project: Path,
    empty_url: str,
    workers: list[Worker],  # noqa: F811
) -> None:
    worker = Worker(project, "--db", empty_url)
    workers.append(worker)
    worker.wait_for("ready")
    assert worker.terminate() == 0, worker.log
    listed = cairn_cmd(project, "runs", "list", "--json", "--db", empty_url)
    assert listed.returncode == 0, listed.stderr


def test_run__creates_a_new_database_and_readers_see_it(project: Path) -> None:
    url = "sqlite:///new.db"
    started = cairn_cmd(project, "run", "flows:total", "2", "3", "--db", url)
    assert started.returncode == 0, started.stderr
    listed = cairn_cmd(project, "runs", "list", "--db", url)
    assert listed.returncode == 0, listed.stderr
    assert "flows.total" in listed.stdout
