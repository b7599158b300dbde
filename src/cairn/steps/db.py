"""Statements on the application's own databases as durable steps: `db.query("app", sql, args)`.

Databases are named in `[tool.cairn.databases]` or `Engine(databases={...})` and reached
through SQLAlchemy Core, one pooled engine per database and process. Values go in `args`
as bound parameters; SQL with a value written into its text is refused before it runs.
Each call runs in a transaction of its own that commits when the statement succeeds.
Each attempt has a time limit (`timeout`, 30 s by default) that the database enforces
(see statement_limits.py), so a statement blocked on a lock or running long fails the
attempt instead of holding the run; a cancel of the run stops it too.
"""

from __future__ import annotations

import time
from typing import Any

from cairn import durations
from cairn.authoring import usage
from cairn.authoring.retry import Retry, coerce
from cairn.errors import InvalidArguments, InvalidValue
from cairn.steps import calling, databases, sql_text, statement_limits
from cairn.steps.errors import DatabaseError, DatabaseUnavailable

__all__ = ["DEFAULT_RETRY", "dispose", "query", "update"]

DEFAULT_RETRY = Retry()
"""Three attempts, 1 s then 2 s apart; only connection troubles, deadlocks and timeouts retry."""
DEFAULT_TIMEOUT = "30s"
"""The time limit of each attempt by default."""


@usage.checked("cairn.steps.db.query")
def query(
    database: str,
    sql: str,
    args: Any = None,
    *,
    name: str | None = None,
    retries: Retry | int | None = None,
    allow_literals: bool = False,
    timeout: Any = DEFAULT_TIMEOUT,
) -> Any:
    """Run a statement that returns rows, as a durable step; the rows as dicts.

    Args:
        database: The database's name in `[tool.cairn.databases]` or `Engine(databases=)`.
        sql: One statement, with `:name` placeholders (args a dict) or `?` placeholders
            (args a list), never values written into the text.
        args: The values of the placeholders.
        name: The step's name in the history (default "db.query").
        retries: The step's policy (default `DEFAULT_RETRY`); a statement the database
            refuses is never retried.
        allow_literals: Accept string literals in `sql` (constants such as
            `status = 'open'`); off by default, so a value formatted into the text fails.
        timeout: Time limit of each attempt, a duration (default "30s"), enforced by the
            database: a statement still running or waiting for a lock then fails the
            attempt with `DatabaseUnavailable`, retried by the policy.

    Returns:
        A list of dicts, one per row, keyed by column name (an awaitable of it in an
        async workflow, or where an event loop runs outside workflow code). Rows are
        stored in the run's history: select what the workflow needs.

    Raises:
        InvalidSQL: At the call, before any step: a string literal, a `%s` or `{...}`
            placeholder, two statements, or args that do not fit the placeholders.
        DatabaseError: The database refused the statement, or is not configured.
        DatabaseUnavailable: It could not be reached, or the statement ran past its
            timeout, once the retries are spent.
    """
    return _call("db.query", database, sql, args, name, retries, allow_literals, timeout, rows=True)


@usage.checked("cairn.steps.db.update")
def update(
    database: str,
    sql: str,
    args: Any = None,
    *,
    name: str | None = None,
    retries: Retry | int | None = None,
    allow_literals: bool = False,
    timeout: Any = DEFAULT_TIMEOUT,
) -> Any:
    """Run a statement that changes rows (INSERT, UPDATE, DELETE, DDL) as a durable step.

    Arguments and errors as for `query`. The statement commits when it succeeds; a crash
    after the commit and before the step is recorded runs it again when the run resumes,
    so write statements that may run twice (an upsert, a `WHERE` that checks).

    Returns:
        The number of rows the statement changed (an awaitable of it in an async
        workflow), as the driver counts them.
    """
    return _call(
        "db.update", database, sql, args, name, retries, allow_literals, timeout, rows=False
    )


def dispose() -> None:
    """Close the pooled connections of every database this process has used."""
    databases.dispose()


