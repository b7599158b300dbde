"""Dialect-neutral SQL text (with `?` placeholders) and row <-> record mapping.

One module per concern; the programs and backends read them all as `_sql.NAME` from here.
PostgreSQL's rewrites of some of these statements live in `store/postgres/dialect.py`.
"""

from __future__ import annotations

from cairn.store._sql.claims import *  # noqa: F403
from cairn.store._sql.columns import *  # noqa: F403
from cairn.store._sql.control import *  # noqa: F403
from cairn.store._sql.listing import *  # noqa: F403
from cairn.store._sql.messages import *  # noqa: F403
from cairn.store._sql.rows import *  # noqa: F403
from cairn.store._sql.runs import *  # noqa: F403
from cairn.store._sql.schedules import *  # noqa: F403
from cairn.store._sql.streams import *  # noqa: F403
from cairn.store._sql.workers import *  # noqa: F403
