"""The oldest psycopg and psycopg_pool the PostgreSQL store supports, checked as it opens.

Older releases lack what the store relies on (psycopg 3.1 has no `cancel_safe`), and
would fail later with an AttributeError deep in a query; pyproject's `postgres` extra
claims the same floor (tests/unit/test_pg_driver.py holds the two together).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cairn.errors import ConfigError

OLDEST: dict[str, tuple[int, int]] = {"psycopg": (3, 2), "psycopg_pool": (3, 2)}


def release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version: "3.2.13" -> (3, 2, 13), "3.3.0.dev1" -> (3, 3, 0)."""
    numbers = []
    for piece in version.split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


def unsupported(found: Mapping[str, str]) -> str | None:
    """The one-line complaint about the first package of `found` older than supported."""
    for name, oldest in OLDEST.items():
        version = found.get(name)
        if version is not None and release(version) < oldest:
            wanted = ".".join(map(str, oldest))
            return (
                f"the PostgreSQL store needs {name} {wanted} or later, found {version}: "
                "pip install --upgrade 'cairn-workflows[postgres]'"
            )
    return None


def check() -> None:
    """Raise ConfigError if the installed psycopg or psycopg_pool is too old."""
    import psycopg
    import psycopg_pool

    problem = unsupported(
        {"psycopg": psycopg.__version__, "psycopg_pool": psycopg_pool.__version__}
    )
    if problem is not None:
        raise ConfigError(problem)
