"""SqlStore: the Store protocol over programs; a backend supplies only how to run them.

Backends implement `open`, `close`, `write` (run a program in a write transaction and
commit before answering) and `read` (run a program without one). Everything else is here,
once, for both dialects.
"""

from __future__ import annotations

from cairn.store.sql_store.workers import SqlWorkers

__all__ = ["SqlStore"]


class SqlStore(SqlWorkers):
    """Every Store method, as a program handed to the backend's `write` or `read`."""
