"""The PostgreSQL forms of the shared statements, from the facts each one declares.

Every `_sql.Statement` is pinned here with the statements PostgreSQL runs for it, so a
fact dropped or added by an edit shows as a changed form; a fact its text does not allow
fails where it is declared, at import.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from cairn.store import _sql
from cairn.store._sql import Statement
from cairn.store.postgres import dialect

LOCK_RUN = "SELECT 1 FROM runs WHERE run_id = %s FOR NO KEY UPDATE"
PG_FENCE = "run_id = %s AND COALESCE(owner, '') = %s AND fence = %s"


def marks(n: int) -> str:
    return ", ".join(["%s"] * n)


# Each declared statement (by its name in `_sql`), the parameters it is given here, and the
# statements PostgreSQL runs for it.
PINNED: dict[str, tuple[tuple[Any, ...], list[tuple[str, tuple[Any, ...]]]]] = {
    "INSERT_RUN": (
        (),
        [
            (
                f"INSERT INTO runs ({_sql.RUN_COLUMNS}) VALUES ({marks(38)}) "
                "ON CONFLICT (run_id) DO NOTHING",
                (),
            )
        ],
    ),
    "INSERT_STEP_OWNED": (
        (),
        [
            (
                f"INSERT INTO steps ({_sql.STEP_COLUMNS}) SELECT {marks(12)} "
                f"WHERE EXISTS (SELECT 1 FROM runs WHERE {PG_FENCE} FOR KEY SHARE)",
                (),
            )
        ],
    ),
    "UPSERT_STEP_OWNED": (
        (),
        [
            (
                f"INSERT INTO steps ({_sql.STEP_COLUMNS}) SELECT {marks(12)} "
                f"WHERE EXISTS (SELECT 1 FROM runs WHERE {PG_FENCE} FOR KEY SHARE) "
                "ON CONFLICT (run_id, key) DO UPDATE SET status = excluded.status, "
                "attempts = excluded.attempts, finished_at = excluded.finished_at, "
                "result = excluded.result, error = excluded.error",
                (),
            )
        ],
    ),
    "FINISH_RUN": (
        (),
        [
            (
                "UPDATE runs SET status = %s, result = %s, error = %s, updated_at = %s, "
                "finished_at = %s, owner = NULL, wake_at = NULL, waiting_for = NULL "
                f"WHERE {PG_FENCE}",
                (),
            )
        ],
    ),
    "SELECT_STATUS": (
        ("r1",),
        [
            (
                "SELECT status, waits_on, substr(args, 1, 80) FROM runs WHERE run_id = %s "
                "FOR NO KEY UPDATE",
                ("r1",),
            )
        ],
    ),
    "SELECT_CONTROL_STATE": (
        ("r1",),
        [
            (
                "SELECT status, attempt, owner, control FROM runs WHERE run_id = %s "
                "FOR NO KEY UPDATE",
                ("r1",),
            )
        ],
    ),
    "HAS_MESSAGES": (
        ("r1",),
        [
            (LOCK_RUN, ("r1",)),
            (
                "SELECT 1 FROM messages WHERE run_id = %s AND consumed_by IS NULL LIMIT 1",
                ("r1",),
            ),
        ],
    ),
    "HAS_MESSAGES_ON": (
        ("r1", '["a"]'),
        [
            (LOCK_RUN, ("r1",)),
            (
                "SELECT 1 FROM messages WHERE run_id = %s AND consumed_by IS NULL AND channel IN "
                "(SELECT json_array_elements_text(CAST(%s AS json))) LIMIT 1",
                ("r1", '["a"]'),
            ),
        ],
    ),
    "CONSUME_MESSAGES": (
        (),
        [
            (
                "UPDATE messages SET consumed_by = %s WHERE run_id = %s AND channel = %s "
                "AND consumed_by IS NULL AND CAST(id AS TEXT) IN "
                "(SELECT json_array_elements_text(CAST(%s AS json)))",
                (),
            )
        ],
    ),
    "WAKE_WAITING": (
        (1.0, "r1", "a"),
        [
            (LOCK_RUN, ("r1",)),
            (
                "UPDATE runs SET wake_at = %s WHERE run_id = %s AND (status || '') = 'WAITING' "
                "AND (waits_on IS NULL OR %s IN "
                "(SELECT json_array_elements_text(CAST(waits_on AS json))))",
                (1.0, "r1", "a"),
            ),
        ],
    ),
}


def test_every_declared_statement__is_pinned() -> None:
    declared = {name for name, value in vars(_sql).items() if isinstance(value, Statement)}

    assert declared == set(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_declared_statement__has_its_pinned_postgresql_form(name: str) -> None:
    params, expected = PINNED[name]

    assert dialect.program_statements(getattr(_sql, name), params, lock="") == expected


def test_a_stream_append__is_fenced_stores_nothing_twice_and_tells_the_stream_s_readers() -> None:
    ((pg, _),) = dialect.program_statements(_sql.append_stream_items(2), (), lock="")

    assert pg.startswith(f"INSERT INTO stream_chunks ({_sql.STREAM_COLUMNS}) SELECT %s, %s, ")
    assert pg.endswith(
        "ORDER BY seq DESC LIMIT 1) AS last ON 1 = 1 "
        f"CROSS JOIN (VALUES (%s, %s, %s), (%s, %s, %s)) AS v "
        f"WHERE EXISTS (SELECT 1 FROM runs WHERE {PG_FENCE} FOR KEY SHARE) "
        "AND NOT COALESCE(last.step_key = %s AND last.attempt = %s AND last.claim = %s "
        "AND last.n > %s, FALSE) "
        "RETURNING pg_notify('cairn_streams', json_build_array(run_id, name)::text)"
    )


def test_a_program_s_lock__follows_the_declared_form() -> None:
    ((pg, _),) = dialect.program_statements(_sql.SELECT_RUN, ("r1",), lock="skip")

    assert pg == f"SELECT {_sql.RUN_COLUMNS} FROM runs WHERE run_id = %s FOR UPDATE SKIP LOCKED"


def test_the_bulk_statements__are_those_declaring_bulk_keys() -> None:
    assert {id(s) for s in dialect.BULK} == {
        id(_sql.INSERT_RUN),
        id(_sql.INSERT_STEP_OWNED),
        id(_sql.FINISH_RUN),
    }


def test_a_plain_copy_of_a_declared_text__carries_none_of_its_facts() -> None:
    # The facts travel with the declared object, whichever of the two is seen first.
    copy = str(_sql.SELECT_STATUS) + ""
    ((plain, _),) = dialect.program_statements(copy, ("r1",), lock="")
    ((declared, _),) = dialect.program_statements(_sql.SELECT_STATUS, ("r1",), lock="")

    assert plain == "SELECT status, waits_on, substr(args, 1, 80) FROM runs WHERE run_id = %s"
    assert declared == plain + " FOR NO KEY UPDATE"


def test_json_members_read_by_an_undeclared_statement__fail_loudly() -> None:
    text = f"SELECT 1 FROM runs WHERE run_id IN ({_sql.json_members('?')})"

    with pytest.raises(RuntimeError, match="undeclared"):
        dialect.program_statements(text, ("[]",), lock="")


@pytest.mark.parametrize(
    ("text", "facts", "problem"),
    [
        # An edit of the fence: the statement no longer has the subquery its lock is on.
        (
            _sql.INSERT_STEP_OWNED.replace("fence = ?", "fence >= ?"),
            {"fenced": True},
            "declared fenced",
        ),
        (_sql.FINISH_RUN, {"lock": "hold"}, "not a SELECT"),
        ("SELECT 1 FROM messages WHERE run_id = ?", {"locks_run": 1}, "parameter 1"),
        (
            _sql.CONSUME_MESSAGES.replace("json_each(?)", "json_each(ids)"),
            {"json_arrays": ("?",)},
            "declares JSON array '?'",
        ),
        (_sql.WAKE_WAITING, {"locks_run": 1}, "does not declare in json_arrays"),
        (_sql.INSERT_RUN.replace("run_id", "id", 1), {"bulk_keys": ("run_id",)}, "bulk key"),
        (_sql.FINISH_RUN, {"bulk_keys": ("key",)}, "bulk key 'key'"),
        (_sql.INSERT_MESSAGE, {"tells_streams": True}, "inserts no run_id and name"),
    ],
)
def test_a_fact_its_text_does_not_allow__fails_where_it_is_declared(
    text: str, facts: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        Statement(text, **facts)
