"""DirectoryStore: `file:///dir`, the SQLite store on the one file `dir/cairn.db`."""

from __future__ import annotations

import os

from cairn.errors import StoreError
from cairn.store.locations import FILE_NAME
from cairn.store.migrate import SchemaMissing
from cairn.store.sqlite.store import SqliteStore


class DirectoryStore(SqliteStore):
    """A SqliteStore on `directory/cairn.db`; the directory is made if missing.

    Unlike a sqlite:/// file, whose folder must exist (a typo in it fails), a directory
    store is asked for by its directory, so making it is the point.
    """

    def __init__(self, directory: str) -> None:
        super().__init__(os.path.join(directory, FILE_NAME))
        self.directory = directory

    def __repr__(self) -> str:
        return f"DirectoryStore({self.directory!r})"

    async def open(self, *, migrate: bool = True) -> None:
        """Make the directory (owner-only, as the file is), then open the store in it.

        `migrate=False` makes nothing: the directory's cairn.db must be there already.
        """
        if not migrate and not os.path.isfile(self.path):
            raise SchemaMissing(repr(self.path), f"the SQLite file {self.path} does not exist")
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot open store directory {self.directory!r}: {exc.strerror or exc}"
            ) from exc
        await super().open(migrate=migrate)
