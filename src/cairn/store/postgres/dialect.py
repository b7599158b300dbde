"""The shared SQL in PostgreSQL form, the row locks READ COMMITTED needs, and bulk forms.

The shared statements use `?` placeholders; here they become `%s` (after escaping `%`),
once per text. A PostgreSQL statement sees only what committed before it started, so
where SQLite relies on its single writer, PostgreSQL takes row locks. Which statement
takes which is declared on it (`_sql.Statement`: `fenced`, `lock`, `locks_run`, ...);
this module only says what each fact is in PostgreSQL:

- a step write fences on the run row with FOR KEY SHARE (`fenced`), which a claim's FOR
  UPDATE waits for (or skips), so a run taken over mid-write is never written by both
  owners;
- whoever queues a message locks the target run before waking it, and a run about to
  wait locks itself before looking for messages (`locks_run`), so a message is never
  missed;
- claims take rows with FOR UPDATE SKIP LOCKED, so two workers never take the same run;
- retention locks with FOR SHARE the FAILED runs it relies on, so a retry (whose FOR
  UPDATE conflicts) either commits first and is seen, or waits for the prune.

A bulk form runs one statement of a program for many rows at once (arrays, unnest); the
statements that have one declare `bulk_keys`.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn.store import _sql
from cairn.store._sql import Statement
from cairn.store.postgres import binary_arrays

Pair = tuple[str, Sequence[Any]]

CHANNEL = "cairn_runs"
STREAMS_CHANNEL = "cairn_streams"
NOTIFY = "SELECT pg_notify('cairn_runs', %s)"
LOCK_RUN = "SELECT 1 FROM runs WHERE run_id = %s FOR NO KEY UPDATE"


@functools.lru_cache(maxsize=1024)
def convert(text: str) -> str:
    """`text` with `?` placeholders as psycopg `%s` ones (literal `%` escaped)."""
    return text.replace("%", "%%").replace("?", "%s")


_LOCKS = {
    "": "",
    "skip": " FOR UPDATE SKIP LOCKED",
    "update": " FOR UPDATE",
    "share": " FOR SHARE",
    "hold": " FOR NO KEY UPDATE",
    "try": " FOR NO KEY UPDATE SKIP LOCKED",
}


# A stream append tells the stream's readers in every process at its commit (PostgreSQL
# sends one NOTIFY per distinct payload of a transaction, however many rows name it).
_STREAM_NOTICE = " RETURNING pg_notify('cairn_streams', json_build_array(run_id, name)::text)"


def _replaced(text: str, old: str, new: str) -> str:
    # `Statement` checked its facts against its text; this guards the rewrite itself.
    if old not in text:
        raise RuntimeError(f"cairn.store.postgres.dialect: no {old!r} in {text!r}")
    return text.replace(old, new)


@functools.lru_cache(maxsize=1024)
def pg_form(text: str) -> tuple[str, int | None]:
    """`text` in PostgreSQL form, and the parameter naming a run to lock before it (or None).

    The form follows the facts `text` declares (`_sql.Statement`); a plain `str` declares
    none. Cached per text: a `Statement` and a plain `str` of the same text are different
    keys (an lru_cache of one `str` argument keys on the `str` itself, of anything else on
    the argument tuple), so a plain copy never stands in for the declared statement.
    """
    if not isinstance(text, Statement):
        if "json_each(" in text:
            raise RuntimeError(f"cairn: JSON members read by an undeclared statement: {text!r}")
        return convert(text), None
    pg: str = text
    if text.fenced:
        pg = _replaced(pg, _sql.FENCED_ON, f"FROM runs WHERE {_sql.FENCE} FOR KEY SHARE)")
    for array in text.json_arrays:
        members = f"SELECT json_array_elements_text(CAST({array} AS json))"
        pg = _replaced(pg, _sql.json_members(array), members)
    pg = convert(pg) + _LOCKS[text.lock]
    if text.tells_streams:
        pg += _STREAM_NOTICE
    return pg, text.locks_run


def program_statements(text: str, params: Sequence[Any], *, lock: str) -> list[Pair]:
    """The PostgreSQL statements for one statement of a shared program.

    The caller reads the result of the last one. `lock` is the program's row-lock mark
    ("", "skip", "update", "share", "hold" or "try", see `programs.base.Sql`).
    """
    pg, position = pg_form(text)
    if lock:
        pg += _LOCKS[lock]
    if position is None:
        return [(pg, params)]
    return [(LOCK_RUN, (params[position],)), (pg, params)]


def numbered(pg: str) -> str:
    """`pg` with `$1, $2, ...` for its `%s` and `%b` (and `%` for `%%`), to PREPARE it."""
    count = itertools.count(1)
    return re.sub(r"%%|%[sb]", lambda m: "%" if m[0] == "%%" else f"${next(count)}", pg)


@dataclass(frozen=True, slots=True)
class Bulk:
    """The array form of a one-row statement: `text` takes one array per parameter.

    The rows its RETURNING gives back are `key(params)` of the rows it wrote.
    """

    text: str
    key_positions: tuple[int, ...]
    types: tuple[str, ...] = ()  # of the parameters, when `binary_arrays` can encode them all

    def key(self, params: Sequence[Any]) -> tuple[Any, ...]:
        """What RETURNING gives back for the row with these parameters."""
        return tuple(params[i] for i in self.key_positions)

    def params(self, rows: Sequence[Sequence[Any]]) -> Sequence[Any]:
        """One array per parameter, for `rows`."""
        if self.types:
            encoded = binary_arrays.encode(self.types, rows)
            if encoded is not None:
                return encoded
        return [list(column) for column in zip(*rows, strict=True)]


# The shared statements with a bulk form: those declaring the columns that identify a row.
BULK: tuple[Statement, ...] = tuple(
    s for s in vars(_sql).values() if isinstance(s, Statement) and s.bulk_keys
)

_INSERT = re.compile(r"^INSERT INTO (\w+) \(([\w, ]+)\) ")
_UPDATE = re.compile(r"^UPDATE (\w+) SET ")


def bulk_form(text: Statement, types: Sequence[str]) -> Bulk | None:
    """The bulk form of shared statement `text` (parameter types as PREPARE found them).

    None when the statement does not have a shape this knows (its rows then go one by
    one): an INSERT whose VALUES or SELECT list is one plain parameter per column, or an
    UPDATE whose top-level WHERE says `column = ?` for each key column.
    """
    pg = program_statements(text, (), lock="")[-1][0]
    names = text.bulk_keys
    count = pg.count("%s")
    if "%b" in pg or len(types) != count:
        return None
    counter = iter(range(1, count + 1))
    body = re.sub(r"%s", lambda _: f"u.p{next(counter)}", pg)
    arrays = ", ".join(f"%b::{kind}[]" for kind in types)
    source = f"unnest({arrays}) AS u({', '.join(f'p{i}' for i in range(1, count + 1))})"
    try:
        if insert := _INSERT.match(pg):
            columns = [c.strip() for c in insert[2].split(",")]
            values = ", ".join(f"u.p{i}" for i in range(1, len(columns) + 1))
            if f"VALUES ({values})" in body:
                body = body.replace(f"VALUES ({values})", f"SELECT {values} FROM {source}", 1)
            elif f") SELECT {values} WHERE " in body:
                body = _before_where(body, f" FROM {source}")
            else:
                return None
            positions = tuple(columns.index(name) for name in names)
            returning = ", ".join(names)
        elif update := _UPDATE.match(pg):
            positions = tuple(_placeholder(pg, f"{name} = %s") for name in names)
            body = _before_where(body, f" FROM {source}")
            returning = ", ".join(f"{update[1]}.{name}" for name in names)
        else:
            return None
    except ValueError:
        return None
    encodable = tuple(types) if binary_arrays.encodable(types) else ()
    return Bulk(f"{body} RETURNING {returning}", positions, encodable)


def _before_where(text: str, insert: str) -> str:
    """`text` with `insert` placed before its top-level WHERE (not one in parentheses)."""
    depth = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and text.startswith(" WHERE ", i):
            return text[:i] + insert + text[i:]
    raise ValueError(f"no top-level WHERE in {text!r}")


def _placeholder(pg: str, pattern: str) -> int:
    """The 0-based number of the `%s` ending `pattern` in `pg`'s top-level WHERE."""
    where = _before_where(pg, "\0").index("\0")
    at = pg.index(pattern, where) + len(pattern) - 2
    return pg.count("%s", 0, at)
