"""A run's columns and progress: checked, then written in the background (one write pending).

`cairn.progress()` in a tight loop must not queue a database write per call: while one
write is in flight the next values are merged (columns by name, the latest progress wins)
and go out together in the one write that follows it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from cairn.errors import InvalidValue
from cairn.names import check_name
from cairn.observability import logcontext
from cairn.store.programs import runs
from cairn.store.protocol import Store

log = logcontext.logger("cairn.run")

# A column value's JSON text (ASCII: json.dumps escapes the rest) is indexed with its
# name; 1,000 keeps name + value inside PostgreSQL's index entry limit, on both stores.
MAX_COLUMN_JSON = 1000


def column_texts(values: dict[str, Any]) -> dict[str, str]:
    """`cairn.set_columns(**values)` as stored: name -> JSON text; a bad one raises, named.

    Raises:
        InvalidName: a column name no store keeps.
        ValueError: a value that is not JSON, or whose JSON is too long to index.
    """
    texts: dict[str, str] = {}
    for name, value in values.items():
        check_name(name, "column name")
        try:
            text = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            raise InvalidValue(
                f"column {name!r} must be a JSON value (str, number, bool, null, list, "
                f"dict), got {type(value).__qualname__}"
            ) from None
        if len(text) > MAX_COLUMN_JSON:
            raise InvalidValue(
                f"column {name!r} is {len(text)} characters of JSON; the limit is "
                f"{MAX_COLUMN_JSON} (columns are for searching: keep long data in a step "
                "result)"
            )
        texts[name] = text
    return texts


def progress_text(message: str, current: float | None, total: float | None, now: float) -> str:
    """`cairn.progress(...)` as stored."""
    return json.dumps({"message": message, "current": current, "total": total, "at": now})


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
                    await self._store.write(
                        runs.update_run_meta(
                            self._run_id, columns=columns, progress=progress, now=self._now()
                        )
                    )
                except Exception as exc:  # columns and progress are advisory: never fail a run
                    log.warning("run %s: could not store columns/progress: %s", self._run_id, exc)
        finally:
            self._writing = None
