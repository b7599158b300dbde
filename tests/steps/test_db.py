"""cairn.steps.db on SQLite, PostgreSQL and MariaDB databases of the application's own."""

from __future__ import annotations

import asyncio
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.steps import DatabaseError, DatabaseUnavailable, InvalidSQL, db
from cairn.steps import databases as pools
from engine.kit import WAIT, Kit

from .conftest import closed_port

TABLE = (
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer VARCHAR(50), "
    "total DECIMAL(10, 2), placed TIMESTAMP NULL)"
)


async def test_db__query_and_update_on_each_database(sqlite_kit: Kit, app_url: str) -> None:
    placed = datetime(2030, 1, 2, 3, 4, 5)

    @sqlite_kit.workflow("db.orders")
    async def flow() -> dict[str, Any]:
        await db.update("app", TABLE)
        first = await db.update(
            "app",
            "INSERT INTO orders (id, customer, total, placed) VALUES (:id, :who, :total, :at)",
            {"id": 1, "who": "ada", "total": Decimal("9.99"), "at": placed},
        )
        more = await db.update(
            "app", "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?), (?, ?, ?)",
            [2, "bob", Decimal("1.50"), 3, "cy", Decimal("20.00")],
        )  # fmt: skip
        changed = await db.update(
            "app", "UPDATE orders SET total = total + ? WHERE id >= ?", [1, 2], name="raise"
        )
        rows = await db.query(
            "app", "SELECT id, customer, total, placed FROM orders WHERE id <= :id ORDER BY id",
            {"id": 2},
        )  # fmt: skip
        return {"counts": [first, more, changed], "rows": rows}

    async with sqlite_kit.engine(databases={"app": app_url}) as engine:
        run = await engine.start(flow)
        result = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert result["counts"] == [1, 2, 2]
    stored: Any = placed
    totals: list[Any] = [Decimal("9.99"), Decimal("2.50")]
    if app_url.startswith("sqlite"):  # SQLite keeps no decimals and no timestamps
        stored, totals = "2030-01-02 03:04:05.000000", [9.99, 2.5]
    assert result["rows"] == [
        {"id": 1, "customer": "ada", "total": totals[0], "placed": stored},
        {"id": 2, "customer": "bob", "total": totals[1], "placed": None},
    ]
    assert [h.name for h in history] == ["db.update"] * 3 + ["raise", "db.query"]
    sql = "SELECT id, customer, total, placed FROM orders WHERE id <= :id ORDER BY id"
    assert history[4].input == {"args": ["app", sql, {"id": 2}], "kwargs": {}}


async def test_db__sync_workflow_on_both_stores(kit: Kit, sqlite_app: str) -> None:
    @kit.workflow("db.sync")
    def flow(n: int) -> list[dict[str, Any]]:
        db.update("app", "CREATE TABLE t (n INTEGER)")
        db.update("app", "INSERT INTO t (n) VALUES (?)", [n])
        rows: list[dict[str, Any]] = db.query("app", "SELECT n * 2 AS twice FROM t")
        return rows

    async with kit.engine(databases={"app": sqlite_app}) as engine:
        assert await (await engine.start(flow, 21)).result(timeout=WAIT) == [{"twice": 42}]


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
async def test_db__the_pool_is_reused_across_steps(
    sqlite_kit: Kit, kind: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"{kind}_app")
    who = "SELECT pg_backend_pid() AS id" if kind == "postgres" else "SELECT CONNECTION_ID() AS id"

    @sqlite_kit.workflow("db.pool")
    async def flow() -> list[Any]:
        return [await db.query("app", who) for _ in range(3)]

    async with sqlite_kit.engine(databases={"app": url}, workers=1) as engine:
        sessions = await (await engine.start(flow)).result(timeout=WAIT)
    assert len(pools._engines) == 1  # one engine (and pool) for the process
    assert sessions[0] == sessions[1] == sessions[2]  # one server session, three steps


async def test_db__a_string_in_the_sql_is_refused_at_the_call(
    sqlite_kit: Kit, sqlite_app: str
) -> None:
    customer = "bob'; DROP TABLE orders; --"

    @sqlite_kit.workflow("db.injected")
    async def flow() -> Any:
        return await db.query("app", f"SELECT * FROM orders WHERE customer = '{customer}'")

    async with sqlite_kit.engine(databases={"app": sqlite_app}) as engine:
        run = await engine.start(flow)
        with pytest.raises(cairn.RunFailed) as failed:
            await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert history == []  # refused before any step
    assert failed.value.error_type == "cairn.steps.errors.InvalidSQL"
    assert failed.value.error_message.startswith(
        "db.query('app'): the SQL holds the string literal 'bob'; pass values in args"
    )


async def test_db__constants_with_allow_literals(sqlite_kit: Kit, sqlite_app: str) -> None:
    @sqlite_kit.workflow("db.constants")
    async def flow() -> Any:
        await db.update("app", "CREATE TABLE s (state TEXT, at TEXT)")
        await db.update(
            "app", "INSERT INTO s VALUES ('open', '12:30'), ('shut', :at)", {"at": "13:00"},
            allow_literals=True,
        )  # fmt: skip
        return await db.query(
            "app", "SELECT at FROM s WHERE state = 'open' -- ':not_a_param'", allow_literals=True
        )

    async with sqlite_kit.engine(databases={"app": sqlite_app}) as engine:
        assert await (await engine.start(flow)).result(timeout=WAIT) == [{"at": "12:30"}]


