"""Status values reach the database only as RunStatus values.

A statement names one status as a literal ('PENDING') where that reads best; this checks
every quoted upper-case word in the store's SQL, and in the dialect's rewrites, is one.
"""

from __future__ import annotations

import re
from pathlib import Path

import cairn.store
from cairn.models import RunStatus
from cairn.store._sql import FINISHED_SQL, UNFINISHED_SQL

STORE = Path(cairn.store.__file__).parent
QUOTED_WORD = re.compile(r"'([A-Z][A-Z_]{2,})'")


def test_every_status_literal_in_the_store_s_sql_is_a_run_status() -> None:
    found = {
        (path.relative_to(STORE).as_posix(), word)
        for path in STORE.rglob("*.py")
        if "migrations" not in path.parts
        for word in QUOTED_WORD.findall(path.read_text())
    }

    assert found, "the scan found no status literal: has the SQL moved?"
    assert {(where, word) for where, word in found if word not in set(RunStatus)} == set()


def test_finished_and_unfinished_lists_are_derived_from_run_status() -> None:
    assert FINISHED_SQL == "('COMPLETED', 'FAILED', 'CANCELLED', 'CONTINUED')"
    assert UNFINISHED_SQL == "('PENDING', 'RUNNING', 'SLEEPING', 'WAITING', 'PAUSED')"