def _call(
    what: str,
    database: Any,
    sql: Any,
    args: Any,
    name: str | None,
    retries: Retry | int | None,
    allow_literals: bool,
    timeout: Any,
    *,
    rows: bool,
) -> Any:
    if not isinstance(database, str) or not database:
        raise InvalidValue(
            f"{what}: the database name must be a non-empty string, got {database!r}"
        )
    if not isinstance(allow_literals, bool):
        raise InvalidArguments(
            f"{what}: allow_literals must be True or False, got {allow_literals!r}"
        )
    limit = durations.seconds(timeout, what=f"{what} timeout")
    if not limit > 0:
        raise InvalidValue(f"{what}: timeout must be a positive duration, got {timeout!r}")
    # Checked here, in the workflow, so that bad SQL fails at its call and records nothing.
    sql_text.bind(
        sql,
        args,
        database=database,
        what=what,
        allow_literals=allow_literals,
        backend=databases.backend(database),
    )

    def execute(database: str, sql: str, args: Any) -> Any:
        bound = sql_text.bind(sql, args, database=database, what=what, allow_literals=True)
        return _execute(database, bound, limit, rows=rows)

    policy = DEFAULT_RETRY if retries is None else coerce(retries)
    return calling.call(name or what, execute, (database, sql, args), retries=policy)


def _execute(database: str, bound: sql_text.Bound, limit: float, *, rows: bool) -> Any:
    """One attempt, in a transaction of its own on a pooled connection, within `limit` s.

    A pooled connection the database dropped meanwhile (a restart) fails at the first
    thing sent, before the statement: it is then replaced once, within the attempt.
    """
    import sqlalchemy.exc

    engine = databases.engine(database)
    deadline = time.monotonic() + limit
    for fresh in (False, True):
        try:
            connection = engine.connect()
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise databases.failure(database, exc, connecting=True) from exc
        stage: list[str] = []  # "sent" once the statement went out, then "committing"
        raw = connection.connection.driver_connection
        with connection, statement_limits.hangs_up(raw, limit + statement_limits.GRACE) as hung:
            try:
                return _statement(connection, bound, limit, stage, hung, rows=rows)
            except sqlalchemy.exc.SQLAlchemyError as exc:
                lost = hung.fired or getattr(exc, "connection_invalidated", False)
                if lost and "committing" in stage and not rows:
                    # The server may have committed: running the update again could
                    # apply it twice, and it has no key to be recognised by.
                    raise DatabaseError(
                        f"database {database!r}: the connection was lost while committing, "
                        "so whether the update took effect is unknown; it is not run again "
                        f"({databases.first_line(exc)})",
                        database=database,
                    ) from exc
                if hung.fired:  # the database fell silent: no answer came at all
                    raise DatabaseUnavailable(
                        f"database {database!r}: no answer within the statement's timeout "
                        f"({limit:g}s); the connection was closed",
                        database=database,
                    ) from exc
                if time.monotonic() >= deadline:  # stopped by the database at the limit
                    raise DatabaseUnavailable(
                        f"database {database!r}: the statement ran past its timeout "
                        f"({limit:g}s): {databases.first_line(exc)}",
                        database=database,
                    ) from exc
                stale = lost and not stage
                if fresh or not stale:
                    raise databases.failure(database, exc) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def _statement(
    connection: Any,
    bound: sql_text.Bound,
    limit: float,
    stage: list[str],
    hung: statement_limits.HangUp,
    *,
    rows: bool,
) -> Any:
    import sqlalchemy

    with connection.begin():
        with statement_limits.limited(connection, limit, hung):
            # Bound with types inferred from the values (Decimal, datetime...), so each
            # driver gets them in a form it takes (SQLite has no decimal of its own).
            statement = sqlalchemy.text(bound.sql).bindparams(**bound.params)
            stage.append("sent")
            result = connection.execute(statement)
            if not rows:
                value: Any = result.rowcount
            elif not result.returns_rows:
                value = []
            else:
                value = [dict(row._mapping) for row in result]
        stage.append("committing")  # leaving the block commits
    return value
