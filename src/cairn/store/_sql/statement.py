"""`Statement`: a shared statement's text with what a backend must know beyond it.

The facts (row locks, JSON members, bulk forms) are declared on the statement and checked
against its text there; backends read them (store/postgres/dialect.py). No dialect's SQL.
"""

from __future__ import annotations

import re
from typing import Literal

from cairn.store._sql.columns import FENCE

__all__ = ["FENCED_ON", "Statement", "json_members"]

Lock = Literal["", "skip", "update", "share", "hold", "try"]

# The write guard of a fenced statement: the run row its lease is checked against.
FENCED_ON = f"FROM runs WHERE {FENCE})"


def json_members(array: str) -> str:
    """A subquery of the text members of JSON array `array` (a column or `?`).

    SQLite's form; a statement that uses it declares `json_arrays=(array,)`, and
    PostgreSQL writes its own form in its place.
    """
    return f"SELECT value FROM json_each({array})"


class Statement(str):
    """The text of a shared statement (`?` placeholders), carrying declared facts.

    It is a `str`, so every caller passes it as text; the facts travel with the object,
    not with its spelling (a text built from it by `+` or `replace` is a plain `str`
    without them). Each fact is checked against the text when declared (ValueError).

    Attributes:
        fenced: its write is guarded by `EXISTS (SELECT 1 FROM runs WHERE FENCE)`; the
            run row is locked against a claim's takeover while it writes (PostgreSQL:
            FOR KEY SHARE). False by default.
        lock: the row lock its SELECT always takes, as `Sql.lock` names them ("hold":
            FOR NO KEY UPDATE): a read whose answer the transaction acts on. "" by default.
        locks_run: the 0-based parameter naming a run to lock (FOR NO KEY UPDATE) before
            the statement runs, so that a message producer waking the run and the run
            about to wait for messages see each other. None by default.
        json_arrays: the arrays (a column, or `?`) whose members it reads with
            `json_members`. Empty by default.
        bulk_keys: the columns that identify a row it writes, when its rows may be
            written many at once (PostgreSQL: one statement over arrays). Empty by default.
        tells_streams: it appends stream items whose readers in every process are told
            at its commit (PostgreSQL: NOTIFY cairn_streams). False by default.
    """

    __slots__ = ("bulk_keys", "fenced", "json_arrays", "lock", "locks_run", "tells_streams")

    fenced: bool
    lock: Lock
    locks_run: int | None
    json_arrays: tuple[str, ...]
    bulk_keys: tuple[str, ...]
    tells_streams: bool

    def __new__(
        cls,
        text: str,
        *,
        fenced: bool = False,
        lock: Lock = "",
        locks_run: int | None = None,
        json_arrays: tuple[str, ...] = (),
        bulk_keys: tuple[str, ...] = (),
        tells_streams: bool = False,
    ) -> Statement:
        """Declare `text` with these facts; ValueError if its text does not allow one."""
        made = super().__new__(cls, text)
        made.fenced = fenced
        made.lock = lock
        made.locks_run = locks_run
        made.json_arrays = json_arrays
        made.bulk_keys = bulk_keys
        made.tells_streams = tells_streams
        for problem in _problems(made):
            raise ValueError(f"statement {text[:60]!r}...: {problem}")
        return made


_INSERT = re.compile(r"^INSERT INTO \w+ \(([\w, ]+)\) ")


def _problems(s: Statement) -> list[str]:
    """What of `s`'s declared facts its text does not allow."""
    problems = []
    if s.fenced and FENCED_ON not in s:
        problems.append(f"declared fenced, but has no {FENCED_ON!r}")
    if s.lock and not s.startswith("SELECT "):
        problems.append(f"declares lock {s.lock!r}, but is not a SELECT")
    if s.locks_run is not None and not 0 <= s.locks_run < s.count("?"):
        problems.append(f"locks the run of parameter {s.locks_run}, which it does not have")
    problems.extend(
        f"declares JSON array {array!r}, but has no {json_members(array)!r}"
        for array in s.json_arrays
        if json_members(array) not in s
    )
    if s.count("json_each(") != sum(s.count(json_members(array)) for array in s.json_arrays):
        problems.append("reads members of a JSON array it does not declare in json_arrays")
    insert = _INSERT.match(s)
    columns = {c.strip() for c in insert[1].split(",")} if insert else set()
    problems.extend(
        f"declares bulk key {key!r}, which it neither inserts nor matches as {key} = ?"
        for key in s.bulk_keys
        if key not in columns and f"{key} = ?" not in s
    )
    if s.tells_streams and not {"run_id", "name"} <= columns:
        problems.append("tells stream readers, but inserts no run_id and name")
    return problems
