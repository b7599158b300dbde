"""Rekey: values encrypted under an old key rewritten under the current one, a batch at a time.

The store knows no keys: the caller (`runtime/rekeying.py`, behind `cairn db rekey`) hands
in the prefix every encrypted value starts with, the head of those under the current key,
and `recode`, which decrypts a value and encrypts it again. A column is walked once, in
key order, each batch one transaction going on after the last row the previous one read,
and a value is rewritten only if it still holds what was read (a run may be finishing
meanwhile): a rekey killed half-way leaves every value readable and is simply run again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.store._sql import rekey as _sql
from cairn.store.programs.base import Program, Sql, all_rows, operation

SEALED_COLUMNS = _sql.SEALED_COLUMNS


@operation
def rekey_batch(
    table: str,
    column: str,
    *,
    prefix: str,
    head: str,
    recode: Callable[[str], str],
    after: tuple[Any, ...] | None,
    limit: int,
) -> Program[tuple[int, tuple[Any, ...] | None]]:
    """Rewrite the next `limit` values of `table.column` not under `head`, after `after`.

    Returns how many it read and the keys of the last (None: none left). `table` and
    `column` must be among SEALED_COLUMNS (their names go into the SQL).
    """
    keys = next(k for name, k, columns in SEALED_COLUMNS if name == table and column in columns)
    quoted = f'%"{prefix}%'
    text = _sql.sealed_select(table, keys, column, prefix, head, after=after is not None)
    params = (prefix, head, quoted, f'"{head}', quoted, *(after or ()), limit)
    rows = yield all_rows(text, params)
    update = _sql.sealed_update(table, keys, column)
    for row in rows:
        old = str(row[-1])
        new = recode(old)
        if new != old:
            yield Sql(update, (new, *row[:-1], old))
    return len(rows), (tuple(rows[-1][:-1]) if rows else None)


def _keys(table: str, column: str) -> tuple[str, ...]:
    return next(k for name, k, columns in SEALED_COLUMNS if name == table and column in columns)


@operation
def referencing(
    table: str, column: str, *, mark: str, after: tuple[Any, ...] | None, limit: int
) -> Program[list[tuple[Any, ...]]]:
    """The next `limit` rows (*keys, value) of `table.column` holding `mark`, after `after`."""
    text = _sql.referencing_select(table, _keys(table, column), column, after=after is not None)
    rows = yield all_rows(text, (f"%{mark}%", *(after or ()), limit))
    return [tuple(row) for row in rows]


@operation
def rewrite(
    table: str, column: str, changes: list[tuple[tuple[Any, ...], str, str]]
) -> Program[int]:
    """Set each (keys, old, new) of `changes` where the value still is `old`; how many were."""
    update = _sql.sealed_update(table, _keys(table, column), column)
    done = 0
    for keys, old, new in changes:
        done += 1 if (yield Sql(update, (new, *keys, old))) else 0
    return done
