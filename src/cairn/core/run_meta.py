"""A run's columns and progress, written in the background with at most one write pending.

`cairn.progress()` in a tight loop must not queue a database write per call: while one
write is in flight the next values are merged (columns by name, the latest progress wins)
and go out together in the one write that follows it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cairn.observability import logcontext
from cairn.store.protocol import Store

log = logcontext.logger("cairn.run")


class MetaWriter:
    """Coalesces one run's column and progress updates into sequential writes."""

    def __init__(self, store: Store, run_id: str, now: Callable[[], float]) -> None:
        self._store = store
        self._run_id = run_id
        self._now = now
        self._columns: dict[str, str] = {}
        self._progress: str | None = None
        self._writing: asyncio.Task[None] | None = None

    def add(self, columns: dict[str, str] | None, progress: str | None) -> None:
        """Queue columns (name -> JSON text) and/or progress (JSON text); on the loop only."""
        if columns:
            self._columns.update(columns)
        if progress is not None:
            self._progress = progress
        if self._writing is None:
            self._writing = asyncio.ensure_future(self._drain())

    async def flush(self) -> None:
        """Wait until everything queued so far is written (or its write failed and was logged)."""
        while self._writing is not None:
            await asyncio.shield(self._writing)

    async def _drain(self) -> None:
        try:
            while self._columns or self._progress is not None:
                columns, progress = self._columns or None, self._progress
                self._columns, self._progress = {}, None
                try:
                    await self._store.update_run_meta(
                        self._run_id, columns=columns, progress=progress, now=self._now()
                    )
                except Exception as exc:  # columns and progress are advisory: never fail a run
                    log.warning("run %s: could not store columns/progress: %s", self._run_id, exc)
        finally:
            self._writing = None
