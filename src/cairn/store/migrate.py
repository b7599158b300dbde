"""Numbered SQL migrations per dialect: which exist, which are pending, which are too new."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from cairn.errors import SchemaTooNew

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


def statements(sql: str) -> list[str]:
    """Split a migration file into statements (our files keep `;` out of literals)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
