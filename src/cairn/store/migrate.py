"""Numbered SQL migrations per dialect: which exist, which are pending, which are too new."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from cairn.errors import SchemaTooNew, StoreError

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS cairn_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
)


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered SQL file."""

    version: int
    name: str
    sql: str


def available(dialect: str) -> list[Migration]:
    """Every migration shipped for `dialect`, in version order."""
    folder = resources.files("cairn.store").joinpath("migrations", dialect)
    found = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def pending(dialect: str, applied: set[int], *, where: str) -> list[Migration]:
    """Migrations not yet in `applied`; SchemaTooNew if the database knows newer ones."""
    shipped = available(dialect)
    newest = max((m.version for m in shipped), default=0)
    if applied and max(applied) > newest:
        raise SchemaTooNew(
            f"database {where} has schema version {max(applied)}, newer than this cairn "
            f"understands ({newest}); upgrade cairn"
        )
    return [m for m in shipped if m.version not in applied]


class SchemaMissing(StoreError):
    """A store opened with `migrate=False` found no cairn schema, or an older one.

    Nothing was created or changed. `reason` says what is missing (no file, no cairn
    table); `applied` is the newest version there (0: none) and `newest` this cairn's.
    """

    def __init__(self, where: str, reason: str, *, applied: int = 0, newest: int = 0) -> None:
        self.where = where
        self.reason = reason
        self.applied = applied
        self.newest = newest
        if applied:
            text = f"database {where} has cairn schema version {applied}, older than this one's"
            super().__init__(f"{text} ({newest}); not migrated")
        else:
            super().__init__(f"no cairn database at {where} ({reason})")


def require_current(dialect: str, applied: set[int] | None, *, where: str, missing: str) -> None:
    """Refuse (SchemaMissing) a schema absent (`applied` None) or older than this cairn's.

    `missing` is the reason given when there is none; a newer one is SchemaTooNew.
    """
    todo = pending(dialect, applied or set(), where=where)
    if not todo:
        return
    shipped = available(dialect)
    raise SchemaMissing(where, missing, applied=max(applied or {0}), newest=shipped[-1].version)


def statements(sql: str) -> list[str]:
    """Split a migration file into statements (our files keep `;` out of literals)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
