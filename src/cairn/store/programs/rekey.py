"""Rekey: values encrypted under an old key rewritten under the current one, a batch at a time.

The store knows no keys: the caller (`runtime/rekeying.py`, behind `cairn db rekey`) hands
in the prefix every encrypted value starts with, the head of those under the current key,
and `recode`, which decrypts a value and encrypts it again. Each batch is one transaction,
and a value is rewritten only if it still holds what was read (a run may be finishing
meanwhile), so a rekey killed half-way leaves every value readable and is simply run again.
"""

from __future__ import annotations

from collections.abc import Callable

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
    limit: int,
) -> Program[int]:
    """Rewrite at most `limit` values of `table.column` under `head`; how many it read.

    `table` and `column` must be among SEALED_COLUMNS (their names go into the SQL).
    """
    keys = next(
        keys for name, keys, columns in SEALED_COLUMNS if name == table and column in columns
    )
    rows = yield all_rows(
        _sql.sealed_select(table, keys, column, prefix, head), (prefix, head, limit)
    )
    update = _sql.sealed_update(table, keys, column)
    for row in rows:
        old = str(row[-1])
        yield Sql(update, (recode(old), *row[:-1], old))
    return len(rows)
