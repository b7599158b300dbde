"""SqlStore: what the SQL backends share; a backend supplies how programs run.

Backends implement `open`, `close`, `write` (run an operation in a write transaction and
commit before answering), `read` (run one without) and the rest of `Backend`. Every
operation is a program in store/programs/, written once for both dialects.
"""

from __future__ import annotations

from cairn.store.sql_store.base import SqlBase

__all__ = ["SqlStore"]


class SqlStore(SqlBase):
    """The base of SqliteStore and PostgresStore."""
