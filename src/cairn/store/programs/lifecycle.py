"""The operation a store answers about itself: which schema its database has."""

from __future__ import annotations

from cairn.store import _sql
from cairn.store.programs.base import Program, all_rows, operation


@operation
def schema_version() -> Program[int]:
    """Read: the newest migration applied to the database (a read: proves it answers)."""
    rows = yield all_rows(_sql.SCHEMA_VERSION)
    return int(rows[0][0] or 0) if rows else 0