async def test_db__a_double_quoted_value_on_sqlite_is_a_literal(
    sqlite_kit: Kit, app_url: str
) -> None:
    """SQLite reads "ada" as a string when no column has that name: refused like 'ada'."""
    if not app_url.startswith(("sqlite", "mysql", "mariadb")):
        pytest.skip("PostgreSQL reads double quotes as a name only")

    @sqlite_kit.workflow("db.double_quoted")
    async def flow() -> Any:
        await db.update("app", "CREATE TABLE `order` (id INTEGER, `who` VARCHAR(9))")
        await db.update("app", "INSERT INTO `order` (id, `who`) VALUES (1, :w)", {"w": "ada"})
        found = await db.query("app", "SELECT `who` FROM `order` WHERE id = 1")
        try:
            await db.query("app", 'SELECT id FROM `order` WHERE `who` = "ada"')
        except InvalidSQL as exc:
            return [found, str(exc)]
        return [found, None]

    async with sqlite_kit.engine(databases={"app": app_url}) as engine:
        found, refused = await (await engine.start(flow)).result(timeout=WAIT)
    assert found == [{"who": "ada"}]
    assert refused is not None and refused.startswith(
        """db.query('app'): the SQL holds "ada", and"""
    )
    assert "quote names with backticks" in refused


async def test_db__a_refused_statement_fails_at_once(sqlite_kit: Kit, app_url: str) -> None:
    @sqlite_kit.workflow("db.refused")
    async def flow() -> str:
        try:
            await db.query("app", "SELECT n FROM no_such_table")
        except DatabaseError as exc:
            assert exc.fatal and exc.attempts == 1
            return exc.error_message
        return "ran"

    async with sqlite_kit.engine(databases={"app": app_url}) as engine:
        message = await (await engine.start(flow)).result(timeout=WAIT)
    assert message.startswith("database 'app': ") and "no_such_table" in message
    assert "\n" not in message


async def test_db__an_unreachable_database_is_retried(sqlite_kit: Kit) -> None:
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/app"

    @sqlite_kit.workflow("db.down")
    async def flow() -> str:
        try:
            await db.query("app", "SELECT 1", retries=cairn.Retry(max_attempts=2, delay=0))
        except DatabaseUnavailable as exc:
            return f"{exc.attempts}: {exc.error_message}"
        return "reached"

    async with sqlite_kit.engine(databases={"app": url}) as engine:
        result = await (await engine.start(flow)).result(timeout=WAIT)
    assert result.startswith("2: database 'app': cannot connect: ")


@pytest.mark.parametrize(
    ("databases", "name", "error"),
    [
        ({"app": "sqlite:///x.db"}, "ap", "no database named 'ap' (configured: app)"),
        ({}, "app", "no database named 'app' (configured: none)"),
        ({"app": "not a url"}, "app", "cannot read the URL 'not a url'"),
        ({"app": "nosuch://u:secret@h/d"}, "app", "no dialect 'nosuch' (nosuch://u:***@h/d)"),
        ({"app": "sqlite://"}, "app", "an in-memory SQLite database"),
        ({"app": 42}, "app", "must be a URL or an SQLAlchemy Engine, got int"),
    ],
)
async def test_db__configuration_errors_name_the_database(
    sqlite_kit: Kit, databases: dict[str, Any], name: str, error: str
) -> None:
    @sqlite_kit.workflow("db.misconfigured")
    async def flow() -> str:
        try:
            await db.query(name, "SELECT 1")
        except DatabaseError as exc:
            assert exc.attempts == 1  # not retried: it will not get better by itself
            return exc.error_message
        return "ran"

    async with sqlite_kit.engine(databases=databases) as engine:
        message = await (await engine.start(flow)).result(timeout=WAIT)
    assert error in message and "secret" not in message


async def test_db__an_sqlalchemy_engine_given_in_code(sqlite_kit: Kit, sqlite_app: str) -> None:
    import sqlalchemy

    mine = sqlalchemy.create_engine(sqlite_app)

    @sqlite_kit.workflow("db.given")
    async def flow() -> Any:
        return await db.query("reports", "SELECT 7 AS n")

    try:
        async with sqlite_kit.engine(databases={"reports": mine}) as engine:
            assert await (await engine.start(flow)).result(timeout=WAIT) == [{"n": 7}]
    finally:
        mine.dispose()


async def test_db__outside_a_run_from_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cairn.databases]\napp = "env:APP_DB"\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APP_DB", f"sqlite:///{tmp_path / 'plain.db'}")
    await db.update("app", "CREATE TABLE p (n INTEGER)")
    # Where no event loop runs (a script, a sync step's thread), the value itself.
    assert await asyncio.to_thread(db.update, "app", "INSERT INTO p VALUES (?)", [5]) == 1
    assert await db.query("app", "SELECT n FROM p") == [{"n": 5}]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: db.query("", "SELECT 1"), "database name must be a non-empty string"),
        (lambda: db.query("app", "SELECT 1", allow_literals="yes"), "allow_literals"),
        (lambda: db.query("app", b"SELECT 1"), "sql must be a string, got bytes"),
        (lambda: db.update("app", "DELETE FROM t WHERE id = ?", "7"), "args must be a dict"),
    ],
)
def test_db__bad_arguments_fail_at_the_call(call: Any, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        call()


def test_db__invalid_sql_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="one statement per step"):
        db.update("app", "DELETE FROM a; DELETE FROM b")
    assert issubclass(InvalidSQL, ValueError) and issubclass(InvalidSQL, cairn.CairnError)
