"""Dialect-neutral SQL text (with `?` placeholders) and row <-> record mapping.

One module per concern; the programs and backends read them all as `_sql.NAME` from here.
What a backend must know of a statement beyond its text (row locks, JSON members, bulk
forms) is declared on it as a `Statement` (statement.py); `store/postgres/dialect.py`
reads those facts.
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
from cairn.store._sql.statement import *  # noqa: F403
from cairn.store._sql.streams import *  # noqa: F403
from cairn.store._sql.workers import *  # noqa: F403
