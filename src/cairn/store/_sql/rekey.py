"""SQL of `cairn db rekey`: find values encrypted under another key, rewrite one of them."""

from __future__ import annotations

__all__ = ["SEALED_COLUMNS", "referencing_select", "sealed_select", "sealed_update"]

# Each table holding encrypted values (cairn/codecs): its primary key and its value
# columns. A migration adding a column of stored values adds it here, or rekey skips it.
SEALED_COLUMNS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("runs", ("run_id",), ("args", "result", "error")),
    ("steps", ("run_id", "key"), ("result", "error", "input")),
    ("retried_steps", ("run_id", "execution", "key"), ("result", "error", "input")),
    ("step_attempts", ("run_id", "execution", "key", "attempt"), ("message", "traceback")),
    ("messages", ("id",), ("payload",)),
    ("tasks", ("task_id",), ("data", "submitted_values")),
    ("schedules", ("schedule_id",), ("args",)),
    ("step_tasks", ("task_id",), ("input",)),
    ("stream_chunks", ("run_id", "name", "seq"), ("value",)),
)


def sealed_select(
    table: str, keys: tuple[str, ...], column: str, prefix: str, head: str, *, after: bool
) -> str:
    """The next rows, in key order, whose `column` holds a value not under `head`.

    Either the whole text is encrypted (it starts with `prefix`, not with `head`), or a
    JSON text holds one (`"<prefix>` is in it once every `"<head>` is taken out: a
    child's result inside its parent's history). Parameters: prefix, head, the LIKE
    pattern of a quoted prefix, the quoted head, that pattern again, the keys of the last
    row read (`after`), and the limit. Rows: (*keys, value).
    """
    names = ", ".join(keys)
    marks = ", ".join("?" for _ in keys)
    return (
        f"SELECT {names}, {column} FROM {table} "
        f"WHERE ((substr({column}, 1, {len(prefix)}) = ? "
        f"AND substr({column}, 1, {len(head)}) <> ?) "
        f"OR ({column} LIKE ? AND replace({column}, ?, '') LIKE ?))"
        + (f" AND ({names}) > ({marks})" if after else "")
        + f" ORDER BY {names} LIMIT ?"
    )


def sealed_update(table: str, keys: tuple[str, ...], column: str) -> str:
    """Set `column` of the row of these keys, if it still holds the value read."""
    where = " AND ".join(f"{key} = ?" for key in keys)
    return f"UPDATE {table} SET {column} = ? WHERE {where} AND {column} = ?"


def referencing_select(table: str, keys: tuple[str, ...], column: str, *, after: bool) -> str:
    """The next rows, in key order, whose `column` references a blob (an offloaded value).

    Which key a blob is under is in the blob, not here: the caller reads it. Parameters:
    the LIKE pattern of the reference's mark, the keys of the last row read (`after`),
    and the limit. Rows: (*keys, value).
    """
    names = ", ".join(keys)
    marks = ", ".join("?" for _ in keys)
    return (
        f"SELECT {names}, {column} FROM {table} WHERE {column} LIKE ?"
        + (f" AND ({names}) > ({marks})" if after else "")
        + f" ORDER BY {names} LIMIT ?"
    )
